// Request bodies of the three doors that take JSON (REST /v1, MCP /mcp, GraphQL
// /graphql): a bound on how deeply they nest, checked on the raw bytes before
// anything parses or walks them. Code after the parser (the NUL/surrogate scan, zod,
// JSON.stringify into SQL, graphql-js's variable coercion) may recurse once per level;
// 20,000 levels fit in 40 kB and overflowed the stack (a 500). See
// docs/decisions/json-depth.md.
import { isUtf8 } from 'node:buffer';

/**
 * Arrays and objects inside one another, at most. The deepest body any door needs is
 * about ten (an MCP envelope around a checkout subject: params.arguments.subject.
 * external.namespace; GraphQL variables for a nested filter); 64 leaves room for
 * clients that wrap, and is far below what any walker's stack holds.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether the JSON text in bytes opens more than max arrays/objects inside one another.
 * One pass, no recursion, no parse: brackets inside strings do not count. On text that
 * is not JSON the answer is meaningless, and the parser refuses such text anyway.
 */
export function jsonNestsDeeperThan(bytes: Uint8Array, max: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next byte is escaped ("\"" stays in the string)
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** The body parser's error for a body nesting too deeply (handled in src/http/rest-routes.ts). */
export class JsonTooDeepError extends Error {
  readonly type = 'entity.too.deep';
  readonly status = 400;
  constructor() { super(`The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.`); }
}

/** A body-parser `verify` refusing a body nested deeper than MAX_JSON_DEPTH. */
export function verifyJsonDepth(_req: unknown, _res: unknown, buf: Buffer): void {
  if (jsonNestsDeeperThan(buf)) throw new JsonTooDeepError();
}

/** As verifyJsonDepth, and JSON is UTF-8 (RFC 8259 8.1): other bytes are refused, not decoded to U+FFFD. */
export function verifyJsonBody(req: unknown, res: unknown, buf: Buffer): void {
  if (!isUtf8(buf)) throw new Error('not UTF-8');
  verifyJsonDepth(req, res, buf);
}
