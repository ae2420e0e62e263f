// Operators (owners): the community's dashboard users, inviting one (a one-time
// sign-in link), changing a role, disabling or enabling, removing one, removing a lost
// second factor; who is signed in (every live session, ending one or all of an
// operator's); and whether the community requires a second factor.
import type { Request, Response, Router } from 'express';
import type { SessionRow } from '../../domain/operators/operator-accounts';
import { day, html, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { actionForm, csrfField, Json, nextLink, Page, problemPage, queryOf, send, sessionRows, table } from '../dashboard-layout';

export function mountOperators(router: Router, ctx: DashboardContext): void {
  const { run, read, act } = ctx;
  const operatorsPage = async (req: Request, res: Response, invited?: Json, status = 200) => {
    const s = req.signed!;
    const page = await read<Page>(req, res, 'list_operators', { query: queryOf(req, []) });
    if (!page) return;
    const sessions = await read<{ data: SessionRow[] }>(req, res, 'list_operator_sessions');
    if (!sessions) return;
    const policy = await read<Json>(req, res, 'get_operator_policy');
    if (!policy) return;
    res.status(status);
    const roleSelect = (id: string, current: string) => html`<label for="${id}">Role</label><select id="${id}" name="role">${['owner', 'admin', 'viewer'].map((r) => html`<option${raw(r === current ? ' selected' : '')}>${r}</option>`)}</select>`;
    const userPath = (u: Json) => `/dashboard/operators/${encodeURIComponent(u.id)}`;
    send(req, res, 'Operators', '/dashboard/operators', html`${invited ? html`<div class="secret" role="status"><p>Send <strong>${invited.email}</strong> (${invited.role}) this one-time sign-in link, valid until ${invited.expires_at}:</p>
<p><code id="invite-link" data-testid="invite-link">${invited.url}</code> <button type="button" class="secondary" data-copy="invite-link">Copy</button></p></div>` : ''}
${table(['Email', 'Role', 'Password', 'Second factor', 'Since', 'Status', ''], page.data.map((u) => [html`${u.email}`, html`${u.role}`, html`${u.has_password ? 'set' : 'not yet'}`,
      html`${u.second_factor ? 'on' : 'off'}`, html`${day(u.created_at)}`,
      html`${u.disabled_at ? `disabled ${day(u.disabled_at)}` : 'active'}`,
      html`<form class="inline" method="post" action="${userPath(u)}">${csrfField(s)}${roleSelect(`role-${u.id}`, u.role)} <button class="secondary" type="submit">Save role of ${u.email}</button></form>
${actionForm(s, userPath(u), u.disabled_at ? `Enable ${u.email}` : `Disable ${u.email}`, { danger: !u.disabled_at, fields: html`<input type="hidden" name="disabled" value="${u.disabled_at ? 'false' : 'true'}">` })}
${actionForm(s, `${userPath(u)}/sign-out`, `End every session of ${u.email}`)}
${u.second_factor ? actionForm(s, `${userPath(u)}/reset-second-factor`, `Remove the second factor of ${u.email}`, { danger: true }) : ''}
${actionForm(s, `${userPath(u)}/remove`, `Remove ${u.email}`, { danger: true })}`]), 'No operators.')}
${nextLink(req, page.next_cursor)}
<form method="post" action="/dashboard/operators">${csrfField(s)}<fieldset><legend>Invite an operator</legend>
<p><label for="o-email">Email</label><input id="o-email" name="email" type="email" required maxlength="254"></p>
<p>${roleSelect('o-role', 'viewer')}</p><p><button type="submit">Invite</button></p></fieldset></form>
<h2>Signed in</h2>
<p class="muted">Every live session of the community's operators. Others' addresses are shown to their network only (203.0.113.x); each operator sees their own in full on their Account page.</p>
${table(['Operator', 'Signed in', 'Last seen', 'Address', 'Browser', ''], sessionRows(sessions.data, (r) => r.current ? html`this session`
      : actionForm(s, `/dashboard/operators/sessions/${encodeURIComponent(r.id)}/end`, `End this session of ${r.email ?? ''}`), true), 'Nobody is signed in.')}
<h2>Second factor</h2>
<form method="post" action="/dashboard/operators/policy">${csrfField(s)}<fieldset><legend>Require a second factor</legend>
<p><input type="checkbox" id="require-2fa" name="second_factor_required" value="true"${raw(policy.second_factor_required ? ' checked' : '')}>
<label for="require-2fa">Every operator must use a second factor (an authenticator app)</label></p>
<p class="muted">${policy.operators_without_second_factor} active operator${policy.operators_without_second_factor === 1 ? ' has' : 's have'} none yet: once required, they are sent to set one up after their password and can do nothing else until they have. Set up your own first (Account page).</p>
<p><button type="submit">Save</button></p></fieldset></form>`);
  };
  router.get('/operators', (req, res) => operatorsPage(req, res));
  router.post('/operators', async (req, res) => {
    const b = req.body as Json;
    const out = await run(req, 'invite_operator', { body: { email: b.email, role: b.role } });
    if (out.problem) return problemPage(req, res, out, '/dashboard/operators');
    return operatorsPage(req, res, out.body as Json, 201);
  });
  router.post('/operators/policy', (req, res) => {
    const on = (req.body as Json).second_factor_required === 'true';
    return act(req, res, 'update_operator_policy', { body: { second_factor_required: on } }, '/dashboard/operators', on ? 'policy-on' : 'policy-off');
  });
  router.post('/operators/sessions/:id/end', (req, res) =>
    act(req, res, 'end_operator_session', { params: { session_id: String(req.params.id) } }, '/dashboard/operators', 'ended'));
  router.post('/operators/:id/sign-out', (req, res) =>
    act(req, res, 'sign_out_operator', { params: { id: String(req.params.id) } }, '/dashboard/operators', 'signed-out'));
  router.post('/operators/:id/reset-second-factor', (req, res) =>
    act(req, res, 'reset_operator_second_factor', { params: { id: String(req.params.id) } }, '/dashboard/operators', 'reset'));
  router.post('/operators/:id/remove', (req, res) =>
    act(req, res, 'remove_operator', { params: { id: String(req.params.id) } }, '/dashboard/operators', 'removed'));
  router.post('/operators/:id', (req, res) => {
    const b = req.body as Json;
    const body: Json = {};
    if (typeof b.role === 'string') body.role = b.role;
    if (b.disabled === 'true' || b.disabled === 'false') body.disabled = b.disabled === 'true';
    return act(req, res, 'update_operator', { params: { id: String(req.params.id) }, body }, '/dashboard/operators', 'operator');
  });
}
