// Audit item 1: the base URL of checkout and portal links is the request's own (or
// PUBLIC_BASE_URL), never a value another request's Host header left behind. In
// production, only PUBLIC_BASE_URL counts.
import { baseUrlFor, loadConfig } from '../../src/core/config';
import { createShop, externalSubject, Shop } from '../support/shop';
import { startApp, TestApp } from '../support/app';
import { raw } from './raw';

let app: TestApp;
let victim: Shop;
beforeAll(async () => {
  app = await startApp();
  victim = await createShop(app);
});
afterAll(() => app.close());

const host = () => new URL(app.url).host;

function createLink(a: TestApp, shop: Shop, hostHeader: string, path = '/v1/checkout-links', body: unknown = { tier_id: shop.ids.tiers.silver, subject: externalSubject() }) {
  return raw(a.url, 'POST', path, {
    headers: { host: hostHeader, authorization: `Bearer ${shop.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

test('under a flood of forged Host headers, every checkout link names its own request\'s host', async () => {
  const attacker = await createShop(app);
  let flooding = true;
  const flood = async () => {
    while (flooding) {
      await Promise.all([
        raw(app.url, 'GET', '/v1/plans', { headers: { host: 'attacker.example' } }),
        raw(app.url, 'GET', '/v1/plans', { headers: { host: 'attacker.example', authorization: `Bearer ${attacker.key}` } }),
        createLink(app, attacker, 'attacker.example'),
      ]);
    }
  };
  const flooders = Array.from({ length: 6 }, flood);
  const links = await Promise.all(Array.from({ length: 15 }, () => createLink(app, victim, host())));
  const portal = await Promise.all(links.slice(0, 5).map((l) => createLink(app, victim, host(), `/v1/members/${l.body.member_id}/portal-sessions`, {})));
  flooding = false;
  await Promise.all(flooders);
  for (const r of [...links, ...portal]) {
    expect(r.status).toBe(200);
    expect(r.body.url.startsWith(`http://${host()}/sandbox/`)).toBe(true);
  }
});

test('PUBLIC_BASE_URL, when set, is the only base: a forged Host changes nothing', async () => {
  const fixed = await startApp({ publicBaseUrl: 'https://billing.example.com' });
  try {
    const shop = await createShop(fixed);
    const r = await createLink(fixed, shop, 'attacker.example');
    expect(r.status).toBe(200);
    expect(r.body.url).toMatch(/^https:\/\/billing\.example\.com\/sandbox\/checkout\/cs_/);
  } finally {
    await fixed.close();
  }
});

test('in production the Host header is never used; elsewhere only a well-formed one', () => {
  const prod = { ...loadConfig({ NODE_ENV: 'production', PORT: '8080' }), publicBaseUrl: null };
  expect(baseUrlFor(prod, { protocol: 'https', host: 'attacker.example' })).toBe('http://localhost:8080');
  const dev = loadConfig({ NODE_ENV: 'development', PORT: '8080' });
  expect(baseUrlFor(dev, { protocol: 'http', host: 'shop.local:3000' })).toBe('http://shop.local:3000');
  expect(baseUrlFor(dev, { protocol: 'http', host: 'evil.example/x?' })).toBe('http://localhost:8080');
  expect(baseUrlFor(dev, { protocol: 'http', host: 'a@evil.example' })).toBe('http://localhost:8080');
  expect(baseUrlFor({ ...dev, publicBaseUrl: 'https://pay.example.com/' }, { protocol: 'http', host: 'x.example' })).toBe('https://pay.example.com');
});
