// The operator dashboard (/dashboard): server-rendered pages over the operations
// registry. A signed-in request runs operations with its session as the credential
// (Caller.session), so the database applies the community, the role's scopes and the
// tenant policies exactly as for an API key; the pages hold no rule. Forms post back
// with a CSRF token; every answer is escaped HTML; a refused or invalid action shows
// the problem's detail with its status.
import express, { Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { SCOPES } from '../core/scopes';
import { decimalOf, minorDigits, minorUnitsOf } from '../core/money';
import { INVOICE_STATUSES, SUBSCRIPTION_STATUSES } from '../core/statuses';
import { EVENT_TYPES } from '../domain/events/event-types';
import { changePassword, signInWithLink, signInWithPassword, signOut, PASSWORD_MIN, PASSWORD_MAX } from '../domain/operators/operator-accounts';
import { dashboardOperation } from '../operations';
import type { Executor, Outcome, RawInput } from '../operations/executor';
import { BASE_CSS, day, esc, Html, html, lineChart, money, raw } from '../web/html';
import { orderedCatalogFile } from '../domain/catalog/catalog-export';
import {
  clearSessionCookie, preSessionCsrf, preSessionCsrfValid, requireSession, setSessionCookie, Signed,
} from './dashboard-session';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Page = { data: Json[]; next_cursor: string | null };

const NAV: [string, string][] = [
  ['/dashboard', 'Overview'], ['/dashboard/subscriptions', 'Subscriptions'], ['/dashboard/purchases', 'Purchases'],
  ['/dashboard/invoices', 'Invoices'], ['/dashboard/members', 'Members'], ['/dashboard/catalog', 'Catalog'],
  ['/dashboard/keys', 'API keys'], ['/dashboard/webhooks', 'Webhooks'], ['/dashboard/events', 'Events'],
  ['/dashboard/operators', 'Operators'],
];

const NOTICES: Record<string, string> = {
  cancelled: 'The subscription will end at the close of its period.',
  reactivated: 'The subscription renews again.',
  refunded: 'The refund is recorded.',
  granted: 'Access granted.',
  revoked: 'The key is revoked: requests with it now answer 401.',
  redelivered: 'The delivery is queued again.',
  updated: 'Saved.',
  deleted: 'The endpoint is deleted.',
  password: 'Your password is set: you can now sign in with it. Your other sessions have ended.',
  operator: 'Saved.',
};

function shell(title: string, body: Html, opts: { signed?: Signed; active?: string } = {}): string {
  const s = opts.signed;
  const nav = s ? html`<nav class="main" aria-label="Dashboard"><ul>${NAV.filter(([href]) => href !== '/dashboard/operators' || s.can('operators:read')).map(([href, label]) =>
    html`<li><a href="${href}"${raw(href === opts.active ? ' aria-current="page"' : '')}>${label}</a></li>`)}</ul></nav>
<div class="who">${s.info.email} · ${s.info.role} · ${s.info.community_name}
<a href="/dashboard/account">Account</a>
<form class="inline" method="post" action="/dashboard/sign-out"><input type="hidden" name="csrf" value="${s.csrf}"><button class="secondary" type="submit">Sign out</button></form></div>` : html``;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · Billing dashboard</title><link rel="stylesheet" href="/dashboard/assets/dashboard.css"></head>
<body><a class="skip" href="#main">Skip to content</a><header class="top"><a href="/dashboard"><strong>Billing</strong></a>${nav}</header>
<main id="main"><h1>${esc(title)}</h1>${body}</main><script src="/dashboard/assets/dashboard.js"></script></body></html>`;
}

const csrfField = (s: Signed) => html`<input type="hidden" name="csrf" value="${s.csrf}">`;

/** A one-button POST form (an action on a row). */
function actionForm(s: Signed, action: string, label: string, opts: { danger?: boolean; fields?: Html } = {}): Html {
  return html`<form class="inline" method="post" action="${action}">${csrfField(s)}${opts.fields ?? ''}<button type="submit"${raw(opts.danger ? ' class="danger"' : ' class="secondary"')}>${label}</button></form>`;
}

function table(headers: string[], rows: Html[][], empty: string): Html {
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<table><thead><tr>${headers.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead>
<tbody>${rows.map((r) => html`<tr>${r.map((c) => html`<td>${c}</td>`)}</tr>`)}</tbody></table>`;
}

function nextLink(req: Request, cursor: string | null): Html {
  if (!cursor) return html``;
  const params = new URLSearchParams(req.query as Record<string, string>);
  params.set('cursor', cursor);
  return html`<p><a href="${req.path === '/' ? '/dashboard' : `/dashboard${req.path}`}?${params.toString()}">Next page →</a></p>`;
}

function flash(req: Request): Html {
  const done = typeof req.query.done === 'string' ? NOTICES[req.query.done] : undefined;
  return done ? html`<p class="notice" role="status">${done}</p>` : html``;
}

/** The filters of a list page as the operation's query: empty fields left out. */
function queryOf(req: Request, names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of [...names, 'cursor']) {
    const v = req.query[n];
    if (typeof v === 'string' && v.trim() !== '') out[n] = v.trim();
  }
  return out;
}

