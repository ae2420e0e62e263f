// Links in mail to members (docs/decisions/mail-outbox.md). A message is rendered in
// the database with placeholders ({{portal_url}}) for links that must be signed with
// the deployment's key, which never reaches the database; the worker fills them in
// when it sends, the dashboard when it shows a message. A portal link names the
// community and member, expires after LINK_DAYS and carries an HMAC-SHA256 of those
// with the key: GET /mail/portal/... (src/providers/mail-portal-routes.ts) checks it
// and opens a fresh portal session.
import crypto from 'node:crypto';

export const LINK_DAYS = 30;

function signature(key: string, purpose: string, communityId: string, memberId: string, exp: number): string {
  return crypto.createHmac('sha256', `mail-link:${key}`).update(`${purpose}\n${communityId}\n${memberId}\n${exp}`).digest('base64url');
}

export function portalLink(baseUrl: string, key: string, communityId: string, memberId: string, now = Date.now()): string {
  const exp = Math.floor(now / 1000) + LINK_DAYS * 86400;
  const sig = signature(key, 'portal', communityId, memberId, exp);
  return `${baseUrl}/mail/portal/${encodeURIComponent(communityId)}/${encodeURIComponent(memberId)}?exp=${exp}&sig=${sig}`;
}

/** Whether a link's parts carry a valid, unexpired signature. */
export function verifyLink(key: string, purpose: string, communityId: string, memberId: string, exp: unknown, sig: unknown, now = Date.now()): boolean {
  if (typeof exp !== 'string' || !/^\d{1,12}$/.test(exp) || typeof sig !== 'string' || sig.length > 100) return false;
  if (Number(exp) * 1000 < now) return false;
  const want = Buffer.from(signature(key, purpose, communityId, memberId, Number(exp)));
  const got = Buffer.from(sig);
  return want.length === got.length && crypto.timingSafeEqual(want, got);
}

export interface LinkContext { baseUrl: string; key: string | null; communityId: string; memberId: string }

/** A message's text or HTML with its placeholders filled (in HTML, & escaped). */
export function fillLinks(body: string, ctx: LinkContext, html: boolean): string {
  const portal = ctx.key ? portalLink(ctx.baseUrl, ctx.key, ctx.communityId, ctx.memberId) : ctx.baseUrl;
  return body.replaceAll('{{portal_url}}', html ? portal.replaceAll('&', '&amp;') : portal);
}
