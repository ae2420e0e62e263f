// Issue 31 item 1: the catalog's rules are the database's, once, so the catalog file,
// the API and the dashboard cannot disagree. The same change (an entitlement with a
// benefit, a tier with two plans, a discount code limited to it, then a new price) is
// made three ways in three communities: `billing catalog apply` (applyCatalog, as the
// CLI runs it), /v1/catalog with a catalog:write key, and the dashboard's forms posted
// with an admin's session. The three catalogs export the same file. A change against
// the rules is refused by all three with the same problem code, naming the same field.
import { csrfFor } from '../../src/dashboard/dashboard-session';
import { applyCatalog, CatalogError, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';

let app: TestApp;
const BASE = { platforms: [{ key: 'discord-main', platform: 'discord', settings: { guild_id: '123456789012345678' } }] };
const ROLE = '222222222222222222';

beforeAll(async () => { app = await startApp(); });
afterAll(async () => { await app.close(); });

async function community(): Promise<Tenant> {
  const t = await createTenant(app.owner);
  await applyCatalog(app.owner, t.communityId, parseCatalog(BASE));
  return t;
}

/** The community's catalog as `billing catalog apply` reads it (billing_api.catalog_file). */
async function exported(communityId: string): Promise<unknown> {
  const db = await app.owner.connect();
  try {
    await db.query('begin');
    await db.query(`select set_config('app.community_id', $1, true)`, [communityId]);
    const { rows } = await db.query('select billing_api.catalog_file($1::jsonb) as f', ['{}']);
    await db.query('rollback');
    return rows[0].f;
  } finally {
    db.release();
  }
}

async function idOf(table: 'tiers' | 'plans', communityId: string, key: string): Promise<string> {
  const { rows } = await app.owner.query(`select id from billing.${table} where community_id = $1 and key = $2`, [communityId, key]);
  return rows[0].id;
}

/** An admin's dashboard session, and a form post as it (the page's CSRF field included). */
async function dashboard(communityId: string) {
  const invite = await inviteOperator(app.owner, communityId, `admin-${Math.random().toString(36).slice(2)}@example.com`, 'admin');
  const signed = await signInWithLink(app.api, invite.token, `10.31.1.${Math.floor(Math.random() * 200) + 1}`);
  if (!signed.ok) throw new Error('sign-in refused');
  const token = signed.session.token;
  return async (path: string, form: Record<string, string | string[]>) => {
    const body = new URLSearchParams({ csrf: csrfFor(token) });
    for (const [k, v] of Object.entries(form)) for (const one of [v].flat()) body.append(k, one);
    const res = await fetch(`${app.url}/dashboard${path}`, {
      method: 'POST', redirect: 'manual', body: body.toString(),
      headers: { cookie: `billing_session=${token}`, 'content-type': 'application/x-www-form-urlencoded' },
    });
    return { status: res.status, location: res.headers.get('location'), html: await res.text() };
  };
}

const FILE = {
  entitlements: [{ key: 'vip', name: 'VIP chat', benefits: [{ platform: 'discord-main', type: 'role', value: ROLE }] }],
  tiers: [{ key: 'gold', name: 'Gold', description: 'The best', rank: 2, entitlements: ['vip'], plans: [
    { key: 'gold-monthly', name: 'Monthly', amount_cents: 1000, currency: 'usd', interval: 'month' },
    { key: 'gold-annual', name: 'Annual', amount_cents: 10000, currency: 'usd', interval: 'year', trial_days: 7 },
  ] }],
  discounts: [{ code: 'GOLD20', value_type: 'percent', percent_off: 20, duration: 'repeating', duration_months: 3, tiers: ['gold'] }],
};

test('the same change made by the file, the API and the dashboard gives the same catalog', async () => {
  const [byFile, byApi, byDashboard] = await Promise.all([community(), community(), community()]);

  // 1. The catalog file.
  await applyCatalog(app.owner, byFile.communityId, parseCatalog(FILE));
  const priced = structuredClone(FILE);
  priced.tiers[0].plans[0].amount_cents = 1200;
  const applied = await applyCatalog(app.owner, byFile.communityId, parseCatalog(priced));
  expect(applied.price_changes).toMatchObject([{ plan: 'gold-monthly', from_cents: 1000, to_cents: 1200, subscriptions: 0 }]);

  // 2. The API.
  const api = (method: string, path: string, body?: unknown) => call(app.url, method, path, { key: byApi.key, body });
  expect((await api('POST', '/v1/catalog/entitlements', FILE.entitlements[0])).status).toBe(201);
  const { plans, ...tier } = FILE.tiers[0];
  const created = await api('POST', '/v1/catalog/tiers', tier);
  expect(created.status).toBe(201);
  for (const plan of plans) expect((await api('POST', '/v1/catalog/plans', { ...plan, tier_id: created.body.id })).status).toBe(201);
  expect((await api('POST', '/v1/catalog/discounts', FILE.discounts[0])).status).toBe(201);
  const monthly = await idOf('plans', byApi.communityId, 'gold-monthly');
  expect((await api('PATCH', `/v1/catalog/plans/${monthly}`, { amount_cents: 1200 })).body.price_change).toMatchObject({ subscriptions: 0 });

  // 3. The dashboard's forms.
  const post = await dashboard(byDashboard.communityId);
  const done = (r: { status: number; location: string | null; html: string }) => {
    expect({ status: r.status, location: r.location, page: r.status === 303 ? '' : r.html.match(/role="alert"[^>]*>([^<]*)/)?.[1] })
      .toEqual({ status: 303, location: expect.stringMatching(/^\/dashboard\/catalog\?done=/), page: '' });
  };
  done(await post('/catalog/entitlements', { key: 'vip', name: 'VIP chat', benefit_platform: 'discord-main', benefit_type: 'role', benefit_value: ROLE }));
  done(await post('/catalog/tiers', { key: 'gold', name: 'Gold', description: 'The best', kind: 'subscription', rank: '2', entitlements: 'vip' }));
  const goldId = await idOf('tiers', byDashboard.communityId, 'gold');
  done(await post('/catalog/plans', { tier_id: goldId, form: '0', key: 'gold-monthly', name: 'Monthly', amount_cents: '1000', currency: 'usd', interval: 'month', trial_days: '' }));
  done(await post('/catalog/plans', { tier_id: goldId, form: '0', key: 'gold-annual', name: 'Annual', amount_cents: '10000', currency: 'usd', interval: 'year', trial_days: '7' }));
  done(await post('/catalog/discounts', { code: 'GOLD20', name: '', value_type: 'percent', percent_off: '20', amount_off_cents: '', currency: '',
    duration: 'repeating', duration_months: '3', use_limit: '', expires_at: '', tiers: 'gold' }));
  const planId = await idOf('plans', byDashboard.communityId, 'gold-monthly');
  const review = await post(`/catalog/plans/${planId}/price`, { form: '0-0', amount_cents: '1200' });
  expect(review.status).toBe(200);
  expect(review.html).toContain('This change concerns 0 subscribers');
  expect(await idOf('plans', byDashboard.communityId, 'gold-monthly')).toBe(planId);
  done(await post(`/catalog/plans/${planId}/price`, { form: '0-0', amount_cents: '1200', confirm: 'yes' }));

  const [a, b, c] = await Promise.all([exported(byFile.communityId), exported(byApi.communityId), exported(byDashboard.communityId)]);
  expect(a).toMatchObject({ tiers: [{ key: 'gold', plans: [{ key: 'gold-annual' }, { key: 'gold-monthly', amount_cents: 1200 }] }] });
  expect(b).toEqual(a);
  expect(c).toEqual(a);
});

test('a change against the rules is refused the same by all three: the same problem code, the same field, nothing written', async () => {
  const [byFile, byApi, byDashboard] = await Promise.all([community(), community(), community()]);
  const seed = { tiers: [{ key: 'silver', name: 'Silver', plans: [] }] };
  for (const t of [byFile, byApi, byDashboard]) await applyCatalog(app.owner, t.communityId, parseCatalog(seed));
  // A plan of a recurring tier without an interval.
  const bad = { key: 'silver-x', name: 'X', amount_cents: 500, currency: 'usd' };
  const before = await Promise.all([byFile, byApi, byDashboard].map((t) => exported(t.communityId)));

  let fileError: CatalogError | null = null;
  try {
    await applyCatalog(app.owner, byFile.communityId, parseCatalog({ tiers: [{ ...seed.tiers[0], plans: [bad] }] }));
  } catch (err) {
    fileError = err as CatalogError;
  }
  expect(fileError).toBeInstanceOf(CatalogError);

  const silver = await idOf('tiers', byApi.communityId, 'silver');
  const api = await call(app.url, 'POST', '/v1/catalog/plans', { key: byApi.key, body: { ...bad, tier_id: silver } });

  const post = await dashboard(byDashboard.communityId);
  const silverD = await idOf('tiers', byDashboard.communityId, 'silver');
  const page = await post('/catalog/plans', { tier_id: silverD, form: '0', key: 'silver-x', name: 'X', amount_cents: '500', currency: 'usd', interval: '', trial_days: '' });
  const beside = /<select id="plan-0-interval"[^>]*aria-invalid="true"[^>]*>[\s\S]*?<span class="error" id="plan-0-interval-problem" role="alert" data-problem="([a-z_]+)">([^<]*)<\/span>/.exec(page.html);
  const text = (h: string | undefined) => h?.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

  expect({ code: fileError!.code, field: fileError!.field.replace(/^tiers\[0\]\.plans\[0\]\./, ''), problem: fileError!.problem })
    .toEqual({ code: 'invalid_request', field: 'interval', problem: 'expected "month" or "year" for a recurring tier' });
  expect({ status: api.status, code: api.body.code, field: api.body.param, detail: api.body.detail })
    .toEqual({ status: 422, code: 'invalid_request', field: 'interval', detail: 'interval: expected "month" or "year" for a recurring tier' });
  expect({ status: page.status, code: beside?.[1], problem: text(beside?.[2]) })
    .toEqual({ status: 422, code: 'invalid_request', problem: 'expected "month" or "year" for a recurring tier' });

  const after = await Promise.all([byFile, byApi, byDashboard].map((t) => exported(t.communityId)));
  expect(after).toEqual(before);
});

