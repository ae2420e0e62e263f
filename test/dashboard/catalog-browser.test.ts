// Issue 31 item 1 and its "Done when", in a real browser with the keyboard only: an
// admin creates a tier with two plans and a discount code on the Catalog page, sees a
// refused value's problem beside its field, changes a plan's price and is told how many
// subscribers it concerns before saving it (they keep their price), and reads each step
// on the Audit page. axe-core finds no serious violation on the pages involved. A viewer
// sees no form.
import type { Browser, Locator, Page } from 'playwright-core';
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';

let app: TestApp;
let browser: Browser;
let tenant: Tenant;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  tenant = await createTenant(app.owner);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

/** Focuses a field by its label and types into it, as a keyboard user does after tabbing there. */
async function type(form: Locator, label: string, text: string) {
  const field = form.getByLabel(label, { exact: true });
  await field.focus();
  await field.page().keyboard.press('ControlOrMeta+A');
  await field.page().keyboard.type(text);
}

/** Presses Enter in a field: the form is submitted; waits for the page it leads to. */
async function enter(page: Page) {
  await Promise.all([page.waitForEvent('framenavigated'), page.keyboard.press('Enter')]);
  await page.waitForLoadState();
}

/** Opens a tier's <details> with the keyboard (its summary focused, Enter). */
async function openTier(page: Page, key: string): Promise<Locator> {
  const details = page.locator(`details[data-tier="${key}"]`);
  if ((await details.getAttribute('open')) === null) {
    await details.locator('summary').focus();
    await page.keyboard.press('Enter');
  }
  return details;
}

async function row(table: 'tiers' | 'plans', key: string) {
  const { rows } = await app.owner.query(`select * from billing.${table} where community_id = $1 and key = $2`, [tenant.communityId, key]);
  return rows[0] ?? null;
}

