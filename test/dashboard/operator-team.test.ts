// Issue 31 item 6 (team): a second factor (TOTP, codes computed here by otpauth from the
// secret, as an authenticator app would), recovery codes, a community's requirement,
// the sessions lists and signing out everywhere, removing operators, and tenancy.
import { Secret, TOTP } from 'otpauth';
import { csrfFor } from '../../src/dashboard/dashboard-session';
import {
  changePassword, endOwnSessions, inviteOperator, newSessionToken, ownSessions, SESSION_TTL, sessionInfo, signInWithLink, signInWithPassword,
} from '../../src/domain/operators/operator-accounts';
import { confirmEnrolment, manageSecondFactor, secondFactorBox, signInWithCode, startEnrolment } from '../../src/domain/operators/second-factor';
import type { OperatorRole } from '../../src/core/scopes';
import { dashboardOperation } from '../../src/operations';
import type { Caller, Executor } from '../../src/operations/executor';
import { createTenant, startApp, TestApp, Tenant } from '../support/app';
import { createExecutor } from '../support/dashboard';
import { runJson } from '../support/cli-process';
import { ENCRYPTION_KEY } from '../support/webhooks';

let app: TestApp;
let executor: Executor;
const box = secondFactorBox(ENCRYPTION_KEY);
const PASSWORD = 'violet kettle orbit 47 marsh';
jest.setTimeout(120_000);

beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY });
  executor = createExecutor(app);
});
afterAll(() => app.close());

const caller = (session: string): Caller => ({ key: null, session, ip: '127.0.0.1' });

/** The code an authenticator app shows for this secret, offset by whole steps from now. */
const code = (secret: string, steps = 0) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: Date.now() + steps * 30_000 });

let n = 0;
let addresses = 0;
/** An address of its own for each sign-in step, so the per-address bucket (10 a minute) is never what a test meets. */
const nextIp = () => `10.33.${Math.floor(++addresses / 250)}.${addresses % 250}`;
interface Op { email: string; token: string; ip: string; userId: string; tenant: Tenant }

