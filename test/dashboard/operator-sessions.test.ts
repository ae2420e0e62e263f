// Operator users (issue 16): one-time links, password sign-in, and sessions that run
// the registry's operations under their community and role, fenced by the database
// (db/migrations/fixtures/*/15-operators.sql). A viewer's writes are refused by SQL.
import { inviteOperator, setPassword, signInWithLink, signInWithPassword, sessionInfo, signOut } from '../../src/domain/operators/operator-accounts';
import { dashboardOperation } from '../../src/operations';
import type { Caller } from '../../src/operations/executor';
import { createTenant, startApp, TestApp, Tenant } from '../support/app';
import { createExecutor } from '../support/dashboard';
import { OPERATOR_SCOPES, SCOPES } from '../../src/core/scopes';
import type { Response } from 'express';
import { setSessionCookie } from '../../src/dashboard/dashboard-session';

let app: TestApp;
let tenant: Tenant;
let other: Tenant;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  other = await createTenant(app.owner);
});
afterAll(() => app.close());

async function sessionFor(role: 'owner' | 'admin' | 'viewer', t: Tenant = tenant): Promise<string> {
  const invite = await inviteOperator(app.owner, t.communityId, `${role}-${Math.random().toString(36).slice(2)}@example.com`, role);
  const signed = await signInWithLink(app.api, invite.token, `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`);
  if (!signed.ok) throw new Error('link refused');
  return signed.session.token;
}

const caller = (session: string | null): Caller => ({ key: null, session, ip: '127.0.0.1' });

test('a one-time link opens one session and is spent', async () => {
  const invite = await inviteOperator(app.owner, tenant.communityId, 'Once@Example.com', 'admin');
  expect(invite.email).toBe('once@example.com');
  const first = await signInWithLink(app.api, invite.token, '127.0.0.2');
  expect(first.ok).toBe(true);
  const again = await signInWithLink(app.api, invite.token, '127.0.0.2');
  expect(again).toEqual({ ok: false, reason: 'invalid' });
  const info = await sessionInfo(app.api, first.ok ? first.session.token : '');
  expect(info).toMatchObject({ community_id: tenant.communityId, email: 'once@example.com', role: 'admin', has_password: false });
});

test('password sign-in works once a password is set, and signing out ends the session', async () => {
  const token = await sessionFor('admin');
  const info = (await sessionInfo(app.api, token))!;
  expect(await setPassword(app.api, token, 'correct horse battery staple')).toBe(true);
  expect(await signInWithPassword(app.api, info.email, 'wrong password here', '127.0.0.3')).toEqual({ ok: false, reason: 'invalid' });
  const ok = await signInWithPassword(app.api, info.email.toUpperCase(), 'correct horse battery staple', '127.0.0.3');
  expect(ok.ok).toBe(true);
  await signOut(app.api, token);
  expect(await sessionInfo(app.api, token)).toBeNull();
});

test('sign-in failures are rate limited per email and address', async () => {
  const results = [];
  for (let i = 0; i < 7; i++) results.push(await signInWithPassword(app.api, 'nobody@example.com', 'not the password', '10.1.0.1'));
  expect(results.slice(0, 5).every((r) => !r.ok && r.reason === 'invalid')).toBe(true);
  expect(results[6]).toMatchObject({ ok: false, reason: 'rate_limited' });
});

test('a session runs operations in its own community only', async () => {
  const executor = createExecutor(app);
  const token = await sessionFor('viewer');
  const mine = await executor.run(dashboardOperation('list_api_keys'), caller(token), {});
  expect(mine.status).toBe(200);
  const ids = (mine.body as { data: { id: string }[] }).data.map((k) => k.id);
  expect(ids).toContain(tenant.keyId);
  expect(ids).not.toContain(other.keyId);
  const revokeOther = await executor.run(dashboardOperation('revoke_api_key'), caller(await sessionFor('admin')), { params: { id: other.keyId } });
  expect(revokeOther.status).toBe(404);
});

test('a viewer cannot change anything: the database refuses its writes', async () => {
  const executor = createExecutor(app);
  const token = await sessionFor('viewer');
  const create = await executor.run(dashboardOperation('create_api_key'), caller(token), { body: { scopes: ['plans:read'] } });
  expect(create.status).toBe(403);
  expect(create.body).toMatchObject({ code: 'missing_scope' });
  const webhook = await executor.run(dashboardOperation('create_webhook_endpoint'), caller(token), { body: { url: 'https://example.com/hook' } });
  expect(webhook.status).toBe(403);
  // The same refusal inside SQL, whatever a page or handler would do: the gate the
  // database offers runs no operation for a scope the session's role lacks.
  const { rows } = await app.api.query(`select billing.api_call($1, '127.0.0.1', '{}', 'keys:write', 'api_keys_create', $2) as r`,
    [require('../../src/core/ids').hashKey(token), { scopes: ['plans:read'], prefix: 'bk_x', key_hash: 'x' }]);
  expect(rows[0].r).toMatchObject({ ok: true, error: { sqlstate: 'BL403', detail: 'keys:write' } });
  expect(rows[0].r.result).toBeUndefined();
});

