// billing.gate_run (issue 33 item 2) is api_call on a leased token, answered as text: for
// the same request it must answer what api_call answers, its result (as JSON) or its
// error (sqlstate, message, detail), and refuse what api_call refuses: an unknown or
// revoked key (BL401, where api_call answers ok: false) and a missing scope (BL403).
import pg from 'pg';
import { hashKey } from '../../src/core/ids';
import { createTenant, TEST_DB } from '../support/app';
import { Seed } from '../support/seed';

let owner: pg.Pool;
beforeAll(() => { owner = new pg.Pool({ connectionString: TEST_DB(), max: 2 }); });
afterAll(() => owner.end());

interface Answer { result?: unknown; error?: { sqlstate: string; message: string; detail: string | null }; ok?: boolean }

/** One statement as the API's role, in a transaction rolled back afterwards. */
async function asApi<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await owner.connect();
  try {
    await client.query('begin');
    await client.query('set local role billing_api');
    return await fn(client);
  } finally {
    await client.query('rollback');
    client.release();
  }
}

const viaApiCall = (hash: string, scope: string, op: string, args: unknown) => asApi(async (client) => {
  const { rows } = await client.query<{ r: Answer }>(
    'select billing.api_call($1, null, null, $2, $3, $4, null, true) as r', [hash, scope, op, args]);
  const r = rows[0].r;
  if (r.ok === false) return { refused: true };
  return r.error ? { error: r.error } : { result: r.result };
});

const viaGateRun = (hash: string, scope: string, op: string, args: unknown) => asApi(async (client) => {
  try {
    const { rows } = await client.query<{ t: string }>('select billing.gate_run($1, $2, $3, $4) as t', [hash, scope, op, args]);
    return { result: JSON.parse(rows[0].t) as unknown };
  } catch (err) {
    const e = err as pg.DatabaseError;
    if (e.code === 'BL401') return { refused: true };
    return { error: { sqlstate: e.code, message: e.message, detail: e.detail || null } };
  }
});

test('gate_run answers what api_call answers on a leased token', async () => {
  const tenant = await createTenant(owner);
  const seed = new Seed(owner, tenant.communityId);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const chat = await seed.entitlement('chat', 'Chat "room" \u00e9');
  const member = await seed.member({ discord: 'run-1', subject: ['crm', 'run-1'] });
  await seed.subscription(member, plan);
  await seed.memberEntitlement(member, chat, { sources: [{ type: 'grant', tier_id: tier }], benefits: [{ platform: 'discord', type: 'role', value: 'chat' }] });
  const hash = hashKey(tenant.key);
  const requests: [string, string, unknown][] = [
    ['members:read', 'entitlements_check', { platform: 'discord', platform_uid: 'run-1' }],
    ['members:read', 'entitlements_check', { namespace: 'crm', external_user_id: 'run-1' }],
    ['members:read', 'entitlements_check', { platform: 'discord', platform_uid: 'run-1', tier_id: tier }],
    ['members:read', 'entitlements_check', { platform: 'discord', platform_uid: 'nobody' }],
    ['members:read', 'entitlements_check', { platform: 'discord' }],
    ['members:read', 'entitlements_check', { platform: 'discord', platform_uid: 'run-1', namespace: 'crm', external_user_id: 'run-1' }],
    ['members:read', 'members_get', { id: member }],
    ['members:read', 'members_get', { id: 'mem_00000000000000000000000000' }],
    ['subscriptions:read', 'subscriptions_list', { limit: 10 }],
    ['plans:read', 'plans_get', { tierId: tier }],
    ['plans:read', 'plans_get', { tierId: 'tier_00000000000000000000000000' }],
  ];
  let errors = 0;
  for (const [scope, op, args] of requests) {
    const expected = await viaApiCall(hash, scope, op, args);
    if ('error' in expected) errors += 1;
    expect({ op, args, answer: await viaGateRun(hash, scope, op, args) }).toEqual({ op, args, answer: expected });
  }
  // The list covers both outcomes.
  expect(errors).toBeGreaterThanOrEqual(2);
  expect(errors).toBeLessThan(requests.length);
});

test('gate_run refuses an unknown or revoked key and a missing scope', async () => {
  const tenant = await createTenant(owner, ['members:read']);
  const hash = hashKey(tenant.key);
  const args = { platform: 'discord', platform_uid: 'x' };
  expect(await viaGateRun(hash, 'members:read', 'entitlements_check', args)).toEqual({ result: { entitled: false, entitlements: [] } });
  const scope = await viaGateRun(hash, 'subscriptions:read', 'subscriptions_list', {});
  expect(scope).toEqual(await viaApiCall(hash, 'subscriptions:read', 'subscriptions_list', {}));
  expect(scope).toMatchObject({ error: { sqlstate: 'BL403', detail: 'subscriptions:read' } });
  expect(await viaGateRun(hashKey('bk_unknown'), 'members:read', 'entitlements_check', args)).toEqual({ refused: true });
  await owner.query('update billing_private.api_keys set revoked_at = now() where id = $1', [tenant.keyId]);
  expect(await viaGateRun(hash, 'members:read', 'entitlements_check', args)).toEqual({ refused: true });
  expect(await viaApiCall(hash, 'members:read', 'entitlements_check', args)).toEqual({ refused: true });
});
