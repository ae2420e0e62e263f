// The OpenAPI 3.1 document, generated from the operations registry so docs and
// behaviour cannot drift. The resources' zod schemas named in
// src/domain/schema-names.ts are emitted once under components/schemas and referenced
// by $ref from every response that holds them (client generators then make one named
// type each: docs/decisions/openapi-named-schemas.md). Each operation lists the error
// statuses it can answer, each with a problem+json schema whose `code` is narrowed to
// the codes that status carries (src/core/errors.ts), and the response headers the
// app sends; bodies and successes carry examples, generated from the schemas unless
// the operation gives its own.
import { z } from 'zod';
import { API_VERSION } from '../core/api-version';
import { codesByStatus, problemBody, problemJsonSchema, PROBLEM_PATH } from '../core/errors';
import type { Operation } from '../domain/operation';
import { NAMED_SCHEMAS } from '../domain/schema-names';
import { problemTableMarkdown } from './problem-pages';

type Json = Record<string, unknown>;

function schemaOf(type: z.ZodType, io: 'input' | 'output'): Json {
  const s = z.toJSONSchema(type, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Json;
  delete s.$schema;
  return s;
}

const COMPONENT_REF = '#/components/schemas/';

/**
 * The response schemas: every named schema as a component, and each operation's
 * response, which refers to the named ones by $ref (a response that is itself a named
 * schema is just the $ref). One zod conversion over all of them, so a schema is
 * emitted once and referred to everywhere it appears.
 */
function responseSchemas(operations: readonly Operation[]): { components: Record<string, Json>; byOperation: Map<string, Json> } {
  const registry = z.registry<{ id: string }>();
  const ids = new Map<z.ZodType, string>();
  for (const [name, schema] of Object.entries(NAMED_SCHEMAS)) {
    if (ids.has(schema)) throw new Error(`OpenAPI: ${name} names a schema already named ${ids.get(schema)}`);
    registry.add(schema, { id: name });
    ids.set(schema, name);
  }
  const unnamed = new Set<string>();
  for (const op of operations) {
    if (!op.response || ids.has(op.response)) continue;
    const id = `__response_${op.name}`;
    registry.add(op.response, { id });
    ids.set(op.response, id);
    unnamed.add(id);
  }
  const { schemas } = z.toJSONSchema(registry, {
    io: 'output', unrepresentable: 'any', target: 'draft-2020-12', uri: (id) => `${COMPONENT_REF}${id}`,
  }) as { schemas: Record<string, Json> };
  if (schemas.__shared) throw new Error('OpenAPI: a response schema was extracted outside the named components (a zod meta id?)');
  const components: Record<string, Json> = {};
  for (const [id, schema] of Object.entries(schemas)) {
    const { $schema: _s, $id: _i, ...rest } = schema;
    if (!unnamed.has(id)) components[id] = rest;
    schemas[id] = rest;
  }
  const byOperation = new Map<string, Json>();
  for (const op of operations) {
    if (!op.response) continue;
    const id = ids.get(op.response)!;
    byOperation.set(op.name, unnamed.has(id) ? schemas[id] : { $ref: `${COMPONENT_REF}${id}` });
  }
  return { components, byOperation };
}

/** The components reachable from `roots` through $ref (only those stay: Redocly's no-unused-components). */
function reachable(roots: unknown, components: Record<string, Json>): Set<string> {
  const seen = new Set<string>();
  const walk = (node: unknown) => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (node === null || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith(COMPONENT_REF)) {
        const name = value.slice(COMPONENT_REF.length);
        if (!seen.has(name) && components[name]) {
          seen.add(name);
          walk(components[name]);
        }
      } else {
        walk(value);
      }
    }
  };
  walk(roots);
  return seen;
}

// ---- response headers, as the app sends them (src/web/express-io.ts, src/web/observe.ts) ----

