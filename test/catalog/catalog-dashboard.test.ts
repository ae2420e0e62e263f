// The Catalog page's forms (issue 31 item 1) posted as a browser would, with an admin's
// session: an entitlement's benefits edited (one kept, one removed, one added), a
// discount code changed and archived, a tier and a plan archived; refused values shown
// beside their field with the status of the problem; odd input (NUL bytes, huge
// strings, forged fields) never a 500.
import { csrfFor } from '../../src/dashboard/dashboard-session';
import { applyCatalog, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { createTenant, startApp, Tenant, TestApp } from '../support/app';

let app: TestApp;
let shop: Tenant;
let token: string;

const ROLE_A = '300000000000000001';
const ROLE_B = '300000000000000002';

beforeAll(async () => {
  app = await startApp();
  shop = await createTenant(app.owner);
  await applyCatalog(app.owner, shop.communityId, parseCatalog({
    platforms: [{ key: 'discord-main', platform: 'discord', settings: { guild_id: '123456789012345678' } }],
    entitlements: [{ key: 'vip', name: 'VIP', benefits: [{ platform: 'discord-main', type: 'role', value: ROLE_A }, { platform: 'discord-main', type: 'channel', value: ROLE_B }] }],
    tiers: [{ key: 'gold', name: 'Gold', entitlements: ['vip'], plans: [{ key: 'gold-m', amount_cents: 1000, currency: 'usd', interval: 'month' }] }],
    discounts: [{ code: 'TEN', value_type: 'percent', percent_off: 10 }],
  }));
  const invite = await inviteOperator(app.owner, shop.communityId, 'admin-forms@example.com', 'admin');
  const signed = await signInWithLink(app.api, invite.token, '10.31.2.1');
  if (!signed.ok) throw new Error('sign-in refused');
  token = signed.session.token;
});
afterAll(async () => { await app.close(); });

async function post(path: string, form: Record<string, string | string[]>) {
  const body = new URLSearchParams({ csrf: csrfFor(token) });
  for (const [k, v] of Object.entries(form)) for (const one of [v].flat()) body.append(k, one);
  const res = await fetch(`${app.url}/dashboard${path}`, {
    method: 'POST', redirect: 'manual', body: body.toString(),
    headers: { cookie: `billing_session=${token}`, 'content-type': 'application/x-www-form-urlencoded' },
  });
  return { status: res.status, location: res.headers.get('location'), html: await res.text() };
}

async function one(sql: string, ...args: unknown[]) {
  const { rows } = await app.owner.query(sql, [shop.communityId, ...args]);
  return rows[0];
}

test('an entitlement\'s benefits: the ticked ones kept, the unticked removed, one added', async () => {
  const ent = await one('select id from billing.entitlements where community_id = $1 and key = $2', 'vip');
  const r = await post(`/catalog/entitlements/${ent.id}`, { form: '0', name: 'VIP chat',
    keep: JSON.stringify({ platform: 'discord-main', type: 'role', value: ROLE_A }),
    benefit_platform: 'discord-main', benefit_type: 'role', benefit_value: '300000000000000003' });
  expect({ status: r.status, location: r.location }).toEqual({ status: 303, location: '/dashboard/catalog?done=catalog' });
  const { rows } = await app.owner.query(`select type, value from billing.entitlement_benefits where community_id = $1 order by value`, [shop.communityId]);
  expect(rows).toEqual([{ type: 'role', value: ROLE_A }, { type: 'role', value: '300000000000000003' }]);
  expect((await one('select name from billing.entitlements where community_id = $1 and id = $2', ent.id)).name).toBe('VIP chat');

  const refused = await post(`/catalog/entitlements/${ent.id}`, { form: '0', name: 'VIP chat', benefit_platform: 'discord-main', benefit_type: 'role', benefit_value: 'Gold' });
  expect(refused.status).toBe(422);
  expect(refused.html).toMatch(/id="entitlement-0-benefit_value-problem" role="alert" data-problem="invalid_request">expected the Discord role id/);
});

test('a discount code changed, then archived: no longer listed in the file nor changeable', async () => {
  const code = await one('select id::text as id from billing.discount_codes where community_id = $1 and code = $2', 'TEN');
  const r = await post(`/catalog/discounts/${code.id}`, { form: '0', name: 'Ten off', use_limit: '50', expires_at: '2030-01-01T00:00:00Z', is_active: 'true' });
  expect(r.status).toBe(303);
  expect(await one('select name, use_limit, is_active, expires_at is not null as expires from billing.discount_codes where community_id = $1 and id = $2::uuid', code.id))
    .toEqual({ name: 'Ten off', use_limit: 50, is_active: true, expires: true });
  const window = await post(`/catalog/discounts/${code.id}`, { form: '0', name: 'Ten off', use_limit: '50', expires_at: 'next week', is_active: 'true' });
  expect(window.status).toBe(422);
  expect(window.html).toMatch(/id="discount-0-expires_at-problem" role="alert"/);
  const archived = await post(`/catalog/discounts/${code.id}/archive`, {});
  expect(archived.location).toBe('/dashboard/catalog?done=archived');
  expect((await one('select archived_at is not null as a from billing.discount_codes where community_id = $1 and id = $2::uuid', code.id)).a).toBe(true);
  const again = await post(`/catalog/discounts/${code.id}`, { form: '0', name: 'x' });
  expect(again.status).toBe(409);
});

test('a plan and a tier archived: inactive, still there', async () => {
  const plan = await one('select id from billing.plans where community_id = $1 and key = $2', 'gold-m');
  expect((await post(`/catalog/plans/${plan.id}/archive`, {})).status).toBe(303);
  const tier = await one('select id from billing.tiers where community_id = $1 and key = $2', 'gold');
  expect((await post(`/catalog/tiers/${tier.id}/archive`, {})).status).toBe(303);
  expect(await one('select p.active as plan, t.active as tier from billing.plans p join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id where p.community_id = $1 and p.id = $2', plan.id))
    .toEqual({ plan: false, tier: false });
});

test('odd input is refused beside a field or as a problem, never a 500', async () => {
  const tier = await one('select id from billing.tiers where community_id = $1 and key = $2', 'gold');
  const ent = await one('select id from billing.entitlements where community_id = $1 and key = $2', 'vip');
  const cases: [string, Record<string, string | string[]>][] = [
    ['/catalog/tiers', { key: 'nul', name: 'a\u0000b' }],
    ['/catalog/tiers', { key: 'big', name: 'x'.repeat(20_000) }],
    ['/catalog/tiers', { key: 'rank', name: 'R', rank: '1e400' }],
    ['/catalog/tiers', { key: 'x', name: 'X', entitlements: ['nope', 'vip'] }],
    [`/catalog/tiers/${tier.id}`, { form: '0', name: '' }],
    ['/catalog/plans', { tier_id: 'tier_nope', form: '0', key: 'p', amount_cents: '-5', currency: 'usd', interval: 'month' }],
    ['/catalog/plans', { tier_id: tier.id, form: '0', key: 'p', amount_cents: 'ten', currency: 'usd', interval: 'month' }],
    [`/catalog/plans/plan_nope/price`, { form: '0-0', amount_cents: '12' }],
    [`/catalog/plans/plan_nope/price`, { form: '0-0', amount_cents: 'lots', confirm: 'yes' }],
    [`/catalog/entitlements/${ent.id}`, { form: '0', name: 'V', keep: ['{not json', '[1]', 'null'] }],
    ['/catalog/discounts', { code: 'BAD CODE', value_type: 'percent', percent_off: '150', tiers: 'nope' }],
    ['/catalog/discounts/not-a-uuid/archive', {}],
  ];
  const statuses: number[] = [];
  for (const [path, form] of cases) {
    const r = await post(path, form);
    expect({ path, status: r.status >= 500 ? r.status : 'not 5xx' }).toEqual({ path, status: 'not 5xx' });
    statuses.push(r.status);
  }
  // Unstorable text 400; refused values 422 (the page again, the problem beside its
  // field); an unknown plan or code 404; forged benefit fields are ignored (saved).
  expect(statuses).toEqual([400, 422, 422, 422, 422, 422, 422, 404, 422, 303, 422, 404]);
});

test('a plan\'s name and trial edited in place; a refused trial shown beside its field, nothing changed', async () => {
  const plan = await one('select id from billing.plans where community_id = $1 and key = $2', 'gold-m');
  const page = await fetch(`${app.url}/dashboard/catalog`, { headers: { cookie: `billing_session=${token}` } });
  expect(await page.text()).toContain(`action="/dashboard/catalog/plans/${plan.id}" novalidate data-form="plan-edit-0-0"`);
  const r = await post(`/catalog/plans/${plan.id}`, { form: '0-0', name: 'Gold monthly', trial_days: '7' });
  expect({ status: r.status, location: r.location }).toEqual({ status: 303, location: '/dashboard/catalog?done=catalog' });
  expect(await one('select name, trial_days, amount_cents from billing.plans where community_id = $1 and id = $2', plan.id))
    .toEqual({ name: 'Gold monthly', trial_days: 7, amount_cents: 1000 });

  const refused = await post(`/catalog/plans/${plan.id}`, { form: '0-0', name: 'Gold monthly', trial_days: '-3' });
  expect(refused.status).toBe(422);
  expect(refused.html).toMatch(/id="plan-edit-0-0-trial_days-problem" role="alert" data-problem="invalid_request">/);
  expect(refused.html).toMatch(/id="plan-edit-0-0-trial_days" name="trial_days" type="text" value="-3"/);
  expect((await one('select trial_days from billing.plans where community_id = $1 and id = $2', plan.id)).trial_days).toBe(7);

  const none = await post(`/catalog/plans/${plan.id}`, { form: '0-0', name: 'Gold monthly', trial_days: '' });
  expect(none.status).toBe(303);
  expect((await one('select trial_days from billing.plans where community_id = $1 and id = $2', plan.id)).trial_days).toBe(0);
});