const statusSelect = (name: string, values: readonly string[], current: unknown) => html`<div><label for="f-${name}">${name.replace(/_/g, ' ')}</label>
<select id="f-${name}" name="${name}"><option value="">any</option>${values.map((v) => html`<option${raw(v === current ? ' selected' : '')}>${v}</option>`)}</select></div>`;
const textFilter = (name: string, label: string, current: unknown) => html`<div><label for="f-${name}">${label}</label>
<input id="f-${name}" name="${name}" value="${typeof current === 'string' ? current : ''}"></div>`;

/** A repeated form field (checkboxes, multi-selects) as an array; absent is empty. */
const listField = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined ? [] : [v]);

const eventTypesSelect = (id: string, selected: string[]) => html`<p><label for="${id}">Event types (none selected: every type)</label>
<select id="${id}" name="event_types" multiple size="6">${EVENT_TYPES.map((t) => html`<option${raw(selected.includes(t) ? ' selected' : '')}>${t}</option>`)}</select></p>`;

const memberLink = (id: string) => html`<a href="/dashboard/members/${encodeURIComponent(id)}">${id}</a>`;

/** An invoice's Refund: the amount (prefilled with what is left to refund) and the button. */
function refundForm(s: Signed, i: Json, back: string): Html {
  const id = `refund-${i.id}`;
  return html`<form class="inline" method="post" action="/dashboard/invoices/${encodeURIComponent(i.id)}/refund">${csrfField(s)}<input type="hidden" name="back" value="${back}">
<label for="${id}">Amount (${String(i.currency).toUpperCase()})</label> <input id="${id}" name="amount" inputmode="decimal" size="8" required value="${decimalOf(i.amount_paid_cents - i.amount_refunded_cents, i.currency)}">
<button type="submit" class="danger">Refund</button></form>`;
}

export interface DashboardDeps { executor: Executor; api: pg.Pool; config: Config }

