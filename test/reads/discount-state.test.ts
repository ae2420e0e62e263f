// Discount state that is true (issue 26, item 6): a code past its expiry, or at its
// use limit, is not active, in the API (is_active false, inactive_reason), in GraphQL
// (isActive, inactiveReason: the same rule) and on the dashboard's catalog page ("no
// (expired)"), though nobody turned it off.
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const ins = async (sql: string, values: unknown[]) => (await app.owner.query(sql, values)).rows[0];
  const code = (code: string, cols: Record<string, unknown>) => {
    const names = Object.keys(cols);
    return ins(`insert into billing.discount_codes (community_id, code, value_type, percent_off, duration${names.map((n) => `, ${n}`).join('')})
      values ($1, $2, 'percent', 10, 'once'${names.map((_, i) => `, $${i + 3}`).join('')}) returning id`, [tenant.communityId, code, ...Object.values(cols)]);
  };
  await code('FRESH', { use_limit: 2, expires_at: '2099-01-01T00:00:00Z' });
  await code('OLD2020', { expires_at: '2020-12-31T00:00:00Z' });
  await code('OFF', { is_active: false, expires_at: '2020-12-31T00:00:00Z' });
  await code('LATER', { starts_at: '2099-01-01T00:00:00Z' });
  const once = (await code('ONCE', { use_limit: 1 })).id;
  const pending = (await code('HELD', { use_limit: 1 })).id;
  const member = await seed.member();
  const redeem = async (discount: string, status: string) => {
    const cs = (await ins(`insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, discount_id, amount_cents, currency, subject_kind, provider, expires_at)
      values ($1, $2, $3, $4, $5, 1000, 'usd', 'member', 'sandbox', now() + interval '1 hour') returning id`, [tenant.communityId, member, tier, plan, discount])).id;
    await ins(`insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status) values ($1, $2, $3, $4, $5) returning 1`,
      [tenant.communityId, discount, cs, member, status]);
  };
  await redeem(once, 'redeemed');
  // A pending redemption of an open checkout holds the last use, as checkout counts it.
  await redeem(pending, 'pending');
});
afterAll(() => app.close());

const states = async () => {
  const r = await call(app.url, 'GET', '/v1/discounts', { key: tenant.key });
  expect(r.status).toBe(200);
  return Object.fromEntries(r.body.data.map((d: { code: string; is_active: boolean; inactive_reason: string | null }) => [d.code, [d.is_active, d.inactive_reason]]));
};

test('an expired or used-up code is listed inactive, with the reason', async () => {
  expect(await states()).toEqual({
    FRESH: [true, null],
    OLD2020: [false, 'expired'],
    OFF: [false, 'disabled'],
    LATER: [false, 'not_started'],
    ONCE: [false, 'exhausted'],
    HELD: [false, 'exhausted'],
  });
});

test('GraphQL says what the API says: isActive false and inactiveReason for an expired, used-up or not yet started code', async () => {
  const res = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${tenant.key}` },
    body: JSON.stringify({ query: '{ discounts(first: 50) { nodes { code isActive inactiveReason } } }' }) });
  const { data, errors } = await res.json() as { data: { discounts: { nodes: { code: string; isActive: boolean; inactiveReason: string | null }[] } }; errors?: unknown };
  expect(errors).toBeUndefined();
  const rest = await states();
  expect(Object.fromEntries(data.discounts.nodes.map((d) => [d.code, [d.isActive, d.inactiveReason]]))).toEqual(rest);
  expect(rest.OLD2020).toEqual([false, 'expired']);
});

test('a code becomes inactive when the community clock passes its expiry, without any write to it', async () => {
  await app.owner.query(`insert into billing.discount_codes (community_id, code, value_type, percent_off, duration, expires_at)
    values ($1, 'SOON', 'percent', 10, 'once', now() + interval '2 days')`, [tenant.communityId]);
  expect((await states()).SOON).toEqual([true, null]);
  await app.owner.query(`update billing.communities set clock_offset = interval '3 days' where id = $1`, [tenant.communityId]);
  try {
    expect((await states()).SOON).toEqual([false, 'expired']);
  } finally {
    await app.owner.query(`update billing.communities set clock_offset = '0' where id = $1`, [tenant.communityId]);
  }
});

test('the dashboard\'s catalog page says an expired or used-up code is not active', async () => {
  const invite = await inviteOperator(app.owner, tenant.communityId, `viewer-${Math.random().toString(36).slice(2)}@example.com`, 'viewer');
  const signed = await signInWithLink(app.api, invite.token, '10.26.6.1');
  if (!signed.ok) throw new Error('link refused');
  const res = await fetch(`${app.url}/dashboard/catalog`, { headers: { cookie: `billing_session=${signed.session.token}` } });
  expect(res.status).toBe(200);
  const page = await res.text();
  const row = (code: string) => page.match(new RegExp(`<tr><td><code>${code}</code>.*?</tr>`, 's'))?.[0] ?? '';
  expect(row('FRESH')).toMatch(/<td>yes<\/td><\/tr>$/);
  expect(row('OLD2020')).toMatch(/<td>no \(expired\)<\/td><\/tr>$/);
  expect(row('ONCE')).toMatch(/<td>no \(exhausted\)<\/td><\/tr>$/);
  expect(row('LATER')).toMatch(/<td>no \(not started\)<\/td><\/tr>$/);
});
