// The dashboard's page shell and what its pages share: the navigation, the notices of
// a done action, tables, row action forms, list filters and pages, the problem page.
// Every answer is escaped HTML (src/web/html.ts).
import type { Request, Response } from 'express';
import type { SessionRow } from '../domain/operators/operator-accounts';
import type { Outcome } from '../operations/executor';
import { esc, Html, html, raw } from '../web/html';
import type { Signed } from './dashboard-session';

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
export type Page = { data: Json[]; next_cursor: string | null };

const NAV: [string, string][] = [
  ['/dashboard', 'Overview'], ['/dashboard/reports', 'Reports'], ['/dashboard/subscriptions', 'Subscriptions'], ['/dashboard/purchases', 'Purchases'],
  ['/dashboard/invoices', 'Invoices'], ['/dashboard/members', 'Members'], ['/dashboard/catalog', 'Catalog'],
  ['/dashboard/keys', 'API keys'], ['/dashboard/webhooks', 'Webhooks'], ['/dashboard/events', 'Events'],
  ['/dashboard/platforms', 'Platforms'],
  ['/dashboard/operators', 'Operators'],
  ['/dashboard/mail', 'Mail'],
  ['/dashboard/settings', 'Settings'],
  ['/dashboard/audit', 'Audit log'],
];

/** Menu entries only some roles may open: the scope each needs. */
const NAV_SCOPES: Record<string, string> = { '/dashboard/operators': 'operators:read', '/dashboard/audit': 'audit:read' };

const NOTICES: Record<string, string> = {
  cancelled: 'The subscription will end at the close of its period.',
  reactivated: 'The subscription renews again.',
  refunded: 'The refund is recorded.',
  granted: 'Access granted.',
  revoked: 'The key is revoked: requests with it now answer 401.',
  redelivered: 'The delivery is queued again.',
  retried: 'The member\'s deliveries are queued: the worker tries every benefit not yet delivered now.',
  updated: 'Saved.',
  deleted: 'The endpoint is deleted.',
  password: 'Your password is set: you can now sign in with it. Your other sessions have ended.',
  operator: 'Saved.',
  removed: 'The operator is removed: their sessions have ended.',
  ended: 'The session has ended: its cookie now gets the sign-in page.',
  'signed-out': 'Every session of that operator has ended.',
  'policy-on': 'Saved: operators without a second factor are sent to set one up before anything else.',
  'policy-off': 'Saved: a second factor is no longer required.',
  'second-factor-off': 'Your second factor is off.',
  reset: 'Their second factor is removed and their sessions have ended: they set up a new one after their password.',
  platform: 'The connection is saved.',
  erased: 'The member is erased: their access ended, the platforms are removing what they granted.',
  catalog: 'The catalog is saved.',
  archived: 'Archived: no longer offered; what was sold stays.',
  price: 'The new price is saved: new buyers pay it; existing subscribers keep theirs until you migrate them with notice (billing plans migrate).',
};

export function shell(title: string, body: Html, opts: { signed?: Signed; active?: string } = {}): string {
  const s = opts.signed;
  const nav = s?.info.needs ? html`<div class="who">${s.info.email} · ${s.info.community_name}
<form class="inline" method="post" action="/dashboard/sign-out"><input type="hidden" name="csrf" value="${s.csrf}"><button class="secondary" type="submit">Sign out</button></form></div>`
    : s ? html`<nav class="main" aria-label="Dashboard"><ul>${NAV.filter(([href]) => !NAV_SCOPES[href] || s.can(NAV_SCOPES[href])).map(([href, label]) =>
    html`<li><a href="${href}"${raw(href === opts.active ? ' aria-current="page"' : '')}>${label}</a></li>`)}</ul></nav>
<div class="who">${s.info.email} · ${s.info.role} · ${s.info.community_name}
<a href="/dashboard/account">Account</a>
<form class="inline" method="post" action="/dashboard/sign-out"><input type="hidden" name="csrf" value="${s.csrf}"><button class="secondary" type="submit">Sign out</button></form></div>` : html``;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · Billing dashboard</title><link rel="stylesheet" href="/dashboard/assets/dashboard.css"></head>
<body><a class="skip" href="#main">Skip to content</a><header class="top"><a href="/dashboard"><strong>Billing</strong></a>${nav}</header>
<main id="main"><h1>${esc(title)}</h1>${body}</main><script src="/dashboard/assets/dashboard.js"></script></body></html>`;
}

export const csrfField = (s: Signed) => html`<input type="hidden" name="csrf" value="${s.csrf}">`;

/** A one-button POST form (an action on a row). */
export function actionForm(s: Signed, action: string, label: string, opts: { danger?: boolean; fields?: Html } = {}): Html {
  return html`<form class="inline" method="post" action="${action}">${csrfField(s)}${opts.fields ?? ''}<button type="submit"${raw(opts.danger ? ' class="danger"' : ' class="secondary"')}>${label}</button></form>`;
}

export function table(headers: string[], rows: Html[][], empty: string): Html {
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<table><thead><tr>${headers.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead>
<tbody>${rows.map((r) => html`<tr>${r.map((c) => html`<td>${c}</td>`)}</tr>`)}</tbody></table>`;
}

