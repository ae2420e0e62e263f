// Audit item 2: a NUL (%00, \u0000) or an unpaired surrogate (\ud800) anywhere in a
// path, query or body is a 400 invalid_request problem, after authentication and a
// rate token like any other request, on every route of the registry and every MCP
// tool (generated from them), never a 500 from PostgreSQL. Bytes that are not UTF-8
// in a JSON body are a 400 too.
import { z } from 'zod';
import { operations } from '../../src/operations';
import { tools } from '../../src/mcp/tools';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { ENCRYPTION_KEY } from '../support/webhooks';
import { rpc, toolCallMessage } from '../support/mcp-client';
import { raw } from './raw';

let app: TestApp;
let t: Tenant;
beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  t = await createTenant(app.owner);
});
afterAll(() => app.close());

const placeholders = (path: string) => [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
const fill = (path: string, values: Record<string, string>) => path.replace(/\{(\w+)\}/g, (_m, name: string) => values[name] ?? 'x_1');
const fieldsOf = (schema?: z.ZodObject<z.ZodRawShape>) => Object.keys(schema?.shape ?? {});

interface Probe { name: string; method: string; path: string; body?: string }

function probes(): Probe[] {
  const out: Probe[] = [];
  for (const op of operations) {
    for (const p of placeholders(op.path)) {
      out.push({ name: `${op.name} path ${p}`, method: op.method, path: fill(op.path, { [p]: '%00' }) });
      out.push({ name: `${op.name} path ${p} (inside)`, method: op.method, path: fill(op.path, { [p]: 'mem_%00x' }) });
    }
    for (const q of [...fieldsOf(op.query), 'unknown_param']) {
      out.push({ name: `${op.name} query ${q}`, method: op.method, path: `${fill(op.path, {})}?${q}=a%00b` });
    }
    if (op.method === 'GET') continue;
    for (const f of [...fieldsOf(op.body), 'unknown_field']) {
      out.push({ name: `${op.name} body ${f} NUL`, method: op.method, path: fill(op.path, {}), body: `{"${f}": "a\\u0000b"}` });
      out.push({ name: `${op.name} body ${f} surrogate`, method: op.method, path: fill(op.path, {}), body: `{"${f}": "a\\ud800b"}` });
      out.push({ name: `${op.name} body ${f} nested`, method: op.method, path: fill(op.path, {}), body: `{"${f}": {"external": {"namespace": "\\udc00"}}}` });
    }
    out.push({ name: `${op.name} body key`, method: op.method, path: fill(op.path, {}), body: '{"a\\u0000": 1}' });
  }
  return out;
}

test('every route of the registry answers 400 invalid_request for NUL or a lone surrogate in its path, query or body', async () => {
  const failures: string[] = [];
  const all = probes();
  expect(all.length).toBeGreaterThan(150);
  for (const p of all) {
    const headers: Record<string, string> = { authorization: `Bearer ${t.key}` };
    if (p.body !== undefined) headers['content-type'] = 'application/json';
    const r = await raw(app.url, p.method, p.path, { headers, body: p.body });
    const ok = r.status === 400 && r.body?.code === 'invalid_request'
      && /^application\/problem\+json/.test(String(r.headers['content-type']))
      && r.headers['ratelimit-remaining'] !== undefined;
    if (!ok) failures.push(`${p.name}: ${p.method} ${p.path} ${p.body ?? ''} -> ${r.status} ${r.text.slice(0, 160)}`);
  }
  expect(failures).toEqual([]);
});

test('the refusal takes a rate token of the key, and comes after authentication', async () => {
  // The per-IP bucket lives in the database that every test file shares, and other files
  // drain 127.0.0.1's on purpose: this file's anonymous request comes from an address of
  // its own (one trusted proxy hop), so only this test's requests count against it.
  const limited = await startApp({ rateLimits: { key_per_minute: 60, key_burst: 5, ip_per_minute: 60, ip_burst: 5 }, trustProxy: 1 });
  try {
    const k = await createTenant(limited.owner);
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await raw(limited.url, 'GET', '/v1/members/%00', { headers: { authorization: `Bearer ${k.key}` } });
      expect(r.status).toBe(400);
      remaining.push(String(r.headers['ratelimit-remaining']));
    }
    expect(remaining).toEqual(['4', '3', '2']);
    const ownAddress = `198.51.100.${1 + (process.pid % 250)}`;
    const anonymous = await raw(limited.url, 'GET', '/v1/members/%00', { headers: { 'x-forwarded-for': ownAddress } });
    expect(anonymous.status).toBe(401);
  } finally {
    await limited.close();
  }
});

/** A value of the right type for a tool's input field (so only the probed field is bad). */
function sample(schema: Record<string, unknown>): unknown {
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (schema.type === 'integer' || schema.type === 'number') return 1;
  if (schema.type === 'boolean') return true;
  if (schema.type === 'array') return ['x'];
  if (Array.isArray(schema.anyOf)) return sample(schema.anyOf[0] as Record<string, unknown>);
  return 'x_1';
}

test('every MCP tool answers a tool error invalid_request for NUL or a lone surrogate in any string input', async () => {
  const failures: string[] = [];
  for (const tool of tools) {
    const js = z.toJSONSchema(tool.input, { io: 'input' }) as { properties?: Record<string, Record<string, unknown>> };
    const props = js.properties ?? {};
    const base: Record<string, unknown> = Object.fromEntries(Object.entries(props).map(([k, s]) => [k, sample(s)]));
    // Identity pairs: one pair at a time (check_entitlement, create_checkout_link).
    if ('platform' in base && 'namespace' in base) { delete base.namespace; delete base.external_user_id; }
    delete base.cursor;
    if ('return_url' in base) base.return_url = 'https://shop.example/back';
    const stringFields = Object.entries(props).filter(([, s]) => s.type === 'string' && !s.enum).map(([k]) => k);
    for (const field of stringFields) {
      for (const bad of ['a\u0000b', 'a\ud800b']) {
        const args = { ...base, [field]: bad };
        if (field === 'namespace' || field === 'external_user_id') {
          delete args.platform; delete args.platform_uid;
          args.namespace ??= 'app'; args.external_user_id ??= 'u1';
          if (args.namespace === 'x_1') args.namespace = 'app';
        }
        const r = await rpc(app.url, t.key, toolCallMessage(tool.name, args));
        const result = r.body?.result;
        const problem = result?.content?.[0]?.text ? JSON.parse(result.content[0].text) : null;
        if (!(r.status === 200 && result?.isError === true && problem?.code === 'invalid_request' && [400, 422].includes(problem?.status))) {
          failures.push(`${tool.name}.${field}=${JSON.stringify(bad)} -> ${r.status} ${problem?.detail ?? r.text.slice(0, 200)}`);
        }
      }
    }
  }
  expect(failures).toEqual([]);
});

test('a JSON body that is not UTF-8 answers 400 invalid_request', async () => {
  const body = Buffer.concat([Buffer.from('{"tier_id": "'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('", "subject": {"member_id": "mem_1"}}')]);
  const r = await raw(app.url, 'POST', '/v1/checkout-links', { headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body });
  expect(r.status).toBe(400);
  expect(r.body).toMatchObject({ code: 'invalid_request', detail: expect.stringMatching(/UTF-8/) });
  expect(r.headers['content-type']).toMatch(/problem\+json/);
  const ok = await call(app.url, 'POST', '/v1/members/mem_none/external-subjects', { key: t.key, body: { namespace: 'app', external_user_id: 'é' } });
  expect(ok.status).toBe(404);
});