/** A fresh operator of t signed in with a link from an address of its own, with a password. */
async function operator(t: Tenant, role: OperatorRole = 'admin'): Promise<Op> {
  const email = `team-${++n}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const ip = `10.31.${n}.7`;
  const invite = await inviteOperator(app.owner, t.communityId, email, role);
  const signed = await signInWithLink(app.api, invite.token, ip);
  if (!signed.ok) throw new Error('link refused');
  expect(await changePassword(app.api, signed.session.token, { next: PASSWORD, ip })).toMatchObject({ ok: true });
  return { email, token: signed.session.token, ip, userId: invite.user_id, tenant: t };
}

/** Turns the operator's second factor on (a code one step old, so two later steps stay usable); answers the secret and recovery codes. */
async function enrol(op: Op): Promise<{ secret: string; recovery: string[] }> {
  const started = await startEnrolment(app.api, box, op.token);
  if (!started.ok) throw new Error(`enrolment refused: ${started.reason}`);
  const done = await confirmEnrolment(app.api, box, op.token, code(started.enrolment.secret, -1), op.ip);
  if (!done.ok) throw new Error(`confirmation refused: ${done.reason}`);
  return { secret: started.enrolment.secret, recovery: done.recoveryCodes };
}

/** Password sign-in of an operator with a second factor: a session that owes its code. */
async function pending(op: Op, ip = nextIp()): Promise<string> {
  const r = await signInWithPassword(app.api, op.email, PASSWORD, ip);
  if (!r.ok) throw new Error(`password refused: ${r.reason}`);
  expect(r.session.code_pending).toBe(true);
  return r.session.token;
}

const canRead = async (token: string) => (await executor.run(dashboardOperation('list_plans'), caller(token), {})).status;

/** A page of the dashboard with a session cookie: its status and where it redirects. */
async function page(token: string, path: string, form?: Record<string, string>): Promise<{ status: number; location: string | null; html: string }> {
  const res = await fetch(`${app.url}${path}`, {
    method: form ? 'POST' : 'GET', redirect: 'manual',
    headers: { cookie: `billing_session=${token}`, ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    body: form ? new URLSearchParams({ csrf: csrfFor(token), ...form }).toString() : undefined,
  });
  return { status: res.status, location: res.headers.get('location'), html: await res.text() };
}

test('enrolment: a code from the new secret turns TOTP on; then the password alone is no credential until the code is given', async () => {
  const t = await createTenant(app.owner);
  const op = await operator(t);
  const started = await startEnrolment(app.api, box, op.token);
  if (!started.ok) throw new Error(started.reason);
  const { secret, uri } = started.enrolment;
  expect(secret).toMatch(/^[A-Z2-7]{32}$/);
  expect(uri).toMatch(new RegExp(`^otpauth://totp/.+\\?.*secret=${secret}`));
  expect(uri).toContain('period=30');
  // Encrypted at rest: the database holds a ciphertext that does not contain the secret.
  const { rows: [stored] } = await app.owner.query('select secret_ciphertext, confirmed_at from billing_private.operator_second_factors where user_id = $1', [op.userId]);
  expect(stored.secret_ciphertext).toMatch(/^v1:/);
  expect(stored.secret_ciphertext).not.toContain(secret);
  expect(stored.confirmed_at).toBeNull();
  // Not on before a right code.
  expect(await confirmEnrolment(app.api, box, op.token, '000000' === code(secret) ? '111111' : '000000', op.ip)).toEqual({ ok: false, reason: 'wrong' });
  expect((await sessionInfo(app.api, op.token))!.second_factor).toBe(false);
  expect((await signInWithPassword(app.api, op.email, PASSWORD, op.ip)).ok && true).toBe(true);
  const confirmed = await confirmEnrolment(app.api, box, op.token, code(secret, -1), op.ip);
  expect(confirmed).toMatchObject({ ok: true, ended: 1 }); // the session opened just above ends
  expect((await sessionInfo(app.api, op.token))!.second_factor).toBe(true);

  // Sign-in: the password opens a session that owes its code and can do nothing.
  const owing = await pending(op);
  expect((await sessionInfo(app.api, owing))!.needs).toBe('code');
  expect(await canRead(owing)).toBe(401);
  expect((await page(owing, '/dashboard/subscriptions')).location).toBe('/dashboard/second-factor');
  const ip = nextIp();
  expect(await signInWithCode(app.api, box, owing, '12345', ip, newSessionToken(), SESSION_TTL)).toEqual({ ok: false, reason: 'wrong' });
  const wrong = String((Number(code(secret)) + 500_000) % 1_000_000).padStart(6, '0');
  expect(await signInWithCode(app.api, box, owing, wrong, ip, newSessionToken(), SESSION_TTL)).toEqual({ ok: false, reason: 'wrong' });
  const signed = await signInWithCode(app.api, box, owing, code(secret), ip, newSessionToken(), SESSION_TTL);
  if (!signed.ok) throw new Error(signed.reason);
  // A new token: the one that owed the code is spent.
  expect(await sessionInfo(app.api, owing)).toBeNull();
  expect(await canRead(signed.session.token)).toBe(200);
  expect((await sessionInfo(app.api, signed.session.token))!.needs).toBeNull();
});

test('a used code is refused (replay), the next step\'s is accepted; ±1 step only', async () => {
  const op = await operator(await createTenant(app.owner));
  const { secret } = await enrol(op);
  const first = await signInWithCode(app.api, box, await pending(op), code(secret), nextIp(), newSessionToken(), SESSION_TTL);
  expect(first.ok).toBe(true);
  const again = await pending(op);
  expect(await signInWithCode(app.api, box, again, code(secret), nextIp(), newSessionToken(), SESSION_TTL)).toEqual({ ok: false, reason: 'replayed' });
  // The enrolment's code (a step before) is older still: refused too.
  expect(await signInWithCode(app.api, box, again, code(secret, -1), nextIp(), newSessionToken(), SESSION_TTL)).toEqual({ ok: false, reason: 'replayed' });
  // Two steps ahead is outside the window.
  expect(await signInWithCode(app.api, box, again, code(secret, 3), nextIp(), newSessionToken(), SESSION_TTL)).toEqual({ ok: false, reason: 'wrong' });
  expect((await signInWithCode(app.api, box, again, code(secret, 1), nextIp(), newSessionToken(), SESSION_TTL)).ok).toBe(true);
});

