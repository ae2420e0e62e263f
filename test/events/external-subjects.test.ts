// POST /v1/members/{id}/external-subjects (spec "Endpoint rules" 1): maps an
// operator subject onto a member, republishes active entitlements as updated with the
// new subject, is a no-op when identical, and answers 409 for mismatched mappings.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { eventsSince, seedWorld, World } from '../support/ledger-world';

let app: TestApp;
let tenant: Tenant;
let w: World;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  w = await seedWorld(app.owner, { communityId: tenant.communityId, members: 4 });
  // member 0 holds e0 and e1 (tier 1) and had e2 (tier 2, now paused: its row is inactive).
  await app.owner.query(
    `insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end)
     values ($1, $2, $3, 'active', billing.community_now($1) + interval '30 days'),
            ($1, $2, $4, 'active', billing.community_now($1) + interval '30 days')`,
    [tenant.communityId, w.members[0], w.plans[1], w.plans[2]]);
  await app.owner.query(`update billing.subscriptions set status = 'paused' where community_id = $1 and plan_id = $2`,
    [tenant.communityId, w.plans[2]]);
});
afterAll(() => app.close());

const lastId = async () => (await eventsSince(app.owner, tenant.communityId, '')).at(-1)!.id;
const attach = (member: string, body: unknown, headers: Record<string, string> = {}) =>
  call(app.url, 'POST', `/v1/members/${member}/external-subjects`, { key: tenant.key, body, headers });

test('attaching republishes each active entitlement as updated with the subject and a new revision', async () => {
  const since = await lastId();
  const r = await attach(w.members[0], { namespace: 'acme', external_user_id: 'u-1' });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({
    id: w.members[0], created_at: expect.any(String), identities: [],
    external_subjects: [{ namespace: 'acme', external_user_id: 'u-1' }], email: null, display_name: 'u-1', note: null, tags: [], erased_at: null,
  });
  const events = await eventsSince(app.owner, tenant.communityId, since);
  expect(events.map((e) => e.type)).toEqual(['member.updated', 'member.entitlement.updated', 'member.entitlement.updated']);
  expect(events[0].data.change).toEqual({ kind: 'external_subject_attached', namespace: 'acme', external_user_id: 'u-1' });
  for (const e of events.slice(1)) {
    expect(e.data).toMatchObject({
      reason: 'external_subject_attached', trigger_event_id: events[0].id,
      member: { id: w.members[0], external_subjects: [{ namespace: 'acme', external_user_id: 'u-1' }] },
      entitlement: { status: 'active', revision: 2 },
      changes: { added_benefits: [], removed_benefits: [] },
    });
  }
  expect(events.slice(1).map((e) => e.data.entitlement.entitlement_id).sort()).toEqual([w.entitlements[0], w.entitlements[1]].sort());
});

test('the identical mapping again is a no-op: same 200 answer, no event', async () => {
  const first = await attach(w.members[1], { namespace: 'acme', external_user_id: 'u-2' });
  const since = await lastId();
  const again = await attach(w.members[1], { namespace: 'acme', external_user_id: 'u-2' });
  expect(again.status).toBe(200);
  expect(again.body).toEqual(first.body);
  expect(await eventsSince(app.owner, tenant.communityId, since)).toEqual([]);
});

test('a subject mapped to another member, or a second subject in a namespace, answers 409 conflict', async () => {
  await attach(w.members[2], { namespace: 'acme', external_user_id: 'u-3' });
  const since = await lastId();
  const taken = await attach(w.members[3], { namespace: 'acme', external_user_id: 'u-3' });
  expect(taken.status).toBe(409);
  expect(taken.body.code).toBe('conflict');
  const second = await attach(w.members[2], { namespace: 'acme', external_user_id: 'u-other' });
  expect(second.status).toBe(409);
  expect(second.body.code).toBe('conflict');
  // Another namespace is fine.
  const other = await attach(w.members[2], { namespace: 'crm', external_user_id: 'u-3' });
  expect(other.status).toBe(200);
  expect(other.body.external_subjects).toEqual([
    { namespace: 'acme', external_user_id: 'u-3' }, { namespace: 'crm', external_user_id: 'u-3' }]);
  expect((await eventsSince(app.owner, tenant.communityId, since)).map((e) => e.type)).toEqual(['member.updated']);
});

test('an unknown member, or one of another community, answers 404', async () => {
  expect((await attach('mem_0123456789abcdef0123456789', { namespace: 'acme', external_user_id: 'x' })).status).toBe(404);
  const stranger = await createTenant(app.owner);
  const r = await call(app.url, 'POST', `/v1/members/${w.members[3]}/external-subjects`,
    { key: stranger.key, body: { namespace: 'acme', external_user_id: 'x' } });
  expect(r.status).toBe(404);
  expect(r.body.code).toBe('not_found');
});

test('invalid bodies answer 422 naming the field; the route needs members:write', async () => {
  const missing = await attach(w.members[3], { namespace: 'acme' });
  expect(missing.status).toBe(422);
  expect(missing.body.param).toBe('external_user_id');
  const extra = await attach(w.members[3], { namespace: 'acme', external_user_id: 'x', color: 'red' });
  expect(extra.status).toBe(422);
  expect(extra.body.param).toBe('color');
  expect((await attach(w.members[3], { namespace: '', external_user_id: 'x' })).status).toBe(422);
  const reader = await createTenant(app.owner, ['members:read']);
  const r = await call(app.url, 'POST', `/v1/members/${w.members[3]}/external-subjects`,
    { key: reader.key, body: { namespace: 'acme', external_user_id: 'x' } });
  expect(r.status).toBe(403);
  expect(r.body.code).toBe('missing_scope');
});

test('an Idempotency-Key replays the first answer; the same key with another body answers 422', async () => {
  const headers = { 'idempotency-key': 'attach-1' };
  const a = await attach(w.members[3], { namespace: 'zeta', external_user_id: 'z-1' }, headers);
  const b = await attach(w.members[3], { namespace: 'zeta', external_user_id: 'z-1' }, headers);
  expect(a.status).toBe(200);
  expect(b.status).toBe(200);
  expect(b.headers.get('idempotent-replayed')).toBe('true');
  expect(b.body).toEqual(a.body);
  const reuse = await attach(w.members[3], { namespace: 'zeta', external_user_id: 'z-2' }, headers);
  expect(reuse.status).toBe(422);
  expect(reuse.body.code).toBe('idempotency_key_reuse');
});
