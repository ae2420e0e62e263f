// Members: finding one by id, platform identity or external subject; a member's
// entitlements, subscriptions, invoices, grants and entitlement history; granting access;
// each benefit's delivery on its platform, and retrying the member's deliveries.
import type { Router } from 'express';
import { day, Html, html } from '../../web/html';
import type { Outcome } from '../../operations/executor';
import type { DashboardContext } from '../dashboard-context';
import type { Signed } from '../dashboard-session';
import { actionForm, csrfField, Json, memberLink, nextLink, Page, queryOf, send, table } from '../dashboard-layout';
import { invoiceRow } from './invoices-page';
import { privacySection } from './member-privacy-page';
import { subscriptionRow } from './subscriptions-page';

/**
 * Each benefit of the member's active entitlements with its delivery on the platform
 * (docs/decisions/platform-delivery.md), and the retry of what is not delivered.
 */
function deliveries(s: Signed, id: string, ents: Json[]): Html {
  const rows = ents.flatMap((e) => (e.benefits as Json[]).map((b) => [html`${e.key}`, html`${b.platform}`, html`${b.type} <code>${b.value}</code>`,
    html`<span class="delivery-${b.delivery?.status ?? 'pending'}">${String(b.delivery?.status ?? 'pending').replace('_', ' ')}</span>`,
    html`${b.delivery?.updated_at ?? '—'}`, html`${b.delivery?.error ?? ''}`]));
  const undelivered = ents.some((e) => (e.benefits as Json[]).some((b) => b.delivery?.status !== 'delivered'));
  return html`${table(['Entitlement', 'Platform', 'Benefit', 'Delivery', 'Updated', 'Error'], rows, 'No platform benefits to deliver.')}
${rows.length > 0 && s.can('members:write') ? html`<p>${actionForm(s, `/dashboard/members/${encodeURIComponent(id)}/deliveries/retry`, 'Retry deliveries')}
<span class="muted">${undelivered ? 'Tries every benefit not yet delivered now, after you fix what an error names.' : 'Every benefit is delivered.'}</span></p>` : ''}`;
}

