// Issue 27 item 4: X-Forwarded-For is believed only as far as TRUST_PROXY says (a hop
// count or the proxies' addresses), never every hop: behind one proxy that appends
// its peer's address, a client that writes its own X-Forwarded-For prefix keeps its
// real address, and the unauthenticated per-IP throttle (429) still reaches it.
import { loadConfig, trustProxySetting } from '../../src/core/config';
import { startApp, TestApp } from '../support/app';
import { raw } from './raw';

const limits = { key_per_minute: 3, key_burst: 5, ip_per_minute: 3, ip_burst: 3 };
let n = 0;
/**
 * A fresh address per test in 198.18.0.0/15 (benchmarking), which no other test sends
 * from: the rate buckets are one table, and other files drain fixed 203.0.113.x ones.
 */
const realClient = () => `198.18.${process.pid % 250}.${++n}`;

/** What one proxy in front sends on: whatever the client wrote, then its peer's address. */
const viaProxy = (forged: string | null, real: string) => ({ 'x-forwarded-for': forged ? `${forged}, ${real}` : real });

async function unauthenticatedStatuses(app: TestApp, real: string, forged: (i: number) => string | null, count = 5): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await raw(app.url, 'GET', '/v1/plans', { headers: viaProxy(forged(i), real) })).status);
  return statuses;
}

describe.each([
  ['a hop count (TRUST_PROXY=1)', '1'],
  ['the proxy\'s address (TRUST_PROXY=127.0.0.1)', '127.0.0.1'],
  ['the proxy\'s network (TRUST_PROXY=127.0.0.0/8, ::1)', '127.0.0.0/8, ::1'],
  ['Express\'s name for it (TRUST_PROXY=loopback)', 'loopback'],
])('behind one proxy configured by %s', (_name, setting) => {
  let app: TestApp;
  beforeAll(async () => {
    const { trustProxy } = loadConfig({ NODE_ENV: 'production', TRUST_PROXY: setting, PUBLIC_BASE_URL: 'https://billing.example.com' });
    app = await startApp({ rateLimits: limits, trustProxy });
  });
  afterAll(() => app.close());

  test('a forged X-Forwarded-For prefix does not change the client IP: the unauthenticated throttle still answers 429', async () => {
    const statuses = await unauthenticatedStatuses(app, realClient(), (i) => `198.51.100.${i + 1}`);
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
  });

  test('the real address the proxy appends is the client: two clients have two buckets', async () => {
    const first = await unauthenticatedStatuses(app, realClient(), () => null, 4);
    const second = await unauthenticatedStatuses(app, realClient(), () => null, 1);
    expect(first).toEqual([401, 401, 401, 429]);
    expect(second).toEqual([401]);
  });
});

test('behind one proxy (TRUST_PROXY=1), dashboard sign-ins with forged X-Forwarded-For prefixes meet the per-address throttle', async () => {
  const { trustProxy } = loadConfig({ NODE_ENV: 'production', TRUST_PROXY: '1', PUBLIC_BASE_URL: 'https://billing.example.com' });
  const app = await startApp({ trustProxy });
  try {
    const real = realClient();
    // Each with a forged prefix of its own, for a different account: only the address's
    // bucket (10 a minute) can stop them. Forms first, then the sign-ins at once, so the
    // bucket (a token back every 6 s) cannot refill on a slow machine.
    const forms = await Promise.all(Array.from({ length: 12 }, async (_, i) => {
      const headers = viaProxy(`198.51.100.${i + 1}`, real);
      const page = await fetch(`${app.url}/dashboard/sign-in`, { headers });
      const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1];
      const cookie = /billing_signin_csrf=[^;]+/.exec(page.headers.get('set-cookie') ?? '')![0];
      return { headers: { ...headers, cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf, email: `sprayed-${i}-${real}@example.com`, password: 'not the password at all' }).toString() };
    }));
    const statuses = await Promise.all(forms.map(async (form) => {
      const res = await fetch(`${app.url}/dashboard/sign-in`, { method: 'POST', redirect: 'manual', ...form });
      await res.text();
      return res.status;
    }));
    expect(statuses.sort()).toEqual([...Array(10).fill(401), 429, 429]);
  } finally {
    await app.close();
  }
});

test('a proxy that is not configured is not believed: X-Forwarded-For from an unlisted peer is ignored', async () => {
  const { trustProxy } = loadConfig({ TRUST_PROXY: '10.0.0.0/8' });
  const app = await startApp({ rateLimits: limits, trustProxy });
  try {
    // The peer is no listed proxy: every request is the peer's, whatever it forwards. The
    // peer is a loopback address of this test's own (Linux answers all of 127.0.0.0/8), so
    // its bucket is this test's alone: 127.0.0.1's is drained and refilled by every file.
    const peer = `127.77.${process.pid % 250}.${++n}`;
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push((await raw(app.url, 'GET', '/v1/plans', { headers: { 'x-forwarded-for': `203.0.113.${200 + i}` }, localAddress: peer })).status);
    }
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
  } finally {
    await app.close();
  }
});

describe('TRUST_PROXY is read strictly', () => {
  test('unset, false or 0: no proxy is believed', () => {
    for (const v of [undefined, '', 'false', '0']) expect(trustProxySetting(v, true)).toBe(false);
  });

  test('true (every hop) is refused in production and means one hop elsewhere', () => {
    expect(() => trustProxySetting('true', true)).toThrow(/TRUST_PROXY=true would believe every X-Forwarded-For hop/);
    expect(() => loadConfig({ NODE_ENV: 'production', TRUST_PROXY: 'true' })).toThrow(/TRUST_PROXY/);
    expect(trustProxySetting('true', false)).toBe(1);
    expect(loadConfig({ TRUST_PROXY: 'true' }).trustProxy).toBe(1);
  });

  test('a hop count is a small whole number: "1" is one hop, not every hop', () => {
    expect(trustProxySetting('1', true)).toBe(1);
    expect(trustProxySetting('2', true)).toBe(2);
    expect(() => trustProxySetting('17', true)).toThrow(/at most 16/);
  });

  test('a list holds addresses, CIDRs and Express\'s range names only', () => {
    expect(trustProxySetting('10.0.0.1, 10.1.0.0/16,fd00::/8, loopback', true)).toEqual(['10.0.0.1', '10.1.0.0/16', 'fd00::/8', 'loopback']);
    for (const bad of ['yes', '10.1', '0x7f.0.0.1', '10.0.0.0/33', '10.0.0.0/8/1', '::1/129', 'example.com', '1.2.3.4/0x8', ',']) {
      expect(() => trustProxySetting(bad, true)).toThrow(/TRUST_PROXY/);
    }
  });
});
