// A plan switch is validated in one place, billing.switch_validate (40-subscriptions.sql,
// issue 28 item 3): the API's switch, the immediate switch it hands over to (which the
// API role may call itself) and the portal's preview all call it, and no other function
// repeats its checks. Its cases, one table.
import type pg from 'pg';
import { createOwnerPool } from '../../src/db/pool';
import { createTenant, TEST_DB } from '../support/app';
import { Seed } from '../support/seed';

let owner: pg.Pool;
beforeAll(() => { owner = createOwnerPool(TEST_DB(), 2); });
afterAll(async () => { await owner.end(); });

test('every switch path calls billing.switch_validate, and only it asks the switch options of a plan', async () => {
  const { rows } = await owner.query<{ name: string; body: string }>(
    `select n.nspname || '.' || p.proname as name, p.prosrc as body
     from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('billing', 'billing_api', 'billing_private')`);
  const calling = (re: RegExp) => rows.filter((r) => re.test(r.body)).map((r) => r.name).sort();
  expect(calling(/\bswitch_validate\s*\(/)).toEqual([
    'billing_api.subscription_switch', 'billing_api.subscription_switch_preview', 'billing_private.subscription_switch_now']);
  // The checks themselves: the status (require_switchable) and the option lookup.
  expect(calling(/\bswitch_options\s*\(/)).toEqual(['billing.switch_validate', 'billing_api.subscription_switch_options']);
  expect(calling(/\brequire_switchable\s*\(/)).toEqual(['billing.switch_validate', 'billing_api.subscription_switch_options']);
});

test('billing.switch_validate: the group of a valid switch, 409 or 422 otherwise', async () => {
  const { communityId: c } = await createTenant(owner);
  const seed = new Seed(owner, c);
  const tiers: string[] = [];
  for (const rank of [0, 1, 2]) {
    const t = await seed.tier();
    await owner.query('update billing.tiers set rank = $3 where community_id = $1 and id = $2', [c, t, rank]);
    tiers.push(t);
  }
  const [silver, silverYearly, gold, bronze, euro] = [
    await seed.plan(tiers[1]), await seed.plan(tiers[1], { interval: 'year' }), await seed.plan(tiers[2]),
    await seed.plan(tiers[0]), await seed.plan(tiers[2], { currency: 'eur' })];
  const member = await seed.member();
  const sub = async (status: string) => seed.subscription(member, silver, { status });
  const active = await sub('active');
  const trialing = await sub('trialing');
  const paused = await sub('paused');
  const cancelling = await sub('cancelling');
  const validate = async (subId: string, plan: string, immediate: boolean) => {
    try {
      const { rows: [r] } = await owner.query(
        `select billing.switch_validate(s, $3, $4) as g from billing.subscriptions s where s.community_id = $1 and s.id = $2`,
        [c, subId, plan, immediate]);
      return r.g as string;
    } catch (e) {
      return (e as { code: string }).code;
    }
  };
  const cases: [string, string, boolean, string][] = [
    [active, silverYearly, false, 'same_tier'],
    [active, gold, false, 'upgrades'],
    [active, bronze, false, 'downgrades'],
    [trialing, gold, false, 'upgrades'],
    [active, silverYearly, true, 'same_tier'],
    [active, gold, true, 'upgrades'],
    [active, bronze, true, 'BL422'],       // a downgrade is scheduled, never immediate
    [active, silver, false, 'BL422'],      // its own plan
    [active, euro, false, 'BL422'],        // another currency
    [active, 'plan_unknown', false, 'BL422'],
    [paused, gold, false, 'BL409'],
    [cancelling, gold, true, 'BL409'],
  ];
  const got = [];
  for (const [s, plan, immediate] of cases) got.push([s, plan, immediate, await validate(s, plan, immediate)]);
  expect(got).toEqual(cases);
});