test('recovery codes: kept hashed, each signs in once; a link sign-in asks for the code too', async () => {
  const op = await operator(await createTenant(app.owner));
  const { recovery } = await enrol(op);
  expect(recovery).toHaveLength(10);
  expect(new Set(recovery).size).toBe(10);
  const { rows } = await app.owner.query('select code_sha256 from billing_private.operator_recovery_codes where user_id = $1', [op.userId]);
  expect(rows).toHaveLength(10);
  expect(rows.map((r) => r.code_sha256).join(' ')).not.toContain(recovery[0].replace('-', ''));

  const used = await signInWithCode(app.api, box, await pending(op), recovery[0].toUpperCase(), nextIp(), newSessionToken(), SESSION_TTL);
  expect(used).toMatchObject({ ok: true, session: { recovery_left: 9 } });
  expect(await signInWithCode(app.api, box, await pending(op), recovery[0], nextIp(), newSessionToken(), SESSION_TTL)).toEqual({ ok: false, reason: 'wrong' });

  // A sign-in link (an owner's or a mailed one) opens a session that owes the code as well.
  const invite = await inviteOperator(app.owner, op.tenant.communityId, op.email, 'admin');
  const linked = await signInWithLink(app.api, invite.token, nextIp());
  expect(linked).toMatchObject({ ok: true, session: { code_pending: true } });
  const linkToken = linked.ok ? linked.session.token : '';
  expect(await canRead(linkToken)).toBe(401);
  expect((await signInWithCode(app.api, box, linkToken, recovery[1], nextIp(), newSessionToken(), SESSION_TTL)).ok).toBe(true);

  // New recovery codes (with a code) replace the old ones.
  const renewed = await manageSecondFactor(app.api, box, used.ok ? used.session.token : '', recovery[2], nextIp(), 'recovery_codes');
  if (!renewed.ok) throw new Error(renewed.reason);
  expect(await signInWithCode(app.api, box, await pending(op), recovery[3], nextIp(), newSessionToken(), SESSION_TTL)).toEqual({ ok: false, reason: 'wrong' });
  expect((await signInWithCode(app.api, box, await pending(op), renewed.recoveryCodes![0], nextIp(), newSessionToken(), SESSION_TTL)).ok).toBe(true);
});

test('wrong codes are throttled per account and address like passwords; another known address is not locked out', async () => {
  const op = await operator(await createTenant(app.owner));
  const { secret } = await enrol(op);
  const owing = await pending(op);
  const attacker = '198.51.100.31';
  const results = [];
  for (let i = 0; i < 6; i++) results.push(await signInWithCode(app.api, box, owing, `00000${i}` === code(secret) ? '999999' : `00000${i}`, attacker, newSessionToken(), SESSION_TTL));
  expect(results.slice(0, 5).every((r) => !r.ok && r.reason === 'wrong')).toBe(true);
  expect(results[5]).toMatchObject({ ok: false, reason: 'rate_limited' });
  expect(await signInWithCode(app.api, box, owing, code(secret), attacker, newSessionToken(), SESSION_TTL)).toMatchObject({ ok: false, reason: 'rate_limited' });
  // The operator's own address (known) still signs in with the right code.
  expect((await signInWithCode(app.api, box, owing, code(secret), op.ip, newSessionToken(), SESSION_TTL)).ok).toBe(true);
});

test('an owner requires a second factor: operators without one can only enrol, then work again', async () => {
  const t = await createTenant(app.owner);
  const owner = await operator(t, 'owner');
  const admin = await operator(t, 'admin');
  const require2fa = (token: string, on: boolean) => executor.run(dashboardOperation('update_operator_policy'), caller(token), { body: { second_factor_required: on } });
  // The owner who requires it has one first.
  expect(await require2fa(owner.token, true)).toMatchObject({ status: 409 });
  await enrol(owner);
  expect(await canRead(admin.token)).toBe(200);
  expect(await require2fa(owner.token, true)).toMatchObject({ status: 200, body: { second_factor_required: true, operators_without_second_factor: 1 } });

  // The admin's live session is refused from its next request on, and a new sign-in too.
  expect(await canRead(admin.token)).toBe(401);
  expect((await sessionInfo(app.api, admin.token))!.needs).toBe('enrolment');
  expect((await page(admin.token, '/dashboard/subscriptions')).location).toBe('/dashboard/account/second-factor');
  expect((await page(admin.token, '/dashboard/account/password', { password: 'granite lantern ferry 19 plum' })).status).toBe(403);
  const again = await signInWithPassword(app.api, admin.email, PASSWORD, admin.ip);
  expect(again.ok && await canRead(again.session.token)).toBe(401);
  // The enrolment pages work (the dashboard's own forms), and enrolling lifts the restriction.
  expect((await page(admin.token, '/dashboard/account/second-factor')).status).toBe(200);
  expect((await page(admin.token, '/dashboard/account/second-factor/start', {})).location).toBe('/dashboard/account/second-factor');
  const enrolPage = (await page(admin.token, '/dashboard/account/second-factor')).html;
  const secret = /data-testid="totp-secret">([A-Z2-7 ]+)</.exec(enrolPage)![1].replace(/ /g, '');
  const done = await page(admin.token, '/dashboard/account/second-factor/confirm', { code: code(secret) });
  expect(done.status).toBe(200);
  expect(done.html).toContain('data-testid="recovery-codes"');
  expect(await canRead(admin.token)).toBe(200);
  // While required, nobody turns their own off.
  expect(await manageSecondFactor(app.api, box, admin.token, code(secret, 1), admin.ip, 'off')).toEqual({ ok: false, reason: 'required' });
  // Not required any more: operators without one work again.
  const viewer = await operator(t, 'viewer');
  expect(await canRead(viewer.token)).toBe(401);
  expect(await require2fa(owner.token, false)).toMatchObject({ status: 200 });
  expect(await canRead(viewer.token)).toBe(200);
});

