// The entitlement check writes each entitlement as a row that json_agg turns into the
// object, as text (billing_private.entitlements_check_text, issue 33): it must stay
// billing.member_entitlement_json's object, on both of the check's paths (a platform
// pair; a subject pair through billing.resolve_identity) and with tier_id. gate_run
// answers the same text (test/operations/gate-run.test.ts).
import pg from 'pg';
import { hashKey } from '../../src/core/ids';
import { createTenant, TEST_DB } from '../support/app';
import { Seed, subscriptionSource } from '../support/seed';

let owner: pg.Pool;
beforeAll(() => { owner = new pg.Pool({ connectionString: TEST_DB(), max: 2 }); });
afterAll(() => owner.end());

test("the check's entitlements are billing.member_entitlement_json's objects", async () => {
  const tenant = await createTenant(owner);
  const seed = new Seed(owner, tenant.communityId);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const chat = await seed.entitlement('chat', 'Chat "room"');
  const vip = await seed.entitlement('vip');
  const gone = await seed.entitlement('gone');
  const member = await seed.member({ discord: 'shape-1', subject: ['crm', 'shape-1'] });
  const sub = await seed.subscription(member, plan);
  const sources = [subscriptionSource(sub, tier, plan)];
  await seed.memberEntitlement(member, chat, { sources, benefits: [{ platform: 'discord', type: 'role', value: 'chat' }], revision: 3 });
  await seed.memberEntitlement(member, vip, { sources });
  await seed.memberEntitlement(member, gone, { status: 'inactive', sources: [] });

  const { rows: [{ expected }] } = await owner.query(
    `select jsonb_agg(billing.member_entitlement_json(me) order by me.id) as expected from billing.member_entitlements me
     where me.community_id = $1 and me.member_id = $2 and me.status = 'active'`, [tenant.communityId, member]);
  expect(expected).toHaveLength(2);
  // As the API calls it: billing_api, a leased token.
  const call = async (args: Record<string, string>) => {
    const client = await owner.connect();
    try {
      await client.query('begin');
      await client.query('set local role billing_api');
      const { rows } = await client.query(
        `select billing.api_call($1, null, null, 'members:read', 'entitlements_check', $2, null, true) as r`,
        [hashKey(tenant.key), args]);
      return rows[0].r.result;
    } finally {
      await client.query('rollback');
      client.release();
    }
  };
  const cases: Record<string, string>[] = [{ platform: 'discord', platform_uid: 'shape-1' }, { namespace: 'crm', external_user_id: 'shape-1' },
    { platform: 'discord', platform_uid: 'shape-1', tier_id: tier }];
  for (const args of cases) {
    expect(await call(args)).toEqual({ entitled: true, entitlements: expected });
  }
  expect(await call({ platform: 'discord', platform_uid: 'shape-1', tier_id: 'tier_00000000000000000000000000' }))
    .toEqual({ entitled: false, entitlements: [] });
  expect(await call({ platform: 'telegram', platform_uid: 'nobody' })).toEqual({ entitled: false, entitlements: [] });
});
