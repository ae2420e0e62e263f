// billing catalog apply (../shared/design/operator-cli.md "Catalog file"): validation
// first, then create-or-update by key in one transaction; applying twice changes nothing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { CatalogError, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { createOwnerPool } from '../../src/db/pool';
import { call, createTenant, startApp, TestApp, TEST_DB } from '../support/app';
import { ROOT, runFailing, runJson } from '../support/cli-process';

const DEMO = path.join(ROOT, 'db/demo/demo-catalog.json');
// The demo file as plain JSON, to break on purpose.
const demo = (): any => JSON.parse(fs.readFileSync(DEMO, 'utf8')); // eslint-disable-line @typescript-eslint/no-explicit-any

let app: TestApp;
let owner: pg.Pool;
let dir: string;

beforeAll(async () => {
  app = await startApp();
  owner = createOwnerPool(TEST_DB());
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-test-'));
});
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await owner.end();
  await app.close();
});

let fileCounter = 0;
function writeCatalog(content: unknown): string {
  const file = path.join(dir, `catalog-${++fileCounter}.json`);
  fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

/** Every catalog row of a community with its xmin: any write changes the snapshot. */
async function snapshot(communityId: string) {
  const { rows } = await owner.query(
    `select 'community' as t, id as k, xmin::text as x from billing.communities where id = $1
     union all select 'platform', key, xmin::text from billing.platform_configs where community_id = $1
     union all select 'entitlement', key, xmin::text from billing.entitlements where community_id = $1
     union all select 'benefit', entitlement_id || '/' || platform_config_id || '/' || type || '/' || value, xmin::text
       from billing.entitlement_benefits where community_id = $1
     union all select 'tier', key, xmin::text from billing.tiers where community_id = $1
     union all select 'link', tier_id || '/' || entitlement_id, xmin::text from billing.tier_entitlements where community_id = $1
     union all select 'plan', key, xmin::text from billing.plans where community_id = $1
     union all select 'discount', code, xmin::text from billing.discount_codes where community_id = $1
     union all select 'events', count(*)::text, '' from billing.events where community_id = $1
     order by 1, 2`, [communityId]);
  return rows as Array<{ t: string; k: string; x: string }>;
}

describe('parseCatalog', () => {
  const fails = (c: unknown) => {
    try {
      parseCatalog(c);
    } catch (err) {
      expect(err).toBeInstanceOf(CatalogError);
      return (err as Error).message;
    }
    throw new Error('expected the catalog to be refused');
  };

  test('the demo catalog is valid', () => {
    expect(() => parseCatalog(demo())).not.toThrow();
  });

  test('a bad value names its field', () => {
    const c = demo();
    c.tiers[1].plans[0].amount_cents = -1;
    expect(fails(c)).toBe('tiers[1].plans[0].amount_cents: expected a non-negative integer');
    c.tiers[1].plans[0].amount_cents = 12.5;
    expect(fails(c)).toBe('tiers[1].plans[0].amount_cents: expected a non-negative integer');
  });

  test('unknown fields are errors that name the field', () => {
    const c = demo();
    c.tiers[0].colour = 'grey';
    expect(fails(c)).toBe('tiers[0].colour: unknown field');
    expect(fails({ ...demo(), extra: true })).toBe('extra: unknown field');
  });

  test('missing required fields, bad enums and cross-field rules name the field', () => {
    const c = demo();
    delete c.tiers[2].name;
    expect(fails(c)).toBe('tiers[2].name: required');
    const d = demo();
    d.platforms[0].platform = 'slack';
    expect(fails(d)).toBe('platforms[0].platform: expected one of "discord", "telegram"');
    const g = demo();
    g.tiers[1].plans[1].key = 'silver-monthly';
    expect(fails(g)).toBe('tiers[1].plans[1].key: duplicate plan key "silver-monthly"');
    expect(fails([])).toBe('expected a JSON object');
  });
});

describe('billing catalog apply', () => {
  test('creates the catalog and prints key-to-id maps; the plans appear in the API', async () => {
    const tenant = await createTenant(app.owner);
    const out = await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    expect(Object.keys(out.tiers)).toEqual(['silver', 'gold', 'guide']);
    expect(Object.keys(out.plans)).toEqual(['silver-monthly', 'silver-annual', 'gold-monthly', 'gold-annual', 'guide-once']);
    expect(Object.keys(out.entitlements)).toEqual(['members-chat', 'vip-chat', 'guide-library']);
    expect(Object.keys(out.platforms)).toEqual(['discord-main']);
    expect(Object.keys(out.discounts)).toEqual(['WELCOME10']);
    expect(out.tiers.gold).toMatch(/^tier_/);
    expect(out.discounts.WELCOME10).toMatch(/^[0-9a-f-]{36}$/);

    const plans = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
    expect(plans.status).toBe(200);
    const gold = plans.body.data.find((t: { id: string }) => t.id === out.tiers.gold);
    expect(gold).toMatchObject({ name: 'Gold', rank: 2, kind: 'subscription', billing_mode: 'recurring' });
    expect(gold.plans.map((p: { id: string; interval: string }) => [p.id, p.interval])).toEqual([
      [out.plans['gold-monthly'], 'month'], [out.plans['gold-annual'], 'year']]);
    const guide = plans.body.data.find((t: { id: string }) => t.id === out.tiers.guide);
    expect(guide.plans[0]).toMatchObject({ interval: null, access_days: 30, amount_cents: 900 });

    const { rows: [c] } = await owner.query('select payment_provider, payment_config from billing.communities where id = $1', [tenant.communityId]);
    expect(c).toEqual({ payment_provider: 'sandbox', payment_config: {} });
    const { rows: links } = await owner.query(
      `select e.key from billing.tier_entitlements te join billing.entitlements e on e.community_id = te.community_id and e.id = te.entitlement_id
       where te.community_id = $1 and te.tier_id = $2 order by 1`, [tenant.communityId, out.tiers.gold]);
    expect(links.map((r) => r.key)).toEqual(['members-chat', 'vip-chat']);
    const { rows: [discount] } = await owner.query('select tier_ids, percent_off::float8 as p from billing.discount_codes where id = $1', [out.discounts.WELCOME10]);
    expect(discount).toEqual({ tier_ids: [out.tiers.silver, out.tiers.gold], p: 10 });
  });

  test('applying the same file twice updates no row and emits no event, and prints the same ids', async () => {
    const tenant = await createTenant(app.owner);
    const first = await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    const before = await snapshot(tenant.communityId);
    expect(before.length).toBeGreaterThan(15);
    const second = await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    // The same ids; the first apply reports every row created, the second nothing.
    const { changes: made, price_changes: priced, ...ids } = first;
    expect(second).toEqual({ ...ids, changes: [], price_changes: [] });
    expect(made.filter((c: { action: string }) => c.action === 'created')).toHaveLength(made.length - 1); // and the provider set
    expect(priced).toEqual([]);
    expect(await snapshot(tenant.communityId)).toEqual(before);
  });

  test('a changed file updates only what changed; links and benefits follow the file; unlisted rows stay', async () => {
    const tenant = await createTenant(app.owner);
    const first = await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    const before = new Map((await snapshot(tenant.communityId)).map((r) => [`${r.t}:${r.k}`, r.x]));

    const c = demo();
    c.tiers = c.tiers.filter((t: { key: string }) => t.key === 'gold'); // silver and guide are not listed
    c.tiers[0].plans[0].amount_cents = 1700;
    c.tiers[0].entitlements = ['vip-chat'];
    c.entitlements = [{ key: 'vip-chat', name: 'VIP chat', benefits: [{ platform: 'discord-main', type: 'role', value: '42' }] }];
    c.discounts[0].code = 'welcome10'; // codes match case-insensitively
    c.discounts[0].tiers = ['gold'];
    const out = await runJson(['catalog', 'apply', writeCatalog(c), '--community', tenant.communityId]);
    expect(out.plans['gold-monthly']).toBe(first.plans['gold-monthly']);
    expect(out.discounts.welcome10).toBe(first.discounts.WELCOME10);

    const after = new Map((await snapshot(tenant.communityId)).map((r) => [`${r.t}:${r.k}`, r.x]));
    const changed = [...after.keys()].filter((k) => before.get(k) !== after.get(k)).sort();
    const removed = [...before.keys()].filter((k) => !after.has(k)).sort();
    const ids = first;
    expect(changed).toEqual([
      `benefit:${ids.entitlements['vip-chat']}/${ids.platforms['discord-main']}/role/42`,
      'discount:welcome10',
      'plan:gold-monthly',
    ]);
    expect(removed).toEqual([
      `benefit:${ids.entitlements['vip-chat']}/${ids.platforms['discord-main']}/role/200000000000000002`,
      'discount:WELCOME10',
      `link:${ids.tiers.gold}/${ids.entitlements['members-chat']}`,
    ]);
    const { rows } = await owner.query('select amount_cents from billing.plans where id = $1', [ids.plans['gold-monthly']]);
    expect(rows[0].amount_cents).toBe(1700);
  });

  test('a bad file is refused with the field named, and changes nothing', async () => {
    const tenant = await createTenant(app.owner);
    await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    const before = await snapshot(tenant.communityId);
    const c = demo();
    c.tiers[0].name = 'Renamed';
    c.tiers[1].plans[0].amount_cents = -5;
    const r = await runFailing(['catalog', 'apply', writeCatalog(c), '--community', tenant.communityId]);
    expect(r.code).toBe(1);
    expect(r.message).toBe('billing: invalid catalog: tiers[1].plans[0].amount_cents: expected a non-negative integer');
    expect(await snapshot(tenant.communityId)).toEqual(before);

    const notJson = await runFailing(['catalog', 'apply', writeCatalog('{"tiers": ['), '--community', tenant.communityId]);
    expect(notJson.message).toMatch(/is not valid JSON/);
    const noCommunity = await runFailing(['catalog', 'apply', DEMO, '--community', 'com_nope']);
    expect(noCommunity.message).toBe('billing: no community com_nope');
  });

  test('a benefit its platform cannot carry out is refused with the field named, and changes nothing', async () => {
    const tenant = await createTenant(app.owner);
    await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    const before = await snapshot(tenant.communityId);
    const refused = async (benefit: { platform: string; type: string; value: string }, platforms?: unknown[]) => {
      const c = demo();
      if (platforms) c.platforms = [...c.platforms, ...platforms];
      c.entitlements[0].benefits = [benefit];
      const r = await runFailing(['catalog', 'apply', writeCatalog(c), '--community', tenant.communityId]);
      expect(r.code).toBe(1);
      return r.message;
    };
    expect(await refused({ platform: 'discord-main', type: 'group', value: '1234' }))
      .toBe('billing: invalid catalog: entitlements[0].benefits[0].type: a discord connection cannot carry out a benefit of type "group" (it can: "role", "channel")');
    expect(await refused({ platform: 'discord-main', type: 'role', value: 'Gold' }))
      .toBe('billing: invalid catalog: entitlements[0].benefits[0].value: expected the Discord role id (a snowflake: digits, e.g. "1234567890123456789")');
    const tg = [{ key: 'tg', platform: 'telegram', settings: { chat_id: '-1001234567890' } }];
    expect(await refused({ platform: 'tg', type: 'role', value: '1234' }, tg))
      .toBe('billing: invalid catalog: entitlements[0].benefits[0].type: a telegram connection cannot carry out a benefit of type "role" (it can: "chat")');
    expect(await refused({ platform: 'tg', type: 'chat', value: 'vip room' }, tg))
      .toBe('billing: invalid catalog: entitlements[0].benefits[0].value: expected the Telegram chat id (an integer, e.g. "-1001234567890") or a public @channelname');
    expect(await snapshot(tenant.communityId)).toEqual(before);
    // What the platforms carry out is accepted: a channel, a chat by id or @name.
    const c = demo();
    c.platforms.push(tg[0]);
    c.entitlements[0].benefits = [{ platform: 'discord-main', type: 'channel', value: '300000000000000009' },
      { platform: 'tg', type: 'chat', value: '-1001234567890' }, { platform: 'tg', type: 'chat', value: '@vip_room' }];
    await runJson(['catalog', 'apply', writeCatalog(c), '--community', tenant.communityId]);
  });

  test('the database refuses a benefit type its connection\'s platform cannot carry out, from any door', async () => {
    const tenant = await createTenant(app.owner);
    const ids = await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    const c = tenant.communityId;
    const ent = Object.values(ids.entitlements)[0];
    const pcfg = ids.platforms['discord-main'];
    await expect(owner.query(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value)
      values ($1, $2, $3, 'chat', '5')`, [c, ent, pcfg])).rejects.toThrow('A discord connection cannot carry out a benefit of type "chat" (it can: "role", "channel").');
    await expect(owner.query(`update billing.entitlement_benefits set type = 'group' where community_id = $1`, [c]))
      .rejects.toThrow(/cannot carry out a benefit of type "group"/);
    // A connection whose benefits are Discord roles cannot become a Telegram chat.
    await expect(owner.query(`update billing.platform_configs set platform = 'telegram', settings = '{"chat_id": "-100"}' where community_id = $1 and id = $2`, [c, pcfg]))
      .rejects.toThrow('A telegram connection cannot carry out a benefit of type "role" (it can: "chat").');
    // The value's format is catalog apply's rule only: rows written directly keep working.
    await owner.query(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value)
      values ($1, $2, $3, 'role', 'any-text')`, [c, ent, pcfg]);
  });

  test('the rules of each object are the database\'s, met as it is written, naming the field in the file', async () => {
    const tenant = await createTenant(app.owner);
    const refused = async (c: unknown) => {
      expect(() => parseCatalog(c)).not.toThrow();
      const r = await runFailing(['catalog', 'apply', writeCatalog(c), '--community', tenant.communityId]);
      expect(r.code).toBe(1);
      return r.message;
    };
    const e = demo();
    e.tiers[0].plans[0].interval = null;
    expect(await refused(e)).toBe('billing: invalid catalog: tiers[0].plans[0].interval: expected "month" or "year" for a recurring tier');
    const f = demo();
    f.discounts[0].value_type = 'amount';
    expect(await refused(f)).toBe('billing: invalid catalog: discounts[0].amount_off_cents: required when value_type is "amount"');
    expect((await snapshot(tenant.communityId)).filter((row) => row.t !== 'community' && row.t !== 'events')).toEqual([]);
  });

  test('an unknown reference rolls back everything written before it', async () => {
    const tenant = await createTenant(app.owner);
    const c = demo();
    c.tiers[2].entitlements = ['no-such-entitlement'];
    const r = await runFailing(['catalog', 'apply', writeCatalog(c), '--community', tenant.communityId]);
    expect(r.message).toBe('billing: invalid catalog: tiers[2].entitlements[0]: unknown entitlement "no-such-entitlement" (no entitlement of the community has this key)');
    expect((await snapshot(tenant.communityId)).filter((row) => row.t !== 'community' && row.t !== 'events')).toEqual([]);
    const { rows } = await owner.query('select payment_provider from billing.communities where id = $1', [tenant.communityId]);
    expect(rows[0].payment_provider).toBeNull();
  });

  test('references may name rows the community already has', async () => {
    const tenant = await createTenant(app.owner);
    const first = await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    const out = await runJson(['catalog', 'apply', writeCatalog({
      tiers: [{ key: 'bronze', name: 'Bronze', rank: 0, entitlements: ['members-chat'],
        plans: [{ key: 'bronze-monthly', amount_cents: 200, currency: 'usd', interval: 'month' }] }],
      discounts: [{ code: 'BRONZE', value_type: 'amount', amount_off_cents: 100, currency: 'usd', tiers: ['bronze', 'gold'] }],
    }), '--community', tenant.communityId]);
    const { rows: [d] } = await owner.query('select tier_ids from billing.discount_codes where id = $1', [out.discounts.BRONZE]);
    expect(d.tier_ids).toEqual([out.tiers.bronze, first.tiers.gold]);
  });

  test('payment_provider null deactivates payments; an absent one leaves them as they are', async () => {
    const tenant = await createTenant(app.owner);
    await runJson(['catalog', 'apply', DEMO, '--community', tenant.communityId]);
    await runJson(['catalog', 'apply', writeCatalog({ discounts: [] }), '--community', tenant.communityId]);
    const provider = async () => (await owner.query('select payment_provider from billing.communities where id = $1', [tenant.communityId])).rows[0].payment_provider;
    expect(await provider()).toBe('sandbox');
    await runJson(['catalog', 'apply', writeCatalog({ payment_provider: null }), '--community', tenant.communityId]);
    expect(await provider()).toBeNull();
  });
});