test('sessions: each operator lists their own and signs out everywhere; the old cookie gets the sign-in page', async () => {
  const t = await createTenant(app.owner);
  const owner = await operator(t, 'owner');
  const op = await operator(t, 'viewer');
  const second = await signInWithPassword(app.api, op.email, PASSWORD, '203.0.113.77');
  if (!second.ok) throw new Error(second.reason);
  // A page request records the browser and address.
  await fetch(`${app.url}/dashboard/account`, { headers: { cookie: `billing_session=${op.token}`, 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0' } });
  const mine = await ownSessions(app.api, op.token);
  expect(mine).toHaveLength(2);
  expect(mine.find((s) => s.current)).toMatchObject({ browser: 'Firefox 128 on Linux', address: expect.stringMatching(/^(127\.0\.0\.1|::1)$/) });
  expect(mine.find((s) => !s.current)).toMatchObject({ address: '203.0.113.77' });
  // The owner sees both, the address cut to its network.
  const listed = await executor.run(dashboardOperation('list_operator_sessions'), caller(owner.token), { query: { user_id: op.userId } });
  expect(listed.status).toBe(200);
  const seen = (listed.body as { data: { id: string; address: string; email: string }[] }).data;
  expect(seen.map((s) => s.address).sort()).toEqual(['127.0.0.x', '203.0.113.x']);
  expect(seen.every((s) => s.email === op.email)).toBe(true);
  // A viewer cannot list everyone's.
  expect((await executor.run(dashboardOperation('list_operator_sessions'), caller(op.token), {})).status).toBe(403);
  // Ending one session from the account page.
  const other = mine.find((s) => !s.current)!;
  expect((await page(op.token, `/dashboard/account/sessions/${other.id}/end`, {})).location).toBe('/dashboard/account?done=ended');
  expect(await sessionInfo(app.api, second.session.token)).toBeNull();
  // Sign out everywhere: every session ends, this one too.
  const third = await signInWithPassword(app.api, op.email, PASSWORD, op.ip);
  if (!third.ok) throw new Error(third.reason);
  expect((await page(op.token, '/dashboard/account/sign-out-everywhere', {})).location).toBe('/dashboard/sign-in');
  for (const token of [op.token, third.session.token]) {
    expect(await sessionInfo(app.api, token)).toBeNull();
    const back = await page(token, '/dashboard/subscriptions');
    expect(back.status).toBe(303);
    expect(back.location).toMatch(/^\/dashboard\/sign-in\?next=/);
  }
  expect(await endOwnSessions(app.api, op.token, null)).toBe(0);
});

test('an owner ends one session or every session of another operator', async () => {
  const t = await createTenant(app.owner);
  const owner = await operator(t, 'owner');
  const op = await operator(t, 'admin');
  const second = await signInWithPassword(app.api, op.email, PASSWORD, '203.0.113.78');
  if (!second.ok) throw new Error(second.reason);
  const one = await executor.run(dashboardOperation('end_operator_session'), caller(owner.token), { params: { session_id: second.session.session_id } });
  expect(one).toMatchObject({ status: 200, body: { ended: 1 } });
  expect(await sessionInfo(app.api, second.session.token)).toBeNull();
  expect(await sessionInfo(app.api, op.token)).not.toBeNull();
  const all = await page(owner.token, `/dashboard/operators/${op.userId}/sign-out`, {});
  expect(all.location).toBe('/dashboard/operators?done=signed-out');
  expect(await sessionInfo(app.api, op.token)).toBeNull();
  expect((await page(op.token, '/dashboard')).location).toMatch(/^\/dashboard\/sign-in/);
  // An admin cannot end anyone's sessions.
  const admin = await operator(t, 'admin');
  expect((await executor.run(dashboardOperation('sign_out_operator'), caller(admin.token), { params: { id: owner.userId } })).status).toBe(403);
});

test('removing an operator ends their sessions at once; the last owner can be neither removed nor demoted', async () => {
  const t = await createTenant(app.owner);
  const owner = await operator(t, 'owner');
  const op = await operator(t, 'admin');
  expect(await canRead(op.token)).toBe(200);
  const removed = await page(owner.token, `/dashboard/operators/${op.userId}/remove`, {});
  expect(removed.location).toBe('/dashboard/operators?done=removed');
  expect(await canRead(op.token)).toBe(401);
  expect((await page(op.token, '/dashboard')).location).toMatch(/^\/dashboard\/sign-in/);
  expect((await signInWithPassword(app.api, op.email, PASSWORD, op.ip)).ok).toBe(false);
  const listed = await executor.run(dashboardOperation('list_operators'), caller(owner.token), {});
  expect((listed.body as { data: { id: string }[] }).data.map((u) => u.id)).not.toContain(op.userId);

  const self = await executor.run(dashboardOperation('remove_operator'), caller(owner.token), { params: { id: owner.userId } });
  expect(self).toMatchObject({ status: 409, body: { code: 'conflict' } });
  const demote = await executor.run(dashboardOperation('update_operator'), caller(owner.token), { params: { id: owner.userId }, body: { role: 'admin' } });
  expect(demote.status).toBe(409);
  expect(await canRead(owner.token)).toBe(200);
  // With a second owner, the first may leave.
  const other = await operator(t, 'owner');
  expect((await executor.run(dashboardOperation('remove_operator'), caller(other.token), { params: { id: owner.userId } })).status).toBe(200);
  expect(await canRead(owner.token)).toBe(401);
});

test('tenancy: an owner of one community can neither see nor end another\'s sessions or operators', async () => {
  const a = await operator(await createTenant(app.owner), 'owner');
  const b = await operator(await createTenant(app.owner), 'admin');
  const bInfo = (await sessionInfo(app.api, b.token))!;
  const listed = await executor.run(dashboardOperation('list_operator_sessions'), caller(a.token), {});
  expect((listed.body as { data: { id: string }[] }).data.map((s) => s.id)).not.toContain(bInfo.session_id);
  expect((await executor.run(dashboardOperation('list_operator_sessions'), caller(a.token), { query: { user_id: b.userId } })).body).toEqual({ data: [] });
  for (const [name, input] of [
    ['end_operator_session', { params: { session_id: bInfo.session_id } }],
    ['sign_out_operator', { params: { id: b.userId } }],
    ['remove_operator', { params: { id: b.userId } }],
    ['reset_operator_second_factor', { params: { id: b.userId } }],
  ] as const) {
    expect({ name, status: (await executor.run(dashboardOperation(name), caller(a.token), input)).status }).toEqual({ name, status: 404 });
  }
  expect(await canRead(b.token)).toBe(200);
});

test('an owner removes a lost second factor (dashboard or CLI): the operator\'s sessions end and the password signs in alone again', async () => {
  const t = await createTenant(app.owner);
  const owner = await operator(t, 'owner');
  const op = await operator(t, 'admin');
  await enrol(op);
  const reset = await executor.run(dashboardOperation('reset_operator_second_factor'), caller(owner.token), { params: { id: op.userId } });
  expect(reset).toMatchObject({ status: 200, body: { id: op.userId, second_factor: false } });
  expect(await sessionInfo(app.api, op.token)).toBeNull();
  const signed = await signInWithPassword(app.api, op.email, PASSWORD, op.ip);
  expect(signed).toMatchObject({ ok: true, session: { code_pending: false } });
  if (!signed.ok) return;

  await enrol({ ...op, token: signed.session.token });
  const out = await runJson(['operators', 'reset-second-factor', '--community', t.communityId, '--email', op.email]);
  expect(out).toMatchObject({ user_id: op.userId, had_second_factor: true });
  expect((await signInWithPassword(app.api, op.email, PASSWORD, op.ip))).toMatchObject({ ok: true, session: { code_pending: false } });
});
