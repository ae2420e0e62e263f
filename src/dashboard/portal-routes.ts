// The member portal of the sandbox provider (/sandbox/portal/{ps_id}?t=...): the
// member's subscriptions with plan, price, next invoice and status, their access on
// Discord or Telegram with its delivery, their purchases and invoices; cancel at period
// end, reactivate, switch plan with the proration shown first, cancel a scheduled
// switch, and change the simulated card. Opening the URL
// (ten minutes, once) starts a member portal session (one hour, httpOnly cookie); every read
// and action runs the API's operations with it, and the database fences it to the
// member (82-member-portal.sql). Stripe communities get Stripe's own billing portal
// from POST /v1/members/{id}/portal-sessions instead (the hand-off is the provider's).
import express, { Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { SESSION_TOKEN_PATTERN } from '../core/ids';
import { decimalOf, percentOfPpm } from '../core/money';
import { memberPortalInfo, MemberPortalInfo, openMemberPortal } from '../domain/members/member-portal';
import { dashboardOperation } from '../operations';
import type { Caller, Executor, Outcome, RawInput } from '../operations/executor';
import { BASE_CSS, day, esc, Html, html, money, raw } from '../web/html';
import { callerOf, sendDocument } from '../web/express-io';
import { startDiscordConnect } from '../web/discord-connect-state';
import { inCommunity } from '../db/community-transaction';
import { cookies, csrfFor } from './dashboard-session';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const COOKIE = 'billing_portal';
const PS_ID = /^ps_[0-9a-f]{26}$/;

const NOTICES: Record<string, string> = {
  cancelled: 'Your subscription will end at the close of the current period. You keep access until then.',
  reactivated: 'Your subscription renews again.',
  switched: 'Your plan is changed.',
  scheduled: 'Your plan change is scheduled for the end of the current period.',
  unscheduled: 'The scheduled plan change is removed.',
  card: 'Your payment method is updated.',
};

/** What Connect Discord came back with (src/linking/discord-connect.ts). */
const DISCORD_NOTICES: Record<string, string> = {
  connected: 'Your Discord account is connected: your roles follow.',
  declined: 'Discord was not connected.',
  identity_taken: 'That Discord account belongs to another member of this community.',
  member_has_identity: 'Another Discord account is already connected for you.',
};

const BENEFIT_LABEL: Record<string, string> = { role: 'a role', channel: 'a channel', chat: 'the chat' };
const DELIVERY_LABEL: Record<string, string> = {
  delivered: 'given', pending: 'being set up', failed: 'being set up (retrying)', action_required: 'needs an action',
};

/** A switch preview's tax, in words: a tax added on top (part of what is due), or one inside the price. */
function taxNote(q: Json): string {
  const line = (q.tax_lines as Json[] | undefined)?.[0];
  if (!line || !q.tax_cents) return '';
  const rate = line.rate_ppm === null ? '' : ` ${percentOfPpm(line.rate_ppm)}`;
  return `${line.inclusive ? ', including' : ', plus'} ${line.name}${rate} ${decimalOf(q.tax_cents, q.currency)} ${String(q.currency).toUpperCase()}`;
}

function shell(title: string, communityName: string, body: Html): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · ${esc(communityName)}</title><link rel="stylesheet" href="/sandbox/portal-assets/portal.css"></head>
<body><p class="banner" role="note">Test mode: sandbox payments, no money moves.</p>
<header class="top"><strong>${esc(communityName)}</strong><span class="who">Member portal</span></header>
<main id="main"><h1>${esc(title)}</h1>${body}</main></body></html>`;
}

function bare(status: number, title: string, message: string): [number, string] {
  return [status, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><link rel="stylesheet" href="/sandbox/portal-assets/portal.css"></head><body><main id="main"><h1>${esc(title)}</h1><p>${esc(message)}</p></main></body></html>`];
}

interface Portal { token: string; info: MemberPortalInfo; csrf: string; caller: Caller; base: string }

export interface PortalDeps { executor: Executor; api: pg.Pool; config: Config }

