// Input and output fields shared by the resources' schemas and operations.
import { z } from 'zod';
import { decodeCursor } from '../core/cursor';
import { PLATFORMS } from '../core/statuses';

/** Opaque cursor (src/core/cursor.ts). Decodes to the id it continues after. */
export const cursorParam = z
  .string()
  .max(200)
  .transform((value, ctx) => {
    const id = decodeCursor(value);
    if (id !== null) return id;
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

/**
 * An instant as billing.iso writes it: RFC 3339 in UTC with milliseconds
 * (2026-01-15T12:00:00.000Z). `format: date-time` in every JSON Schema made from it, so
 * generated clients can type it as a date.
 */
export const timestamp = z.string().meta({ format: 'date-time', description: 'ISO 8601 UTC timestamp (RFC 3339)' });

/** A first-party platform (billing.member_identities.platform). */
export const platform = z.enum(PLATFORMS);
