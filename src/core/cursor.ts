// The opaque list cursor: base64url of {"id": <the last id of the page>, "list": <the
// operation that listed it>, "filters": <digest of that request's filters>}. SQL writes
// it (billing.encode_cursor, for next_cursor; the list and filters come from the
// transaction's app.cursor_list / app.cursor_filters, set by the executor) and the API
// reads it back here; test/core/sql-agreement.test.ts holds the two to one format.
// A cursor is bound to its list and filters so that it continues only the listing that
// issued it (docs/decisions/cursors-bound-to-their-list.md).
import crypto from 'node:crypto';
import { ID_PATTERN } from './ids';

/** Which listing a cursor continues: the operation's name and its filters' digest. */
export interface CursorBinding {
  list: string;
  filters: string;
}

/** A cursor's content; list and filters are null in a cursor from before they were bound. */
export interface DecodedCursor {
  id: string;
  list: string | null;
  filters: string | null;
}

const LIST_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
const DIGEST_PATTERN = /^[A-Za-z0-9_-]{16}$/;

export function encodeCursor(id: string, binding: CursorBinding): string {
  return Buffer.from(JSON.stringify({ id, list: binding.list, filters: binding.filters }), 'utf8').toString('base64url');
}

/** The cursor's content, or null when it is not a cursor this API returned. */
export function decodeCursor(cursor: string): DecodedCursor | null {
  if (!/^[A-Za-z0-9_-]*$/.test(cursor)) return null;
  try {
    const decoded: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!decoded || typeof decoded !== 'object' || Array.isArray(decoded)) return null;
    const { id, list = null, filters = null, ...rest } = decoded as Record<string, unknown>;
    if (Object.keys(rest).length > 0) return null;
    // Ids are gen_id values; discount ids are UUIDs.
    if (typeof id !== 'string' || !(ID_PATTERN.test(id) || /^[0-9a-f-]{36}$/.test(id))) return null;
    if (list === null && filters === null) return { id, list: null, filters: null };
    if (typeof list !== 'string' || !LIST_PATTERN.test(list) || typeof filters !== 'string' || !DIGEST_PATTERN.test(filters)) return null;
    return { id, list, filters };
  } catch {
    // not base64url JSON
  }
  return null;
}

/** JSON with object keys sorted, undefined members left out: one text per value. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The digest of a listing's filters (its parsed path and query values but cursor and
 * limit): 96 bits of SHA-256, base64url. Not a secret: it only tells one listing from
 * another.
 */
export function filtersDigest(filters: Record<string, unknown>): string {
  return crypto.createHash('sha256').update(canonical(filters)).digest('base64url').slice(0, 16);
}