test('an admin builds a tier with two plans and a discount code with the keyboard, changes a price after seeing whom it concerns, and reads it all in the audit log', async () => {
  const { context, page } = await newPage(browser);
  try {
    await signInAs(page, app, tenant.communityId, 'admin');
    await page.goto(`${app.url}/dashboard/catalog`);
    expect(await seriousViolations(page)).toEqual([]);

    // A tier.
    const addTier = page.locator('form[data-form="add-tier"]');
    await type(addTier, 'Key', 'gold');
    await page.keyboard.press('Tab');
    await page.keyboard.type('Gold');
    await type(addTier, 'Rank', '2');
    await enter(page);
    expect(page.url()).toMatch(/\/dashboard\/catalog\?done=catalog$/);
    await expect(page.locator('[role=status]').first().textContent()).resolves.toContain('The catalog is saved.');
    expect(await row('tiers', 'gold')).toMatchObject({ name: 'Gold', rank: 2, billing_mode: 'recurring', active: true });

    // Two plans, the first with a refused currency: the problem stands beside the field.
    let tier = await openTier(page, 'gold');
    let addPlan = tier.locator('form[data-form="plan-0"]');
    await type(addPlan, 'Key', 'gold-monthly');
    await type(addPlan, 'Name', 'Monthly');
    await type(addPlan, 'Price (minor units, e.g. 1000 for 10.00)', '1000');
    await type(addPlan, 'Currency', 'US');
    await enter(page);
    tier = page.locator('details[data-tier="gold"]');
    expect(await tier.getAttribute('open')).not.toBeNull();
    addPlan = tier.locator('form[data-form="plan-0"]');
    const currency = addPlan.getByLabel('Currency', { exact: true });
    await expect(currency.getAttribute('aria-invalid')).resolves.toBe('true');
    const problem = page.locator('#plan-0-currency-problem');
    await expect(problem.textContent()).resolves.toBe('expected a lowercase three-letter currency code, e.g. "usd"');
    await expect(currency.getAttribute('aria-describedby')).resolves.toContain('plan-0-currency-problem');
    expect(await seriousViolations(page)).toEqual([]);
    // What was typed is kept; only the currency is retyped.
    await expect(addPlan.getByLabel('Key', { exact: true }).inputValue()).resolves.toBe('gold-monthly');
    await type(addPlan, 'Currency', 'usd');
    await enter(page);
    expect({ url: page.url(), alerts: await page.locator('[role=alert]').allTextContents() }).toEqual({ url: expect.stringMatching(/done=catalog$/), alerts: [] });
    tier = await openTier(page, 'gold');
    addPlan = tier.locator('form[data-form="plan-0"]');
    await type(addPlan, 'Key', 'gold-annual');
    await type(addPlan, 'Name', 'Annual');
    await type(addPlan, 'Price (minor units, e.g. 1000 for 10.00)', '10000');
    await addPlan.getByLabel('Interval', { exact: true }).focus();
    await page.keyboard.type('year');
    await type(addPlan, 'Trial days', '7');
    await enter(page);
    expect(await row('plans', 'gold-monthly')).toMatchObject({ amount_cents: 1000, currency: 'usd', interval: 'month', active: true });
    expect(await row('plans', 'gold-annual')).toMatchObject({ amount_cents: 10000, interval: 'year', trial_days: 7 });

    // A discount code for the tier (its checkbox ticked with Space).
    const addCode = page.locator('form[data-form="add-discount"]');
    await type(addCode, 'Code', 'GOLD20');
    await type(addCode, 'Percent off', '20');
    await addCode.getByLabel('Gold', { exact: true }).focus();
    await page.keyboard.press('Space');
    await addCode.getByLabel('Code', { exact: true }).focus();
    await enter(page);
    expect(page.url()).toMatch(/done=catalog$/);
    const { rows: [code] } = await app.owner.query('select value_type, percent_off, tier_ids from billing.discount_codes where community_id = $1 and code = $2',
      [tenant.communityId, 'GOLD20']);
    const gold = await row('tiers', 'gold');
    expect(code).toEqual({ value_type: 'percent', percent_off: '20', tier_ids: [gold.id] });

    // Two subscribers pay the monthly plan's price; a new price concerns them.
    const monthly = await row('plans', 'gold-monthly');
    for (let i = 0; i < 2; i++) {
      const { rows: [m] } = await app.owner.query(`insert into billing.members (community_id, id) values ($1, billing.gen_id('mem')) returning id`, [tenant.communityId]);
      await app.owner.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end)
        values ($1, $2, $3, 'active', now(), now() + interval '1 month')`, [tenant.communityId, m.id, monthly.id]);
    }
    tier = await openTier(page, 'gold');
    const priceForm = tier.locator('form[data-plan="gold-monthly"]');
    await type(priceForm, 'New price of Monthly (minor units)', '1200');
    await enter(page);
    await expect(page.locator('#price-concerns').textContent()).resolves.toMatch(/This change concerns 2 subscribers\..*keep the price they pay until you migrate them/s);
    expect(await seriousViolations(page)).toEqual([]);
    // Not saved yet.
    expect((await row('plans', 'gold-monthly')).amount_cents).toBe(1000);
    await page.getByRole('button', { name: 'Save the new price' }).focus();
    await enter(page);
    expect(page.url()).toMatch(/done=price$/);
    expect((await row('plans', 'gold-monthly')).amount_cents).toBe(1200);
    const { rows: prices } = await app.owner.query('select price_cents from billing.subscriptions where community_id = $1', [tenant.communityId]);
    expect(prices.map((r) => r.price_cents)).toEqual([1000, 1000]);

    // Each step in the audit log, by the operator who made it.
    for (const [table, n] of [['tiers', 1], ['plans', 3], ['discount_codes', 1]] as const) {
      await page.goto(`${app.url}/dashboard/audit?table=${table}&actor_type=operator`);
      const rows = page.locator('main table tbody tr');
      expect({ table, rows: await rows.count() }).toEqual({ table, rows: n });
      await expect(rows.first().textContent()).resolves.toMatch(/operator opu_/);
    }
    await page.goto(`${app.url}/dashboard/audit?table=plans&operation=update`);
    const update = page.locator('main table tbody tr').first();
    await update.locator('summary').focus();
    await page.keyboard.press('Enter');
    await expect(update.locator('details dl').textContent()).resolves.toMatch(/amount_cents1000 → 1200/);
    expect(await seriousViolations(page)).toEqual([]);
  } finally {
    await context.close();
  }
});

test('a viewer sees the catalog without a form, and a forged form post is refused by the role\'s scopes', async () => {
  const { context, page } = await newPage(browser);
  try {
    await signInAs(page, app, tenant.communityId, 'viewer');
    await page.goto(`${app.url}/dashboard/catalog`);
    await expect(page.locator('form[data-form]').count()).resolves.toBe(0);
    const csrf = await page.evaluate(async () => (await fetch('/dashboard/account')).text())
      .then((h) => /name="csrf" value="([^"]+)"/.exec(h)?.[1] ?? '');
    const status = await page.evaluate(async (token) => (await fetch('/dashboard/catalog/tiers', {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf: token, key: 'forged', name: 'Forged' }).toString(),
    })).status, csrf);
    expect(status).toBe(403);
    expect(await row('tiers', 'forged')).toBeNull();
  } finally {
    await context.close();
  }
});
