// Members: the list by display name, searched (GET /v1/members?q=) and filtered by
// subscription status, tier, plan, tag and joining date; an exact member id, email or
// platform:uid opens that member. A member's page: display name, email, the operators'
// note and tags (edited by members:write, a refused field's problem beside it),
// entitlements, subscriptions, invoices, grants and entitlement history; granting
// access; each benefit's delivery on its platform, and retrying the member's deliveries.
import type { Request, Response, Router } from 'express';
import { SUBSCRIPTION_STATUSES } from '../../core/statuses';
import { day, Html, html, raw } from '../../web/html';
import type { Outcome } from '../../operations/executor';
import type { DashboardContext } from '../dashboard-context';
import type { Signed } from '../dashboard-session';
import { actionForm, csrfField, Json, nextLink, Page, problemPage, send, table } from '../dashboard-layout';
import { invoiceRow } from './invoices-page';
import { privacySection } from './member-privacy-page';
import { subscriptionRow } from './subscriptions-page';

/** A field refused by the operation: its name (the form's), the problem, what was entered. */
interface FieldProblem { field: string; detail: string }

/** The attributes tying a field to its problem, and the problem shown beside it. */
const invalid = (id: string, p?: FieldProblem | null) => raw(p ? ` aria-invalid="true" aria-describedby="${id}-problem"` : '');
const problemBeside = (id: string, p?: FieldProblem | null) => (p ? html` <span class="error" id="${id}-problem" role="alert">${p.detail}</span>` : html``);

/** The field of a form a problem's param names (tags.3 is the tags field), or null. */
function fieldOf(out: Outcome, fields: readonly string[]): FieldProblem | null {
  if (out.status !== 400 && out.status !== 422) return null;
  const p = out.body as { param?: unknown; detail?: string; title?: string };
  const field = typeof p.param === 'string' ? p.param.split('.')[0] : '';
  if (!fields.includes(field)) return null;
  const detail = (p.detail ?? p.title ?? 'Not valid.').replace(/^Invalid [a-z_.0-9]+: /, '');
  return { field, detail };
}

// ---- the list -----------------------------------------------------------------------

const FILTERS = ['q', 'status', 'tier_id', 'plan_id', 'tag', 'created_after', 'created_before'] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** The filters as the form sent them (dates as YYYY-MM-DD), empty ones left out. */
function filtersOf(req: Request): Filters {
  const out: Filters = {};
  for (const n of FILTERS) {
    const v = req.query[n];
    if (typeof v === 'string' && v.trim() !== '') out[n] = v.trim();
  }
  return out;
}

/** The operation's query: a day is its first instant in UTC (another form is left for the API to refuse). */
function listQuery(f: Filters, cursor: unknown): Record<string, string> {
  const out: Record<string, string> = { ...f } as Record<string, string>;
  for (const n of ['created_after', 'created_before'] as const) {
    if (f[n] && /^\d{4}-\d{2}-\d{2}$/.test(f[n]!)) out[n] = `${f[n]}T00:00:00Z`;
  }
  if (typeof cursor === 'string' && cursor) out.cursor = cursor;
  return out;
}

