// Links in mail to members (docs/decisions/mail-outbox.md, mail-invoice-links.md). A
// message is rendered in the database with placeholders for links that must be signed
// with the deployment's key, which never reaches the database; the worker fills them in
// when it sends, the dashboard when it shows a message:
// - {{portal_url}}: GET /mail/portal/{community}/{member} opens a fresh portal session
//   (src/providers/mail-portal-routes.ts); LINK_DAYS.
// - {{invoice_pdf_url:<invoice id>}}: GET /mail/invoices/{community}/{member}/{invoice}/pdf
//   downloads that invoice's PDF (src/providers/mail-link-routes.ts); DOCUMENT_LINK_DAYS,
//   as long as the invoice is still the member's.
// - {{unsubscribe_url}} (optional mail only): /mail/unsubscribe/{community}/{member}/{template},
//   a page to unsubscribe from that template (or subscribe again) and the RFC 8058
//   one-click POST the List-Unsubscribe header names; DOCUMENT_LINK_DAYS.
// Each link names what it opens, expires, and carries an HMAC-SHA256 of its purpose and
// every part with the key.
import crypto from 'node:crypto';

export const LINK_DAYS = 30;
/** A receipt is looked up at tax time: its PDF link outlasts a year of renewals. */
export const DOCUMENT_LINK_DAYS = 400;

/** The ids a link may name (community, member, invoice): nothing that needs encoding. */
export const LINK_ID = /^[a-z]{2,5}_[0-9a-f]{26}$/;

function signature(key: string, purpose: string, communityId: string, memberId: string, exp: number, subject?: string): string {
  return crypto.createHmac('sha256', `mail-link:${key}`)
    .update(`${purpose}\n${communityId}\n${memberId}\n${exp}${subject === undefined ? '' : `\n${subject}`}`).digest('base64url');
}

const expiry = (now: number, days: number) => Math.floor(now / 1000) + days * 86400;

export function portalLink(baseUrl: string, key: string, communityId: string, memberId: string, now = Date.now()): string {
  const exp = expiry(now, LINK_DAYS);
  const sig = signature(key, 'portal', communityId, memberId, exp);
  return `${baseUrl}/mail/portal/${encodeURIComponent(communityId)}/${encodeURIComponent(memberId)}?exp=${exp}&sig=${sig}`;
}

/** The member's download of one of their invoices as PDF (a receipt, or the invoice a credit note amends). */
export function invoicePdfLink(baseUrl: string, key: string, communityId: string, memberId: string, invoiceId: string, now = Date.now()): string {
  const exp = expiry(now, DOCUMENT_LINK_DAYS);
  const sig = signature(key, 'invoice-pdf', communityId, memberId, exp, invoiceId);
  return `${baseUrl}/mail/invoices/${encodeURIComponent(communityId)}/${encodeURIComponent(memberId)}/${encodeURIComponent(invoiceId)}/pdf?exp=${exp}&sig=${sig}`;
}

/** The member's page (GET) and one-click POST (RFC 8058) to stop one optional template. */
export function unsubscribeLink(baseUrl: string, key: string, communityId: string, memberId: string, template: string, now = Date.now()): string {
  const exp = expiry(now, DOCUMENT_LINK_DAYS);
  const sig = signature(key, 'unsubscribe', communityId, memberId, exp, template);
  return `${baseUrl}/mail/unsubscribe/${encodeURIComponent(communityId)}/${encodeURIComponent(memberId)}/${encodeURIComponent(template)}?exp=${exp}&sig=${sig}`;
}

/** The names of templates (billing.mail_templates()). */
export const TEMPLATE_NAME = /^[a-z][a-z_]{0,49}$/;

/**
 * Whether a link's parts carry a valid, unexpired signature. `subject` is what the link
 * opens besides the member (an invoice id, a template), for the purposes that name one.
 */
export function verifyLink(key: string, purpose: string, communityId: string, memberId: string, exp: unknown, sig: unknown, now = Date.now(), subject?: string): boolean {
  if (typeof exp !== 'string' || !/^\d{1,12}$/.test(exp) || typeof sig !== 'string' || sig.length > 100) return false;
  if (Number(exp) * 1000 < now) return false;
  const want = Buffer.from(signature(key, purpose, communityId, memberId, Number(exp), subject));
  const got = Buffer.from(sig);
  return want.length === got.length && crypto.timingSafeEqual(want, got);
}

export interface LinkContext {
  baseUrl: string;
  key: string | null;
  communityId: string;
  memberId: string;
  /** The message's template: what its unsubscribe link stops. */
  template?: string;
  /** When the links are made (their expiry counts from it); now by default. */
  now?: number;
}

const INVOICE_PDF = /\{\{invoice_pdf_url:([A-Za-z0-9_]{1,64})\}\}/g;

/**
 * A message's text or HTML with its placeholders filled (in HTML, & escaped). Without
 * a key no link can be signed: a link becomes the service's address.
 */
export function fillLinks(body: string, ctx: LinkContext, html: boolean): string {
  const now = ctx.now ?? Date.now();
  const out = (url: string) => (html ? url.replaceAll('&', '&amp;') : url);
  const portal = ctx.key ? portalLink(ctx.baseUrl, ctx.key, ctx.communityId, ctx.memberId, now) : ctx.baseUrl;
  const unsubscribe = ctx.key && ctx.template ? unsubscribeLink(ctx.baseUrl, ctx.key, ctx.communityId, ctx.memberId, ctx.template, now) : ctx.baseUrl;
  return body.replaceAll('{{portal_url}}', () => out(portal))
    .replaceAll('{{unsubscribe_url}}', () => out(unsubscribe))
    .replace(INVOICE_PDF, (_m, invoiceId: string) =>
      out(ctx.key ? invoicePdfLink(ctx.baseUrl, ctx.key, ctx.communityId, ctx.memberId, invoiceId, now) : ctx.baseUrl));
}
