// API keys: the list, creating one (its secret shown once) and revoking one.
import type { Request, Response, Router } from 'express';
import { SCOPES } from '../../core/scopes';
import { day, html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { actionForm, csrfField, Json, listField, nextLink, Page, problemPage, queryOf, send, table } from '../dashboard-layout';

export function mountKeys(router: Router, ctx: DashboardContext): void {
  const { run, read, act } = ctx;
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
}
