// Protocol versions: the v2 SDK client negotiates the current revision (2026-07-28,
// server/discover, no initialize) and gets the same tools and REST-equal results; a
// v2 client in its default legacy mode, and the v1 client of the other tests in this
// directory, still get the 2025 handshake. Keys, scopes and rate limits are the same
// on both eras.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { connect as connectV1 } from '../support/mcp-client';

let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  // A slow refill (one token a minute) keeps the key's rate-token count exact. The IP's
  // bucket (anonymous requests from 127.0.0.1, one table shared with other files that
  // drain it) refills at once, so a bad key meets 401, not another file's 429.
  app = await startApp({ rateLimits: { key_per_minute: 1, key_burst: 200, ip_per_minute: 1e6, ip_burst: 1000 } });
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

async function connectV2(key: string | null, mode: 'auto' | 'legacy'): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', app.url), {
    requestInit: { headers: key ? { authorization: `Bearer ${key}` } : {} },
  });
  const client = new Client({ name: 'billing-tests-v2', version: '1.0.0' }, { versionNegotiation: { mode } });
  await client.connect(transport);
  return client;
}

/** The JSON of a tool result's text content (the REST body), checked against structuredContent. */
function json(result: { content?: unknown; structuredContent?: unknown }): unknown {
  const text = (result.content as { type: string; text?: string }[]).find((c) => c.type === 'text')?.text;
  if (text === undefined) throw new Error(`no text content: ${JSON.stringify(result)}`);
  const parsed: unknown = JSON.parse(text);
  if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) expect(result.structuredContent).toEqual(parsed);
  return parsed;
}

test('the v2 client negotiates protocol 2026-07-28 and calls a tool: the result is the REST body', async () => {
  const client = await connectV2(tenant.key, 'auto');
  try {
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    expect(client.getProtocolEra()).toBe('modern');
    expect(client.getServerVersion()?.name).toBe('community-billing');

    const result = await client.callTool({ name: 'list_plans', arguments: {} });
    expect(result.isError).toBeFalsy();
    const rest = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
    expect(rest.status).toBe(200);
    expect(json(result)).toEqual(rest.body);
  } finally {
    await client.close();
  }
});

test('both eras list the same 36 tools with the same titles, descriptions, input and output schemas and annotations', async () => {
  const modern = await connectV2(tenant.key, 'auto');
  const old: V1Client = await connectV1(app.url, tenant.key);
  try {
    const byName = (tools: { name: string }[]) => Object.fromEntries(tools.map((t) => [t.name, t]));
    const modernTools = (await modern.listTools()).tools;
    expect(modernTools).toHaveLength(36);
    expect(byName(modernTools)).toEqual(byName((await old.listTools()).tools));
    const checkout = modernTools.find((t) => t.name === 'create_checkout_link');
    expect(checkout?.annotations).toEqual({ title: checkout?.title, readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true });
    expect(checkout?.outputSchema).toMatchObject({ type: 'object' });
  } finally {
    await modern.close();
    await old.close();
  }
});

test('on 2026-07-28 a missing scope is still a tool error carrying the REST problem', async () => {
  const narrow = await createTenant(app.owner, ['discounts:read']);
  const client = await connectV2(narrow.key, 'auto');
  try {
    const result = await client.callTool({ name: 'list_plans', arguments: {} });
    expect(result.isError).toBe(true);
    const rest = await call(app.url, 'GET', '/v1/plans', { key: narrow.key });
    expect(rest.status).toBe(403);
    expect(json(result)).toEqual(rest.body);
    expect(rest.body).toMatchObject({ code: 'missing_scope', required_scope: 'plans:read' });
  } finally {
    await client.close();
  }
});

test('on 2026-07-28 a bad key is refused with HTTP 401 before the protocol', async () => {
  const err = await connectV2('nonsense', 'auto').then(async (c) => { await c.close(); return null; }, (e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  expect(String((err as Error).message)).toMatch(/401/);
});

test('a v2 client in its default (legacy) mode still gets the 2025 handshake, at 2025-11-25', async () => {
  const client = await connectV2(tenant.key, 'legacy');
  try {
    expect(client.getNegotiatedProtocolVersion()).toBe('2025-11-25');
    expect(client.getProtocolEra()).toBe('legacy');
    const result = await client.callTool({ name: 'list_plans', arguments: {} });
    const rest = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
    expect(json(result)).toEqual(rest.body);
  } finally {
    await client.close();
  }
});

test('a raw 2026-07-28 tools/call costs one rate token, like its REST twin', async () => {
  const before = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
  const res = await fetch(new URL('/mcp', app.url), {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'list_plans',
      authorization: `Bearer ${tenant.key}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: {
        name: 'list_plans', arguments: {},
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
  const text = await res.text();
  expect({ status: res.status, text }).toEqual({ status: 200, text: expect.stringContaining('"result"') });
  expect(Number(res.headers.get('ratelimit-remaining'))).toBe(Number(before.headers.get('ratelimit-remaining')) - 1);
});
