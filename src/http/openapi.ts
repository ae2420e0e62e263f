// The OpenAPI 3.1 document, generated from the operations registry so docs and
// behaviour cannot drift.
import { z } from 'zod';
import { API_VERSION } from '../core/api-version';
import { PROBLEM_BASE } from '../core/errors';
import type { Operation } from '../domain/operation';

type Json = Record<string, unknown>;

function schemaOf(type: z.ZodType, io: 'input' | 'output'): Json {
  const s = z.toJSONSchema(type, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Json;
  delete s.$schema;
  return s;
}

const problemSchema = {
  type: 'object',
  required: ['type', 'title', 'status', 'code'],
  properties: {
    type: { type: 'string', description: `URI ending in #<code>, under ${PROBLEM_BASE}` },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    code: { type: 'string' },
  },
};

export function buildOpenApi(operations: readonly Operation[]): Json {
  const paths: Record<string, Record<string, Json>> = {};
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
      parameters.push({ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', minLength: 1, maxLength: 255 } });
    }
    const status = String(op.status ?? 200);
    const entry: Json = {
      operationId: op.name,
      summary: op.summary,
      description: op.description,
      tags: [op.tag],
      security: [{ bearer: [] }],
      'x-required-scope': op.scope,
      parameters,
      responses: {
        [status]: op.response
          ? { description: 'Success', content: { 'application/json': { schema: schemaOf(op.response, 'output') } } }
          : { description: 'Success' },
        default: { description: 'Error', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } },
      },
    };
    if (op.body) {
      entry.requestBody = { required: false, content: { 'application/json': { schema: schemaOf(op.body.strict(), 'input') } } };
    }
    (paths[op.path] ??= {})[op.method.toLowerCase()] = entry;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Community Billing API',
      version: API_VERSION,
      description: 'Community-scoped subscription billing and access. Errors are RFC 9457 problem+json with a stable code.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Problem: problemSchema },
    },
    paths,
  };
}
