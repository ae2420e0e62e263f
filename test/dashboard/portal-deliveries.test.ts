// The member portal shows the member's own access on the platforms (issue 29 item 2):
// each benefit's delivery, and the error only when it asks for an action. Another
// member's deliveries never show; no key or operator reads through the portal's
// operation (it answers a member portal session only).
import type { Browser } from 'playwright-core';
import { call, startApp, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { createShop, Shop, subscribe } from '../support/shop';
import { openMemberPortal } from '../../src/domain/members/member-portal';
import { dashboardOperation } from '../../src/operations';
import { createExecutor } from '../support/dashboard';

let app: TestApp;
let browser: Browser;
let shop: Shop;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  shop = await createShop(app);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

const ROLE_ERROR = 'The member is not in the Discord server: they need to join it (delivery is retried when they do, or from the dashboard).';
const FAILED_ERROR = 'Discord could not be reached or failed (HTTP 502); retrying.';

/** Records deliveries for a member as the job would (its own job removed first, so no worker overwrites them). */
async function record(memberId: string, results: { value: string; status: string; error: string | null }[]) {
  const pcfg = shop.ids.platforms?.['discord-main'] ?? (await app.owner.query<{ id: string }>(
    `select id from billing.platform_configs where community_id = $1 and key = 'discord-main'`, [shop.communityId])).rows[0].id;
  await app.owner.query(`delete from graphile_worker._private_jobs where key = $1`, [`deliver:${shop.communityId}:${memberId}`]);
  await app.owner.query(`select billing_private.platform_delivery_record($1, $2, $3, '[]')`, [shop.communityId, memberId,
    JSON.stringify(results.map((r) => ({ platform_config_id: pcfg, type: 'role', value: r.value, want: 'present', status: r.status, applied_uid: null, error: r.error, state: {} })))]);
}

async function portalUrl(memberId: string): Promise<string> {
  const r = await call(app.url, 'POST', `/v1/members/${memberId}/portal-sessions`, { key: shop.key, body: {} });
  expect(r.status).toBe(200);
  return r.body.url;
}

test('the portal shows the member\'s benefits with their delivery, the error only when an action is needed', async () => {
  const mine = await subscribe(app, shop, 'gold', 'gold-monthly');
  const theirs = await subscribe(app, shop, 'gold', 'gold-monthly');
  await record(mine.memberId, [{ value: '9876', status: 'action_required', error: ROLE_ERROR }, { value: '1111', status: 'failed', error: FAILED_ERROR }]);
  await record(theirs.memberId, [{ value: '9876', status: 'action_required', error: 'Someone else\'s problem.' }, { value: '1111', status: 'delivered', error: null }]);

  const { context, page } = await newPage(browser);
  await page.goto(await portalUrl(mine.memberId));
  await page.getByRole('heading', { name: 'Your access' }).waitFor();
  const items = (await page.locator('h2:has-text("Your access") + ul > li').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim()).sort();
  expect(items).toEqual([
    `Member chat: a role on Main server (discord), being set up (retrying)`,
    `VIP chat: a role on Main server (discord), needs an action ${ROLE_ERROR}`,
  ]);
  const html = await page.content();
  expect(html).not.toContain(FAILED_ERROR);
  expect(html).not.toContain('Someone else');
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('only a member portal session reads the portal\'s benefits, and only its own member\'s', async () => {
  const mine = await subscribe(app, shop, 'silver');
  const theirs = await subscribe(app, shop, 'gold', 'gold-monthly');
  await record(mine.memberId, [{ value: '1111', status: 'delivered', error: null }]);
  await record(theirs.memberId, [{ value: '9876', status: 'action_required', error: ROLE_ERROR }]);
  const url = new URL(await portalUrl(mine.memberId));
  const opened = await openMemberPortal(app.api, url.pathname.split('/').pop()!, url.searchParams.get('t')!);
  if (opened?.status !== 'open') throw new Error('portal did not open');
  const executor = createExecutor(app);
  const own = await executor.run(dashboardOperation('get_portal_benefits'), { key: null, session: opened.token, ip: '127.0.0.1' }, {});
  expect(own.status).toBe(200);
  const data = (own.body as { data: { key: string; benefits: { value: string; delivery: { status: string } }[] }[] }).data;
  expect(data.map((e) => [e.key, e.benefits.map((b) => [b.value, b.delivery.status])])).toEqual([['member-chat', [['1111', 'delivered']]]]);
  const byKey = await executor.run(dashboardOperation('get_portal_benefits'), { key: shop.key, ip: '127.0.0.1' }, {});
  expect(byKey.status).toBe(404);
});
