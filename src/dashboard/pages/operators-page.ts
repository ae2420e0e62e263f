// Operators (owners): the community's dashboard users, inviting one (a one-time
// sign-in link), changing a role, disabling or enabling.
import type { Request, Response, Router } from 'express';
import { day, html, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { actionForm, csrfField, Json, nextLink, Page, problemPage, queryOf, send, table } from '../dashboard-layout';

export function mountOperators(router: Router, ctx: DashboardContext): void {
  const { run, read, act } = ctx;
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
}
