// Signing in (before a session exists): the email and password form, and the
// one-time link an owner hands out. Both forms carry the pre-session CSRF token.
import type { Request, Response, Router } from 'express';
import { signInWithLink, signInWithPassword, MAILED_LINK_TTL, PASSWORD_MAX } from '../../domain/operators/operator-accounts';
import { html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { shell } from '../dashboard-layout';
import { preSessionCsrf, preSessionCsrfValid, setSessionCookie } from '../dashboard-session';
import { operatorLinkMailer } from '../operator-link-mail';

export function mountSignIn(router: Router, ctx: DashboardContext): void {
  const { api, config } = ctx;
  const mailer = operatorLinkMailer(config);
  const signInPage = (req: Request, res: Response, status: number, error?: string) => {
    const csrf = preSessionCsrf(req, res, config);
    const next = typeof req.query.next === 'string' && req.query.next.startsWith('/dashboard') ? req.query.next : '/dashboard';
    res.status(status).type('html').send(shell('Sign in', html`${error ? html`<p class="error" role="alert">${error}</p>` : ''}
<form method="post" action="/dashboard/sign-in?next=${encodeURIComponent(next)}"><input type="hidden" name="csrf" value="${csrf}">
<p><label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required autofocus></p>
<p><label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required></p>
<p><button type="submit">Sign in</button></p></form>
<p class="muted">No password yet? Ask an owner for a sign-in link (<code>billing operators invite</code>).</p>`));
  };

  router.get('/sign-in', (req, res) => signInPage(req, res, 200));
  router.post('/sign-in', async (req, res) => {
    if (!preSessionCsrfValid(req)) return signInPage(req, res, 403, 'The form expired: please try again.');
    const body = req.body as Record<string, unknown>;
    const email = typeof body.email === 'string' ? body.email.trim().slice(0, 254) : '';
    const password = typeof body.password === 'string' ? body.password.slice(0, PASSWORD_MAX) : '';
    if (!email || !password) return signInPage(req, res, 422, 'Enter your email and password.');
    const result = await signInWithPassword(api, email, password, req.ip ?? 'unknown', mailer ?? undefined);
    if (!result.ok && result.reason === 'rate_limited') {
      res.setHeader('Retry-After', String(result.retry_after ?? 60));
      return signInPage(req, res, 429, `Too many sign-in attempts: try again in ${result.retry_after ?? 60} seconds.`);
    }
    if (!result.ok && result.reason === 'link_required') {
      // The same words for a right and a wrong password: only the mailbox learns which.
      return signInPage(req, res, 429, mailer
        ? `This account has had many failed sign-ins, so a new address signs in with a one-time link. If the password is right, one is on its way to the account's email address (valid ${MAILED_LINK_TTL}); an owner can also make one (dashboard or billing operators invite).`
        : 'This account has had many failed sign-ins: from a new address, sign in with a one-time link (an owner makes one in the dashboard or with billing operators invite).');
    }
    if (!result.ok) return signInPage(req, res, 401, 'That email and password do not match an operator.');
    setSessionCookie(res, config, result.session.token);
    const next = typeof req.query.next === 'string' && /^\/dashboard(\/|$|\?)/.test(req.query.next) ? req.query.next : '/dashboard';
    // With a second factor, the session owes its code first (second-factor-page.ts).
    res.redirect(303, result.session.code_pending ? `/dashboard/second-factor?next=${encodeURIComponent(next)}` : next);
  });

  // A link only shows a button: spending it takes a POST, so a mail scanner's GET
  // does not use it up.
  router.get('/link', (req, res) => {
    const csrf = preSessionCsrf(req, res, config);
    const t = typeof req.query.t === 'string' ? req.query.t : '';
    res.type('html').send(shell('Sign in with your link', html`<form method="post" action="/dashboard/link">
<input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="t" value="${t}">
<p>This one-time link signs you in to the dashboard.</p><p><button type="submit" autofocus>Sign in</button></p></form>`));
  });
  router.post('/link', async (req, res) => {
    if (!preSessionCsrfValid(req)) return signInPage(req, res, 403, 'The form expired: open the link again.');
    const t = (req.body as Record<string, unknown>).t;
    const result = typeof t === 'string' && t.length <= 200 ? await signInWithLink(api, t, req.ip ?? 'unknown') : { ok: false as const, reason: 'invalid' as const };
    if (!result.ok) {
      return signInPage(req, res, result.reason === 'rate_limited' ? 429 : 401,
        result.reason === 'rate_limited' ? 'Too many attempts: try again in a minute.' : 'This sign-in link is unknown, used or expired: ask for a new one.');
    }
    setSessionCookie(res, config, result.session.token);
    res.redirect(303, result.session.code_pending ? '/dashboard/second-factor?next=%2Fdashboard%2Faccount' : '/dashboard/account');
  });
}