export function mountDashboard(app: express.Express, deps: DashboardDeps): void {
  const { executor, api, config } = deps;
  const router = express.Router();
  router.use((_req, res, next) => {
    res.setHeader('Content-Security-Policy',
      "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'same-origin');
    next();
  });
  router.use(express.urlencoded({ extended: false, limit: '50kb' }));

  router.get('/assets/dashboard.css', (_req, res) => { res.setHeader('Cache-Control', 'public, max-age=300'); res.type('css').send(BASE_CSS); });
  router.get('/assets/dashboard.js', (_req, res) => { res.setHeader('Cache-Control', 'public, max-age=300'); res.type('js').send(CLIENT_JS); });

  // ---- sign-in ---------------------------------------------------------------------

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
    const result = await signInWithPassword(api, email, password, req.ip ?? 'unknown');
    if (!result.ok && result.reason === 'rate_limited') {
      res.setHeader('Retry-After', String(result.retry_after ?? 60));
      return signInPage(req, res, 429, `Too many sign-in attempts: try again in ${result.retry_after ?? 60} seconds.`);
    }
    if (!result.ok && result.reason === 'link_required') {
      return signInPage(req, res, 429, 'This account has had many failed sign-ins: from a new address, sign in with a one-time link (an owner makes one in the dashboard or with billing operators invite).');
    }
    if (!result.ok) return signInPage(req, res, 401, 'That email and password do not match an operator.');
    setSessionCookie(res, config, result.session.token);
    const next = typeof req.query.next === 'string' && /^\/dashboard(\/|$|\?)/.test(req.query.next) ? req.query.next : '/dashboard';
    res.redirect(303, next);
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
    res.redirect(303, '/dashboard/account');
  });

  router.use(requireSession(api));

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

  // ---- running operations ----------------------------------------------------------

  async function run(req: Request, name: string, input: RawInput = {}): Promise<Outcome> {
    return executor.run(dashboardOperation(name), req.signed!.caller, input);
  }

  function problemPage(req: Request, res: Response, out: Outcome, back: string) {
    if (out.status === 401) return void res.redirect(303, '/dashboard/sign-in');
    const p = out.body as { title?: string; detail?: string; code?: string };
    const why = out.status === 403 && p.code === 'missing_scope' ? `Your role (${req.signed!.info.role}) cannot do this.` : (p.detail ?? p.title ?? 'The request failed.');
    res.status(out.status).type('html').send(shell('Not done', html`<p class="error" role="alert">${why} <span class="muted">(${p.code ?? 'error'}, ${out.status})</span></p>
<p><a href="${back}">Back</a></p>`, { signed: req.signed }));
  }

  /** Runs a read; on a problem answers its page and returns null. */
  async function read<T = Json>(req: Request, res: Response, name: string, input: RawInput = {}): Promise<T | null> {
    const out = await run(req, name, input);
    if (out.problem) { problemPage(req, res, out, '/dashboard'); return null; }
    return out.body as T;
  }

  /** Runs an action from a form and redirects to back?done=notice, or shows the problem. */
  async function act(req: Request, res: Response, name: string, input: RawInput, back: string, notice: string) {
    const out = await run(req, name, input);
    if (out.problem) return problemPage(req, res, out, back);
    res.redirect(303, `${back}${back.includes('?') ? '&' : '?'}done=${notice}`);
  }

  const send = (req: Request, res: Response, title: string, active: string, body: Html) =>
    res.type('html').send(shell(title, html`${flash(req)}${body}`, { signed: req.signed, active }));

  // ---- overview --------------------------------------------------------------------

  router.get('/', async (req, res) => {
    const days = req.query.days === '90' ? 90 : 30;
    // The summary and the series from one read of the subscriptions (analytics_overview).
    const overview = await read(req, res, 'get_analytics_overview', { query: { days: String(days) } });
    if (!overview) return;
    const summary = overview.summary as Json;
    const series = overview.series as Json;
    const cur = summary.currency as string | null;
    const points = (series.days as Json[]);
    send(req, res, 'Overview', '/dashboard', html`<div class="cards">
<div class="card"><div class="l">MRR</div><div class="n" data-testid="mrr">${money(summary.mrr_cents, cur)}</div></div>
<div class="card"><div class="l">Active subscribers</div><div class="n" data-testid="active">${summary.active_subscribers}</div></div>
<div class="card"><div class="l">Signups (30 days)</div><div class="n" data-testid="signups">${summary.recent_signups}</div></div>
<div class="card"><div class="l">Cancels (30 days)</div><div class="n">${summary.recent_cancels}</div></div>
<div class="card"><div class="l">Past due</div><div class="n">${series.past_due}</div></div></div>
<p><a href="/dashboard?days=30"${raw(days === 30 ? ' aria-current="true"' : '')}>Last 30 days</a> · <a href="/dashboard?days=90"${raw(days === 90 ? ' aria-current="true"' : '')}>Last 90 days</a></p>
<div class="charts">${lineChart(`MRR${series.currency ?? cur ? ` (${String(series.currency ?? cur).toUpperCase()})` : ''}, last ${days} days`, points.map((p) => ({ label: p.day, value: p.mrr_cents })),
      (v) => money(v, series.currency ?? cur), (v) => String(Math.round(v / 10 ** minorDigits(series.currency ?? cur))))}
${lineChart(`Signups per day, last ${days} days`, points.map((p) => ({ label: p.day, value: p.signups })), String)}
${lineChart(`Cancels per day, last ${days} days`, points.map((p) => ({ label: p.day, value: p.cancels })), String)}</div>
${mrrMovements(series, days)}`);
  });

  /** The MRR movements as recorded when they happened: per month (12), then per day with any (the series' days). */
  function mrrMovements(series: Json, days: number): Html {
    const c = series.currency as string | null;
    const kinds = ['new', 'expansion', 'contraction', 'churn', 'reactivation'] as const;
    const cells = (r: Json) => kinds.map((k) => html`${r[`${k}_cents`] ? money(r[`${k}_cents`], c) : '—'}`);
    const months = ((series.months ?? []) as Json[]).slice().reverse();
    const moved = ((series.days ?? []) as Json[]).filter((d) => kinds.some((k) => d[`${k}_cents`])).reverse();
    const heads = ['New', 'Expansion', 'Contraction', 'Churn', 'Reactivation'];
    return html`<h2 id="mrr-movements">MRR movements by month${c ? ` (${c.toUpperCase()})` : ''}</h2>
${table(['Month', 'Opening MRR', ...heads, 'Net', 'Closing MRR'], months.map((m) => [html`${String(m.month).slice(0, 7)}`, html`${money(m.opening_mrr_cents, c)}`,
      ...cells(m), html`${money(m.net_cents, c)}`, html`${money(m.closing_mrr_cents, c)}`]), 'No MRR yet.')}
<h2 id="mrr-movements-daily">MRR movements by day, last ${days} days</h2>
${table(['Day', ...heads, 'MRR at day end'], moved.map((d) => [html`${d.day}`, ...cells(d), html`${money(d.mrr_cents, c)}`]), 'No MRR movements in these days.')}`;
  }

  // ---- lists -----------------------------------------------------------------------

  const subscriptionRow = (s: Json) => [html`<code>${s.id}</code>`, memberLink(s.member_id), html`${s.tier_name ?? s.tier_id} · ${s.plan_name ?? s.plan_id}`,
    html`${money(s.amount_cents, s.currency)}${s.interval ? ` / ${s.interval}` : ''}`, html`${s.status}`, html`${day(s.current_period_end)}`];

  router.get('/subscriptions', async (req, res) => {
    const page = await read<Page>(req, res, 'list_subscriptions', { query: queryOf(req, ['status', 'plan_id', 'tier_id', 'member_id']) });
    if (!page) return;
    send(req, res, 'Subscriptions', '/dashboard/subscriptions', html`<form class="filters" method="get" action="/dashboard/subscriptions">
${statusSelect('status', SUBSCRIPTION_STATUSES, req.query.status)}${textFilter('plan_id', 'Plan id', req.query.plan_id)}${textFilter('tier_id', 'Tier id', req.query.tier_id)}${textFilter('member_id', 'Member id', req.query.member_id)}
<div><button type="submit">Filter</button></div></form>
${table(['Id', 'Member', 'Plan', 'Price', 'Status', 'Period ends'], page.data.map(subscriptionRow), 'No subscriptions match.')}${nextLink(req, page.next_cursor)}`);
  });

  router.get('/purchases', async (req, res) => {
    const page = await read<Page>(req, res, 'list_purchases', { query: queryOf(req, []) });
    if (!page) return;
    send(req, res, 'Purchases', '/dashboard/purchases', html`${table(['Id', 'Member', 'Plan', 'Amount', 'Status', 'Paid', 'Access until'], page.data.map((p) => [
      html`<code>${p.id}</code>`, memberLink(p.member_id), html`${p.tier_name ?? p.tier_id} · ${p.plan_name ?? p.plan_id}`, html`${money(p.amount_cents, p.currency)}`,
      html`${p.status}`, html`${day(p.paid_at)}`, html`${day(p.access_expires_at)}`]), 'No purchases yet.')}${nextLink(req, page.next_cursor)}`);
  });

  const invoiceRow = (s: Signed, back: string) => (i: Json) => [html`<code>${i.id}</code>`, memberLink(i.member_id), html`${i.billing_reason}`,
    html`${money(i.total_cents, i.currency)}`, html`${i.status}${i.amount_refunded_cents ? html` (refunded ${money(i.amount_refunded_cents, i.currency)})` : ''}${i.dispute ? html`, disputed: ${String(i.dispute.status).replace('_', ' ')}` : ''}`, html`${day(i.created_at)}`,
    // A disputed payment is never refunded (the operation refuses it: 409).
    s.can('invoices:write') && i.status === 'paid' && !i.dispute && i.amount_refunded_cents < i.amount_paid_cents ? refundForm(s, i, back) : html``];

  router.get('/invoices', async (req, res) => {
    const page = await read<Page>(req, res, 'list_invoices', { query: queryOf(req, ['status', 'member_id', 'subscription_id']) });
    if (!page) return;
    send(req, res, 'Invoices', '/dashboard/invoices', html`<form class="filters" method="get" action="/dashboard/invoices">
${statusSelect('status', INVOICE_STATUSES, req.query.status)}${textFilter('member_id', 'Member id', req.query.member_id)}<div><button type="submit">Filter</button></div></form>
${table(['Id', 'Member', 'Reason', 'Total', 'Status', 'Created', ''], page.data.map(invoiceRow(req.signed!, '/dashboard/invoices')), 'No invoices match.')}${nextLink(req, page.next_cursor)}`);
  });

  router.get('/members', async (req, res) => {
    const q = typeof req.query.q === 'string' ? req.query.q.trim() : '';
    if (q) {
      if (/^mem_[0-9a-f]{26}$/.test(q)) return void res.redirect(303, `/dashboard/members/${q}`);
      const i = q.indexOf(':');
      const [a, b] = i > 0 ? [q.slice(0, i), q.slice(i + 1)] : ['', ''];
      const query = a === 'discord' || a === 'telegram' ? { platform: a, platform_uid: b } : { namespace: a, external_user_id: b };
      const out = a && b ? await run(req, 'lookup_member', { query }) : null;
      if (out && !out.problem) return void res.redirect(303, `/dashboard/members/${(out.body as Json).id}`);
    }
    const page = await read<Page>(req, res, 'list_members', { query: queryOf(req, []) });
    if (!page) return;
    send(req, res, 'Members', '/dashboard/members', html`<form class="filters" method="get" action="/dashboard/members" role="search">
<div><label for="q">Find a member: id, platform:uid (discord:123) or namespace:external id</label><input id="q" name="q" size="40" value="${q}"></div>
<div><button type="submit">Find</button></div></form>${q ? html`<p class="error" role="alert">No member matches “${q}”.</p>` : ''}
${table(['Id', 'Identities', 'External subjects', 'Since'], page.data.map((m) => [memberLink(m.id),
      html`${(m.identities as Json[]).map((x) => `${x.platform}:${x.platform_uid}`).join(', ') || '—'}`,
      html`${(m.external_subjects as Json[]).map((x) => `${x.namespace}:${x.external_user_id}`).join(', ') || '—'}`, html`${day(m.created_at)}`]), 'No members yet.')}
${nextLink(req, page.next_cursor)}`);
  });

  router.get('/members/:id', async (req, res) => {
    const s = req.signed!;
    const id = String(req.params.id);
    const member = await read(req, res, 'get_member', { params: { id } });
    if (!member) return;
    const [ents, subs, invoices, grants, plans, history] = await Promise.all([
      run(req, 'get_member_entitlements', { params: { id } }), run(req, 'list_subscriptions', { query: { member_id: id, limit: '100' } }),
      run(req, 'list_invoices', { query: { member_id: id, limit: '50' } }), run(req, 'list_grants', { params: { id } }), run(req, 'list_plans'),
      run(req, 'list_member_entitlement_history', { params: { id }, query: { limit: '50' } })]);
    const data = (o: Outcome) => (o.problem ? [] : ((o.body as Page).data ?? []));
    const back = `/dashboard/members/${encodeURIComponent(id)}`;
    const backField = html`<input type="hidden" name="back" value="${back}">`;
    const subActions = (x: Json) => !s.can('subscriptions:write') ? html`` : x.status === 'cancelling'
      ? actionForm(s, `/dashboard/subscriptions/${encodeURIComponent(x.id)}/reactivate`, 'Reactivate', { fields: backField })
      : ['active', 'trialing', 'past_due'].includes(x.status) ? actionForm(s, `/dashboard/subscriptions/${encodeURIComponent(x.id)}/cancel`, 'Cancel at period end', { danger: true, fields: backField }) : html``;
    send(req, res, `Member ${id}`, '/dashboard/members', html`<dl class="facts">
<dt>Created</dt><dd>${member.created_at}</dd>
<dt>Identities</dt><dd>${(member.identities as Json[]).map((x) => `${x.platform}:${x.platform_uid}${x.username ? ` (${x.username})` : ''}`).join(', ') || 'none'}</dd>
<dt>External subjects</dt><dd>${(member.external_subjects as Json[]).map((x) => `${x.namespace}:${x.external_user_id}`).join(', ') || 'none'}</dd></dl>
<h2>Entitlements</h2>${table(['Key', 'Status', 'Revision', 'Sources', 'Granted'], data(ents).map((e) => [html`${e.key}`, html`${e.status}`, html`${e.revision}`,
      html`${(e.sources as Json[]).map((src) => `${src.type} ${src.id} (${src.status}${src.valid_until ? `, until ${day(src.valid_until)}` : ''})`).join('; ')}`, html`${day(e.granted_at)}`]), 'No active entitlements.')}
<h2>Subscriptions</h2>${table(['Id', 'Member', 'Plan', 'Price', 'Status', 'Period ends', ''], data(subs).map((x) => [...subscriptionRow(x), subActions(x)]), 'No subscriptions.')}
<h2>Invoices</h2>${table(['Id', 'Member', 'Reason', 'Total', 'Status', 'Created', ''], data(invoices).map(invoiceRow(s, back)), 'No invoices.')}
<h2>Grants</h2>${table(['Id', 'Tier', 'Status', 'Expires', 'Note'], data(grants).map((g) => [html`<code>${g.id}</code>`, html`${g.tier_id}`, html`${g.status}`, html`${day(g.expires_at)}`, html`${g.note ?? ''}`]), 'No grants.')}
${s.can('members:write') ? html`<form method="post" action="/dashboard/members/${encodeURIComponent(id)}/grants">${csrfField(s)}<fieldset><legend>Grant access</legend>
<p><label for="g-tier">Tier</label><select id="g-tier" name="tier_id" required>${data(plans).map((t) => html`<option value="${t.id}">${t.name}</option>`)}</select></p>
<p><label for="g-note">Note</label><input id="g-note" name="note" maxlength="500"></p><p><button type="submit">Grant</button></p></fieldset></form>` : ''}
<h2>Entitlement history</h2>${table(['When', 'Event', 'Entitlement', 'Revision', 'Status', 'Reason'], data(history).map((e) => [html`${e.timestamp}`,
      html`${String(e.type).replace('member.entitlement.', '')}`, html`${e.data?.entitlement?.key ?? ''}`, html`${e.data?.entitlement?.revision ?? ''}`,
      html`${e.data?.entitlement?.status ?? ''}`, html`${e.data?.reason ?? ''}`]), 'No entitlement changes yet.')}
<p><a href="/dashboard/events">Events feed</a></p>`);
  });

  const backOf = (req: Request, fallback: string) => {
    const b = (req.body as Record<string, unknown>).back;
    return typeof b === 'string' && /^\/dashboard(\/[A-Za-z0-9_/-]*)?$/.test(b) ? b : fallback;
  };
  router.post('/subscriptions/:id/cancel', (req, res) => act(req, res, 'cancel_subscription', { params: { id: String(req.params.id) } }, backOf(req, '/dashboard/subscriptions'), 'cancelled'));
  router.post('/subscriptions/:id/reactivate', (req, res) => act(req, res, 'reactivate_subscription', { params: { id: String(req.params.id) } }, backOf(req, '/dashboard/subscriptions'), 'reactivated'));
  router.post('/invoices/:id/refund', async (req, res) => {
    // The amount typed (a decimal in the invoice's currency, read here: 500 is 500 yen
    // but 5.00 dollars); none: all that is left. Text that is no such decimal goes on as
    // typed, so the operation refuses it (422, amount_cents).
    const id = String(req.params.id);
    const back = backOf(req, '/dashboard/invoices');
    const amount = (req.body as Record<string, unknown>).amount;
    let body = {};
    if (typeof amount === 'string' && amount.trim() !== '') {
      const invoice = await run(req, 'get_invoice', { params: { id } });
      if (invoice.problem) return problemPage(req, res, invoice, back);
      body = { amount_cents: minorUnitsOf(amount, (invoice.body as Json).currency as string) ?? amount };
    }
    return act(req, res, 'refund_invoice', { params: { id }, body }, back, 'refunded');
  });
  router.post('/members/:id/grants', (req, res) => {
    const b = req.body as Record<string, unknown>;
    const body: Record<string, unknown> = { tier_id: b.tier_id };
    if (typeof b.note === 'string' && b.note.trim()) body.note = b.note.trim();
    return act(req, res, 'create_grant', { params: { id: String(req.params.id) }, body }, `/dashboard/members/${encodeURIComponent(String(req.params.id))}`, 'granted');
  });

  // ---- catalog ---------------------------------------------------------------------

  router.get('/catalog', async (req, res) => {
    const tiers = await read<Page>(req, res, 'list_plans');
    if (!tiers) return;
    const discounts = await run(req, 'list_discounts');
    const codes = discounts.problem ? [] : (discounts.body as Page).data;
    const file = await run(req, 'get_catalog_file');
    send(req, res, 'Catalog', '/dashboard/catalog', html`<h2>Tiers and plans</h2>
${table(['Tier', 'Kind', 'Plans'], tiers.data.map((t) => [html`<strong>${t.name}</strong><br><span class="muted">${t.id}</span>`, html`${t.kind}`,
      html`${(t.plans as Json[]).map((p) => html`<div>${p.name ?? p.id}: ${money(p.amount_cents, p.currency)}${p.interval ? ` / ${p.interval}` : ' once'}${p.trial_days ? `, ${p.trial_days}-day trial` : ''}</div>`)}`]), 'No tiers yet.')}
<h2>Discount codes</h2>${table(['Code', 'Value', 'Duration', 'Redeemed', 'Active'], codes.map((d) => [html`<code>${d.code}</code>`,
      html`${d.value_type === 'percent' ? `${d.percent_off}% off` : money(d.amount_off_cents, d.currency) + ' off'}`, html`${d.duration}`, html`${d.redeemed_count}${d.use_limit ? ` of ${d.use_limit}` : ''}`, html`${d.is_active ? 'yes' : `no (${String(d.inactive_reason ?? 'disabled').replace('_', ' ')})`}`]), 'No discount codes.')}
<h2>As a catalog file</h2>${file.problem ? html`<p class="muted">The catalog file needs the plans:read and discounts:read scopes.</p>` : html`<p>This file is the whole catalog: platforms, entitlements and their benefits, tiers (inactive ones too) with their plans, discount codes, the payment provider and the retry schedule, by their keys. <code>billing catalog apply --community ID FILE</code> recreates it in an empty community (staging, a copy) and changes nothing when applied here. It holds no secrets: a Stripe account's keys are set in the file you apply (<code>secret_key</code>, <code>webhook_secret</code>), never exported.</p>
<pre><code id="catalog-file">${JSON.stringify(orderedCatalogFile(file.body as Json), null, 2)}</code></pre><p><button type="button" class="secondary" data-copy="catalog-file">Copy</button></p>`}`);
  });

  // ---- API keys --------------------------------------------------------------------

  const keysPage = async (req: Request, res: Response, created?: Json, status = 200) => {
    const s = req.signed!;
    const page = await read<Page>(req, res, 'list_api_keys', { query: queryOf(req, []) });
    if (!page) return;
    res.status(status);
    send(req, res, 'API keys', '/dashboard/keys', html`${created ? html`<div class="secret" role="status"><p><strong>Your new key ${created.name ?? ''}</strong>, shown only this once:</p>
<p><code id="new-key" data-testid="new-key">${created.key}</code> <button type="button" class="secondary" data-copy="new-key">Copy</button></p></div>` : ''}
${table(['Name', 'Prefix', 'Scopes', 'Created', 'Last used', 'Status', ''], page.data.map((k) => [html`${k.name ?? '—'}`, html`<code>${k.prefix}</code>`,
      html`${(k.scopes as string[]).join(' ')}`, html`${day(k.created_at)}`, html`${k.last_used_at ?? 'never'}`, html`${k.revoked_at ? `revoked ${day(k.revoked_at)}` : 'active'}`,
      !k.revoked_at && s.can('keys:write') ? actionForm(s, `/dashboard/keys/${encodeURIComponent(k.id)}/revoke`, `Revoke ${k.prefix}`, { danger: true }) : html``]), 'No API keys.')}
${nextLink(req, page.next_cursor)}
${s.can('keys:write') ? html`<form method="post" action="/dashboard/keys">${csrfField(s)}<fieldset><legend>Create a key</legend>
<p><label for="k-name">Name</label><input id="k-name" name="name" maxlength="200"></p>
<fieldset><legend>Scopes</legend>${SCOPES.map((sc) => html`<label><input type="checkbox" name="scopes" value="${sc}"> ${sc}</label>`)}</fieldset>
<p><button type="submit">Create key</button></p></fieldset></form>` : ''}`);
  };
  router.get('/keys', (req, res) => keysPage(req, res));
  router.post('/keys', async (req, res) => {
    const b = req.body as Record<string, unknown>;
    const body: Record<string, unknown> = { scopes: listField(b.scopes) };
    if (typeof b.name === 'string' && b.name.trim()) body.name = b.name.trim();
    const out = await run(req, 'create_api_key', { body });
    if (out.problem) return problemPage(req, res, out, '/dashboard/keys');
    return keysPage(req, res, out.body as Json, 201);
  });
  router.post('/keys/:id/revoke', (req, res) => act(req, res, 'revoke_api_key', { params: { id: String(req.params.id) } }, '/dashboard/keys', 'revoked'));

  // ---- webhooks --------------------------------------------------------------------

  router.get('/webhooks', async (req, res) => {
    const s = req.signed!;
    const page = await read<Page>(req, res, 'list_webhook_endpoints');
    if (!page) return;
    send(req, res, 'Webhooks', '/dashboard/webhooks', html`${table(['URL', 'Events', 'Enabled', ''], page.data.map((e) => [
      html`<a href="/dashboard/webhooks/${encodeURIComponent(e.id)}">${e.url}</a>${e.description ? html`<br><span class="muted">${e.description}</span>` : ''}`,
      html`${(e.event_types as string[]).join(', ') || 'all'}`, html`${e.enabled ? 'yes' : `no${e.disabled_reason ? ` (${e.disabled_reason})` : ''}`}`, html`<a href="/dashboard/webhooks/${encodeURIComponent(e.id)}">Deliveries</a>`]), 'No webhook endpoints yet.')}
${s.can('webhooks:write') ? html`<form method="post" action="/dashboard/webhooks">${csrfField(s)}<fieldset><legend>Add an endpoint</legend>
<p><label for="w-url">URL (https)</label><input id="w-url" name="url" type="url" required size="50"></p>
<p><label for="w-desc">Description</label><input id="w-desc" name="description" maxlength="500"></p>
${eventTypesSelect('w-types', [])}
<p><button type="submit">Add endpoint</button></p></fieldset></form>` : ''}`);
  });

  const secretPage = (req: Request, res: Response, endpoint: Json, status: number) => {
    res.status(status);
    send(req, res, 'Signing secret', '/dashboard/webhooks', html`<div class="secret" role="status"><p>The signing secret of <strong>${endpoint.url}</strong>, shown only this once:</p>
<p><code id="secret">${endpoint.secret}</code> <button type="button" class="secondary" data-copy="secret">Copy</button></p></div>
<p><a href="/dashboard/webhooks/${encodeURIComponent(endpoint.id)}">Go to the endpoint</a></p>`);
  };

  router.post('/webhooks', async (req, res) => {
    const b = req.body as Record<string, unknown>;
    const body: Record<string, unknown> = { url: b.url, event_types: listField(b.event_types) };
    if (typeof b.description === 'string' && b.description.trim()) body.description = b.description.trim();
    const out = await run(req, 'create_webhook_endpoint', { body });
    if (out.problem) return problemPage(req, res, out, '/dashboard/webhooks');
    secretPage(req, res, out.body as Json, 201);
  });

  router.get('/webhooks/:id', async (req, res) => {
    const s = req.signed!;
    const id = String(req.params.id);
    const endpoint = await read(req, res, 'get_webhook_endpoint', { params: { id } });
    if (!endpoint) return;
    const page = await read<Page>(req, res, 'list_webhook_deliveries', { params: { id }, query: queryOf(req, []) });
    if (!page) return;
    const base = `/dashboard/webhooks/${encodeURIComponent(id)}`;
    const w = s.can('webhooks:write');
    send(req, res, `Endpoint ${endpoint.url}`, '/dashboard/webhooks', html`<p>${endpoint.description ?? ''} · events: ${(endpoint.event_types as string[]).join(', ') || 'all'} · ${endpoint.enabled ? 'enabled' : 'disabled'}</p>
${w ? html`<p>${actionForm(s, `${base}/test`, 'Send a test event')} ${actionForm(s, `${base}/rotate`, 'Rotate secret')}
${actionForm(s, `${base}/enabled`, endpoint.enabled ? 'Disable' : 'Enable', { fields: html`<input type="hidden" name="enabled" value="${endpoint.enabled ? 'false' : 'true'}">` })}
${actionForm(s, `${base}/delete`, 'Delete endpoint', { danger: true })}</p>
<form method="post" action="${base}/edit">${csrfField(s)}<fieldset><legend>Edit</legend>
<p><label for="e-url">URL</label><input id="e-url" name="url" type="url" value="${endpoint.url}" size="50" required></p>
<p><label for="e-desc">Description</label><input id="e-desc" name="description" value="${endpoint.description ?? ''}" maxlength="500"></p>
${eventTypesSelect('e-types', endpoint.event_types as string[])}
<p><button type="submit">Save</button></p></fieldset></form>` : ''}
<h2>Delivery log</h2>${table(['Event', 'Status', 'Attempts', 'Last answer', 'Duration', 'Response', ''], page.data.map((d) => {
      const last = (d.attempts as Json[])[(d.attempts as Json[]).length - 1];
      return [html`${d.event_type}<br><code>${d.event_id}</code>`, html`${d.status}`, html`${d.attempt_count}`, html`${d.last_status_code ?? d.last_error ?? '—'}`,
        html`${last?.duration_ms != null ? `${last.duration_ms} ms` : '—'}`, html`<code>${(last?.response_excerpt ?? '').slice(0, 120)}</code>`,
        w ? actionForm(s, `${base}/deliveries/${encodeURIComponent(d.id)}/redeliver`, 'Redeliver') : html``];
    }), 'No deliveries yet: events are delivered as they happen.')}${nextLink(req, page.next_cursor)}`);
  });

  router.post('/webhooks/:id/test', async (req, res) => {
    const id = String(req.params.id);
    const out = await run(req, 'test_webhook_endpoint', { params: { id } });
    if (out.problem) return problemPage(req, res, out, `/dashboard/webhooks/${encodeURIComponent(id)}`);
    const r = out.body as Json;
    send(req, res, 'Test event sent', '/dashboard/webhooks', html`<p class="notice" role="status">The endpoint answered ${r.status_code ?? 'nothing'}${r.error ? ` (${r.error})` : ''}.</p>
<p><a href="/dashboard/webhooks/${encodeURIComponent(id)}">Back to the endpoint</a></p>`);
  });
  router.post('/webhooks/:id/rotate', async (req, res) => {
    const id = String(req.params.id);
    const out = await run(req, 'rotate_webhook_secret', { params: { id } });
    if (out.problem) return problemPage(req, res, out, `/dashboard/webhooks/${encodeURIComponent(id)}`);
    secretPage(req, res, { id, ...(out.body as Json) }, 200);
  });
  router.post('/webhooks/:id/enabled', (req, res) => act(req, res, 'update_webhook_endpoint',
    { params: { id: String(req.params.id) }, body: { enabled: (req.body as Json).enabled === 'true' } }, `/dashboard/webhooks/${encodeURIComponent(String(req.params.id))}`, 'updated'));
  router.post('/webhooks/:id/edit', (req, res) => {
    const b = req.body as Json;
    const body: Json = { url: b.url, event_types: listField(b.event_types) };
    if (typeof b.description === 'string') body.description = b.description.trim() || null;
    return act(req, res, 'update_webhook_endpoint', { params: { id: String(req.params.id) }, body }, `/dashboard/webhooks/${encodeURIComponent(String(req.params.id))}`, 'updated');
  });
  router.post('/webhooks/:id/delete', (req, res) => act(req, res, 'delete_webhook_endpoint', { params: { id: String(req.params.id) } }, '/dashboard/webhooks', 'deleted'));
  router.post('/webhooks/:id/deliveries/:delivery/redeliver', (req, res) => act(req, res, 'redeliver_webhook_delivery',
    { params: { id: String(req.params.id), deliveryId: String(req.params.delivery) } }, `/dashboard/webhooks/${encodeURIComponent(String(req.params.id))}`, 'redelivered'));

  // ---- events ----------------------------------------------------------------------

  router.get('/events', async (req, res) => {
    const page = await read<Page>(req, res, 'list_events', { query: queryOf(req, ['type']) });
    if (!page) return;
    send(req, res, 'Events', '/dashboard/events', html`<form class="filters" method="get" action="/dashboard/events">${statusSelect('type', EVENT_TYPES, req.query.type)}<div><button type="submit">Filter</button></div></form>
${table(['When', 'Type', 'Id', 'Subject'], page.data.map((e) => [html`${e.timestamp}`, html`${e.type}`, html`<code>${e.id}</code>`,
      e.data?.member?.id ? memberLink(e.data.member.id) : e.data?.member_id ? memberLink(e.data.member_id) : html`${e.data?.id ?? ''}`]), 'No events yet.')}${nextLink(req, page.next_cursor)}`);
  });

  // ---- operators (owners) ------------------------------------------------------------

  const operatorsPage = async (req: Request, res: Response, invited?: Json, status = 200) => {
    const s = req.signed!;
    const page = await read<Page>(req, res, 'list_operators', { query: queryOf(req, []) });
    if (!page) return;
    res.status(status);
    const roleSelect = (id: string, current: string) => html`<label for="${id}">Role</label><select id="${id}" name="role">${['owner', 'admin', 'viewer'].map((r) => html`<option${raw(r === current ? ' selected' : '')}>${r}</option>`)}</select>`;
    send(req, res, 'Operators', '/dashboard/operators', html`${invited ? html`<div class="secret" role="status"><p>Send <strong>${invited.email}</strong> (${invited.role}) this one-time sign-in link, valid until ${invited.expires_at}:</p>
<p><code id="invite-link" data-testid="invite-link">${invited.url}</code> <button type="button" class="secondary" data-copy="invite-link">Copy</button></p></div>` : ''}
${table(['Email', 'Role', 'Password', 'Since', 'Status', ''], page.data.map((u) => [html`${u.email}`, html`${u.role}`, html`${u.has_password ? 'set' : 'not yet'}`, html`${day(u.created_at)}`,
      html`${u.disabled_at ? `disabled ${day(u.disabled_at)}` : 'active'}`,
      html`<form class="inline" method="post" action="/dashboard/operators/${encodeURIComponent(u.id)}">${csrfField(s)}${roleSelect(`role-${u.id}`, u.role)} <button class="secondary" type="submit">Save role of ${u.email}</button></form>
${actionForm(s, `/dashboard/operators/${encodeURIComponent(u.id)}`, u.disabled_at ? `Enable ${u.email}` : `Disable ${u.email}`, { danger: !u.disabled_at, fields: html`<input type="hidden" name="disabled" value="${u.disabled_at ? 'false' : 'true'}">` })}`]), 'No operators.')}
${nextLink(req, page.next_cursor)}
<form method="post" action="/dashboard/operators">${csrfField(s)}<fieldset><legend>Invite an operator</legend>
<p><label for="o-email">Email</label><input id="o-email" name="email" type="email" required maxlength="254"></p>
<p>${roleSelect('o-role', 'viewer')}</p><p><button type="submit">Invite</button></p></fieldset></form>`);
  };
  router.get('/operators', (req, res) => operatorsPage(req, res));
  router.post('/operators', async (req, res) => {
    const b = req.body as Json;
    const out = await run(req, 'invite_operator', { body: { email: b.email, role: b.role } });
    if (out.problem) return problemPage(req, res, out, '/dashboard/operators');
    return operatorsPage(req, res, out.body as Json, 201);
  });
  router.post('/operators/:id', (req, res) => {
    const b = req.body as Json;
    const body: Json = {};
    if (typeof b.role === 'string') body.role = b.role;
    if (b.disabled === 'true' || b.disabled === 'false') body.disabled = b.disabled === 'true';
    return act(req, res, 'update_operator', { params: { id: String(req.params.id) }, body }, '/dashboard/operators', 'operator');
  });

  router.use((req, res) => {
    res.status(404).type('html').send(shell('Not found', html`<p class="error" role="alert">There is no page ${req.originalUrl.split('?')[0]} in the dashboard.</p><p><a href="/dashboard">Go to the overview</a></p>`, { signed: req.signed }));
  });

  app.use('/dashboard', router);
}

/** Copy buttons (data-copy="element id"); the pages work without it. */
const CLIENT_JS = `document.addEventListener('click', function (e) {
  var b = e.target.closest && e.target.closest('button[data-copy]');
  if (!b) return;
  var el = document.getElementById(b.getAttribute('data-copy'));
  if (el && navigator.clipboard) navigator.clipboard.writeText(el.textContent).then(function () { b.textContent = 'Copied'; });
});`;
