// Issue 27 item 6: operator accounts that hold. New passwords are checked for strength
// (zxcvbn) and control characters; changing one asks for the current one and ends the
// operator's other sessions; sign-in is throttled per address and per account without
// letting anyone who knows an operator's email lock them out.
import { changePassword, inviteOperator, LinkMailer, passwordProblem, sessionInfo, signInWithLink, signInWithPassword } from '../../src/domain/operators/operator-accounts';
import { createTenant, startApp, TestApp, Tenant } from '../support/app';
import { startSmtpServer } from '../support/smtp-server';

let app: TestApp;
let tenant: Tenant;
const GOOD = 'violet kettle orbit 47 marsh';
const OTHER = 'granite lantern ferry 19 plum';
// Each attempt derives a scrypt key (~0.1 s alone, seconds on a loaded machine).
jest.setTimeout(180_000);

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

let n = 0;
/** A fresh operator signed in with a link from an address of its own; its password set. */
async function operator(password: string | null = GOOD): Promise<{ email: string; token: string; ip: string }> {
  const email = `op-${++n}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const ip = `10.27.${n}.1`;
  const invite = await inviteOperator(app.owner, tenant.communityId, email, 'admin');
  const signed = await signInWithLink(app.api, invite.token, ip);
  if (!signed.ok) throw new Error('link refused');
  if (password) expect(await changePassword(app.api, signed.session.token, { next: password, ip })).toEqual({ ok: true, ended: 0 });
  return { email, token: signed.session.token, ip };
}

test('weak passwords and control characters are refused; a strong passphrase is accepted', async () => {
  for (const weak of [' '.repeat(12), '\u0000'.repeat(12), 'password1234', 'aaaaaaaaaaaaaaaa', 'qwertyuiop12', '123456789012', 'short']) {
    expect(passwordProblem(weak)).not.toBeNull();
  }
  expect(passwordProblem(`${GOOD}\u0000`)).toMatch(/control characters/);
  expect(passwordProblem(`${GOOD}\n`)).toMatch(/control characters/);
  expect(passwordProblem(`${GOOD}\ud800`)).toMatch(/control characters/);
  expect(passwordProblem('x'.repeat(201))).toMatch(/12 to 200/);
  // The operator's own email and community name are known words.
  expect(passwordProblem('jsmith@example.com!', ['jsmith@example.com', 'Example Community'])).not.toBeNull();
  expect(passwordProblem(GOOD)).toBeNull();

  const { token, ip } = await operator(null);
  for (const weak of [' '.repeat(12), '\u0000'.repeat(12), 'password1234']) {
    expect(await changePassword(app.api, token, { next: weak, ip })).toMatchObject({ ok: false, reason: 'weak' });
  }
  expect((await sessionInfo(app.api, token))!.has_password).toBe(false);
});

test('changing a password asks for the current one and ends the other sessions', async () => {
  const { email, token, ip } = await operator();
  const elsewhere = await signInWithPassword(app.api, email, GOOD, '10.27.200.1');
  expect(elsewhere.ok).toBe(true);
  const other = elsewhere.ok ? elsewhere.session.token : '';

  expect(await changePassword(app.api, token, { next: OTHER, ip })).toMatchObject({ ok: false, reason: 'wrong_password' });
  expect(await changePassword(app.api, token, { current: 'not my password at all', next: OTHER, ip })).toMatchObject({ ok: false, reason: 'wrong_password' });
  expect(await signInWithPassword(app.api, email, OTHER, ip)).toMatchObject({ ok: false, reason: 'invalid' });

  expect(await changePassword(app.api, token, { current: GOOD, next: OTHER, ip })).toEqual({ ok: true, ended: 1 });
  expect(await sessionInfo(app.api, other)).toBeNull();
  expect(await sessionInfo(app.api, token)).not.toBeNull();
  expect((await signInWithPassword(app.api, email, OTHER, ip)).ok).toBe(true);
  expect(await signInWithPassword(app.api, email, GOOD, ip)).toMatchObject({ ok: false, reason: 'invalid' });
});

test('guessing the current password through a stolen session is throttled', async () => {
  const { token } = await operator();
  const results = [];
  for (let i = 0; i < 7; i++) results.push((await changePassword(app.api, token, { current: `wrong guess number ${i}`, next: OTHER, ip: '10.27.201.1' })));
  expect(results.slice(0, 5).every((r) => !r.ok && r.reason === 'wrong_password')).toBe(true);
  expect(results[6]).toMatchObject({ ok: false, reason: 'rate_limited' });
  expect(await changePassword(app.api, token, { current: GOOD, next: OTHER, ip: '10.27.201.1' })).toMatchObject({ ok: false, reason: 'rate_limited' });
});

test('wrong passwords from one address never lock out the right password from another', async () => {
  const { email } = await operator();
  const attacker = [];
  for (let i = 0; i < 8; i++) attacker.push(await signInWithPassword(app.api, email, `guess number ${i} here`, '198.51.100.7'));
  expect(attacker.slice(0, 5).every((r) => !r.ok && r.reason === 'invalid')).toBe(true);
  expect(attacker.slice(5).every((r) => !r.ok && r.reason === 'rate_limited')).toBe(true);
  // The attacker's address is throttled for this account, even with the right password...
  expect(await signInWithPassword(app.api, email, GOOD, '198.51.100.7')).toMatchObject({ ok: false, reason: 'rate_limited' });
  // ... the operator, from an address never seen before, is not.
  expect((await signInWithPassword(app.api, email, GOOD, '203.0.113.9')).ok).toBe(true);
});

test('one address trying many accounts is throttled per address (10 a minute), and only that address', async () => {
  const victims = [await operator(), await operator()];
  const sprayer = '10.27.250.9';
  const emails = [...victims.map((v) => v.email), ...Array.from({ length: 10 }, (_, i) => `sprayed-${i}-${n}@example.com`)];
  // All at once, so the address's bucket (a token back every 6 s) cannot refill meanwhile.
  const results = await Promise.all(emails.map((email) => signInWithPassword(app.api, email, 'one guess per account here', sprayer)));
  // One failure per account: no account's or pair's budget is near its end, the address's is.
  expect(results.map((r) => !r.ok && r.reason).sort()).toEqual([...Array(10).fill('invalid'), 'rate_limited', 'rate_limited'].sort());
  // The right password from that address waits too (its bucket emptied again: the
  // derivations above take seconds on a loaded machine); from any other address it signs in.
  await app.owner.query(`update billing_private.rate_buckets set tokens = 0, updated_at = clock_timestamp() where bucket = $1`, [`signin-ip:${sprayer}`]);
  expect(await signInWithPassword(app.api, victims[0].email, GOOD, sprayer)).toMatchObject({ ok: false, reason: 'rate_limited' });
  expect((await signInWithPassword(app.api, victims[0].email, GOOD, '10.27.250.10')).ok).toBe(true);
});

test('a guessing attack from many addresses: known addresses still sign in, new ones are sent to a link', async () => {
  const { email, ip: known } = await operator();
  for (let i = 0; i < 3; i++) {
    expect(await signInWithPassword(app.api, email, `distributed guess ${i}`, `192.0.2.${i + 1}`)).toMatchObject({ ok: false, reason: 'invalid' });
  }
  // The rest of a 30-address attack (each attempt costs a scrypt derivation): the
  // account's failure budget, shared by every address, is spent.
  const { rowCount } = await app.owner.query(`update billing_private.rate_buckets set tokens = 0, updated_at = clock_timestamp() where bucket = $1`, [`signin-fail:${email}`]);
  expect(rowCount).toBe(1);
  expect(await signInWithPassword(app.api, email, `distributed guess 30`, '192.0.2.31')).toMatchObject({ ok: false, reason: 'link_required' });
  expect(await signInWithPassword(app.api, email, GOOD, '203.0.113.77')).toMatchObject({ ok: false, reason: 'link_required' });
  // The address the operator signed in from before still works with the right password.
  expect((await signInWithPassword(app.api, email, GOOD, known)).ok).toBe(true);
  // A one-time link works from anywhere and makes that address known.
  const invite = await inviteOperator(app.owner, tenant.communityId, email, 'admin');
  expect((await signInWithLink(app.api, invite.token, '203.0.113.77')).ok).toBe(true);
  expect((await signInWithPassword(app.api, email, GOOD, '203.0.113.77')).ok).toBe(true);
});

/** A distributed guessing attack has spent the account's failure budget (as in the test above). */
async function spendAccountBudget(email: string): Promise<void> {
  expect(await signInWithPassword(app.api, email, 'one more distributed guess', '192.0.2.99')).toMatchObject({ ok: false, reason: 'invalid' });
  const { rowCount } = await app.owner.query(`update billing_private.rate_buckets set tokens = 0, updated_at = clock_timestamp() where bucket = $1`, [`signin-fail:${email}`]);
  expect(rowCount).toBe(1);
}

const afterTheAnswer = () => new Promise((resolve) => setTimeout(resolve, 50));

test('with the account budget spent, a right password from a new address gets a one-time link mailed to the account; a wrong one gets the same answer and no mail', async () => {
  const { email } = await operator();
  await spendAccountBudget(email);
  const mails: Parameters<LinkMailer>[0][] = [];
  const mailer: LinkMailer = async (mail) => { mails.push(mail); };
  expect(await signInWithPassword(app.api, email, 'a wrong guess from afar', '203.0.113.150', mailer)).toEqual({ ok: false, reason: 'link_required', retry_after: expect.any(Number) });
  await afterTheAnswer();
  expect(mails).toEqual([]);
  expect(await signInWithPassword(app.api, email, GOOD, '203.0.113.151', mailer)).toEqual({ ok: false, reason: 'link_required', retry_after: expect.any(Number) });
  await afterTheAnswer();
  expect(mails).toEqual([{ to: email, communityName: expect.stringMatching(/^Test community/), token: expect.stringMatching(/^bol_/) }]);
  // One mailed link per account every 10 minutes, however often the right password comes.
  expect(await signInWithPassword(app.api, email, GOOD, '203.0.113.152', mailer)).toMatchObject({ ok: false, reason: 'link_required' });
  await afterTheAnswer();
  expect(mails).toHaveLength(1);
  // The link signs the operator in where they are, and that address is known from then on.
  expect((await signInWithLink(app.api, mails[0].token, '203.0.113.151')).ok).toBe(true);
  expect((await signInWithLink(app.api, mails[0].token, '203.0.113.151')).ok).toBe(false);
  expect((await signInWithPassword(app.api, email, GOOD, '203.0.113.151')).ok).toBe(true);
});

test('the dashboard mails the link over SMTP_URL, and says the same to a right and a wrong password', async () => {
  const smtp = await startSmtpServer();
  const mailing = await startApp({ smtpUrl: smtp.url, publicBaseUrl: 'https://billing.example.com' });
  try {
    const { email } = await operator();
    await spendAccountBudget(email);
    await mailing.owner.query(`delete from billing_private.rate_buckets where bucket like 'signin-%127.0.0.1'`);
    const signIn = async (password: string) => {
      const page = await fetch(`${mailing.url}/dashboard/sign-in`);
      const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1];
      const cookie = /billing_signin_csrf=[^;]+/.exec(page.headers.get('set-cookie') ?? '')![0];
      const res = await fetch(`${mailing.url}/dashboard/sign-in`, { method: 'POST', redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, email, password }).toString() });
      return { status: res.status, alert: /<p class="error" role="alert">([^<]*)<\/p>/.exec(await res.text())?.[1] };
    };
    const wrong = await signIn('not the password, sorry');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(smtp.received).toHaveLength(0);
    const right = await signIn(GOOD);
    expect(wrong.status).toBe(429);
    expect(right).toEqual(wrong);
    expect(right.alert).toMatch(/If the password is right, one is on its way to the account(&#39;|')s email address/);
    for (let i = 0; i < 100 && smtp.to(email).length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    await afterTheAnswer();
    const mails = smtp.to(email);
    expect(mails).toHaveLength(1);
    const link = /https:\/\/billing\.example\.com\/dashboard\/link\?t=(bol_[A-Za-z0-9_-]+)/.exec(mails[0].mail.text ?? '');
    expect(link).not.toBeNull();
    expect((await signInWithLink(mailing.api, decodeURIComponent(link![1]), '127.0.0.1')).ok).toBe(true);
  } finally {
    await mailing.close();
    await smtp.close();
  }
});

test('a right password forgives its address\'s typos: typos between successes never add up to a lock-out', async () => {
  const { email, ip } = await operator();
  for (let round = 0; round < 4; round++) {
    for (let i = 0; i < 3; i++) expect(await signInWithPassword(app.api, email, `typo ${round} ${i} oops`, ip)).toMatchObject({ reason: 'invalid' });
    expect((await signInWithPassword(app.api, email, GOOD, ip)).ok).toBe(true);
    // The address bucket (10 a minute) is another matter: start each round with it full.
    await app.owner.query('delete from billing_private.rate_buckets where bucket = $1', [`signin-ip:${ip}`]);
  }
});

test('the dashboard form: current password required, weak ones refused, sign-in throttled by req.ip', async () => {
  const { email } = await operator();
  const form = async (path: string, body: Record<string, string>, cookie = '') => {
    const page = await fetch(`${app.url}${path === '/dashboard/sign-in' ? path : '/dashboard/account'}`, { headers: { cookie }, redirect: 'manual' });
    const html = await page.text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
    const pre = /billing_signin_csrf=([^;]+)/.exec(page.headers.get('set-cookie') ?? '')?.[1];
    const jar = [cookie, pre ? `billing_signin_csrf=${pre}` : ''].filter(Boolean).join('; ');
    const res = await fetch(`${app.url}${path}`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar },
      body: new URLSearchParams({ csrf, ...body }).toString() });
    return { status: res.status, html: await res.text(), headers: res.headers };
  };
  await app.owner.query(`delete from billing_private.rate_buckets where bucket like 'signin-%127.0.0.1'`);
  const signed = await form('/dashboard/sign-in', { email, password: GOOD });
  expect(signed.status).toBe(303);
  const cookie = `billing_session=${/billing_session=([^;]+)/.exec(signed.headers.get('set-cookie') ?? '')![1]}`;
  const account = await (await fetch(`${app.url}/dashboard/account`, { headers: { cookie } })).text();
  expect(account).toContain('name="current"');
  expect((await form('/dashboard/account/password', { password: OTHER }, cookie)).status).toBe(403);
  expect((await form('/dashboard/account/password', { current: GOOD, password: 'password1234' }, cookie)).status).toBe(422);
  expect((await form('/dashboard/account/password', { current: GOOD, password: OTHER }, cookie)).status).toBe(303);
  const { rows } = await app.owner.query(`select 1 from billing_private.operator_known_addresses k join billing_private.operator_users u on u.id = k.user_id
    where u.email = $1 and k.ip in ('127.0.0.1', '::ffff:127.0.0.1')`, [email]);
  expect(rows).toHaveLength(1);
});