/** A timestamp to the minute, in UTC. */
export const minute = (ts: string | null | undefined) => (ts ? `${ts.slice(0, 10)} ${ts.slice(11, 16)} UTC` : '');

/** The cells of a sessions table: signed in, last seen, address, browser, and an action. */
export function sessionRows(rows: SessionRow[], action: (row: SessionRow) => Html, withEmail = false): Html[][] {
  return rows.map((r) => [
    ...(withEmail ? [html`${r.email ?? ''}`] : []),
    html`${minute(r.created_at)}${r.code_pending ? html` <span class="muted">(code not given yet)</span>` : ''}`,
    html`${minute(r.last_seen_at)}`,
    html`${r.address ?? 'unknown'}`,
    html`${r.browser ?? 'unknown'}`,
    action(r),
  ]);
}

export function nextLink(req: Request, cursor: string | null): Html {
  if (!cursor) return html``;
  const params = new URLSearchParams(req.query as Record<string, string>);
  params.set('cursor', cursor);
  return html`<p><a href="${req.path === '/' ? '/dashboard' : `/dashboard${req.path}`}?${params.toString()}">Next page →</a></p>`;
}

export function flash(req: Request): Html {
  const done = typeof req.query.done === 'string' ? NOTICES[req.query.done] : undefined;
  return done ? html`<p class="notice" role="status">${done}</p>` : html``;
}

/** The filters of a list page as the operation's query: empty fields left out. */
export function queryOf(req: Request, names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of [...names, 'cursor']) {
    const v = req.query[n];
    if (typeof v === 'string' && v.trim() !== '') out[n] = v.trim();
  }
  return out;
}

export const statusSelect = (name: string, values: readonly string[], current: unknown) => html`<div><label for="f-${name}">${name.replace(/_/g, ' ')}</label>
<select id="f-${name}" name="${name}"><option value="">any</option>${values.map((v) => html`<option${raw(v === current ? ' selected' : '')}>${v}</option>`)}</select></div>`;
export const textFilter = (name: string, label: string, current: unknown) => html`<div><label for="f-${name}">${label}</label>
<input id="f-${name}" name="${name}" value="${typeof current === 'string' ? current : ''}"></div>`;

/** A repeated form field (checkboxes, multi-selects) as an array; absent is empty. */
export const listField = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined ? [] : [v]);

export const memberLink = (id: string) => html`<a href="/dashboard/members/${encodeURIComponent(id)}">${id}</a>`;

/** Where a row action goes back to: the form's back field when it is a dashboard page. */
export const backOf = (req: Request, fallback: string) => {
  const b = (req.body as Record<string, unknown>).back;
  return typeof b === 'string' && /^\/dashboard(\/[A-Za-z0-9_/-]*)?$/.test(b) ? b : fallback;
};

/** A page of the dashboard: the shell with the notice of a done action (?done=). */
export const send = (req: Request, res: Response, title: string, active: string, body: Html) =>
  res.type('html').send(shell(title, html`${flash(req)}${body}`, { signed: req.signed, active }));

/** A refused or invalid action: the problem's detail and status; a lost session signs in again. */
export function problemPage(req: Request, res: Response, out: Outcome, back: string) {
  if (out.status === 401) return void res.redirect(303, '/dashboard/sign-in');
  const p = out.body as { title?: string; detail?: string; code?: string };
  const why = out.status === 403 && p.code === 'missing_scope' ? `Your role (${req.signed!.info.role}) cannot do this.` : (p.detail ?? p.title ?? 'The request failed.');
  res.status(out.status).type('html').send(shell('Not done', html`<p class="error" role="alert">${why} <span class="muted">(${p.code ?? 'error'}, ${out.status})</span></p>
<p><a href="${back}">Back</a></p>`, { signed: req.signed }));
}

/** The 404 page of a signed-in dashboard address. */
export function notFound(req: Request, res: Response): void {
  res.status(404).type('html').send(shell('Not found', html`<p class="error" role="alert">There is no page ${req.originalUrl.split('?')[0]} in the dashboard.</p><p><a href="/dashboard">Go to the overview</a></p>`, { signed: req.signed }));
}
