// The operator's side of issue 26 item 1: `billing catalog apply` says what it changed
// and names the subscribers a price edit concerns (they keep their price), readable for
// any count; `billing plans migrate` schedules their move with notice and `billing
// plans migrations` shows it (docs/decisions/price-changes-keep-existing-subscribers.md).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { catalog, createShop, Shop } from '../support/shop';
import { startApp, TestApp } from '../support/app';
import { runCli, runFailing, runJson } from '../support/cli-process';

let app: TestApp;
let dir: string;
beforeAll(async () => {
  app = await startApp();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'price-cli-'));
});
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await app.close();
});

let n = 0;
function fileWithSilverAt(cents: number): string {
  const c = catalog();
  c.tiers!.find((t) => t.key === 'silver')!.plans![0].amount_cents = cents;
  const file = path.join(dir, `catalog-${++n}.json`);
  fs.writeFileSync(file, JSON.stringify(c));
  return file;
}

/** `count` active silver subscriptions, written directly (ids in id order). */
async function silverSubscribers(shop: Shop, count: number): Promise<string[]> {
  const { rows } = await app.owner.query<{ id: string }>(
    `with m as (insert into billing.members (community_id) select $1 from generate_series(1, $2) returning id)
     insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end)
     select $1, m.id, $3, 'active', billing.community_now($1), billing.community_now($1) + interval '1 month' from m
     returning id`, [shop.communityId, count, shop.ids.plans['silver-monthly']]);
  return rows.map((r) => r.id).sort();
}

test('catalog apply prints what it changed and names the subscribers of an edited price, ten ids and a count', async () => {
  const shop = await createShop(app);
  const ids = await silverSubscribers(shop, 25);
  const text = await runCli(['catalog', 'apply', fileWithSilverAt(1000), '--community', shop.communityId]);
  expect(text.code).toBe(0);
  expect(text.stdout).toContain('Applied catalog: 0 created, 1 updated,');
  expect(text.stdout).toMatch(/updated +plan +silver-monthly \(amount_cents\)/);
  expect(text.stdout).toContain('Price of plan silver-monthly: 800 usd -> 1,000 usd for new buyers.');
  expect(text.stdout).toContain(`25 existing subscriptions keep the price they pay: ${ids.slice(0, 10).join(', ')}, ... and 15 more`);
  expect(text.stdout).not.toContain(ids[10]);
  expect(text.stdout).toContain(`billing plans migrate --community ${shop.communityId} --plan silver-monthly --notice-days 30`);

  // --json: the whole list, additively beside the key-to-id maps.
  const json = await runJson(['catalog', 'apply', fileWithSilverAt(1200), '--community', shop.communityId]);
  expect(json.plans['silver-monthly']).toBe(shop.ids.plans['silver-monthly']);
  expect(json.changes).toEqual([{ kind: 'plan', key: 'silver-monthly', id: shop.ids.plans['silver-monthly'], action: 'updated', fields: ['amount_cents'] }]);
  expect(json.price_changes).toEqual([{ plan: 'silver-monthly', plan_id: shop.ids.plans['silver-monthly'], from_cents: 1000, to_cents: 1200,
    currency: 'usd', subscriptions: 25, pending_migration: 0, subscription_ids: ids }]);

  const unchanged = await runCli(['catalog', 'apply', fileWithSilverAt(1200), '--community', shop.communityId]);
  expect(unchanged.stdout.split('\n')[0]).toMatch(/^Applied catalog: nothing changed \(\d+ listed\)$/);
  expect(unchanged.stdout).not.toContain('Price of plan');
});

test('plans migrate schedules the move with notice and names the subscribers; plans migrations lists it', async () => {
  const shop = await createShop(app);
  const ids = await silverSubscribers(shop, 3);
  await runJson(['catalog', 'apply', fileWithSilverAt(1000), '--community', shop.communityId]);

  const text = await runCli(['plans', 'migrate', '--community', shop.communityId, '--plan', 'silver-monthly', '--notice-days', '30']);
  expect(text.code).toBe(0);
  expect(text.stdout).toMatch(/^Price migration pmig_\S+: plan silver-monthly subscribers move to 1,000 usd\n/);
  expect(text.stdout).toContain(`3 subscriptions: ${ids.join(', ')}`);

  // A second migration replaces the first for every subscriber; JSON names them all.
  const json = await runJson(['plans', 'migrate', '--community', shop.communityId, '--plan', shop.ids.plans['silver-monthly'], '--notice-days', '45']);
  expect(json).toMatchObject({ plan_key: 'silver-monthly', price_cents: 1000, notice_days: 45, subscriptions: 3, subscription_ids: ids });
  const listed = await runJson(['plans', 'migrations', '--community', shop.communityId, '--plan', 'silver-monthly']);
  expect(listed.data.map((m: { id: string; pending_subscriptions: number }) => [m.id === json.id, m.pending_subscriptions])).toEqual([[true, 3], [false, 0]]);
  const lines = await runCli(['plans', 'migrations', '--community', shop.communityId]);
  expect(lines.stdout).toContain(`${json.id}  plan silver-monthly  to 1,000 usd  notice 45 days`);

  // The file's next apply names them as having a migration pending.
  const again = await runJson(['catalog', 'apply', fileWithSilverAt(1100), '--community', shop.communityId]);
  expect(again.price_changes[0]).toMatchObject({ subscriptions: 3, pending_migration: 3 });

  expect((await runFailing(['plans', 'migrate', '--community', shop.communityId, '--plan', 'silver-monthly', '--notice-days', '-3'])).message)
    .toContain('--notice-days');
  expect((await runFailing(['plans', 'migrate', '--community', shop.communityId, '--plan', 'nope', '--notice-days', '3'])).message)
    .toContain('No plan nope');
});