function filterForm(f: Filters, tiers: Json[], p: FieldProblem | null): Html {
  const option = (value: string, label: string, current?: string) => html`<option value="${value}"${raw(value === current ? ' selected' : '')}>${label}</option>`;
  const field = (name: keyof Filters, label: string, input: (id: string) => Html) => {
    const id = `f-${name}`;
    const mine = p?.field === name ? p : null;
    return html`<div><label for="${id}">${label}</label>${input(id)}${problemBeside(id, mine)}</div>`;
  };
  const at = (name: keyof Filters) => (p?.field === name ? p : null);
  return html`<form class="filters" method="get" action="/dashboard/members" role="search" aria-label="Find members">
${field('q', 'Find a member: username, email, platform id, external id or member id', (id) => html`<input id="${id}" name="q" type="search" size="36" maxlength="200" value="${f.q ?? ''}"${invalid(id, at('q'))}>`)}
${field('status', 'Subscription status', (id) => html`<select id="${id}" name="status"${invalid(id, at('status'))}>${option('', 'any')}${SUBSCRIPTION_STATUSES.map((v) => option(v, v.replace('_', ' '), f.status))}</select>`)}
${field('tier_id', 'Tier', (id) => html`<select id="${id}" name="tier_id"${invalid(id, at('tier_id'))}>${option('', 'any')}${tiers.map((t) => option(t.id, t.name, f.tier_id))}</select>`)}
${field('plan_id', 'Plan', (id) => html`<select id="${id}" name="plan_id"${invalid(id, at('plan_id'))}>${option('', 'any')}${tiers.map((t) => html`<optgroup label="${t.name}">${(t.plans as Json[]).map((pl) => option(pl.id, pl.name ?? pl.id, f.plan_id))}</optgroup>`)}</select>`)}
${field('tag', 'Tag', (id) => html`<input id="${id}" name="tag" size="14" maxlength="40" value="${f.tag ?? ''}"${invalid(id, at('tag'))}>`)}
${field('created_after', 'Joined on or after (UTC)', (id) => html`<input id="${id}" name="created_after" type="date" value="${f.created_after ?? ''}"${invalid(id, at('created_after'))}>`)}
${field('created_before', 'Joined before (UTC)', (id) => html`<input id="${id}" name="created_before" type="date" value="${f.created_before ?? ''}"${invalid(id, at('created_before'))}>`)}
<div><button type="submit">Find</button>${Object.keys(f).length ? html` <a href="/dashboard/members">Clear</a>` : ''}</div></form>`;
}

/** A member's name as a link to its page: the display name, the id beneath it (or the id alone). */
const nameCell = (m: Json) => html`<a href="/dashboard/members/${encodeURIComponent(m.id)}">${m.display_name ?? m.id}</a>${m.display_name ? html`<br><code class="muted">${m.id}</code>` : ''}`;
const tagList = (tags: unknown) => ((tags as string[] | undefined) ?? []).length
  ? html`<ul class="tags">${(tags as string[]).map((t) => html`<li>${t}</li>`)}</ul>` : html`—`;

// ---- a member's page ----------------------------------------------------------------