const HEADERS: Record<string, Json> = {
  RateLimitLimit: {
    description: 'Requests allowed per window (per minute) for this key, or for this client IP without a valid key. Sent whenever the request reached the rate limiter.',
    schema: { type: 'integer', minimum: 0 },
  },
  RateLimitRemaining: {
    description: 'Burst tokens left (at most the burst capacity, 60 for a key).',
    schema: { type: 'integer', minimum: 0 },
  },
  RateLimitReset: {
    description: 'Seconds until the bucket is full again.',
    schema: { type: 'integer', minimum: 0 },
  },
  RetryAfter: {
    description: 'Seconds to wait before retrying: on 429 until a token is available; on 503 while the database is unreachable (absent when retrying will not help).',
    schema: { type: 'integer', minimum: 0 },
  },
  IdempotentReplayed: {
    description: 'true when this answer is the replay of an earlier request with the same Idempotency-Key and body (nothing was done again); absent otherwise.',
    schema: { type: 'string', enum: ['true'] },
  },
  XRequestId: {
    description: 'The request\'s id: the X-Request-Id the request sent (printable ASCII, up to 128 characters) or a generated UUID. It is on the service\'s log line for the request.',
    schema: { type: 'string', minLength: 1, maxLength: 128 },
  },
  ApiVersion: {
    description: 'The API version that answered.',
    schema: { type: 'string', enum: [API_VERSION] },
  },
  ContentDisposition: {
    description: 'inline; filename="<name>.pdf": a browser shows the document, and saves it under that name; attachment; filename="<name>.csv" for a report: a browser downloads it.',
    schema: { type: 'string' },
  },
  WWWAuthenticate: {
    description: 'The authentication scheme wanted: Bearer realm="billing".',
    schema: { type: 'string' },
  },
};

const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** Headers on every answer of an operation: the request id, the version and the rate budget. */
function commonHeaders(): Json {
  return {
    'X-Request-Id': header('XRequestId'),
    'Api-Version': header('ApiVersion'),
    'RateLimit-Limit': header('RateLimitLimit'),
    'RateLimit-Remaining': header('RateLimitRemaining'),
    'RateLimit-Reset': header('RateLimitReset'),
  };
}

function errorHeaders(status: number): Json {
  const headers = commonHeaders();
  if (status === 429 || status === 503) headers['Retry-After'] = header('RetryAfter');
  if (status === 401) headers['WWW-Authenticate'] = header('WWWAuthenticate');
  return headers;
}

const TAGS: Record<string, string> = {
  Plans: 'The community\'s plan tiers and their prices.',
  Members: 'Members, their identities, entitlements, grants, portal sessions and link codes.',
  Subscriptions: 'Subscriptions and their lifecycle: cancel, pause, resume, reactivate, switch.',
  Purchases: 'One-time purchases.',
  Invoices: 'Invoices and refunds.',
  Discounts: 'Discount codes.',
  Analytics: 'Revenue and membership figures.',
  Entitlements: 'Whether an identity is entitled to a tier.',
  Events: 'The event log that webhooks deliver.',
  Checkout: 'Hosted checkout links.',
  Webhooks: 'Webhook endpoints and their deliveries.',
};

/** What each error status means for a caller, for the response descriptions. */
const ERROR_TEXT: Record<number, string> = {
  400: 'The request could not be read (body not JSON, unknown query parameter, bad cursor or a cursor of another list or filters, unknown Api-Version, missing required query parameter, Idempotency-Key where it is refused).',
  401: 'Missing, malformed, unknown or revoked API key.',
  402: 'The payment provider declined the payment; nothing was changed.',
  403: 'The API key lacks the scope this operation requires (required_scope names it).',
  404: 'No such resource in the key\'s community.',
  409: 'The resource is not in a state that allows this operation.',
  422: 'An input is invalid (param names it) or a business rule refuses it.',
  429: 'Rate limited: retry after the Retry-After header\'s seconds.',
  503: 'A dependency is unavailable; nothing was changed. The database unreachable (an outage): retry after the Retry-After header\'s seconds. The payment provider or webhook encryption not configured: retrying will not help.',
};

const CODES_BY_STATUS = codesByStatus();

function problemName(status: number): string {
  return `Problem${status}`;
}

/** Problem with `status` fixed and `code` narrowed to what that status carries. */
function statusProblemSchema(status: number): Json {
  return {
    allOf: [
      { $ref: '#/components/schemas/Problem' },
      {
        type: 'object',
        properties: { status: { const: status }, code: { enum: CODES_BY_STATUS.get(status) ?? [] } },
      },
    ],
  };
}

/** Operations without a path id that still answer 404, and why. */
const NOT_FOUND_WITHOUT_PATH_ID: Record<string, string> = {
  lookup_member: 'no member holds the identity',
  create_checkout_link: 'the tier or plan is unknown or inactive',
  redeem_link_code: 'the code is unknown, expired, used or replaced',
};

