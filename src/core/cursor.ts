// The opaque list cursor: base64url of {"id": <the last id of the page>}. SQL writes
// it (billing.encode_cursor, for next_cursor) and the API reads it back here;
// test/core/sql-agreement.test.ts holds the two to one format.
import { ID_PATTERN } from './ids';

export function encodeCursor(id: string): string {
  return Buffer.from(JSON.stringify({ id }), 'utf8').toString('base64url');
}

/** The id a cursor continues after, or null when it is not a cursor this API returned. */
export function decodeCursor(cursor: string): string | null {
  try {
    const decoded: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    const id = (decoded as { id?: unknown })?.id;
    // Ids are gen_id values; discount ids are UUIDs.
    if (typeof id === 'string' && (ID_PATTERN.test(id) || /^[0-9a-f-]{36}$/.test(id))) return id;
  } catch {
    // not base64url JSON
  }
  return null;
}
