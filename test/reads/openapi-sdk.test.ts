// Issue 26 item 11: a generator makes good SDKs from the served document. openapi-
// typescript (the CLI a third party runs) turns GET /v1/openapi.json into types; the
// resources are named types (components["schemas"]["Subscription"], ...) that every
// operation refers to instead of an anonymous copy each; timestamps are date-time;
// responses document the headers the app sends. A small client file using those types
// is type-checked against the output.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { startApp, TestApp } from '../support/app';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const NAMED = ['Subscription', 'Member', 'Invoice', 'InvoiceLine', 'Tier', 'Plan', 'Purchase', 'Grant', 'Discount',
  'MemberEntitlement', 'Event', 'CheckoutLink', 'AnalyticsSummary', 'WebhookEndpoint', 'WebhookDelivery', 'Problem'];

let app: TestApp;
let doc: Json;
let dir: string;
let generated: string;

beforeAll(async () => {
  app = await startApp();
  doc = await (await fetch(`${app.url}/v1/openapi.json`)).json() as Json;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-sdk-'));
  fs.writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(doc));
  const cli = path.join(__dirname, '../../node_modules/openapi-typescript/bin/cli.js');
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [cli, path.join(dir, 'openapi.json'), '-o', path.join(dir, 'billing-api.d.ts')],
      (err, _out, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve()));
  });
  generated = fs.readFileSync(path.join(dir, 'billing-api.d.ts'), 'utf8');
}, 60000);
afterAll(async () => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  await app?.close();
});

test('openapi-typescript makes a named type for each resource: components["schemas"]["Subscription"] and the rest', () => {
  const schemasBlock = generated.slice(generated.indexOf('export interface components {'));
  for (const name of NAMED) {
    expect({ name, named: new RegExp(`\\n {8}${name}: \\{`).test(schemasBlock) }).toEqual({ name, named: true });
  }
});

test('operations refer to the named types: a resource\'s fields appear once in the generated code, not once per operation', () => {
  // current_period_end is a Subscription field only; total_cents an Invoice field only.
  expect(generated.match(/\bcurrent_period_end\??:/g)).toHaveLength(1);
  expect(generated.match(/\btotal_cents\??:/g)).toHaveLength(1);
  expect(generated).toContain('data: components["schemas"]["Subscription"][];');
  expect(generated).toContain('"application/json": components["schemas"]["Invoice"];');
  // In the document: every response holding a subscription says so by $ref.
  const getSub = doc.paths['/v1/subscriptions/{id}'].get.responses['200'].content['application/json'].schema;
  expect(getSub).toEqual({ $ref: '#/components/schemas/Subscription' });
});

test('a client written against the generated types type-checks: list items are Subscriptions, problems have typed codes', () => {
  const client = `
import type { components, paths } from './billing-api';
type Subscription = components['schemas']['Subscription'];
type Listed = paths['/v1/subscriptions']['get']['responses'][200]['content']['application/json']['data'][number];
const listed: Listed = null as unknown as Subscription;
const sub: Subscription = listed;
export const created: string = sub.created_at;
export const status: 'active' | 'trialing' | 'past_due' | 'cancelling' | 'cancelled' | 'paused' = sub.status;
type Refund = paths['/v1/invoices/{id}/refunds']['post']['responses'][200]['content']['application/json'];
export const refunded: components['schemas']['Invoice'] = (null as unknown as Refund).invoice;
type Problem = components['schemas']['Problem'];
export const code: Problem['code'] = 'not_found';
// @ts-expect-error a code the API does not have
export const unknownCode: Problem['code'] = 'no_such_code';
// @ts-expect-error Subscription has no such field
export const nothing = sub.no_such_field;
`;
  fs.writeFileSync(path.join(dir, 'client.ts'), client);
  const program = ts.createProgram([path.join(dir, 'client.ts')], {
    strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS, skipLibCheck: false, types: [],
  });
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  expect(diagnostics).toEqual([]);
}, 60000);

test('every timestamp is format date-time, in the document and as a comment on the generated type', () => {
  const timestamps: string[] = [];
  const loose: string[] = [];
  const walk = (node: unknown, at: string) => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${at}/${i}`));
    if (node === null || typeof node !== 'object') return;
    const props = (node as Json).properties as Json | undefined;
    for (const [key, value] of Object.entries(props ?? {})) {
      if (!/(_at|_since|_until|^window_start|^period_start|^period_end|^timestamp)$/.test(key)) continue;
      const text = JSON.stringify(value);
      if (text.includes('"format":"date-time"')) timestamps.push(`${at}/${key}`);
      else if (!text.includes('$ref')) loose.push(`${at}/${key}`);
    }
    for (const [key, value] of Object.entries(node)) walk(value, `${at}/${key}`);
  };
  walk(doc, '#');
  expect(loose).toEqual([]);
  expect(timestamps.length).toBeGreaterThan(40);
  expect(timestamps).toEqual(expect.arrayContaining(['#/components/schemas/Subscription/created_at', '#/components/schemas/Invoice/paid_at']));
  expect(generated).toMatch(/Format: date-time\n[^/]*\*\/\n\s+created_at: string;/);
});

test('responses document the headers the app sends: request id, version, rate budget, Retry-After, Idempotent-Replayed', async () => {
  const ok = doc.paths['/v1/subscriptions'].get.responses['200'].headers;
  expect(Object.keys(ok).sort()).toEqual(['Api-Version', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'X-Request-Id']);
  const replayable = doc.paths['/v1/checkout-links'].post.responses['200'].headers;
  expect(replayable['Idempotent-Replayed']).toEqual({ $ref: '#/components/headers/IdempotentReplayed' });
  const limited = doc.components.responses.Problem429.headers;
  const unavailable = doc.components.responses.Problem503.headers;
  expect(limited['Retry-After']).toEqual({ $ref: '#/components/headers/RetryAfter' });
  expect(unavailable['Retry-After']).toEqual({ $ref: '#/components/headers/RetryAfter' });
  expect(doc.components.responses.Problem401.headers['WWW-Authenticate']).toBeDefined();
  for (const ref of Object.values({ ...ok, ...limited }) as { $ref: string }[]) {
    expect(doc.components.headers[ref.$ref.split('/').pop()!]).toMatchObject({ description: expect.any(String), schema: expect.any(Object) });
  }
  // The documented names are the ones a response carries.
  const res = await fetch(`${app.url}/v1/subscriptions`, { headers: { authorization: 'Bearer bk_nope' } });
  await res.text();
  for (const name of ['X-Request-Id', 'Api-Version', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) {
    expect({ name, sent: res.headers.has(name) }).toEqual({ name, sent: true });
  }
});
