// Idempotency over HTTP (spec "Limits", idempotency rules 1-3) on a real idempotent
// operation: 20 identical POST /v1/checkout-links with one Idempotency-Key, at once.
import { call, startApp, TestApp } from '../support/app';
import { createShop, externalSubject } from '../checkout/fixtures';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

test('20 identical checkout requests at once create exactly one checkout', async () => {
  const shop = await createShop(app);
  const body = { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject('idem') };
  const replies = await Promise.all(Array.from({ length: 20 }, () =>
    call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'checkout-once' } })));
  const { rows } = await app.owner.query('select count(*)::int as n from billing.checkout_sessions where community_id = $1', [shop.communityId]);
  expect(rows[0].n).toBe(1);
  const ok = replies.filter((r) => r.status < 300);
  const inFlight = replies.filter((r) => r.status === 409);
  expect(ok.length + inFlight.length).toBe(20);
  expect(ok.length).toBeGreaterThanOrEqual(1);
  expect(new Set(ok.map((r) => r.body.checkout_id)).size).toBe(1);
  expect(ok.filter((r) => r.headers.get('idempotent-replayed') !== 'true').length).toBe(1);
  for (const r of inFlight) expect(r.body.code).toBe('request_in_flight');

  // Later: the same key and body replays; another body is refused.
  const replay = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'checkout-once' } });
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.body.checkout_id).toBe(ok[0].body.checkout_id);
  const other = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { ...body, client_reference_id: 'x' }, headers: { 'idempotency-key': 'checkout-once' } });
  expect(other.status).toBe(422);
  expect(other.body.code).toBe('idempotency_key_reuse');
});

test('an Idempotency-Key longer than 255 characters answers 400 invalid_request', async () => {
  const shop = await createShop(app);
  const body = { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject('long') };
  const r = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'k'.repeat(256) } });
  expect(r.status).toBe(400);
  expect(r.body).toMatchObject({ code: 'invalid_request', param: 'Idempotency-Key' });
});
