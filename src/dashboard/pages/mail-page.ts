// Mail: the messages sent (or kept, without SMTP_URL) to members, like a developer
// mailbox: the list, one message's text and HTML (the HTML opened on its own URL under
// a sandboxing CSP: no script, no requests, a unique origin), and the templates, each
// with its on/off switch, whether members may unsubscribe from it (an optional one the
// operator may mark required) and a preview. A message its member unsubscribed from
// shows as skipped: recorded, not sent. docs/decisions/mail-outbox.md, mail-unsubscribe.md.
import type { Request, Response, Router } from 'express';
import { baseUrlFor } from '../../core/config';
import { fillLinks } from '../../domain/mail/mail-links';
import { html, type Html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { actionForm, Json, memberLink, nextLink, Page, queryOf, send, table } from '../dashboard-layout';

/** A message's status, with why it was skipped or what the last attempt met. */
function statusOf(m: Json): Html {
  if (m.status === 'skipped') return html`skipped: the member unsubscribed`;
  return html`${m.status}${m.last_error ? html` (${m.last_error})` : ''}`;
}

/** A rendered message's HTML as its own document: sandboxed (no script, unique origin), nothing fetched. */
function sendSandboxed(res: Response, body: string): void {
  res.setHeader('Content-Security-Policy', "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:");
  res.type('html').send(body);
}

export function mountMail(router: Router, ctx: DashboardContext): void {
  const { read, act } = ctx;
  const links = (req: Request, m: Json) => ({
    baseUrl: baseUrlFor(ctx.config, { protocol: req.protocol, host: req.get('host') }),
    key: ctx.config.webhookEncryptionKey, communityId: req.signed!.info.community_id as string, memberId: m.member_id as string,
    template: m.template as string,
  });

  router.get('/mail', async (req, res) => {
    const s = req.signed!;
    const page = await read<Page>(req, res, 'list_mail_messages', { query: queryOf(req, []) });
    if (!page) return;
    const t = await read<Json>(req, res, 'list_mail_templates');
    if (!t) return;
    send(req, res, 'Mail', '/dashboard/mail', html`<p>${ctx.config.smtpUrl ? 'Messages are sent over SMTP.' : 'No SMTP_URL is set: messages are kept here instead of being sent.'}
Sender: ${t.sender_name}${t.reply_to ? html` (replies to ${t.reply_to})` : ''}.</p>
${table(['When', 'To', 'Subject', 'Template', 'Status', 'Member'], page.data.map((m) => [html`${m.created_at}`, html`${m.to}`,
      html`<a href="/dashboard/mail/${encodeURIComponent(m.id)}">${m.subject}</a>`, html`${m.template}`,
      statusOf(m), memberLink(m.member_id)]), 'No mail yet.')}
${nextLink(req, page.next_cursor)}
<h2>Templates</h2>${table(['Template', 'Sent on', 'Kind', 'State', 'Preview', ''], (t.data as Json[]).map((x) => {
      const path = `/dashboard/mail/templates/${encodeURIComponent(x.template)}`;
      return [html`${x.title}`, html`<code>${x.event_type}</code>`,
        html`${x.transactional ? 'transactional' : x.required ? 'required here (no unsubscribe)' : 'optional: members may unsubscribe'}`,
        html`${x.enabled ? 'on' : 'off'}`,
        html`<a href="${path}/preview">Preview</a>`,
        s.can('members:write') ? html`${actionForm(s, path, x.enabled ? 'Turn off' : 'Turn on',
          { fields: html`<input type="hidden" name="enabled" value="${x.enabled ? 'false' : 'true'}">` })}${x.transactional ? ''
          : actionForm(s, path, x.required ? 'Let members unsubscribe' : 'Mark required',
            { fields: html`<input type="hidden" name="required" value="${x.required ? 'false' : 'true'}">` })}` : html``];
    }), 'No templates.')}`);
  });

  router.get('/mail/templates/:template/preview', async (req, res) => {
    const t = await read<Json>(req, res, 'list_mail_templates');
    if (!t) return;
    const x = (t.data as Json[]).find((y) => y.template === String(req.params.template));
    if (!x) return void res.redirect(303, '/dashboard/mail');
    const sample = { member_id: 'mem_sample' };
    if (req.query.part === 'html') return sendSandboxed(res, fillLinks(x.preview.html, links(req, sample), true));
    send(req, res, `Preview: ${x.title}`, '/dashboard/mail', html`<dl class="facts"><dt>Subject</dt><dd>${x.preview.subject}</dd></dl>
<h2>Plain text</h2><pre>${fillLinks(x.preview.text, links(req, sample), false)}</pre>
<p><a href="/dashboard/mail/templates/${encodeURIComponent(x.template)}/preview?part=html">Open the HTML version</a></p>
<p><a href="/dashboard/mail">Back to mail</a></p>`);
  });

  router.post('/mail/templates/:template', (req, res) => {
    const b = req.body as Json;
    const body = typeof b.required === 'string' ? { required: b.required === 'true' } : { enabled: b.enabled === 'true' };
    return act(req, res, 'set_mail_template', { params: { template: String(req.params.template) }, body }, '/dashboard/mail', 'updated');
  });

  router.get('/mail/:id', async (req, res) => {
    const m = await read<Json>(req, res, 'get_mail_message', { params: { id: String(req.params.id) } });
    if (!m) return;
    // A message's body acts for its member: signed portal links (filled here, live) and
    // link codes. Shown to roles that may change members; a viewer sees what was sent.
    const body = req.signed!.can('members:write');
    if (req.query.part === 'html') {
      if (!body) return void res.status(403).type('text').send('Only roles that may change members see a message\'s body.');
      return sendSandboxed(res, fillLinks(m.html, links(req, m), true));
    }
    send(req, res, m.subject, '/dashboard/mail', html`<dl class="facts"><dt>To</dt><dd>${m.to}</dd><dt>Member</dt><dd>${memberLink(m.member_id)}</dd>
<dt>Template</dt><dd>${m.template}${m.unsubscribable ? ' (optional: carries an unsubscribe link)' : ''}</dd><dt>Cause</dt><dd><code>${m.event_id ?? m.ref}</code></dd><dt>Status</dt><dd>${statusOf(m)}</dd>
<dt>Attempts</dt><dd>${m.attempts}</dd><dt>Created</dt><dd>${m.created_at}</dd><dt>Sent</dt><dd>${m.sent_at ?? '—'}</dd></dl>
${body ? html`<h2>Plain text</h2><pre>${fillLinks(m.text, links(req, m), false)}</pre>
<p><a href="/dashboard/mail/${encodeURIComponent(m.id)}?part=html">Open the HTML version</a> (shown sandboxed: no script runs)</p>`
    : html`<p>The message's text holds links and codes that act for the member: only roles that may change members see it.</p>`}
<p><a href="/dashboard/mail">Back to mail</a></p>`);
  });
}