/** The error statuses an operation can answer. */
export function errorStatuses(op: Operation): number[] {
  const changes = op.method !== 'GET';
  const statuses = new Set<number>([400, 401, 429]);
  if (op.scope) statuses.add(403);
  if (/\{\w+\}/.test(op.path) || op.name in NOT_FOUND_WITHOUT_PATH_ID || /\b404\b/.test(op.description ?? '')) statuses.add(404);
  if (op.query || op.body || changes) statuses.add(422);
  if (changes || /\b409\b/.test(op.description ?? '')) statuses.add(409);
  if (op.name === 'switch_subscription') statuses.add(402);
  // Every operation needs the database (503 with Retry-After while it is unreachable);
  // webhook routes also need the encryption key, state changes the payment provider.
  statuses.add(503);
  return [...statuses].sort((a, b) => a - b);
}

// ---- examples, generated from a JSON schema ---------------------------------------

const KNOWN_PATTERNS: Record<string, string> = {
  '^[a-z]{1,5}_[0-9a-f]{26}$': 'evt_0123456789abcdef0123456789',
};

/** A value that satisfies `schema` (the subset of JSON Schema zod emits here). */
export function exampleOf(schema: Json, name = 'value', components: Record<string, Json> = {}): unknown {
  if (typeof schema.$ref === 'string' && schema.$ref.startsWith(COMPONENT_REF)) {
    const target = components[schema.$ref.slice(COMPONENT_REF.length)];
    if (!target) throw new Error(`OpenAPI examples: unknown $ref ${schema.$ref}`);
    return exampleOf(target, name, components);
  }
  if (schema.examples && Array.isArray(schema.examples) && schema.examples.length) return schema.examples[0];
  if (schema.default !== undefined) return schema.default;
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = schema[key] as Json[] | undefined;
    if (branches) return exampleOf(branches.find((b) => b.type !== 'null') ?? branches[0], name, components);
  }
  if (Array.isArray(schema.allOf)) return exampleOf(Object.assign({}, ...(schema.allOf as Json[])), name, components);
  const type = Array.isArray(schema.type) ? (schema.type as string[]).find((t) => t !== 'null') : schema.type as string | undefined;
  switch (type) {
    case 'object': {
      const out: Json = {};
      const props = (schema.properties ?? {}) as Record<string, Json>;
      for (const key of (schema.required ?? []) as string[]) {
        if (props[key]) out[key] = exampleOf(props[key], key, components);
      }
      return out;
    }
    case 'array': {
      const n = Math.max(1, Number(schema.minItems ?? 1));
      return Array.from({ length: n }, () => exampleOf((schema.items ?? {}) as Json, name, components));
    }
    case 'integer':
    case 'number': {
      const min = schema.minimum ?? (typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + 1 : undefined);
      return typeof min === 'number' ? Math.max(min, Math.min(1, Number(schema.maximum ?? 1))) : 1;
    }
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'string':
      return stringExample(schema, name);
    default:
      return name;
  }
}

function stringExample(schema: Json, name: string): string {
  if (typeof schema.pattern === 'string') {
    const known = KNOWN_PATTERNS[schema.pattern];
    if (!known) throw new Error(`OpenAPI examples: no example for the pattern ${schema.pattern} (${name}); add it to KNOWN_PATTERNS`);
    return known;
  }
  switch (schema.format) {
    case 'date-time': return '2026-01-15T12:00:00.000Z';
    case 'date': return '2026-01-15';
    case 'uri': case 'url': return 'https://example.com/return';
    case 'email': return 'member@example.com';
    case 'uuid': return '7d444840-9dc0-11d1-b245-5ffdce74fad2';
    default: break;
  }
  let value = /_id$|^id$/.test(name) ? `${name.replace(/_id$/, '').slice(0, 4) || 'id'}_0123456789abcdef0123456789` : `example_${name}`;
  const min = Number(schema.minLength ?? 0);
  const max = Number(schema.maxLength ?? Infinity);
  if (value.length < min) value = value.padEnd(min, 'x');
  if (value.length > max) value = value.slice(0, max);
  return value;
}

// ---- the document -------------------------------------------------------------------

