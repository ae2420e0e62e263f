// Webhooks: the endpoints, adding one (its signing secret shown once), an endpoint's
// delivery log, and its actions (test, rotate, enable or disable, edit, delete, redeliver).
import type { Request, Response, Router } from 'express';
import { EVENT_TYPES } from '../../domain/events/event-types';
import { html, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { actionForm, csrfField, Json, listField, nextLink, Page, problemPage, queryOf, send, table } from '../dashboard-layout';

const eventTypesSelect = (id: string, selected: string[]) => html`<p><label for="${id}">Event types (none selected: every type)</label>
<select id="${id}" name="event_types" multiple size="6">${EVENT_TYPES.map((t) => html`<option${raw(selected.includes(t) ? ' selected' : '')}>${t}</option>`)}</select></p>`;

export function mountWebhooks(router: Router, ctx: DashboardContext): void {
  const { run, read, act } = ctx;
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
}
