// The OpenAPI check that call() applies to every response of the suite: it must
// fail a test whose response breaks the published document, and pass one that keeps it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { call } from '../support/app';

// A fake API publishing a tiny document and answering whatever the test asks for.
let server: http.Server;
let base: string;
let next: { status: number; type: string; body: string } = { status: 200, type: 'application/json', body: '{}' };

const doc = {
  openapi: '3.1.0',
  components: { schemas: { Problem: { type: 'object', required: ['type', 'title', 'status', 'code'], properties: { status: { type: 'integer' }, code: { type: 'string' } } } } },
  paths: {
    '/v1/things/{id}': { get: { operationId: 'get_thing', responses: {
      200: { content: { 'application/json': { schema: { type: 'object', required: ['id', 'note'], additionalProperties: false,
        properties: { id: { type: 'string' }, note: { anyOf: [{ type: 'string' }, { type: 'null' }] } } } } } },
      default: { content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } },
    } } },
    '/v1/things/special': { get: { operationId: 'get_special', responses: { 200: { content: { 'application/json': { schema: { type: 'array' } } } } } } },
  },
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.url === '/v1/openapi.json') { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify(doc)); return; }
    res.statusCode = next.status;
    res.setHeader('content-type', next.type);
    res.end(next.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

test('a body that matches the documented schema passes, nulls included', async () => {
  next = { status: 200, type: 'application/json', body: JSON.stringify({ id: 'x', note: null }) };
  expect((await call(base, 'GET', '/v1/things/x')).body).toEqual({ id: 'x', note: null });
});

test('an omitted field, an extra field or a wrong type fails with a clear message', async () => {
  next = { status: 200, type: 'application/json', body: JSON.stringify({ id: 'x' }) };
  await expect(call(base, 'GET', '/v1/things/x')).rejects.toThrow(/OpenAPI mismatch: GET \/v1\/things\/x \(get_thing\) answered 200: .*\n.*note/);
  next = { status: 200, type: 'application/json', body: JSON.stringify({ id: 'x', note: null, extra: 1 }) };
  await expect(call(base, 'GET', '/v1/things/x')).rejects.toThrow(/additional/);
  next = { status: 200, type: 'application/json', body: JSON.stringify({ id: 1, note: 'n' }) };
  await expect(call(base, 'GET', '/v1/things/x')).rejects.toThrow(/\/id must be string/);
});

test('an undocumented success status fails', async () => {
  next = { status: 201, type: 'application/json', body: JSON.stringify({ id: 'x', note: null }) };
  await expect(call(base, 'GET', '/v1/things/x')).rejects.toThrow(/status 201 is not documented/);
});

test('errors must be problem+json Problems whose status matches', async () => {
  next = { status: 404, type: 'application/problem+json', body: JSON.stringify({ type: 't', title: 'Not found', status: 404, code: 'not_found' }) };
  expect((await call(base, 'GET', '/v1/things/x')).status).toBe(404);
  next = { status: 404, type: 'application/json', body: JSON.stringify({ error: 'nope' }) };
  await expect(call(base, 'GET', '/v1/things/x')).rejects.toThrow(/problem\+json/);
  next = { status: 404, type: 'application/problem+json', body: JSON.stringify({ type: 't', title: 'x', status: 500, code: 'x' }) };
  await expect(call(base, 'GET', '/v1/things/x')).rejects.toThrow(/differs from the HTTP status/);
});

test('a literal path wins over a parameter, as in the router', async () => {
  next = { status: 200, type: 'application/json', body: JSON.stringify([1, 2]) };
  expect((await call(base, 'GET', '/v1/things/special')).body).toEqual([1, 2]);
});

test('responses of routes the document does not describe are not checked', async () => {
  next = { status: 200, type: 'text/plain', body: 'ok' };
  expect((await call(base, 'GET', '/v1/other')).text).toBe('ok');
  expect((await call(base, 'POST', '/v1/things/x')).text).toBe('ok');
});
