// The member's doors of signed links in mail (src/domain/mail/mail-links.ts), beside
// the portal link (mail-portal-routes.ts). No API key and no portal session: the
// link's signature, bound to the community, the member and what it opens, is the
// credential (docs/decisions/mail-invoice-links.md, mail-unsubscribe.md).
//   GET  /mail/invoices/{community}/{member}/{invoice}/pdf?exp&sig  the invoice's PDF
//   GET  /mail/unsubscribe/{community}/{member}/{template}?exp&sig  a page: unsubscribe
//        from that optional template, or subscribe again (a GET changes nothing: mail
//        scanners open links)
//   POST the same URL: RFC 8058 one-click (List-Unsubscribe=One-Click, as a mail client
//        posts it; any other body that asks for nothing else) unsubscribes; the page's
//        form posts action=unsubscribe or action=resubscribe and is sent back to the page
// The database checks each time that the member still exists and was not erased (and
// the invoice is still theirs), so erasing the member revokes the links. A bad, expired, tampered or foreign
// link answers a 404 page that says nothing of why. A link's URL (its signature) is
// never logged: the access log names the route template only.
import express from 'express';
import type { Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { renderInvoicePdf } from '../domain/invoices/invoice-pdf';
import { LINK_ID, TEMPLATE_NAME, verifyLink } from '../domain/mail/mail-links';
import { inCommunity } from '../db/community-transaction';
import { sendDocument } from '../web/express-io';
import { esc, html, Html } from '../web/html';

/** A member-facing page in the portal's look (its stylesheet, one heading, a landmark). */
function memberPage(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title><link rel="stylesheet" href="/sandbox/portal-assets/portal.css"></head>
<body><main id="main"><h1>${esc(title)}</h1>${body}</main></body></html>`;
}

const PAGE_POLICY = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

function notFound(res: Response): void {
  res.setHeader('Content-Security-Policy', PAGE_POLICY);
  res.status(404).type('html').send(memberPage('This link is not valid', '<p>This link is not valid or has expired. Ask the community for a new one.</p>'));
}

export function mountMailLinks(app: express.Express, deps: { config: Config; ownerPool: pg.Pool }): void {
  app.use('/mail', (_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('X-Frame-Options', 'DENY');
    next();
  });

  app.get('/mail/invoices/:communityId/:memberId/:invoiceId/pdf', async (req: Request, res: Response) => {
    const { communityId, memberId, invoiceId } = req.params as Record<string, string>;
    const key = deps.config.webhookEncryptionKey;
    if (!key || ![communityId, memberId, invoiceId].every((id) => LINK_ID.test(id))
      || !verifyLink(key, 'invoice-pdf', communityId, memberId, req.query.exp, req.query.sig, Date.now(), invoiceId)) {
      return notFound(res);
    }
    const data = await inCommunity(deps.ownerPool, communityId, async (client) => (await client.query<{ d: unknown }>(
      'select billing_private.mail_invoice_document($1, $2, $3) as d', [communityId, memberId, invoiceId])).rows[0].d);
    if (!data) return notFound(res);
    sendDocument(res, await renderInvoicePdf(data));
  });

  const preference = (communityId: string, memberId: string, template: string, subscribe: boolean | null) =>
    inCommunity(deps.ownerPool, communityId, async (client) => (await client.query<{ p: Preference | null }>(
      'select billing_private.mail_preference($1, $2, $3, $4) as p', [communityId, memberId, template, subscribe])).rows[0].p);

  /** The link's parts when its signature holds, else null. */
  const unsubscribeParts = (req: Request) => {
    const { communityId, memberId, template } = req.params as Record<string, string>;
    const key = deps.config.webhookEncryptionKey;
    if (!key || !LINK_ID.test(communityId) || !LINK_ID.test(memberId) || !TEMPLATE_NAME.test(template)
      || !verifyLink(key, 'unsubscribe', communityId, memberId, req.query.exp, req.query.sig, Date.now(), template)) return null;
    return { communityId, memberId, template };
  };

  app.get('/mail/unsubscribe/:communityId/:memberId/:template', async (req: Request, res: Response) => {
    const parts = unsubscribeParts(req);
    const p = parts && await preference(parts.communityId, parts.memberId, parts.template, null);
    if (!p) return notFound(res);
    res.setHeader('Content-Security-Policy', PAGE_POLICY);
    res.type('html').send(unsubscribePage(p, req.originalUrl, req.query.done === '1'));
  });

  app.post('/mail/unsubscribe/:communityId/:memberId/:template', express.urlencoded({ extended: false, limit: '2kb' }), async (req: Request, res: Response) => {
    const parts = unsubscribeParts(req);
    const action = (req.body as Record<string, unknown> | undefined)?.action;
    const p = parts && await preference(parts.communityId, parts.memberId, parts.template, action === 'resubscribe');
    if (!p) return notFound(res);
    // The page's own form goes back to the page; a one-click POST gets its answer here.
    if (action === 'unsubscribe' || action === 'resubscribe') {
      const back = new URL(req.originalUrl, 'http://x');
      back.searchParams.set('done', '1');
      return void res.redirect(303, `${back.pathname}${back.search}`);
    }
    res.setHeader('Content-Security-Policy', PAGE_POLICY);
    res.type('html').send(unsubscribePage(p, req.originalUrl, true));
  });
}

interface Preference { community_name: string; title: string; optional: boolean; unsubscribed: boolean }

/** The page of one template's choice: its state, and the one button that changes it. */
function unsubscribePage(p: Preference, url: string, done: boolean): string {
  const self = new URL(url, 'http://x');
  self.searchParams.delete('done');
  const action = `${self.pathname}${self.search}`;
  const form = (value: string, label: string, secondary = false): Html => html`<form method="post" action="${action}">
<input type="hidden" name="action" value="${value}"><button type="submit"${secondary ? new Html(' class="secondary"') : ''}>${label}</button></form>`;
  const what = html`<strong>${p.title}</strong> emails from ${p.community_name}`;
  const body = !p.optional
    ? html`<p>${what} are notices about your payments, access or contract that the community must send: they cannot be unsubscribed from.</p>`
    : p.unsubscribed
      ? html`<p class="notice"${done ? new Html(' role="status"') : ''}>You are unsubscribed from ${what}. Receipts and notices about your payments and access still come.</p>
${form('resubscribe', 'Subscribe again', true)}`
      : html`${done ? html`<p class="notice" role="status">You are subscribed to ${what} again.</p>` : html`<p>You receive ${what}.</p>`}
${form('unsubscribe', `Unsubscribe from ${p.title} emails`)}`;
  return memberPage('Email preferences', `<p class="muted">${esc(p.community_name)}</p>${body}`);
}
