// Issue 31's "Done when", the people half (the catalog half is catalog-browser.test.ts),
// in a real browser with the keyboard alone: an admin finds a member by their Discord
// username among others, exports their data, erases them, and reads each step on the
// Audit page: the export (a line of its own, without the data), the erasure's changes to
// the member and the subscription it ended. Nothing the erasure removed shows there.
// axe-core finds no serious violation on the pages involved.
import fs from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { Seed } from '../support/seed';

let app: TestApp;
let browser: Browser;
let shop: Tenant;
let ada: string;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  shop = await createTenant(app.owner);
  const seed = new Seed(app.owner, shop.communityId);
  const gold = await seed.tier({ name: 'Gold' });
  const plan = await seed.plan(gold, { name: 'Gold monthly' });
  ada = await seed.member({ discord: '700000000000000031', username: 'ada_journey' });
  await seed.subscription(ada, plan, { status: 'active' });
  // others whose names share a part of hers: the search must pick her out
  for (const [uid, username] of [['700000000000000032', 'adam_journey'], ['700000000000000033', 'grace_journey']]) {
    await seed.subscription(await seed.member({ discord: uid, username }), plan, { status: 'active' });
  }
});
afterAll(async () => { await browser?.close(); await app?.close(); });

/** Presses Enter on what has focus and waits for the page it leads to. */
async function enter(page: Page) {
  await Promise.all([page.waitForEvent('framenavigated'), page.keyboard.press('Enter')]);
  await page.waitForLoadState();
}

test('an admin finds a member by Discord username, exports and erases them, and reads each step in the audit log', async () => {
  const { context, page } = await newPage(browser);
  try {
    await signInAs(page, app, shop.communityId, 'admin');

    // Find her by her Discord username.
    await page.goto(`${app.url}/dashboard/members`);
    await page.getByLabel(/^Find a member/).focus();
    await page.keyboard.type('ada_journey');
    await enter(page);
    expect(await seriousViolations(page)).toEqual([]);
    const rows = page.locator('table tbody tr');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('discord:700000000000000031 (ada_journey)');
    await page.getByRole('link', { name: 'ada_journey' }).focus();
    await enter(page);
    expect(page.url()).toBe(`${app.url}/dashboard/members/${ada}`);

    // Export her data.
    await page.getByRole('button', { name: 'Export data (JSON)' }).focus();
    const [download] = await Promise.all([page.waitForEvent('download'), page.keyboard.press('Enter')]);
    const doc = JSON.parse(fs.readFileSync((await download.path())!, 'utf8'));
    expect(doc.member).toMatchObject({ id: ada, identities: [{ platform_uid: '700000000000000031', username: 'ada_journey' }] });

    // Erase her, confirming with her id.
    await page.getByRole('button', { name: 'Erase member…' }).focus();
    await enter(page);
    await page.getByLabel('Type the member id to confirm').focus();
    await page.keyboard.type(ada);
    await enter(page);
    await page.getByText('The member is erased').waitFor();

    // Each step on the Audit page, by this operator, filtered to her id.
    await page.goto(`${app.url}/dashboard/audit`);
    await page.getByLabel('Row id').focus();
    await page.keyboard.type(ada);
    await enter(page);
    expect(await seriousViolations(page)).toEqual([]);
    const lines = await page.locator('table tbody tr').allTextContents();
    const of = (what: RegExp) => lines.filter((l) => what.test(l) && /operator/.test(l));
    expect(of(/export\s+members/)).toHaveLength(1);
    expect(of(/data exported/)).toHaveLength(1);
    expect(of(/update\s+members/).length).toBeGreaterThanOrEqual(1); // erased_at set, personal columns emptied
    const text = lines.join('\n');
    expect(text).not.toContain('ada_journey');
    expect(text).not.toContain('700000000000000031');

    // The subscription the erasure ended, by the same operator.
    const { rows: [sub] } = await app.owner.query<{ id: string }>(
      'select id from billing.subscriptions where community_id = $1 and member_id = $2', [shop.communityId, ada]);
    await page.goto(`${app.url}/dashboard/audit?table=subscriptions&row_id=${sub.id}`);
    const subLines = await page.locator('table tbody tr').allTextContents();
    expect(subLines.filter((l) => /update\s+subscriptions/.test(l) && /operator/.test(l) && /cancelled/.test(l))).toHaveLength(1);
  } finally {
    await context.close();
  }
});
