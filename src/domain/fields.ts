// Input and output fields shared by the resources' schemas and operations.
import { z } from 'zod';
import { decodeCursor } from '../core/cursor';
import { PLATFORMS } from '../core/statuses';

/**
 * Opaque cursor (src/core/cursor.ts): checked here for its form only; the executor
 * then checks that it belongs to the list and filters it is sent to and hands SQL the
 * id it continues after (src/operations/executor.ts bindCursor).
 */
export const cursorParam = z
  .string()
  .max(200)
  .refine((value) => decodeCursor(value) !== null, { message: 'cursor is not a cursor this API returned', params: { status: 400 } })
  .describe('Opaque cursor copied verbatim from a previous next_cursor, with the same filters; omit for the first page.');

/**
 * An integer query parameter: a JSON integer (MCP, pages) or decimal digits only
 * (REST: `^[0-9]+$`). `0x10`, ` 5`, `1e2`, `5.0` and `` are refused, where
 * z.coerce.number() accepted anything Number() reads.
 */
export function queryInteger<T extends z.ZodType<number | undefined>>(schema: T) {
  return z.preprocess((value, ctx) => {
    if (typeof value !== 'string') return value;
    if (/^[0-9]+$/.test(value)) return Number(value);
    ctx.addIssue({ code: 'custom', message: 'must be a decimal integer (digits 0-9 only)' });
    return z.NEVER;
  }, schema);
}

export const limitParam = queryInteger(z.number().int().min(1).max(100).default(25))
  .describe('Page size, 1 to 100 (default 25).');

export const pageQuery = { cursor: cursorParam.optional(), limit: limitParam };

export const idParam = (description: string) => z.string().min(1).max(100).describe(description);

export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), next_cursor: z.string().nullable() });
}

/**
 * An instant as billing.iso writes it: RFC 3339 in UTC with milliseconds
 * (2026-01-15T12:00:00.000Z). `format: date-time` in every JSON Schema made from it, so
 * generated clients can type it as a date.
 */
export const timestamp = z.string().meta({ format: 'date-time', description: 'ISO 8601 UTC timestamp (RFC 3339)' });

/** A first-party platform (billing.member_identities.platform). */
export const platform = z.enum(PLATFORMS);