/** The note and tags form: what is stored, or what was entered with the problem beside its field. */
function notesForm(s: Signed, id: string, member: Json, entered?: { note: string; tags: string; problem: FieldProblem }): Html {
  const note = entered ? entered.note : (member.note ?? '');
  const tags = entered ? entered.tags : ((member.tags as string[]) ?? []).join(', ');
  const p = (field: string) => (entered?.problem.field === field ? entered.problem : null);
  return html`<form method="post" action="/dashboard/members/${encodeURIComponent(id)}/notes">${csrfField(s)}<fieldset><legend>Note and tags</legend>
<p><label for="m-note">Note (operators only; at most 2000 characters; empty removes it)</label>
<textarea id="m-note" name="note" rows="4" cols="60" maxlength="2000"${invalid('m-note', p('note'))}>${note}</textarea>${problemBeside('m-note', p('note'))}</p>
<p><label for="m-tags">Tags, separated by commas</label><input id="m-tags" name="tags" size="50" value="${tags}" aria-describedby="m-tags-hint${p('tags') ? ' m-tags-problem' : ''}"${raw(p('tags') ? ' aria-invalid="true"' : '')}>
<span class="muted" id="m-tags-hint">Up to 20, each up to 40 letters, digits or - _ . : / (spaces become -, capitals small).</span>${problemBeside('m-tags', p('tags'))}</p>
<p><button type="submit">Save note and tags</button></p></fieldset></form>`;
}

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
    const f = filtersOf(req);
    const q = f.q ?? '';
    // An exact id, email, platform:uid or namespace:external id opens that member.
    if (q && Object.keys(f).length === 1 && !req.query.cursor) {
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
    const [out, plans] = await Promise.all([run(req, 'list_members', { query: listQuery(f, req.query.cursor) }), run(req, 'list_plans')]);
    const problem = out.problem ? fieldOf(out, FILTERS) : null;
    if (out.problem && !problem) return problemPage(req, res, out, '/dashboard/members');
    const tiers = plans.problem ? [] : ((plans.body as { data: Json[] }).data ?? []);
    const page = out.problem ? null : out.body as Page;
    const filtered = Object.keys(f).length > 0;
    res.status(out.status);
    send(req, res, 'Members', '/dashboard/members', html`${filterForm(f, tiers, problem)}
${page ? html`${table(['Member', 'Email', 'Identities', 'External subjects', 'Tags', 'Since'], page.data.map((m) => [nameCell(m), html`${m.email ?? '—'}`,
      html`${(m.identities as Json[]).map((x) => `${x.platform}:${x.platform_uid}${x.username ? ` (${x.username})` : ''}`).join(', ') || '—'}`,
      html`${(m.external_subjects as Json[]).map((x) => `${x.namespace}:${x.external_user_id}`).join(', ') || '—'}`, tagList(m.tags), html`${day(m.created_at)}`]),
      filtered ? 'No member matches this search.' : 'No members yet.')}
${nextLink(req, page.next_cursor)}` : ''}`);
  });

  const memberPage = async (req: Request, res: Response, id: string, entered?: { note: string; tags: string; problem: FieldProblem }) => {
    const s = req.signed!;
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
    if (entered) res.status(422);
    send(req, res, member.display_name ?? `Member ${id}`, '/dashboard/members', html`<dl class="facts">
<dt>Id</dt><dd><code>${id}</code></dd>
<dt>Display name</dt><dd>${member.display_name ?? 'none (no username, email or external id)'}</dd>
<dt>Created</dt><dd>${member.created_at}</dd>
<dt>Email</dt><dd>${member.email ?? 'none'}</dd>
<dt>Identities</dt><dd>${(member.identities as Json[]).map((x) => `${x.platform}:${x.platform_uid}${x.username ? ` (${x.username})` : ''}`).join(', ') || 'none'}</dd>
<dt>External subjects</dt><dd>${(member.external_subjects as Json[]).map((x) => `${x.namespace}:${x.external_user_id}`).join(', ') || 'none'}</dd>
<dt>Tags</dt><dd data-testid="member-tags">${tagList(member.tags)}</dd>
<dt>Note</dt><dd class="note" data-testid="member-note">${member.note ?? 'none'}</dd></dl>
${s.can('members:write') ? html`${notesForm(s, id, member, entered)}
<form method="post" action="/dashboard/members/${encodeURIComponent(id)}/email">${csrfField(s)}<fieldset><legend>Email</legend>
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
  };

  router.get('/members/:id', (req, res) => memberPage(req, res, String(req.params.id)));

  router.post('/members/:id/notes', async (req, res) => {
    const id = String(req.params.id);
    const b = req.body as Record<string, unknown>;
    const note = typeof b.note === 'string' ? b.note : '';
    const tags = typeof b.tags === 'string' ? b.tags : '';
    const body = { note: note.trim() ? note : null, tags: tags.split(',').map((t) => t.trim()).filter((t) => t !== '') };
    const out = await run(req, 'update_member', { params: { id }, body });
    if (!out.problem) return void res.redirect(303, `/dashboard/members/${encodeURIComponent(id)}?done=updated`);
    const problem = fieldOf(out, ['note', 'tags']);
    if (!problem) return problemPage(req, res, out, `/dashboard/members/${encodeURIComponent(id)}`);
    return memberPage(req, res, id, { note, tags, problem });
  });
  router.post('/members/:id/deliveries/retry', (req, res) => act(req, res, 'retry_member_deliveries', { params: { id: String(req.params.id) } },
    `/dashboard/members/${encodeURIComponent(String(req.params.id))}`, 'retried'));
  router.post('/members/:id/email', (req, res) => {
    const given = (req.body as Record<string, unknown>).email;
    const email = typeof given === 'string' && given.trim() ? given.trim() : null;
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
