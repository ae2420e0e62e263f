// A member's data exported and erased from the member page (issue 31 item 4;
// docs/decisions/member-export.md, member-erasure.md, member-privacy-scopes.md):
//   GET  /dashboard/members/:id/export  downloads GET /v1/members/{id}/export's JSON
//   GET  /dashboard/members/:id/erase   the confirm step: what erasure does, the member id typed
//   POST /dashboard/members/:id/erase   runs erase_member, back to the member page
// Both need their scope (members:export, members:erase: admins and owners); the member
// page offers them only to a role that holds it, and the database refuses the rest.
import type { Router } from 'express';
import { html, Html, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import type { Signed } from '../dashboard-session';
import { csrfField, Json, problemPage, send } from '../dashboard-layout';

const memberPath = (id: string) => `/dashboard/members/${encodeURIComponent(id)}`;

/** The member page's Privacy section: the export button and the way to the erase step (or the erasure's date). */
export function privacySection(s: Signed, id: string, member: Json): Html {
  const canExport = s.can('members:export');
  const canErase = s.can('members:erase');
  if (!canExport && !canErase && !member.erased_at) return html``;
  return html`<h2>Privacy</h2>
${member.erased_at ? html`<p class="notice">This member's personal data was erased on ${member.erased_at}: their invoices are kept with the fields the law requires.</p>` : ''}
<div class="actions">${canExport ? html`<form class="inline" method="get" action="${memberPath(id)}/export"><button type="submit" class="secondary">Export data (JSON)</button></form>` : ''}
${canErase && !member.erased_at ? html`<form class="inline" method="get" action="${memberPath(id)}/erase"><button type="submit" class="danger">Erase member…</button></form>` : ''}</div>`;
}

function confirmPage(s: Signed, id: string, problem: string | null): Html {
  const describedBy = problem ? raw(' aria-invalid="true" aria-describedby="erase-confirm-hint erase-confirm-problem"') : raw(' aria-describedby="erase-confirm-hint"');
  return html`<p>Erasing <a href="${memberPath(id)}">${id}</a> cannot be undone. It:</p>
<ul>
<li>removes their platform identities, external subjects, email, billing details, note and tags, and the addresses and bodies of the mail sent to them;</li>
<li>ends their access now: subscriptions cancelled without a refund (at Stripe too), grants revoked, purchases ended, open checkouts expired; the platforms remove the roles and chats they were given;</li>
<li>stops every link they were sent (receipts' PDF links, the portal, unsubscribe) and removes their link codes;</li>
<li>redacts the events that named them and emits <code>member.erased</code>;</li>
<li>keeps their invoices, numbers and amounts: a business buyer's name, address and tax id stay on them, a consumer's country only.</li>
</ul>
<form method="post" action="${memberPath(id)}/erase">${csrfField(s)}<fieldset><legend>Confirm the erasure</legend>
<p><label for="erase-confirm">Type the member id to confirm</label><input id="erase-confirm" name="confirm" required autocomplete="off" spellcheck="false"${describedBy}>
<span class="muted" id="erase-confirm-hint">${id}</span>${problem ? html` <span class="error" id="erase-confirm-problem" role="alert">${problem}</span>` : ''}</p>
<p><button type="submit" class="danger">Erase this member</button> <a href="${memberPath(id)}">Cancel</a></p></fieldset></form>`;
}

export function mountMemberPrivacy(router: Router, ctx: DashboardContext): void {
  const { run, read, act } = ctx;

  router.get('/members/:id/export', async (req, res) => {
    const id = String(req.params.id);
    const out = await run(req, 'export_member', { params: { id } });
    if (out.problem) return problemPage(req, res, out, memberPath(id));
    res.setHeader('Content-Disposition', `attachment; filename="${id.replace(/[^A-Za-z0-9_-]/g, '')}-export.json"`);
    res.type('application/json').send(out.bodyText ?? JSON.stringify(out.body));
  });

  router.get('/members/:id/erase', async (req, res) => {
    const id = String(req.params.id);
    const member = await read(req, res, 'get_member', { params: { id } });
    if (!member) return;
    if (member.erased_at) return void res.redirect(303, memberPath(id));
    send(req, res, `Erase member ${id}`, '/dashboard/members', confirmPage(req.signed!, id, null));
  });

  router.post('/members/:id/erase', async (req, res) => {
    const id = String(req.params.id);
    const typed = (req.body as Record<string, unknown>).confirm;
    if (typeof typed !== 'string' || typed.trim() !== id) {
      res.status(422);
      return void send(req, res, `Erase member ${id}`, '/dashboard/members',
        confirmPage(req.signed!, id, 'This is not the member id: type it exactly to erase the member.'));
    }
    return act(req, res, 'erase_member', { params: { id } }, memberPath(id), 'erased');
  });
}