export function buildOpenApi(operations: readonly Operation[]): Json {
  const paths: Record<string, Record<string, Json>> = {};
  const responses = responseSchemas(operations);
  const usedStatuses = new Set<number>();
  for (const op of operations) {
    const parameters: Json[] = [];
    for (const [where, obj] of [['path', op.params], ['query', op.query]] as const) {
      if (!obj) continue;
      const schema = schemaOf(obj, 'input') as { properties?: Record<string, Json>; required?: string[] };
      for (const [name, prop] of Object.entries(schema.properties ?? {})) {
        parameters.push({
          name, in: where, required: where === 'path' || (schema.required ?? []).includes(name),
          schema: prop, description: (prop.description as string | undefined) ?? undefined,
        });
      }
    }
    if (op.idempotent) {
      parameters.push({
        name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', minLength: 1, maxLength: 255 },
        description: 'A retry with the same key and body within 24 hours answers the first response (header Idempotent-Replayed: true) instead of repeating the work.',
      });
    }
    const idempotency = op.idempotencyRefused ? ` Idempotency-Key is refused here (400 invalid_request): ${op.idempotencyRefused}` : '';
    const status = String(op.status ?? 200);
    const headers = commonHeaders();
    if (op.idempotent) headers['Idempotent-Replayed'] = header('IdempotentReplayed');
    let success: Json;
    const schema = responses.byOperation.get(op.name);
    if (op.document) {
      // A document (Operation.document): bytes of its media type, not JSON.
      success = {
        description: op.document.description,
        headers: { ...headers, 'Content-Disposition': header('ContentDisposition') },
        content: { [op.document.mediaType]: { schema: { type: 'string', contentMediaType: op.document.mediaType } } },
      };
    } else if (schema) {
      success = {
        description: 'Success',
        headers,
        content: { 'application/json': { schema, examples: { example: { value: op.examples?.response ?? exampleOf(schema, 'value', responses.components) } } } },
      };
    } else {
      success = { description: 'Success', headers };
    }
    const answers: Json = { [status]: success };
    for (const errorStatus of errorStatuses(op)) {
      usedStatuses.add(errorStatus);
      answers[String(errorStatus)] = { $ref: `#/components/responses/${problemName(errorStatus)}` };
    }
    answers.default = {
      description: 'Any other error, e.g. 500 internal_error.',
      headers: { 'X-Request-Id': header('XRequestId'), 'Api-Version': header('ApiVersion') },
      content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
    };
    const entry: Json = {
      operationId: op.name,
      summary: op.summary,
      description: `${op.description ?? op.summary}${op.scope ? ` Requires the API key scope ${op.scope}.` : ''}${idempotency}`,
      tags: [op.tag],
      security: [{ bearer: [] }],
      'x-required-scope': op.scope,
      parameters,
      responses: answers,
    };
    if (op.body) {
      const schema = schemaOf(op.body.strict(), 'input') as Json;
      entry.requestBody = {
        required: Array.isArray(schema.required) && schema.required.length > 0,
        content: { 'application/json': { schema, examples: { example: { value: op.examples?.request ?? exampleOf(schema) } } } },
      };
    }
    (paths[op.path] ??= {})[op.method.toLowerCase()] = entry;
  }
  const statuses = [...usedStatuses].sort((a, b) => a - b);
  const schemas: Json = { Problem: problemJsonSchema() };
  const errorResponses: Json = {};
  for (const s of statuses) {
    schemas[problemName(s)] = statusProblemSchema(s);
    const code = (CODES_BY_STATUS.get(s) ?? ['internal_error'])[0];
    errorResponses[problemName(s)] = {
      description: ERROR_TEXT[s] ?? 'Error',
      headers: errorHeaders(s),
      content: {
        'application/problem+json': {
          schema: { $ref: `#/components/schemas/${problemName(s)}` },
          examples: { example: { value: problemBody(code, s, ERROR_TEXT[s]) } },
        },
      },
    };
  }
  // The named resource schemas that some response holds, in the order they are named.
  const used = reachable(paths, responses.components);
  for (const name of Object.keys(responses.components)) {
    if (used.has(name)) schemas[name] = responses.components[name];
  }
  const usedTags = [...new Set(operations.map((op) => op.tag))];
  return {
    openapi: '3.1.0',
    info: {
      title: 'Community Billing API',
      version: API_VERSION,
      description: 'Community-scoped subscription billing and access.\n\n'
        + `Errors are RFC 9457 problem+json with a stable \`code\`; their \`type\` is the address of the code's page on this server (\`${PROBLEM_PATH}#<code>\`):\n\n`
        + problemTableMarkdown(''),
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: '/', description: 'This server' }],
    tags: usedTags.map((name) => ({ name, description: TAGS[name] ?? name })),
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API key of a community: Authorization: Bearer bk_...' } },
      schemas,
      responses: errorResponses,
      headers: HEADERS,
    },
    paths,
  };
}
