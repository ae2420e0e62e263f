// Issue 27 item 1: a GraphQL query's cost counts every field (aliases and single-row
// lookups too), aliases and selections are capped (fragments expanded, in linear
// time), rate tokens are paid by cost, and GraphQL statements time out before REST's.
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';
import { MAX_ALIASES, MAX_FIELDS } from '../../src/graphql/graphql-limits';
import { captureLogs } from '../../src/core/log';
import { GRAPHQL_STATEMENT_TIMEOUT_MS, pgSettingsFor } from '../../src/graphql/graphql-preset';

let app: TestApp;
let a: Tenant;
let plan: string;

interface GqlReply { status: number; headers: Headers; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any

async function gql(base: string, key: string, query: string, variables?: Record<string, unknown>): Promise<GqlReply> {
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const codes = (r: GqlReply): string[] => (r.body.errors ?? []).map((e: { extensions?: { code?: string } }) => e.extensions?.code);
const lookups = (n: number) => `query($p: String!) { ${Array.from({ length: n }, (_, i) => `a${i}: planById(id: $p) { id amountCents }`).join(' ')} }`;

beforeAll(async () => {
  app = await startApp();
  a = await createTenant(app.owner);
  const seed = new Seed(app.owner, a.communityId);
  plan = await seed.plan(await seed.tier());
  // The schema is built on first use: build it before anything is timed.
  expect((await gql(app.url, a.key, '{ plans(first: 1) { nodes { id } } }')).body.data.plans.nodes).toHaveLength(1);
});
afterAll(() => app.close());

/** /healthz round trips, one after another, until stop() is called. */
function probeHealthz() {
  const latencies: number[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const t0 = performance.now();
      await fetch(`${app.url}/healthz`).then((r) => r.text());
      latencies.push(performance.now() - t0);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  return { latencies, stop: async () => { running = false; await done; } };
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

test('the alias bomb (the audit\'s query, 1,000 aliased single-row lookups) is refused at once, and every /healthz answer meanwhile takes under 100 ms more than idle', async () => {
  const bomb = lookups(1000);
  // The first bomb this server sees (beforeAll warmed the route with a small query):
  // on main 2a577d0 planning a first bomb held the event loop for seconds.
  const idle = probeHealthz();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await idle.stop();
  const probe = probeHealthz();
  // Let the probe be in flight before the bomb is sent, and keep probing after it is answered.
  await new Promise((resolve) => setTimeout(resolve, 20));
  const r = await gql(app.url, a.key, bomb, { p: plan });
  await new Promise((resolve) => setTimeout(resolve, 20));
  await probe.stop();
  expect(probe.latencies.length).toBeGreaterThan(1);
  // main 2a577d0: this bomb ran 4.4-5.7 s and /healthz waited up to 3.3 s.
  expect(Math.max(...probe.latencies)).toBeLessThan(Math.max(...idle.latencies) + 100);
  expect(r.body.data).toBeUndefined();
  expect(codes(r)).toEqual(['QUERY_TOO_LARGE']);
});

test('four alias bombs at once are refused at once, and /healthz answers meanwhile', async () => {
  const bombQueries = [lookups(1000), lookups(1000), lookups(300), lookups(300)];
  // Warm: the first request of a kind pays for compiling its code path, bomb or not.
  await gql(app.url, a.key, bombQueries[0], { p: plan });
  // /healthz on this machine now, without a bomb: the yardstick.
  const idle = probeHealthz();
  await new Promise((resolve) => setTimeout(resolve, 300));
  await idle.stop();
  const probe = probeHealthz();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const bombs = await Promise.all(bombQueries.map((q) => gql(app.url, a.key, q, { p: plan })));
  const took = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await probe.stop();
  // Four bombs at once: /healthz answered meanwhile as it answers on this machine
  // without them, within 100 ms at the median (a loaded machine, such as 8 test runs
  // sharing 2 cores, delays an idle server's answers too: that delay is measured
  // first and allowed for). Checked first: on main 2a577d0 the probe waited seconds.
  expect(probe.latencies.length).toBeGreaterThan(0);
  expect(median(probe.latencies)).toBeLessThan(median(idle.latencies) + 100);
  expect(Math.max(...probe.latencies)).toBeLessThan(Math.max(...idle.latencies) + 1000);
  for (const r of bombs) {
    expect(r.body.data).toBeUndefined();
    expect(r.body.errors.length).toBeGreaterThan(0);
  }
  // 1,000 lookups pass the token limit of the parser; 300 fit in it and break the alias cap.
  expect(bombs[0].body.errors[0]).toMatchObject({ message: 'The document has more than 5000 tokens; at most 5000 are allowed.', extensions: { code: 'QUERY_TOO_LARGE' } });
  expect(codes(bombs[2])).toContain('QUERY_TOO_LARGE');
  expect(bombs[2].body.errors[0].message).toMatch(/300 aliases/);
  // And the reason: this process (it runs the app, the bombs' client and the probe)
  // spent a few hundred ms of CPU at most on all four bombs, where main 2a577d0 spent
  // seconds on one (4.4-5.7 s, /healthz stalled up to 3.3 s).
  expect((cpu.user + cpu.system) / 1000).toBeLessThan(400);
  expect(took).toBeLessThan(3000 + 10 * median(idle.latencies));
});

test(`aliases are capped at ${MAX_ALIASES}, and single-row lookups count`, async () => {
  const atCap = await gql(app.url, a.key, lookups(MAX_ALIASES), { p: plan });
  expect(atCap.body.errors).toBeUndefined();
  expect(Object.keys(atCap.body.data)).toHaveLength(MAX_ALIASES);
  const over = await gql(app.url, a.key, lookups(MAX_ALIASES + 1), { p: plan });
  expect(codes(over)).toEqual(['QUERY_TOO_LARGE']);
  expect(over.body.errors[0].message).toBe(`The query has ${MAX_ALIASES + 1} aliases; at most ${MAX_ALIASES} are allowed: read lists through a connection.`);
  // Aliased relation fields count as aliases wherever they are.
  const nested = `{ plans(first: 1) { nodes { ${Array.from({ length: MAX_ALIASES + 1 }, (_, i) => `t${i}: tier { id }`).join(' ')} } } }`;
  expect(codes(await gql(app.url, a.key, nested))).toEqual(['QUERY_TOO_LARGE']);
});

test('single-row relations cost a row per parent row, so they count toward the row budget', async () => {
  // 100 members, 100 subscriptions each: 10,100 rows by connections alone, and a plan
  // and a member per subscription: 20,000 more.
  const q = (fields: string) => `{ members(first: 100) { nodes { subscriptions(first: 100) { nodes { ${fields} } } } } }`;
  const r = await gql(app.url, a.key, q('id plan { id } member { id }'));
  expect(r.body.data).toBeUndefined();
  expect(codes(r)).toEqual(['QUERY_TOO_COSTLY']);
  expect(r.body.errors[0].message).toMatch(/^The query may read 30,100 rows; at most 25,?000 are allowed/);
  // One relation per subscription fits (20,100 rows).
  expect((await gql(app.url, a.key, q('id plan { id }'))).body.errors).toBeUndefined();
});

test('fragments are counted expanded, in linear time: a chain of doubling fragment spreads is refused at once', async () => {
  // F40 expands to 2^40 fields; walking it spread by spread would never end.
  const frags = ['fragment F0 on Plan { id }'];
  for (let i = 1; i <= 40; i++) frags.push(`fragment F${i} on Plan { ...F${i - 1} ... on Plan { ...F${i - 1} } }`);
  const t0 = performance.now();
  const r = await gql(app.url, a.key, `{ plans(first: 1) { nodes { ...F40 } } } ${frags.join(' ')}`);
  expect(performance.now() - t0).toBeLessThan(1000);
  expect(r.body.data).toBeUndefined();
  expect(codes(r)).toContain('QUERY_TOO_LARGE');
  expect(r.body.errors[0].message).toMatch(/fields \(fragments expanded\)/);
  // Plain repetition is counted the same way.
  const many = `{ plans(first: 1) { nodes { ${'id '.repeat(MAX_FIELDS + 1)} } } }`;
  expect(codes(await gql(app.url, a.key, many))).toEqual(['QUERY_TOO_LARGE']);
});

test('a query pays rate tokens by its cost: one per root field and per 100 rows', async () => {
  const limited = await startApp({ rateLimits: { key_per_minute: 1, key_burst: 60, ip_per_minute: 1e6, ip_burst: 1e6 } });
  try {
    const t = await createTenant(limited.owner);
    const seed = new Seed(limited.owner, t.communityId);
    const p = await seed.plan(await seed.tier());
    // 20 lookups: 20 statements, 20 tokens (REST would take 20 requests).
    const r = await gql(limited.url, t.key, lookups(20), { p });
    expect(r.body.errors).toBeUndefined();
    expect(r.headers.get('ratelimit-remaining')).toBe('40');
    // 100 members x 30 subscriptions: 3,100 rows, 31 tokens; only 40 are left... then 9.
    const rows = '{ members(first: 100) { nodes { id subscriptions(first: 30) { nodes { id } } } } }';
    const paid = await gql(limited.url, t.key, rows);
    expect(paid.body.errors).toBeUndefined();
    expect(paid.headers.get('ratelimit-remaining')).toBe('9');
    // It cannot be paid for now: 429 as REST answers it, and the bucket keeps its tokens.
    const refused = await gql(limited.url, t.key, rows);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.body.code).toBe('rate_limited');
    expect(refused.body.detail).toMatch(/costs 31 rate tokens/);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const cheap = await gql(limited.url, t.key, '{ plans(first: 1) { nodes { id } } }');
    expect(cheap.status).toBe(200);
    expect(cheap.headers.get('ratelimit-remaining')).toBe('7');
  } finally {
    await limited.close();
  }
});

test('GraphQL statements time out before the API login\'s own statement_timeout', async () => {
  const { rows } = await app.owner.query<{ ms: string }>(`
    select (regexp_match(cfg, '^statement_timeout=(.*)$'))[1] as ms
    from pg_db_role_setting s join pg_roles r on r.oid = s.setrole, unnest(s.setconfig) cfg
    where r.rolname = 'billing_app' and cfg like 'statement_timeout=%'`);
  expect(rows).toHaveLength(1);
  const { rows: [api] } = await app.owner.query<{ ms: number }>(`select extract(epoch from $1::interval) * 1000 as ms`, [rows[0].ms]);
  expect(GRAPHQL_STATEMENT_TIMEOUT_MS).toBeLessThan(Number(api.ms));
  // And it is what every GraphQL transaction runs with (the settings the preset hands grafast).
  expect(pgSettingsFor({ communityId: 'c', keyId: 'k', scopes: [], rl: { limit: 1, remaining: 1, reset: 1, retry_after: 1 } } as never).statement_timeout)
    .toBe(String(GRAPHQL_STATEMENT_TIMEOUT_MS));
});

test('a GraphQL statement is cancelled at the GraphQL timeout, long before the API login\'s', async () => {
  // A read that cannot finish: the owner holds the plans table locked until rollback.
  const locker = await app.owner.connect();
  // The answer names the error by an id; the service's log (not the console) says why.
  const printed = jest.spyOn(console, 'error').mockImplementation(() => {});
  const logs = captureLogs('error');
  try {
    await locker.query('begin');
    await locker.query('lock table billing.plans in access exclusive mode');
    const t0 = performance.now();
    const r = await gql(app.url, a.key, '{ plans(first: 1) { nodes { id } } }');
    const took = performance.now() - t0;
    expect(r.body.errors?.length).toBeGreaterThan(0);
    expect(r.body.data?.plans ?? null).toBeNull();
    // Cancelled at GraphQL's 3 s (main 2a577d0: 5 s; the API login's is 15 s).
    expect(took).toBeGreaterThanOrEqual(GRAPHQL_STATEMENT_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(GRAPHQL_STATEMENT_TIMEOUT_MS + 1500);
    const errorId = (r.body.errors?.[0]?.extensions as { errorId?: string } | undefined)?.errorId;
    expect(r.body.errors?.[0]?.message).toBe(`An error occurred (logged with id '${errorId}').`);
    const line = logs.lines.map((l) => JSON.parse(l) as { error_id?: string; err?: { message?: string } }).find((l) => l.error_id === errorId);
    expect(line?.err?.message).toMatch(/canceling statement due to statement timeout/);
    expect(printed).not.toHaveBeenCalled();
  } finally {
    logs.stop();
    printed.mockRestore();
    await locker.query('rollback');
    locker.release();
  }
  // The connection went back to the pool healthy: the next query answers.
  expect((await gql(app.url, a.key, '{ plans(first: 1) { nodes { id } } }')).body.data.plans.nodes).toHaveLength(1);
});

test('hostile documents are answered with GraphQL errors before anything runs, never a 500', async () => {
  const nested = (levels: number) => `{ ${'plans(first: 1) { nodes { tier { '.repeat(levels)} id ${'} } } '.repeat(levels)} }`;
  const deep = await gql(app.url, a.key, nested(300));
  expect(codes(deep)).toContain('QUERY_TOO_DEEP');
  for (const query of ['{'.repeat(20_000), `{ plans(first: 1) { nodes { id } } }\u0000`, `{ plans(first: 1) { nodes { id\uD800 } } }`, '']) {
    const r = await gql(app.url, a.key, query);
    expect(r.status).toBeLessThan(500);
    expect(r.body.errors.length).toBeGreaterThan(0);
    expect(r.body.data).toBeUndefined();
  }
  // Variables nested deep, where a string is expected (the body written by hand: JSON.stringify would overflow).
  const body = `{"query":"query($p: String!) { planById(id: $p) { id } }","variables":{"p":${'['.repeat(5_000)}"x"${']'.repeat(5_000)}}}`;
  const res = await fetch(`${app.url}/graphql`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${a.key}` },
  });
  expect(res.status).toBeLessThan(500);
  expect(await res.text()).toMatch(/"errors"|"invalid_request"/);
});
