// GET /mail/portal/{community}/{member}?exp&sig: the portal link of mail to members
// (src/domain/mail/mail-links.ts). A valid, unexpired signature opens a fresh portal
// session for the member with the community's provider (the sandbox portal, or
// Stripe's billing portal) and redirects there, as POST /v1/members/{id}/portal-sessions
// would for an operator. Anything else answers 404, saying nothing about why.
import type express from 'express';
import type { Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import type { PaymentServices, PortalInfo, ProviderName } from '../domain/checkout/payment-port';
import { verifyLink } from '../domain/mail/mail-links';
import { inCommunity } from '../db/community-transaction';

const ID = /^[a-z]{2,5}_[0-9a-f]{26}$/;

export function mountMailPortal(app: express.Express, deps: { config: Config; ownerPool: pg.Pool; payments: PaymentServices }, baseUrl: (req: Request) => string): void {
  app.get('/mail/portal/:communityId/:memberId', async (req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    const communityId = String(req.params.communityId);
    const memberId = String(req.params.memberId);
    const key = deps.config.webhookEncryptionKey;
    const notFound = () => res.status(404).type('text/plain').send('This link is not valid or has expired.');
    if (!key || !ID.test(communityId) || !ID.test(memberId) || !verifyLink(key, 'portal', communityId, memberId, req.query.exp, req.query.sig)) {
      return void notFound();
    }
    const url = await inCommunity(deps.ownerPool, communityId, async (client) => {
      const exists = await client.query('select 1 from billing.members where community_id = $1 and id = $2 and erased_at is null', [communityId, memberId]);
      if (exists.rowCount === 0) return null;
      const { rows } = await client.query<{ r: PortalInfo & { provider: ProviderName | null } }>(
        'select billing_api.portal_session_create($1) as r', [{ id: memberId }]);
      const portal = rows[0].r;
      if (!portal.provider) return null;
      const ctx = { baseUrl: baseUrl(req), communityId, query: client.query.bind(client) as typeof client.query };
      const provider = deps.payments.provider(portal.provider);
      if (!(await provider.ready(ctx))) return null;
      const made = await provider.createPortal(ctx, portal);
      await client.query('select billing_api.portal_session_set_url($1)', [{ id: portal.id, url: made.stored_url ?? made.url }]);
      return made.url;
    });
    if (!url) return void notFound();
    res.redirect(303, url);
  });
}
