// The second factor's pages (issue 31 item 6): the code step of a sign-in
// (/second-factor, for a session that owes it), and the operator's own enrolment and
// management (/account/second-factor): the secret and its otpauth:// URI as text (no
// QR code library is kept), confirmation with a code, recovery codes shown once, new
// recovery codes and turning it off with a code. The rules are SQL's and
// src/domain/operators/second-factor.ts's; these pages only ask and answer.
import type { Request, Response, Router } from 'express';
import { newSessionToken, SESSION_TTL } from '../../domain/operators/operator-accounts';
import {
  CODE_MESSAGES, CodeProblem, confirmEnrolment, manageSecondFactor, pendingEnrolment, secondFactorBox, signInWithCode, startEnrolment,
  TOTP_DIGITS, TOTP_PERIOD,
} from '../../domain/operators/second-factor';
import { Html, html, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { csrfField, flash, shell } from '../dashboard-layout';
import { clearSessionCookie, setSessionCookie, type Signed } from '../dashboard-session';

const STATUS: Record<CodeProblem, number> = {
  signed_out: 401, no_factor: 409, rate_limited: 429, wrong: 422, replayed: 422, required: 409, unavailable: 503,
};

/** A code field with its label, and its error beside it (aria-describedby). */
function codeField(id: string, label: string, error?: string, opts: { digitsOnly?: boolean; autofocus?: boolean } = {}): Html {
  return html`<p><label for="${id}">${label}</label>
<input id="${id}" name="code" autocomplete="one-time-code" required maxlength="64" spellcheck="false"${raw(opts.digitsOnly ? ' inputmode="numeric"' : '')}${raw(opts.autofocus ? ' autofocus' : '')}${raw(error ? ` aria-invalid="true" aria-describedby="${id}-error"` : '')}>
${error ? html`<span class="error" id="${id}-error">${error}</span>` : ''}</p>`;
}

const safeNext = (v: unknown) => (typeof v === 'string' && /^\/dashboard(\/|$|\?)/.test(v) && !v.startsWith('/dashboard/second-factor') ? v : '/dashboard');

function recoveryCodesBlock(codes: string[]): Html {
  return html`<h2>Your recovery codes</h2>
<p>Keep these somewhere safe, apart from your phone. Each one signs you in once instead of a code; they are shown only now.</p>
<pre id="recovery-codes" data-testid="recovery-codes">${codes.join('\n')}</pre>
<p><button type="button" class="secondary" data-copy="recovery-codes">Copy the recovery codes</button></p>`;
}

export function mountSecondFactor(router: Router, ctx: DashboardContext): void {
  const { api, config } = ctx;
  const box = secondFactorBox(config.webhookEncryptionKey);

  // ---- the code step of a sign-in ----------------------------------------------------------

  const codePage = (req: Request, res: Response, status: number, error?: string) => {
    const s = req.signed!;
    const next = safeNext(req.query.next);
    res.status(status).type('html').send(shell('Second factor', html`<form method="post" action="/dashboard/second-factor?next=${encodeURIComponent(next)}">${csrfField(s)}
<p>Your password was right. Now type the ${TOTP_DIGITS}-digit code your authenticator app shows for ${s.info.email}, or one of your recovery codes.</p>
${codeField('code', 'Code', error, { autofocus: true })}
<p><button type="submit">Verify</button></p></form>
<p class="muted">Lost your phone and your recovery codes? An owner can remove your second factor on the Operators page.</p>`, { signed: s }));
  };
  router.get('/second-factor', (req, res) => {
    if (req.signed!.info.needs !== 'code') return void res.redirect(303, safeNext(req.query.next));
    codePage(req, res, 200);
  });
  router.post('/second-factor', async (req, res) => {
    const s = req.signed!;
    if (s.info.needs !== 'code') return void res.redirect(303, safeNext(req.query.next));
    const code = (req.body as Record<string, unknown>).code;
    const result = await signInWithCode(api, box, s.token, typeof code === 'string' ? code : '', req.ip ?? 'unknown', newSessionToken(), SESSION_TTL);
    if (!result.ok) {
      if (result.reason === 'signed_out') {
        clearSessionCookie(res, config);
        return void res.redirect(303, '/dashboard/sign-in');
      }
      if (result.reason === 'rate_limited') res.setHeader('Retry-After', String(result.retry_after ?? 300));
      return codePage(req, res, STATUS[result.reason], CODE_MESSAGES[result.reason]);
    }
    // The session continues under a new token: the one set before the code is spent.
    setSessionCookie(res, config, result.session.token);
    res.redirect(303, safeNext(req.query.next));
  });

  // ---- enrolment and management (the operator's own) -------------------------------------------

  const enrolPage = async (req: Request, res: Response, status: number, opts: { error?: string; errorFor?: string; body?: Html } = {}) => {
    const s: Signed = req.signed!;
    const err = (form: string) => (opts.errorFor === form ? opts.error : undefined);
    let body: Html;
    if (opts.body) {
      body = opts.body;
    } else if (s.info.second_factor) {
      body = html`<p>Your second factor is <strong>on</strong>: after your password (or a sign-in link), the dashboard asks for a code from your authenticator app.</p>
<form method="post" action="/dashboard/account/second-factor/recovery-codes">${csrfField(s)}<fieldset><legend>New recovery codes</legend>
<p>Replaces every recovery code you have with ten new ones.</p>
${codeField('rc-code', 'Code from your app (or a recovery code)', err('recovery-codes'))}
<p><button type="submit">Make new recovery codes</button></p></fieldset></form>
<form method="post" action="/dashboard/account/second-factor/off">${csrfField(s)}<fieldset><legend>Turn the second factor off</legend>
${codeField('off-code', 'Code from your app (or a recovery code)', err('off'))}
<p><button type="submit" class="danger">Turn off</button></p></fieldset></form>`;
    } else if (!box) {
      body = html`<p class="error" role="alert">${CODE_MESSAGES.unavailable}</p>`;
    } else {
      const pending = await pendingEnrolment(api, box, s.token);
      body = pending ? html`<ol class="steps">
<li><p>In your authenticator app, add an account with this setup key (time based, ${TOTP_DIGITS} digits, every ${TOTP_PERIOD} seconds):</p>
<p><code id="totp-secret" data-testid="totp-secret">${pending.secret.replace(/(.{4})/g, '$1 ').trim()}</code> <button type="button" class="secondary" data-copy="totp-secret">Copy the key</button></p>
<p>Or open this address on the device with the app:</p><p><a id="totp-uri" data-testid="totp-uri" href="${pending.uri}">${pending.uri}</a></p></li>
<li><form method="post" action="/dashboard/account/second-factor/confirm">${csrfField(s)}
${codeField('confirm-code', `The ${TOTP_DIGITS}-digit code the app shows now`, err('confirm'), { digitsOnly: true })}
<p><button type="submit">Turn on</button></p></form></li></ol>`
        : html`<p>A second factor asks for a code from an authenticator app on your phone (any app for time-based codes) after your password, so a password alone no longer signs in.</p>
<form method="post" action="/dashboard/account/second-factor/start">${csrfField(s)}<p><button type="submit">Set up a second factor</button></p></form>
${opts.error && !opts.errorFor ? html`<p class="error" role="alert">${opts.error}</p>` : ''}`;
    }
    const required = s.info.needs === 'enrolment'
      ? html`<p class="notice" role="status">${s.info.community_name} requires a second factor of its operators: set yours up to continue.</p>` : '';
    res.status(status).type('html').send(shell('Second factor', html`${flash(req)}${required}${body}
${s.info.needs ? '' : html`<p><a href="/dashboard/account">Back to your account</a></p>`}`, { signed: s }));
  };

  router.get('/account/second-factor', (req, res) => enrolPage(req, res, 200));
  router.post('/account/second-factor/start', async (req, res) => {
    const r = await startEnrolment(api, box, req.signed!.token);
    if (!r.ok && r.reason === 'signed_out') return void res.redirect(303, '/dashboard/sign-in');
    if (!r.ok && r.reason === 'unavailable') return enrolPage(req, res, 503, { error: CODE_MESSAGES.unavailable });
    res.redirect(303, '/dashboard/account/second-factor');
  });
  router.post('/account/second-factor/confirm', async (req, res) => {
    const s = req.signed!;
    const code = (req.body as Record<string, unknown>).code;
    const r = await confirmEnrolment(api, box, s.token, typeof code === 'string' ? code : '', req.ip ?? 'unknown');
    if (!r.ok) {
      if (r.reason === 'signed_out') return void res.redirect(303, '/dashboard/sign-in');
      if (r.reason === 'no_factor') return void res.redirect(303, '/dashboard/account/second-factor');
      return enrolPage(req, res, STATUS[r.reason], { error: CODE_MESSAGES[r.reason], errorFor: 'confirm' });
    }
    s.info = { ...s.info, second_factor: true, needs: null };
    return enrolPage(req, res, 200, { body: html`<p class="notice" role="status">Your second factor is on.${r.ended ? ` Your ${r.ended} other session${r.ended === 1 ? '' : 's'} ended.` : ''}</p>
${recoveryCodesBlock(r.recoveryCodes)}<p><a href="/dashboard">Continue to the dashboard</a></p>` });
  });
  router.post('/account/second-factor/recovery-codes', async (req, res) => {
    const code = (req.body as Record<string, unknown>).code;
    const r = await manageSecondFactor(api, box, req.signed!.token, typeof code === 'string' ? code : '', req.ip ?? 'unknown', 'recovery_codes');
    if (!r.ok) {
      if (r.reason === 'signed_out') return void res.redirect(303, '/dashboard/sign-in');
      return enrolPage(req, res, STATUS[r.reason], { error: CODE_MESSAGES[r.reason], errorFor: 'recovery-codes' });
    }
    return enrolPage(req, res, 200, { body: html`${recoveryCodesBlock(r.recoveryCodes ?? [])}<p class="muted">Your earlier recovery codes no longer work.</p>` });
  });
  router.post('/account/second-factor/off', async (req, res) => {
    const code = (req.body as Record<string, unknown>).code;
    const r = await manageSecondFactor(api, box, req.signed!.token, typeof code === 'string' ? code : '', req.ip ?? 'unknown', 'off');
    if (!r.ok) {
      if (r.reason === 'signed_out') return void res.redirect(303, '/dashboard/sign-in');
      return enrolPage(req, res, STATUS[r.reason], { error: CODE_MESSAGES[r.reason], errorFor: 'off' });
    }
    res.redirect(303, '/dashboard/account?done=second-factor-off');
  });
}
