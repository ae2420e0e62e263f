// Leased rate tokens (src/operations/token-leases.ts): an API instance takes a key's
// tokens a few at a time; a SQL operation run on a leased token writes nothing to the
// bucket. The key's limits still hold across API processes (four of them in the last
// test, within the tolerance docs/decisions/leased-rate-tokens.md states), the headers still count down
// one per request, and a revoked key is refused on the very next request.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import type pg from 'pg';
import { TokenLeases } from '../../src/operations/token-leases';
import { call, createTenant, startApp, TEST_APP_DB, TEST_DB, TestApp } from '../support/app';

const DEFAULTS = { key_per_minute: 300, key_burst: 60, ip_per_minute: 20, ip_burst: 10 };

let app: TestApp;

beforeAll(async () => {
  // Leases kept a minute here, so a slow machine cannot expire one mid-test.
  app = await startApp({ rateLimits: DEFAULTS, tokenLeaseMs: 60_000 });
});
afterAll(() => app.close());

async function bucket(keyId: string): Promise<{ xmin: string; tokens: number }> {
  const { rows } = await app.owner.query(`select xmin::text as xmin, tokens from billing_private.rate_buckets where bucket = $1`, [`key:${keyId}`]);
  return rows[0];
}

test('with the default limits (burst 60) a key leases 6 tokens at once; reads on them leave its bucket row alone', async () => {
  const tenant = await createTenant(app.owner);
  const remaining: number[] = [];
  const versions: string[] = [];
  for (let i = 0; i < 6; i++) {
    const r = await call(app.url, 'GET', '/v1/subscriptions', { key: tenant.key });
    expect(r.status).toBe(200);
    remaining.push(Number(r.headers.get('ratelimit-remaining')));
    versions.push((await bucket(tenant.keyId)).xmin);
  }
  // The headers count down one per request, as without leases.
  expect(remaining).toEqual([59, 58, 57, 56, 55, 54]);
  // One write (the lease) for six requests: the row version never changed after the first.
  expect(new Set(versions).size).toBe(1);
  expect((await bucket(tenant.keyId)).tokens).toBeLessThan(55);
  const seventh = await call(app.url, 'GET', '/v1/subscriptions', { key: tenant.key });
  expect(seventh.status).toBe(200);
  expect((await bucket(tenant.keyId)).xmin).not.toBe(versions[0]);
});

test('requests that only authenticate (refused input, GET /mcp) spend lease tokens too: headers count down one per request across leases', async () => {
  // One token a minute: nothing refills during the test, so the count is exact.
  const exact = await startApp({ rateLimits: { key_per_minute: 1, key_burst: 60, ip_per_minute: 1e6, ip_burst: 1e6 }, tokenLeaseMs: 60_000 });
  try {
    const tenant = await createTenant(exact.owner);
    const remaining: number[] = [];
    const note = (r: { headers: Headers }) => remaining.push(Number(r.headers.get('ratelimit-remaining')));
    note(await call(exact.url, 'GET', '/v1/subscriptions', { key: tenant.key }));
    // These only authenticate (src/operations/gate.ts pass): before, they took their
    // token from the bucket behind the lease's back, and the next lease's headers
    // jumped down by as many.
    const bad = await call(exact.url, 'GET', '/v1/subscriptions?limit=nonsense', { key: tenant.key });
    expect(bad.status).toBe(422);
    note(bad);
    for (let i = 0; i < 3; i++) {
      const res = await fetch(new URL('/mcp', exact.url), { headers: { authorization: `Bearer ${tenant.key}` } });
      expect(res.status).toBe(405);
      await res.text();
      note(res);
    }
    // Six per lease: these cross into the second and third leases.
    for (let i = 0; i < 8; i++) note(await call(exact.url, 'GET', '/v1/subscriptions', { key: tenant.key }));
    expect(remaining).toEqual(Array.from({ length: 13 }, (_, i) => 59 - i));
  } finally {
    await exact.close();
  }
});

test('a revoked key is refused on the next request, however many tokens its lease still holds', async () => {
  const tenant = await createTenant(app.owner);
  expect((await call(app.url, 'GET', '/v1/subscriptions', { key: tenant.key })).status).toBe(200);
  await app.owner.query(`update billing_private.api_keys set revoked_at = now() where id = $1`, [tenant.keyId]);
  const after = await call(app.url, 'GET', '/v1/subscriptions', { key: tenant.key });
  expect(after.status).toBe(401);
  expect(after.body.code).toBe('unauthorized');
});

