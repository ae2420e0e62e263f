// The signed-in operator's account: setting or changing the password, the second
// factor (second-factor-page.ts), their own sessions (ending one, or all of them: sign
// out everywhere), and signing out.
import type { Request, Response, Router } from 'express';
import { changePassword, endOwnSessions, ownSessions, signOut, PASSWORD_MIN, PASSWORD_MAX } from '../../domain/operators/operator-accounts';
import { html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { actionForm, csrfField, flash, sessionRows, shell, table } from '../dashboard-layout';
import { clearSessionCookie } from '../dashboard-session';

export function mountAccount(router: Router, ctx: DashboardContext): void {
  const { api, config } = ctx;
  router.post('/sign-out', async (req, res) => {
    await signOut(api, req.signed!.token);
    clearSessionCookie(res, config);
    res.redirect(303, '/dashboard/sign-in');
  });

  const accountPage = async (req: Request, res: Response, status: number, error?: string) => {
    const s = req.signed!;
    const sessions = await ownSessions(api, s.token);
    res.status(status).type('html').send(shell('Account', html`${flash(req)}${error ? html`<p class="error" role="alert">${error}</p>` : ''}<p>${s.info.email}, ${s.info.role} of ${s.info.community_name} (${s.info.community_id}).</p>
<h2>${s.info.has_password ? 'Change your password' : 'Set a password'}</h2>
<form method="post" action="/dashboard/account/password">${csrfField(s)}
${s.info.has_password ? html`<p><label for="current">Current password</label><input id="current" name="current" type="password" autocomplete="current-password" maxlength="${PASSWORD_MAX}" required></p>` : ''}
<p><label for="pw">New password (at least ${PASSWORD_MIN} characters, hard to guess; your other sessions end)</label><input id="pw" name="password" type="password" autocomplete="new-password" minlength="${PASSWORD_MIN}" maxlength="${PASSWORD_MAX}" required></p>
<p><button type="submit">Save password</button></p></form>
<h2>Second factor</h2>
<p>${s.info.second_factor ? 'On: sign-in asks for a code from your authenticator app.' : 'Off: your password alone signs you in.'} <a href="/dashboard/account/second-factor">${s.info.second_factor ? 'Manage your second factor' : 'Set up a second factor'}</a></p>
<h2>Your sessions</h2>
${table(['Signed in', 'Last seen', 'Address', 'Browser', ''], sessionRows(sessions, (row) => row.current ? html`this session`
      : actionForm(s, `/dashboard/account/sessions/${encodeURIComponent(row.id)}/end`, `End the session from ${row.address ?? 'an unknown address'}`)), 'No sessions.')}
<p>Sign out everywhere: ${actionForm(s, '/dashboard/account/sign-out-everywhere', 'End all my sessions, this one too', { danger: true })}</p>
<p><a href="/dashboard">Go to the overview</a></p>`, { signed: s }));
  };
  router.get('/account', (req, res) => accountPage(req, res, 200));
  router.post('/account/sessions/:id/end', async (req, res) => {
    await endOwnSessions(api, req.signed!.token, String(req.params.id));
    res.redirect(303, '/dashboard/account?done=ended');
  });
  router.post('/account/sign-out-everywhere', async (req, res) => {
    await endOwnSessions(api, req.signed!.token, null);
    clearSessionCookie(res, config);
    res.redirect(303, '/dashboard/sign-in');
  });
  router.post('/account/password', async (req, res) => {
    const s = req.signed!;
    const body = req.body as Record<string, unknown>;
    const pw = typeof body.password === 'string' ? body.password : '';
    const result = await changePassword(api, s.token, {
      current: typeof body.current === 'string' ? body.current : null, next: pw, ip: req.ip ?? 'unknown',
      userInputs: [s.info.email, s.info.community_name],
    });
    if (!result.ok) {
      if (result.reason === 'signed_out') return void res.redirect(303, '/dashboard/sign-in');
      return accountPage(req, res, result.reason === 'weak' ? 422 : result.reason === 'rate_limited' ? 429 : 403, result.message);
    }
    res.redirect(303, '/dashboard/account?done=password');
  });
}
