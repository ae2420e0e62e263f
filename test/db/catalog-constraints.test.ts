// The cross-field rules of the catalog validator (checkRules in src/catalog.ts) hold
// for every door into the tables, SQL included (db/migrations/fixtures/tables/20-catalog.sql).
import pg from 'pg';
import { createTenant, TEST_DB, Tenant } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';

let owner: pg.Pool;
let tenant: Tenant;

beforeAll(async () => {
  owner = createOwnerPool(TEST_DB());
  tenant = await createTenant(owner);
});
afterAll(() => owner.end());

/** Runs statements in one owner transaction that is always rolled back; returns the error, if any. */
async function attempt(statements: (c: pg.PoolClient) => Promise<unknown>): Promise<{ code?: string; constraint?: string; detail?: string } | null> {
  const client = await owner.connect();
  try {
    await client.query('begin');
    await statements(client);
    await client.query('set constraints all immediate');
    return null;
  } catch (err) {
    return err as { code?: string };
  } finally {
    await client.query('rollback');
    client.release();
  }
}

const discount = (values: string) => (c: pg.PoolClient) => c.query(
  `insert into billing.discount_codes (community_id, code, value_type, percent_off, amount_off_cents, currency, duration, duration_months, min_spend_cents, max_spend_cents, starts_at, expires_at)
   values ($1, 'C' || md5(random()::text), ${values})`, [tenant.communityId]);

test.each([
  ['percent without percent_off', `'percent', null, null, null, 'once', null, null, null, null, null`, 'discount_codes_percent_value'],
  ['percent with amount_off_cents too', `'percent', 10, 100, null, 'once', null, null, null, null, null`, 'discount_codes_percent_value'],
  ['amount without amount_off_cents', `'amount', null, null, 'usd', 'once', null, null, null, null, null`, 'discount_codes_amount_value'],
  ['amount without currency', `'amount', null, 100, null, 'once', null, null, null, null, null`, 'discount_codes_amount_value'],
  ['amount with percent_off too', `'amount', 10, 100, 'usd', 'once', null, null, null, null, null`, 'discount_codes_amount_value'],
  ['repeating without duration_months', `'percent', 10, null, null, 'repeating', null, null, null, null, null`, 'discount_codes_duration_months'],
  ['duration_months without repeating', `'percent', 10, null, null, 'once', 3, null, null, null, null`, 'discount_codes_duration_months'],
  ['min_spend above max_spend', `'percent', 10, null, null, 'once', null, 500, 100, null, null`, 'discount_codes_spend_range'],
  ['starts_at not before expires_at', `'percent', 10, null, null, 'once', null, null, null, '2030-01-02', '2030-01-01'`, 'discount_codes_window'],
])('a discount code with %s is refused', async (_name, values, constraint) => {
  expect(await attempt(discount(values))).toMatchObject({ code: '23514', constraint });
});

test('valid discount codes of both kinds are accepted', async () => {
  expect(await attempt(discount(`'percent', 10, null, null, 'repeating', 3, 0, 100, '2030-01-01', '2030-01-02'`))).toBeNull();
  expect(await attempt(discount(`'amount', null, 500, 'usd', 'forever', null, 100, 100, null, null`))).toBeNull();
});

test('a one_time tier must be billed one_time', async () => {
  const err = await attempt((c) => c.query(`insert into billing.tiers (community_id, key, name, kind, billing_mode) values ($1, 'ot', 'OT', 'one_time', 'recurring')`, [tenant.communityId]));
  expect(err).toMatchObject({ code: '23514', constraint: 'tiers_one_time_billed_one_time' });
});

async function oneTimeTier(c: pg.PoolClient): Promise<string> {
  const { rows: [t] } = await c.query(`insert into billing.tiers (community_id, key, name, kind, billing_mode) values ($1, 'ot', 'OT', 'one_time', 'one_time') returning id`, [tenant.communityId]);
  return t.id;
}

test('a plan of a tier billed one_time has no interval and no trial', async () => {
  expect(await attempt(async (c) => {
    const tier = await oneTimeTier(c);
    await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, interval) values ($1, $2, 'p', 100, 'usd', 'month')`, [tenant.communityId, tier]);
  })).toMatchObject({ code: '23514', detail: 'interval' });
  expect(await attempt(async (c) => {
    const tier = await oneTimeTier(c);
    await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, trial_days) values ($1, $2, 'p', 100, 'usd', 7)`, [tenant.communityId, tier]);
  })).toMatchObject({ code: '23514', detail: 'trial_days' });
  expect(await attempt(async (c) => {
    const tier = await oneTimeTier(c);
    await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, access_days) values ($1, $2, 'p', 100, 'usd', 30)`, [tenant.communityId, tier]);
  })).toBeNull();
});

test('a tier with recurring plans cannot switch to one_time billing', async () => {
  expect(await attempt(async (c) => {
    const { rows: [t] } = await c.query(`insert into billing.tiers (community_id, key, name) values ($1, 'rec', 'Rec') returning id`, [tenant.communityId]);
    await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, interval) values ($1, $2, 'm', 100, 'usd', 'month')`, [tenant.communityId, t.id]);
    await c.query(`update billing.tiers set billing_mode = 'one_time' where id = $1`, [t.id]);
  })).toMatchObject({ code: '23514', detail: 'interval' });
});

async function recurringTier(c: pg.PoolClient): Promise<string> {
  const { rows: [t] } = await c.query(`insert into billing.tiers (community_id, key, name) values ($1, 'rec', 'Rec') returning id`, [tenant.communityId]);
  return t.id;
}

test('a plan of a recurring tier has an interval and no access_days', async () => {
  expect(await attempt(async (c) => {
    const tier = await recurringTier(c);
    await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency) values ($1, $2, 'p', 100, 'usd')`, [tenant.communityId, tier]);
  })).toMatchObject({ code: '23514', detail: 'interval' });
  expect(await attempt(async (c) => {
    const tier = await recurringTier(c);
    await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, interval, access_days) values ($1, $2, 'p', 100, 'usd', 'year', 30)`, [tenant.communityId, tier]);
  })).toMatchObject({ code: '23514', detail: 'access_days' });
  expect(await attempt(async (c) => {
    const tier = await recurringTier(c);
    const { rows: [p] } = await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, interval) values ($1, $2, 'p', 100, 'usd', 'month') returning id`, [tenant.communityId, tier]);
    await c.query(`update billing.plans set interval = null where id = $1`, [p.id]);
  })).toMatchObject({ code: '23514', detail: 'interval' });
});

test('a tier with one-time plans cannot switch to recurring billing', async () => {
  expect(await attempt(async (c) => {
    const { rows: [t] } = await c.query(`insert into billing.tiers (community_id, key, name, billing_mode) values ($1, 'pass', 'Pass', 'one_time') returning id`, [tenant.communityId]);
    await c.query(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, access_days) values ($1, $2, 'd', 100, 'usd', 30)`, [tenant.communityId, t.id]);
    await c.query(`update billing.tiers set billing_mode = 'recurring' where id = $1`, [t.id]);
  })).toMatchObject({ code: '23514', detail: 'interval' });
});
