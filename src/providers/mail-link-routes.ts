// The member's doors of signed links in mail (src/domain/mail/mail-links.ts), beside
// the portal link (mail-portal-routes.ts). No API key and no portal session: the
// link's signature, bound to the community, the member and what it opens, is the
// credential (docs/decisions/mail-invoice-links.md).
//   GET /mail/invoices/{community}/{member}/{invoice}/pdf?exp&sig  the invoice's PDF
// The database checks each time that the member still exists and the invoice is still
// theirs, so erasing the member revokes the link. A bad, expired, tampered or foreign
// link answers a 404 page that says nothing of why. A link's URL (its signature) is
// never logged: the access log names the route template only.
import type express from 'express';
import type { Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { renderInvoicePdf } from '../domain/invoices/invoice-pdf';
import { LINK_ID, verifyLink } from '../domain/mail/mail-links';
import { inCommunity } from '../db/community-transaction';
import { sendDocument } from '../web/express-io';
import { esc } from '../web/html';

/** A member-facing page in the portal's look (its stylesheet, one heading, a landmark). */
export function memberPage(title: string, body: string): string {
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
}