test('an expired lease puts its unspent tokens back: a slow client pays one token per request', async () => {
  // One token a minute refills nothing worth counting; leases expire after 50 ms.
  const slow = await startApp({ rateLimits: { key_per_minute: 1, key_burst: 60, ip_per_minute: 1000, ip_burst: 1000 }, tokenLeaseMs: 50 });
  try {
    const tenant = await createTenant(slow.owner);
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 120)); // past the lease's lifetime
      const r = await call(slow.url, 'GET', '/v1/subscriptions', { key: tenant.key });
      remaining.push(Number(r.headers.get('ratelimit-remaining')));
    }
    // Without the give-back each request would cost a whole lease: 59, 53, 47.
    expect(remaining).toEqual([59, 58, 57]);
  } finally {
    await slow.close();
  }
});

test('a lease given back before the bucket row forgets it frees its tokens at once', async () => {
  // The process counts a lease from before it asked and the row from when it granted,
  // so a process may give a lease back while the row still holds the bucket below its
  // burst for it: without the lease's id the tokens given back were capped away (54,
  // then 48 here instead of 54 again).
  const tenant = await createTenant(app.owner);
  const { rows: [{ hash }] } = await app.owner.query(`select key_hash as hash from billing_private.api_keys where id = $1`, [tenant.keyId]);
  const limits = { ...DEFAULTS, lease_ms: 60_000 };
  const lease = async (unspent: number, returned: string | null) => (await app.owner.query(
    'select billing_private.lease_key_tokens($1, 6, $2, $3, $4) as r', [hash, limits, unspent, returned])).rows[0].r;
  const first = await lease(0, null);
  expect(first).toMatchObject({ granted: 6, remaining: 54 });
  expect(typeof first.lease).toBe('string');
  // All six unspent, the row still counting the lease for a minute.
  const second = await lease(6, first.lease);
  expect(second).toMatchObject({ granted: 6, remaining: 54 });
  expect(second.lease).not.toBe(first.lease);
  // One lease left on the row: the second.
  const { rows: [{ leases }] } = await app.owner.query(`select leases from billing_private.rate_buckets where bucket = $1`, [`key:${tenant.keyId}`]);
  expect(leases.map((l: { i: string }) => l.i)).toEqual([second.lease]);
});

test('a spent lease given back does not release the refill it held back', async () => {
  // Burst 60, 5 tokens a second. A lease of 6 leaves the bucket at 54, which is also
  // its cap while the lease lives: the second's refill is held back, and lost. Folded
  // lazily against the cap after the lease ends, it came back at once (53 here, not 48)
  // and two processes could spend their burst, their unspent leases and that refill.
  const tenant = await createTenant(app.owner);
  const { rows: [{ hash }] } = await app.owner.query(`select key_hash as hash from billing_private.api_keys where id = $1`, [tenant.keyId]);
  const limits = { ...DEFAULTS, lease_ms: 60_000 };
  const lease = async (unspent: number, returned: string | null) => (await app.owner.query(
    'select billing_private.lease_key_tokens($1, 6, $2, $3, $4) as r', [hash, limits, unspent, returned])).rows[0].r;
  const first = await lease(0, null);
  expect(first).toMatchObject({ granted: 6, remaining: 54 });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  // All six spent: nothing given back, the lease named.
  expect(await lease(0, first.lease)).toMatchObject({ granted: 6, remaining: 48 });
});

test('a database slower than the lease lifetime still serves: the request spends from the lease it waited for', async () => {
  // Each round trip 30 ms, the lease 5 ms: every lease has expired by the time it
  // arrives. Before, the request leased again and again, giving the tokens back, forever.
  const slowPool = { query: async (...args: Parameters<pg.Pool['query']>) => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    return (app.owner.query as (...a: unknown[]) => unknown)(...args);
  } } as unknown as pg.Pool;
  const leases = new TokenLeases(slowPool, DEFAULTS, 5);
  const tenant = await createTenant(app.owner);
  const { rows: [{ hash }] } = await app.owner.query(`select key_hash as hash from billing_private.api_keys where id = $1`, [tenant.keyId]);
  const answers = await Promise.all([leases.take(hash), leases.take(hash), leases.take(hash)]);
  expect(answers.map((a) => a.kind)).toEqual(['token', 'token', 'token']);
  // One lease served all three.
  expect(answers.map((a) => (a.kind === 'token' ? a.rl.remaining : null))).toEqual([59, 58, 57]);
});

