// The hourly retention purge removes what has outlived its use, and nothing else.
import { createTenant, startApp, TestApp } from '../support/app';
import { asTenant } from '../support/tenant';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

test('purge_expired removes expired idempotency records, old link codes and portal sessions, idle buckets; keeps live ones', async () => {
  const t = await createTenant(app.owner);
  const q = (sql: string, v: unknown[] = []) => app.owner.query(sql, v);
  const member = (await q('insert into billing.members (community_id) values ($1) returning id', [t.communityId])).rows[0].id;
  await q(`insert into billing.idempotency_keys (community_id, endpoint, key, request_hash, response_status, expires_at) values
    ($1, 'POST /x', 'old', 'h', 0, now() - interval '1 minute'), ($1, 'POST /x', 'live', 'h', 0, now() + interval '1 hour')`, [t.communityId]);
  await q(`insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at) values
    ($1, $2, $3, 'discord', now() - interval '2 days'), ($1, $2, $4, 'discord', now() - interval '1 minute')`, [t.communityId, member, `old-${member}`, `recent-${member}`]);
  await q(`insert into billing.portal_sessions (community_id, member_id, url, expires_at) values
    ($1, $2, 'https://a', now() - interval '2 days'), ($1, $2, 'https://b', now() + interval '5 minutes')`, [t.communityId, member]);
  await q(`insert into billing_private.rate_buckets (bucket, tokens, updated_at) values
    ($1, 1, now() - interval '2 hours'), ($2, 1, now())`, [`key:idle-${member}`, `key:busy-${member}`]);

  const { rows } = await q('select billing_private.purge_expired() as purged');
  expect(rows[0].purged.idempotency_keys).toBeGreaterThanOrEqual(1);

  const keys = await q('select key from billing.idempotency_keys where community_id = $1', [t.communityId]);
  expect(keys.rows.map((r) => r.key)).toEqual(['live']);
  const codes = await q('select code from billing.link_codes where community_id = $1', [t.communityId]);
  expect(codes.rows.map((r) => r.code)).toEqual([`recent-${member}`]);
  const portals = await q('select url from billing.portal_sessions where community_id = $1', [t.communityId]);
  expect(portals.rows.map((r) => r.url)).toEqual(['https://b']);
  const buckets = await q('select bucket from billing_private.rate_buckets where bucket like $1', [`key:%-${member}`]);
  expect(buckets.rows.map((r) => r.bucket)).toEqual([`key:busy-${member}`]);
});

test('the API role cannot run the purge', async () => {
  await asTenant(app.owner, null, async (client) => {
    await expect(client.query('select billing_private.purge_expired()')).rejects.toThrow(/permission denied/);
  }, { role: 'billing_api' });
});
