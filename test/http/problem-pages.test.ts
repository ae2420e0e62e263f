// Issue 26 item 11: a problem's `type` resolves. It is {base}/problems#<code> (the
// spec: a URI ending in an anchor for the code), at the base URL the request used;
// that page is served, with a section whose id is the code, and /problems/<code> is
// the code's own page. The OpenAPI document's error table links the same addresses.
import { PROBLEM_CODES } from '../../src/http/problem-pages';
import { call, createTenant, startApp, TestApp } from '../support/app';
import { callTool, connect } from '../support/mcp-client';

let app: TestApp;
let key: string;

beforeAll(async () => {
  app = await startApp();
  key = (await createTenant(app.owner, ['members:read'])).key;
});
afterAll(() => app.close());

async function page(url: string): Promise<{ status: number; type: string | null; text: string; csp: string | null }> {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text(), csp: res.headers.get('content-security-policy') };
}

test('REST problems name this server\'s page for their code, and the page has a section with that id', async () => {
  const answers = [
    await call(app.url, 'GET', '/v1/members/mem_00000000000000000000000000', { key }),
    await call(app.url, 'GET', '/v1/subscriptions', { key }),
    await call(app.url, 'GET', '/v1/members', { key: 'bk_nope' }),
    await call(app.url, 'GET', '/v1/members?limit=500', { key }),
  ];
  expect(answers.map((a) => a.body.code)).toEqual(['not_found', 'missing_scope', 'unauthorized', 'invalid_request']);
  for (const answer of answers) {
    const { code, type } = answer.body;
    expect(type).toBe(`${app.url}/problems#${code}`);
    const served = await page(type);
    expect({ code, status: served.status, html: served.type }).toEqual({ code, status: 200, html: expect.stringMatching(/^text\/html/) });
    expect(served.text).toContain(`<section id="${code}">`);
  }
});

test('the page answers at the host the request used; a configured PUBLIC_BASE_URL wins', async () => {
  const viaLocalhost = await fetch(`${app.url.replace('127.0.0.1', 'localhost')}/v1/members`, { headers: { authorization: 'Bearer bk_nope' } });
  expect((await viaLocalhost.json() as { type: string }).type).toBe(`${app.url.replace('127.0.0.1', 'localhost')}/problems#unauthorized`);
  const configured = await startApp({ publicBaseUrl: 'https://billing.example.com/' });
  try {
    const r = await call(configured.url, 'GET', '/v1/members', { key: 'bk_nope' });
    expect(r.body.type).toBe('https://billing.example.com/problems#unauthorized');
  } finally {
    await configured.close();
  }
});

test('MCP tool errors carry the same type as REST', async () => {
  const client = await connect(app.url, key);
  try {
    const result = await callTool(client, 'list_subscriptions');
    expect(result.structuredContent).toMatchObject({ code: 'missing_scope', type: `${app.url}/problems#missing_scope` });
  } finally {
    await client.close();
  }
});

test('every code has its section on /problems and its own page at /problems/<code>; an unknown code is a 404 problem', async () => {
  const index = await page(`${app.url}/problems`);
  expect(index.status).toBe(200);
  expect(index.csp).toMatch(/default-src 'none'/);
  for (const code of PROBLEM_CODES) {
    expect({ code, section: index.text.includes(`<section id="${code}">`) }).toEqual({ code, section: true });
    const own = await page(`${app.url}/problems/${code}`);
    expect({ code, status: own.status, section: own.text.includes(`<section id="${code}">`) }).toEqual({ code, status: 200, section: true });
  }
  for (const bogus of ['nope', '%00', '..%2Fv1', '%F0%9F%98%80', 'x'.repeat(5000)]) {
    const r = await fetch(`${app.url}/problems/${bogus}`);
    expect({ bogus, status: r.status, type: r.headers.get('content-type') }).toEqual({ bogus, status: 404, type: expect.stringMatching(/^application\/problem\+json/) });
    await r.text();
  }
  // Not UTF-8 (a lone surrogate, a stray byte): the app's answer to an unreadable URL, never a 500.
  for (const bogus of ['%ED%A0%80', '%FF']) {
    const r = await fetch(`${app.url}/problems/${bogus}`);
    expect({ bogus, client: r.status >= 400 && r.status < 500, type: r.headers.get('content-type') }).toEqual({ bogus, client: true, type: expect.stringMatching(/^application\/problem\+json/) });
    await r.text();
  }
});

test('the OpenAPI document describes type as the page address and lists every code with its link', async () => {
  const doc = (await call(app.url, 'GET', '/v1/openapi.json')).body;
  expect(doc.components.schemas.Problem.properties.type.description).toContain('/problems#<code>');
  expect(doc.components.schemas.Problem.properties.code.enum.sort()).toEqual([...PROBLEM_CODES].sort());
  for (const code of PROBLEM_CODES) {
    expect({ code, listed: doc.info.description.includes(`[\`${code}\`](/problems#${code})`) }).toEqual({ code, listed: true });
  }
  const example = doc.components.responses.Problem404.content['application/problem+json'].examples.example.value;
  expect(example.type).toBe('/problems#not_found');
  expect(JSON.stringify(doc)).not.toContain('docs.billing.example');
});