test('a key that spends its leases fast leases more at once, up to a tenth of its burst, and fewer again when it slows', async () => {
  // Burst 600: leases of 20, growing to 60. One token a minute refills nothing worth
  // counting, so the headers fall by exactly one a request (with 100 a second they rose
  // at each new lease on a slow CI run). A pool that counts the leases asked for.
  const sizes: number[] = [];
  const counting = { query: (...args: unknown[]) => {
    const values = (args[1] ?? []) as unknown[];
    if (String(args[0]).includes('lease_key_tokens')) sizes.push(values[1] as number);
    return (app.owner.query as (...a: unknown[]) => unknown)(...args);
  } } as unknown as pg.Pool;
  const limits = { ...DEFAULTS, key_per_minute: 1, key_burst: 600 };
  const leases = new TokenLeases(counting, limits, 60_000);
  const tenant = await createTenant(app.owner);
  const { rows: [{ hash }] } = await app.owner.query(`select key_hash as hash from billing_private.api_keys where id = $1`, [tenant.keyId]);
  const remaining: number[] = [];
  for (let i = 0; i < 200; i++) {
    const a = await leases.take(hash);
    expect(a).toMatchObject({ kind: 'token', key: { communityId: tenant.communityId, keyId: tenant.keyId } });
    if (a.kind === 'token') remaining.push(a.rl.remaining);
  }
  // 20, 40, then 60 a lease (a tenth of the burst): 200 requests in 5 leases, not 10.
  expect(sizes).toEqual([20, 40, 60, 60, 60]);
  // The headers still count down one per request, whatever the lease's size.
  expect(remaining.slice(0, 3)).toEqual([599, 598, 597]);
  expect(remaining).toEqual(Array.from({ length: 200 }, (_, i) => 599 - i));
  // Leases that expire with tokens left shrink back. Lifetime 1 s: 120 requests at once
  // grow the leases to 60; then one request a lease lifetime: the next lease is asked
  // for the same 60 (the last was spent, though not fast), then 30 and 20 (59 and 29
  // were given back unspent).
  const slowing = new TokenLeases(counting, limits, 1000);
  sizes.length = 0;
  for (let i = 0; i < 120; i++) await slowing.take(hash);
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(await slowing.take(hash)).toMatchObject({ kind: 'token' });
  }
  expect(sizes).toEqual([20, 40, 60, 60, 30, 20]);
});

test('four API processes share one bucket: the key gets its burst and what refilled, never more, less by at most 3 unspent tokens per process', async () => {
  // Burst 40: leases of 4 tokens. 6 per minute refills about one token in ten seconds.
  const limits = { key_per_minute: 6, key_burst: 40, ip_per_minute: 1000, ip_burst: 1000 };
  const procs = await Promise.all(Array.from({ length: 4 }, () => spawnApi({
    RATE_LIMIT_KEY_PER_MINUTE: String(limits.key_per_minute), RATE_LIMIT_KEY_BURST: String(limits.key_burst),
    RATE_LIMIT_IP_PER_MINUTE: String(limits.ip_per_minute), RATE_LIMIT_IP_BURST: String(limits.ip_burst),
  })));
  try {
    // Four operating-system processes, each with its own pools and leases.
    expect(new Set(procs.map((p) => p.proc.pid)).size).toBe(4);
    const tenant = await createTenant(app.owner);
    const started = Date.now();
    const statuses: number[] = [];
    // 100 requests, 8 at a time, spread over the four processes.
    for (let wave = 0; wave < 100 / 8; wave++) {
      const replies = await Promise.all(Array.from({ length: 8 }, (_, i) =>
        call(procs[(wave * 8 + i) % 4].url, 'GET', '/v1/subscriptions', { key: tenant.key })));
      statuses.push(...replies.map((r) => r.status));
    }
    const refilled = Math.ceil(((Date.now() - started) / 60_000) * limits.key_per_minute);
    const ok = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(ok).toBeLessThanOrEqual(limits.key_burst + refilled);
    expect(ok).toBeGreaterThanOrEqual(limits.key_burst - 4 * 3);
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
});

/** An API in a process of its own (api-process-child.ts), with the given environment. */
async function spawnApi(env: Record<string, string>): Promise<{ url: string; proc: ChildProcess; stop(): Promise<void> }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'api-process-child.ts')], {
    cwd: path.resolve(__dirname, '../..'),
    env: { ...process.env, ...env, CHILD_DATABASE_URL: TEST_DB(), CHILD_APP_DATABASE_URL: TEST_APP_DB() },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const first = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: proc.stdout! }).once('line', resolve);
    void exited.then(() => reject(new Error(`API process exited with ${proc.exitCode}`)));
  });
  return {
    url: (JSON.parse(first) as { url: string }).url,
    proc,
    stop: async () => {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}