export function mountMemberPortal(app: express.Express, deps: PortalDeps): void {
  const { executor, api, config } = deps;
  const router = express.Router();
  router.use((_req, res, next) => {
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    next();
  });
  router.use(express.urlencoded({ extended: false, limit: '10kb' }));

  const send = (res: Response, [status, body]: [number, string]) => res.status(status).type('html').send(body);

  const portalOf = async (req: Request, token: string): Promise<Portal | null> => {
    const info = await memberPortalInfo(api, token);
    if (!info) return null;
    return {
      token, info, csrf: csrfFor(token), base: `/sandbox/portal/${encodeURIComponent(String(req.params.ps))}`,
      caller: { ...callerOf(req), key: null, session: token },
    };
  };

  const run = (p: Portal, name: string, input: RawInput = {}): Promise<Outcome> => executor.run(dashboardOperation(name), p.caller, input);

  const problem = (res: Response, p: Portal, out: Outcome) => {
    const body = out.body as { detail?: string; title?: string; code?: string };
    res.status(out.status).type('html').send(shell('Not done', p.info.community_name,
      html`<p class="error" role="alert">${body.detail ?? body.title ?? 'The request failed.'}</p><p><a href="${p.base}/account">Back to your subscriptions</a></p>`));
  };

  const csrfField = (p: Portal) => html`<input type="hidden" name="csrf" value="${p.csrf}">`;
  const button = (p: Portal, action: string, label: string, fields: Html = html``, danger = false) =>
    html`<form class="inline" method="post" action="${p.base}/${action}">${csrfField(p)}${fields}<button type="submit"${raw(danger ? ' class="danger"' : '')}>${label}</button></form>`;

  /** The member's benefits on Discord or Telegram with their delivery; what to do when it needs an action. */
  const access = (ents: Json[]) => {
    const items = ents.flatMap((e) => (e.benefits as Json[]).map((b) => html`<li><strong>${e.name}</strong>: ${BENEFIT_LABEL[b.type] ?? b.type} on ${b.connection ?? b.platform} (${b.platform}),
<span data-testid="delivery">${DELIVERY_LABEL[b.delivery.status] ?? b.delivery.status}</span>${b.delivery.error ? html`<br><span class="error">${b.delivery.error}</span>` : ''}</li>`));
    return items.length ? html`<h2>Your access</h2><ul>${items}</ul>` : html``;
  };

  async function account(req: Request, res: Response, p: Portal) {
    const [subs, purchases, invoices, plans, benefits] = await Promise.all([
      run(p, 'list_subscriptions', { query: { member_id: p.info.member_id, limit: '100' } }),
      run(p, 'list_purchases', { query: { limit: '100' } }),
      run(p, 'list_invoices', { query: { member_id: p.info.member_id, limit: '25' } }),
      run(p, 'list_plans'),
      run(p, 'get_portal_benefits'),
    ]);
    for (const out of [subs, purchases, invoices]) if (out.problem) return problem(res, p, out);
    const planNames = new Map<string, string>();
    for (const t of plans.problem ? [] : (plans.body as Json).data as Json[]) for (const pl of t.plans as Json[]) planNames.set(pl.id, `${t.name} · ${pl.name ?? pl.id}`);
    const sandbox = p.info.provider === 'sandbox';
    const cards = new Map<string, string>();
    if (sandbox) {
      await Promise.all(((subs.body as Json).data as Json[]).map(async (s) => {
        const c = await run(p, 'get_sandbox_card', { params: { id: s.id } });
        if (!c.problem) cards.set(s.id, (c.body as Json).card);
      }));
    }
    const done = typeof req.query.done === 'string' ? NOTICES[req.query.done]
      : typeof req.query.discord === 'string' ? DISCORD_NOTICES[req.query.discord] : undefined;
    const discord = await discordToConnect(p);
    const subItems = ((subs.body as Json).data as Json[]).map((s) => {
      const live = ['active', 'trialing', 'past_due', 'cancelling'].includes(s.status);
      const next = s.status === 'cancelling' ? html`No further invoice: it ends on ${day(s.cancel_at ?? s.current_period_end)}.`
        : live && s.current_period_end ? html`${money(s.amount_cents, s.currency)} on ${day(s.current_period_end)}${s.status === 'trialing' ? ' (when the trial ends)' : ''}` : html`none`;
      const idField = html`<input type="hidden" name="subscription" value="${s.id}">`;
      const actions: Html[] = [];
      if (s.status === 'cancelling') actions.push(button(p, 'reactivate', 'Keep my subscription', idField));
      if (['active', 'trialing'].includes(s.status)) actions.push(html`<a class="button" href="${p.base}/subscriptions/${encodeURIComponent(s.id)}/switch">Change plan</a>`);
      if (s.scheduled_plan_id) actions.push(button(p, 'cancel-switch', 'Keep my current plan', idField));
      if (['active', 'trialing', 'past_due'].includes(s.status)) actions.push(button(p, 'cancel', 'Cancel at period end', idField, true));
      const card = cards.get(s.id);
      return html`<section class="sub" aria-labelledby="h-${s.id}"><h2 id="h-${s.id}">${s.tier_name ?? s.tier_id}: ${s.plan_name ?? s.plan_id}</h2>
<dl><dt>Price</dt><dd>${money(s.amount_cents, s.currency)}${s.interval ? ` per ${s.interval}` : ''}</dd>
<dt>Status</dt><dd data-testid="status">${s.status}</dd>
<dt>Current period ends</dt><dd>${day(s.current_period_end)}</dd>
<dt>Next invoice</dt><dd>${next}</dd>
${s.scheduled_plan_id ? html`<dt>Scheduled change</dt><dd>to ${planNames.get(s.scheduled_plan_id) ?? s.scheduled_plan_id} on ${day(s.scheduled_at)}</dd>` : ''}
${card ? html`<dt>Payment method</dt><dd>Test card that ${card === 'pays' ? 'pays' : 'declines'}</dd>` : ''}</dl>
<p class="actions">${actions}</p>
${card && live ? html`<form method="post" action="${p.base}/card">${csrfField(p)}${idField}<fieldset><legend>Change payment method</legend>
<label><input type="radio" name="card" value="pays"${raw(card === 'pays' ? ' checked' : '')}> Test card that pays</label>
<label><input type="radio" name="card" value="declines"${raw(card === 'declines' ? ' checked' : '')}> Test card that declines</label>
<button type="submit">Save payment method</button></fieldset></form>` : ''}</section>`;
    });
    const purchaseRows = ((purchases.body as Json).data as Json[]).filter((x) => x.member_id === p.info.member_id);
    res.type('html').send(shell('Your subscriptions', p.info.community_name, html`${done ? html`<p class="notice" role="status">${done}</p>` : ''}
${subItems.length ? subItems : html`<p class="empty">You have no subscriptions.</p>`}
${access(benefits.problem ? [] : (benefits.body as Json).data as Json[])}
${discord ? html`<p><a class="button" href="${p.base}/connect-discord">Connect Discord</a> so your Discord roles follow your membership.</p>` : ''}
<h2>Purchases</h2>${purchaseRows.length ? html`<ul>${purchaseRows.map((x) => html`<li>${x.tier_name ?? x.tier_id}: ${money(x.amount_cents, x.currency)}, ${x.status}${x.access_expires_at ? `, access until ${day(x.access_expires_at)}` : ''}</li>`)}</ul>` : html`<p class="empty">No purchases.</p>`}
<h2>Invoices</h2>${((invoices.body as Json).data as Json[]).length ? html`<table><thead><tr><th scope="col">Date</th><th scope="col">Invoice</th><th scope="col">For</th><th scope="col">Total</th><th scope="col">Status</th></tr></thead><tbody>
${((invoices.body as Json).data as Json[]).map((i) => html`<tr><td>${day(i.created_at)}</td><td><a href="${p.base}/invoices/${encodeURIComponent(i.id)}/pdf">${i.number ?? 'Draft'} (PDF)</a></td><td>${i.billing_reason.replace(/_/g, ' ')}</td><td>${money(i.total_cents, i.currency)}</td><td>${i.status}</td></tr>`)}</tbody></table>` : html`<p class="empty">No invoices yet.</p>`}
${p.info.return_url ? html`<p><a href="${p.info.return_url}">Back</a></p>` : ''}`));
  }

  router.get('/portal-assets/portal.css', (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.type('css').send(`${BASE_CSS}\n.sub{background:#fff;border:1px solid #dfe3e8;border-radius:6px;padding:.4rem 1rem;margin:1rem 0}a.button{display:inline-block;padding:.4rem .9rem;border:1px solid #0b57d0;border-radius:4px;text-decoration:none}.actions>*{margin-right:.5rem}dl{display:grid;grid-template-columns:auto 1fr;gap:.3rem 1rem}dt{color:#4a5360}`);
  });

  // The URL handed out by POST /v1/members/{id}/portal-sessions.
  router.get('/portal/:ps', async (req, res) => {
    const ps = String(req.params.ps);
    const t = req.query.t;
    if (!PS_ID.test(ps) || typeof t !== 'string' || t.length === 0 || t.length > 200) return send(res, bare(404, 'Not found', 'No such portal session.'));
    const opened = await openMemberPortal(api, ps, t);
    if (!opened) return send(res, bare(404, 'Not found', 'No such portal session.'));
    if (opened.status === 'used') {
      // One use: the browser that opened it goes on with its session (a reload); anyone
      // else holding the URL gets nothing.
      const token = cookies(req)[COOKIE];
      const mine = token && SESSION_TOKEN_PATTERN.test(token) && token.startsWith('bmp_') ? await portalOf(req, token) : null;
      if (mine && mine.info.portal_session_id === ps) return account(req, res, mine);
      return send(res, bare(410, 'This portal link was already used', 'A portal link opens once: ask for a new link where you found this one.'));
    }
    if (opened.status === 'expired') return send(res, bare(410, 'This portal link has expired', 'Ask for a new link where you found this one.'));
    res.append('Set-Cookie', `${COOKIE}=${opened.token}; Path=/sandbox/portal; HttpOnly; SameSite=Lax; Max-Age=3600${config.production ? '; Secure' : ''}`);
    const p = await portalOf(req, opened.token);
    if (!p) return send(res, bare(404, 'Not found', 'No such portal session.'));
    return account(req, res, p);
  });

  /** The member portal session of the cookie (and, for a POST, its CSRF token checked). */
  const signed = async (req: Request, res: Response): Promise<Portal | null> => {
    const token = cookies(req)[COOKIE];
    const p = token && SESSION_TOKEN_PATTERN.test(token) && token.startsWith('bmp_') ? await portalOf(req, token) : null;
    if (!p) { send(res, bare(401, 'Your portal session has ended', 'Open the portal again from where you found its link.')); return null; }
    if (req.method === 'POST' && (req.body as Json)?.csrf !== p.csrf) {
      send(res, bare(403, 'Refused', 'This form has expired or did not come from this page: go back and try again.'));
      return null;
    }
    return p;
  };

  /** The community's Discord connection with an OAuth2 application, while the member has no Discord account; else null. */
  async function discordToConnect(p: Portal): Promise<{ id: string; clientId: string } | null> {
    return inCommunity(api, p.info.community_id, async (client) => {
      const { rows } = await client.query<{ id: string; client_id: string }>(
        `select pc.id, pc.settings->>'client_id' as client_id from billing.platform_configs pc
         where pc.platform = 'discord' and pc.settings ? 'client_id'
           and not exists (select 1 from billing.member_identities i where i.member_id = $1 and i.platform = 'discord')
         order by pc.id limit 1`, [p.info.member_id]);
      return rows[0] ? { id: rows[0].id, clientId: rows[0].client_id } : null;
    });
  }

  // Connect Discord (docs/decisions/discord-connect.md): the session's member gets the account.
  router.get('/portal/:ps/connect-discord', async (req, res) => {
    const p = await signed(req, res);
    if (!p) return;
    const discord = await discordToConnect(p);
    if (!discord) return void res.redirect(303, `${p.base}/account`);
    if (!startDiscordConnect(req, res, config, discord.id, discord.clientId,
      { kind: 'portal', portalSessionId: p.info.portal_session_id, memberId: p.info.member_id })) {
      send(res, bare(503, 'Discord cannot be connected here', 'This deployment has no WEBHOOK_ENCRYPTION_KEY.'));
    }
  });

  router.get('/portal/:ps/account', async (req, res) => {
    const p = await signed(req, res);
    if (p) await account(req, res, p);
  });

  router.get('/portal/:ps/subscriptions/:id/switch', async (req, res) => {
    const p = await signed(req, res);
    if (!p) return;
    const id = String(req.params.id);
    const [sub, options] = await Promise.all([run(p, 'get_subscription', { params: { id } }), run(p, 'get_switch_options', { params: { id } })]);
    if (sub.problem) return problem(res, p, sub);
    if (options.problem) return problem(res, p, options);
    const s = sub.body as Json;
    const groups = options.body as Json;
    const all = [...groups.same_tier, ...groups.upgrades, ...groups.downgrades] as Json[];
    const previews = await Promise.all(all.map((o) => run(p, 'preview_switch', { params: { id }, query: { plan_id: o.plan_id } })));
    const rows = all.map((o, i) => {
      const q = previews[i].problem ? null : previews[i].body as Json;
      const terms = !q ? html`—` : q.applies === 'now'
        ? html`Due now: <strong>${money(q.due_now_cents, q.currency)}</strong> (${money(q.charge_cents, q.currency)} for the rest of the period, less ${money(q.credit_cents, q.currency)} unused on your current plan${taxNote(q)})`
        : html`From ${day(q.applies_at)}; nothing due now`;
      return html`<tr><td>${o.plan_name ?? o.plan_id}</td><td>${money(o.amount_cents, o.currency)} per ${o.interval}</td><td>${terms}</td>
<td>${button(p, 'switch', `Switch to ${o.plan_name ?? o.plan_id}`, html`<input type="hidden" name="subscription" value="${id}"><input type="hidden" name="plan_id" value="${o.plan_id}">`)}</td></tr>`;
    });
    res.type('html').send(shell('Change plan', p.info.community_name, html`<p>Now: ${s.tier_name ?? s.tier_id} · ${s.plan_name ?? s.plan_id}, ${money(s.amount_cents, s.currency)} per ${s.interval}.</p>
${rows.length ? html`<table><thead><tr><th scope="col">Plan</th><th scope="col">Price</th><th scope="col">What you pay</th><th scope="col"><span class="muted">Action</span></th></tr></thead><tbody>${rows}</tbody></table>` : html`<p class="empty">There is no other plan to switch to.</p>`}
<p><a href="${p.base}/account">Back to your subscriptions</a></p>`));
  });

  // An invoice's PDF: the member's own only (member_fence: another's answers 404).
  router.get('/portal/:ps/invoices/:id/pdf', async (req, res) => {
    const p = await signed(req, res);
    if (!p) return;
    const out = await run(p, 'get_invoice_pdf', { params: { id: String(req.params.id) } });
    if (out.problem || !out.document) return problem(res, p, out);
    // The page policy (default-src 'none') would keep a browser's PDF viewer from showing it.
    res.removeHeader('Content-Security-Policy');
    sendDocument(res, out.document);
  });

  const action = (path: string, op: string, notice: (out: Outcome) => string, body: (b: Json) => Json | undefined = () => undefined) =>
    router.post(`/portal/:ps/${path}`, async (req, res) => {
      const p = await signed(req, res);
      if (!p) return;
      const b = req.body as Json;
      const id = typeof b.subscription === 'string' ? b.subscription : '';
      const input: RawInput = { params: { id } };
      const extra = body(b);
      if (extra) input.body = extra;
      const out = await run(p, op, input);
      if (out.problem) return problem(res, p, out);
      res.redirect(303, `${p.base}/account?done=${notice(out)}`);
    });
  action('cancel', 'cancel_subscription', () => 'cancelled', () => ({}));
  action('reactivate', 'reactivate_subscription', () => 'reactivated');
  action('cancel-switch', 'cancel_scheduled_switch', () => 'unscheduled');
  action('switch', 'switch_subscription', (out) => ((out.body as Json).scheduled_plan_id ? 'scheduled' : 'switched'), (b) => ({ plan_id: typeof b.plan_id === 'string' ? b.plan_id : '' }));
  action('card', 'set_sandbox_card', () => 'card', (b) => ({ card: b.card === 'declines' ? 'declines' : 'pays' }));

  app.use('/sandbox', router);
}
