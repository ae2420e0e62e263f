// One registry of operations. Each API capability is defined once here: its name,
// scope, input schemas (zod) and either a SQL function (billing_api.<sql>, run in
// the same round trip as authentication) or a handler. REST routes, the OpenAPI
// document and MCP tools are generated from these definitions.
import { z } from 'zod';
import type pg from 'pg';
import type { Config } from '../config';

export const SCOPES = [
  'subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
  'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
  'webhooks:read', 'webhooks:write',
] as const;
export type Scope = (typeof SCOPES)[number];

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** What a handler may use: the request's transaction (tenant and scopes already set). */
export interface OpContext {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** Calls billing_api.<fn>(args) in the request's transaction and returns its jsonb. */
  call<T = unknown>(fn: string, args: unknown): Promise<T>;
  communityId: string;
  keyId: string;
  config: Config;
  baseUrl: string;
  services: Services;
  /**
   * Runs fn after the transaction commits and the connection is released; its value
   * becomes the response body. For slow outside work (not for idempotent operations).
   */
  afterCommit(fn: () => Promise<unknown>): void;
}

/** Process-wide collaborators handlers may need (payment providers, crypto...). */
export interface Services {
  [name: string]: unknown;
}

type AnyObject = z.ZodObject<z.ZodRawShape>;

export interface Operation {
  name: string;
  method: Method;
  path: string;
  scope: Scope | null;
  summary: string;
  description?: string;
  tag: string;
  params?: AnyObject;
  query?: AnyObject;
  body?: AnyObject;
  response?: z.ZodType;
  status?: number;
  idempotent?: boolean;
  /** billing_api function taking the merged input as jsonb: one round trip. */
  sql?: string;
  handler?: (ctx: OpContext, input: Record<string, unknown>) => Promise<unknown>;
}

export function defineOperation<T extends Operation>(op: T): T {
  if (!op.sql === !op.handler) throw new Error(`operation ${op.name} needs exactly one of sql or handler`);
  return op;
}

// ---- common parameters -----------------------------------------------------------

export const ID_PATTERN = /^[a-z]{1,5}_[0-9a-f]{26}$/;

export function encodeCursor(id: string): string {
  return Buffer.from(JSON.stringify({ id }), 'utf8').toString('base64url');
}

/** Opaque cursor: base64url of {"id": ...}. Decodes to the id it continues after. */
export const cursorParam = z
  .string()
  .max(200)
  .transform((value, ctx) => {
    try {
      const decoded: unknown = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
      const id = (decoded as { id?: unknown })?.id;
      if (typeof id === 'string' && (ID_PATTERN.test(id) || /^[0-9a-f-]{36}$/.test(id))) return id;
    } catch {
      // fall through
    }
    ctx.addIssue({ code: 'custom', message: 'cursor is not a cursor this API returned', params: { status: 400 } });
    return z.NEVER;
  })
  .describe('Opaque cursor copied verbatim from a previous next_cursor; omit for the first page.');

export const limitParam = z.coerce
  .number()
  .int()
  .min(1)
  .max(100)
  .default(25)
  .describe('Page size, 1 to 100 (default 25).');

export const pageQuery = { cursor: cursorParam.optional(), limit: limitParam };

export const idParam = (description: string) => z.string().min(1).max(100).describe(description);

export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), next_cursor: z.string().nullable() });
}

export const timestamp = z.string().describe('ISO 8601 UTC timestamp');
