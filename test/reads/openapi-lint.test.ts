// The published OpenAPI document passes Redocly's linter at zero errors and zero
// warnings: the `recommended-strict` ruleset (recommended, warnings raised to errors)
// plus stricter rules (examples validated against their schemas, tags described,
// every operation described). No rule is configured away.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { buildOpenApi } from '../../src/http/openapi';
import { operations } from '../../src/operations';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const STRICTER = {
  'no-invalid-media-type-examples': { severity: 'error', allowAdditionalProperties: false },
  'no-invalid-schema-examples': 'error',
  'no-invalid-parameter-examples': 'error',
  'tag-description': 'error',
  'operation-tag-defined': 'error',
  'operation-description': 'error',
  'operation-4xx-problem-details-rfc7807': 'error',
  'no-unused-components': 'error',
} as const;

/** Redocly's lint, in a child process: @redocly/openapi-core is ESM-only (see the script). */
function lint(doc: Json): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, [path.join(__dirname, '../support/redocly-lint.mjs')], { maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout) as string[])));
    child.stdin?.end(JSON.stringify({ doc, extends: ['recommended-strict'], rules: STRICTER }));
  });
}

const doc = buildOpenApi(operations) as Json;

test('Redocly finds no error and no warning in the document', async () => {
  expect(await lint(doc)).toEqual([]);
}, 60000);

test('the linter does check examples against their schemas (a wrong example is reported)', async () => {
  const broken: Json = JSON.parse(JSON.stringify(doc));
  broken.paths['/v1/checkout-links'].post.requestBody.content['application/json'].examples.example.value = { tier_id: 42 };
  expect((await lint(broken)).some((p) => p.includes('no-invalid-media-type-examples'))).toBe(true);
}, 60000);

test('a body with required fields is required; one without is optional', () => {
  for (const [path, methods] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(methods as Json)) {
      const body = (op as Json).requestBody;
      if (!body) continue;
      const required = body.content['application/json'].schema.required ?? [];
      expect({ at: `${method} ${path}`, required: body.required }).toEqual({ at: `${method} ${path}`, required: required.length > 0 });
    }
  }
  expect(doc.paths['/v1/checkout-links'].post.requestBody.required).toBe(true);
});

test('each operation lists the errors it can answer, each narrowed to its codes', () => {
  const statuses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses);
  // Every operation: 400, 401, 429 and the catch-all; 403 when it needs a scope.
  for (const [path, methods] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(methods as Json)) {
      expect({ op: (op as Json).operationId, has: statuses(path, method).filter((s) => ['400', '401', '429', 'default'].includes(s)) })
        .toEqual({ op: (op as Json).operationId, has: ['400', '401', '429', 'default'] });
      if ((op as Json)['x-required-scope']) expect(statuses(path, method)).toContain('403');
    }
  }
  expect(statuses('/v1/subscriptions/{id}', 'get')).toEqual(['200', '400', '401', '403', '404', '429', '503', 'default']);
  expect(statuses('/v1/subscriptions/{id}/switch', 'post')).toEqual(
    expect.arrayContaining(['200', '400', '401', '402', '403', '404', '409', '422', '429', '503', 'default']));
  expect(statuses('/v1/webhooks/endpoints', 'get')).toContain('503');
  expect(statuses('/v1/plans', 'get')).not.toContain('404');

  const codes = (status: number) => doc.components.schemas[`Problem${status}`].allOf[1].properties.code.enum;
  expect(codes(401)).toEqual(['unauthorized']);
  expect(codes(403)).toEqual(['missing_scope']);
  expect(codes(429)).toEqual(['rate_limited']);
  expect(codes(402)).toEqual(['payment_failed']);
  expect(codes(400)).toEqual(['invalid_request']);
  expect(codes(409).sort()).toEqual(['conflict', 'not_eligible', 'payment_config_inactive', 'request_in_flight']);
  expect(codes(422)).toEqual(expect.arrayContaining(['invalid_request', 'plan_required', 'discount_invalid', 'idempotency_key_reuse']));
  expect(doc.components.responses.Problem404.content['application/problem+json'].schema).toEqual({ $ref: '#/components/schemas/Problem404' });
});

test('every request body and every 2xx body has an example', () => {
  for (const [path, methods] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(methods as Json)) {
      const at = `${method} ${path}`;
      const body = (op as Json).requestBody;
      if (body) expect({ at, example: body.content['application/json'].examples?.example?.value !== undefined }).toEqual({ at, example: true });
      for (const [status, response] of Object.entries((op as Json).responses as Json)) {
        const json = (response as Json).content?.['application/json'];
        if (/^2/.test(status) && json) expect({ at, status, example: json.examples?.example?.value !== undefined }).toEqual({ at, status, example: true });
      }
    }
  }
});