export function mountMembers(router: Router, ctx: DashboardContext): void {
  const { run, read, act } = ctx;
  router.get('/members', async (req, res) => {
    const q = typeof req.query.q === 'string' ? req.query.q.trim() : '';
    if (q) {
      if (/^mem_[0-9a-f]{26}$/.test(q)) return void res.redirect(303, `/dashboard/members/${q}`);
      if (q.includes('@')) {
        // an email, compared case-insensitively (docs/decisions/member-email.md)
        const byEmail = await run(req, 'list_members', { query: { email: q, limit: '1' } });
        const hit = byEmail.problem ? null : (byEmail.body as Page).data[0];
        if (hit) return void res.redirect(303, `/dashboard/members/${hit.id}`);
      }
      const i = q.indexOf(':');
      const [a, b] = i > 0 ? [q.slice(0, i), q.slice(i + 1)] : ['', ''];
      const query = a === 'discord' || a === 'telegram' ? { platform: a, platform_uid: b } : { namespace: a, external_user_id: b };
      const out = a && b ? await run(req, 'lookup_member', { query }) : null;
      if (out && !out.problem) return void res.redirect(303, `/dashboard/members/${(out.body as Json).id}`);
    }
    const page = await read<Page>(req, res, 'list_members', { query: queryOf(req, []) });
    if (!page) return;
    send(req, res, 'Members', '/dashboard/members', html`<form class="filters" method="get" action="/dashboard/members" role="search">
<div><label for="q">Find a member: id, email, platform:uid (discord:123) or namespace:external id</label><input id="q" name="q" size="40" value="${q}"></div>
<div><button type="submit">Find</button></div></form>${q ? html`<p class="error" role="alert">No member matches “${q}”.</p>` : ''}
${table(['Id', 'Email', 'Identities', 'External subjects', 'Since'], page.data.map((m) => [memberLink(m.id), html`${m.email ?? '—'}`,
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
<dt>Email</dt><dd>${member.email ?? 'none'}</dd>
<dt>Identities</dt><dd>${(member.identities as Json[]).map((x) => `${x.platform}:${x.platform_uid}${x.username ? ` (${x.username})` : ''}`).join(', ') || 'none'}</dd>
<dt>External subjects</dt><dd>${(member.external_subjects as Json[]).map((x) => `${x.namespace}:${x.external_user_id}`).join(', ') || 'none'}</dd></dl>
${s.can('members:write') ? html`<form method="post" action="/dashboard/members/${encodeURIComponent(id)}/email">${csrfField(s)}<fieldset><legend>Email</legend>
<p><label for="m-email">Email (empty clears it)</label><input id="m-email" name="email" type="email" maxlength="254" value="${member.email ?? ''}"></p>
<p><button type="submit">Save email</button></p></fieldset></form>` : ''}
<h2>Entitlements</h2>${table(['Key', 'Status', 'Revision', 'Sources', 'Granted'], data(ents).map((e) => [html`${e.key}`, html`${e.status}`, html`${e.revision}`,
      html`${(e.sources as Json[]).map((src) => `${src.type} ${src.id} (${src.status}${src.valid_until ? `, until ${day(src.valid_until)}` : ''})`).join('; ')}`, html`${day(e.granted_at)}`]), 'No active entitlements.')}
<h2>Benefit deliveries</h2>${deliveries(s, id, data(ents))}
<h2>Subscriptions</h2>${table(['Id', 'Member', 'Plan', 'Price', 'Status', 'Period ends', ''], data(subs).map((x) => [...subscriptionRow(x), subActions(x)]), 'No subscriptions.')}
<h2>Invoices</h2>${table(['Id', 'Member', 'Reason', 'Total', 'Status', 'Created', ''], data(invoices).map(invoiceRow(s, back)), 'No invoices.')}
<h2>Grants</h2>${table(['Id', 'Tier', 'Status', 'Expires', 'Note'], data(grants).map((g) => [html`<code>${g.id}</code>`, html`${g.tier_id}`, html`${g.status}`, html`${day(g.expires_at)}`, html`${g.note ?? ''}`]), 'No grants.')}
${s.can('members:write') ? html`<form method="post" action="/dashboard/members/${encodeURIComponent(id)}/grants">${csrfField(s)}<fieldset><legend>Grant access</legend>
<p><label for="g-tier">Tier</label><select id="g-tier" name="tier_id" required>${data(plans).map((t) => html`<option value="${t.id}">${t.name}</option>`)}</select></p>
<p><label for="g-note">Note</label><input id="g-note" name="note" maxlength="500"></p><p><button type="submit">Grant</button></p></fieldset></form>` : ''}
<h2>Entitlement history</h2>${table(['When', 'Event', 'Entitlement', 'Revision', 'Status', 'Reason'], data(history).map((e) => [html`${e.timestamp}`,
      html`${String(e.type).replace('member.entitlement.', '')}`, html`${e.data?.entitlement?.key ?? ''}`, html`${e.data?.entitlement?.revision ?? ''}`,
      html`${e.data?.entitlement?.status ?? ''}`, html`${e.data?.reason ?? ''}`]), 'No entitlement changes yet.')}
${privacySection(s, id, member)}
<p><a href="/dashboard/events">Events feed</a></p>`);
  });

  router.post('/members/:id/deliveries/retry', (req, res) => act(req, res, 'retry_member_deliveries', { params: { id: String(req.params.id) } },
    `/dashboard/members/${encodeURIComponent(String(req.params.id))}`, 'retried'));
  router.post('/members/:id/email', (req, res) => {
    const raw = (req.body as Record<string, unknown>).email;
    const email = typeof raw === 'string' && raw.trim() ? raw.trim() : null;
    const id = String(req.params.id);
    return act(req, res, 'update_member', { params: { id }, body: { email } }, `/dashboard/members/${encodeURIComponent(id)}`, 'updated');
  });

  router.post('/members/:id/grants', (req, res) => {
    const b = req.body as Record<string, unknown>;
    const body: Record<string, unknown> = { tier_id: b.tier_id };
    if (typeof b.note === 'string' && b.note.trim()) body.note = b.note.trim();
    return act(req, res, 'create_grant', { params: { id: String(req.params.id) }, body }, `/dashboard/members/${encodeURIComponent(String(req.params.id))}`, 'granted');
  });
}