test('an admin creates a key with scopes it holds, never keys:*, and revokes it', async () => {
  const executor = createExecutor(app);
  const token = await sessionFor('admin');
  const bad = await executor.run(dashboardOperation('create_api_key'), caller(token), { body: { scopes: ['keys:write'] } });
  expect(bad.status).toBe(422);
  const made = await executor.run(dashboardOperation('create_api_key'), caller(token), { body: { name: 'bot', scopes: ['plans:read'] } });
  expect(made.status).toBe(200);
  const key = made.body as { id: string; key: string; prefix: string; scopes: string[] };
  expect(key.key.startsWith(key.prefix)).toBe(true);
  expect(key.scopes).toEqual(['plans:read']);
  const use = await fetch(`${app.url}/v1/plans`, { headers: { authorization: `Bearer ${key.key}` } });
  expect(use.status).toBe(200);
  const revoked = await executor.run(dashboardOperation('revoke_api_key'), caller(token), { params: { id: key.id } });
  expect(revoked.status).toBe(200);
  expect((await fetch(`${app.url}/v1/plans`, { headers: { authorization: `Bearer ${key.key}` } })).status).toBe(401);
});

test('a session token is no bearer key for /v1, and a revoked session is unauthorized', async () => {
  const token = await sessionFor('admin');
  expect((await fetch(`${app.url}/v1/plans`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
  await signOut(app.api, token);
  const out = await createExecutor(app).run(dashboardOperation('list_plans'), caller(token), {});
  expect(out.status).toBe(401);
});

test('SQL knows the same API scopes as src/core/scopes.ts, and a viewer holds read scopes only', async () => {
  const { rows } = await app.owner.query(`select billing_private.api_key_scopes() as api,
    billing_private.operator_role_scopes('viewer') as viewer, billing_private.operator_role_scopes('admin') as admin`);
  expect([...rows[0].api].sort()).toEqual([...SCOPES].sort());
  expect(rows[0].viewer.every((s: string) => s.endsWith(':read'))).toBe(true);
  expect([...rows[0].admin].sort()).toEqual([...SCOPES, 'keys:read', 'keys:write'].sort());
  const owner = await app.owner.query(`select billing_private.operator_role_scopes('owner') as s`);
  expect([...owner.rows[0].s].sort()).toEqual([...SCOPES, ...OPERATOR_SCOPES].sort());
});

test('the session cookie is httpOnly and SameSite=Lax, and Secure in production only', () => {
  const headers: string[] = [];
  const res = { append: (_name: string, value: string) => { headers.push(value); } } as unknown as Response;
  setSessionCookie(res, { ...app.config, production: true }, 'bos_x');
  setSessionCookie(res, { ...app.config, production: false }, 'bos_y');
  expect(headers[0]).toBe('billing_session=bos_x; Path=/dashboard; HttpOnly; SameSite=Lax; Max-Age=43200; Secure');
  expect(headers[1]).toBe('billing_session=bos_y; Path=/dashboard; HttpOnly; SameSite=Lax; Max-Age=43200');
});

test("the API's role never reads a password hash and cannot open a session without the password", async () => {
  const token = await sessionFor('admin');
  const info = (await sessionInfo(app.api, token))!;
  await setPassword(app.api, token, 'another long password');
  const { rows } = await app.api.query('select billing_private.operator_password_candidates($1) as r', [info.email]);
  expect(rows[0].r).toEqual([{ user_id: info.user_id, params: expect.stringMatching(/^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]+$/) }]);
  await expect(app.api.query("select billing_private.operator_session_open($1, 'x', '1 hour')", [info.user_id])).rejects.toThrow(/permission denied/);
  const forged = await app.api.query("select billing_private.operator_password_sign_in($1, $2, 'x', '1 hour') as r", [info.user_id, Buffer.alloc(32).toString('base64')]);
  expect(forged.rows[0].r).toBeNull();
});

test("the purge keeps a key's last use, and removes spent links and old sessions", async () => {
  const executor = createExecutor(app);
  const token = await sessionFor('admin');
  const info = (await sessionInfo(app.api, token))!;
  const t = await createTenant(app.owner);
  await fetch(`${app.url}/v1/plans`, { headers: { authorization: `Bearer ${t.key}` } });
  await app.owner.query(`update billing_private.rate_buckets set updated_at = '2026-01-02T03:04:05Z' where bucket = $1`, [`key:${t.keyId}`]);
  await app.owner.query(`update billing_private.operator_sessions set expires_at = now() - interval '2 days' where id = $1`, [info.session_id]);
  const { rows } = await app.owner.query('select billing_private.purge_expired() as r');
  expect(rows[0].r.operator_sessions).toBeGreaterThanOrEqual(1);
  expect(rows[0].r.operator_links).toBeGreaterThanOrEqual(0);
  const left = await app.owner.query('select count(*)::int as n from billing_private.operator_sessions where id = $1', [info.session_id]);
  expect(left.rows[0].n).toBe(0);
  const admin = await sessionFor('admin', t);
  const keys = await executor.run(dashboardOperation('list_api_keys'), caller(admin), {});
  expect((keys.body as { data: { id: string; last_used_at: string | null }[] }).data.find((k) => k.id === t.keyId)?.last_used_at).toBe('2026-01-02T03:04:05.000Z');
});
