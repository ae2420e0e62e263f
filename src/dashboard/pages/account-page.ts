// The signed-in operator's account: setting or changing the password, and signing out.
import type { Request, Response, Router } from 'express';
import { changePassword, signOut, PASSWORD_MIN, PASSWORD_MAX } from '../../domain/operators/operator-accounts';
import { html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { csrfField, flash, shell } from '../dashboard-layout';
import { clearSessionCookie } from '../dashboard-session';

export function mountAccount(router: Router, ctx: DashboardContext): void {
  const { api, config } = ctx;
  router.post('/sign-out', async (req, res) => {
    await signOut(api, req.signed!.token);
    clearSessionCookie(res, config);
    res.redirect(303, '/dashboard/sign-in');
  });

  const accountPage = (req: Request, res: Response, status: number, error?: string) => {
    const s = req.signed!;
    res.status(status).type('html').send(shell('Account', html`${flash(req)}${error ? html`<p class="error" role="alert">${error}</p>` : ''}<p>${s.info.email}, ${s.info.role} of ${s.info.community_name} (${s.info.community_id}).</p>
<h2>${s.info.has_password ? 'Change your password' : 'Set a password'}</h2>
<form method="post" action="/dashboard/account/password">${csrfField(s)}
${s.info.has_password ? html`<p><label for="current">Current password</label><input id="current" name="current" type="password" autocomplete="current-password" maxlength="${PASSWORD_MAX}" required></p>` : ''}
<p><label for="pw">New password (at least ${PASSWORD_MIN} characters, hard to guess; your other sessions end)</label><input id="pw" name="password" type="password" autocomplete="new-password" minlength="${PASSWORD_MIN}" maxlength="${PASSWORD_MAX}" required></p>
<p><button type="submit">Save password</button></p></form><p><a href="/dashboard">Go to the overview</a></p>`, { signed: s }));
  };
  router.get('/account', (req, res) => accountPage(req, res, 200));
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
