// Member sessions: the billing portal (provider-hosted for Stripe, a service page for
// the sandbox; ten minutes) and link codes that let a platform bot attach a platform
// identity to a member (create here, redeem from the bot; ten minutes, one-time).
import { z } from 'zod';
import { ApiError } from '../../core/errors';
import { httpsUrl } from '../checkout/checkout-schema';
import type { PortalInfo, ProviderName } from '../checkout/payment-port';
import { idParam, platform, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';
import { member } from './member-schema';

export const memberSessionOperations: Operation[] = [
  defineOperation({
    name: 'create_portal_session',
    method: 'POST',
    path: '/v1/members/{id}/portal-sessions',
    scope: 'members:write',
    tag: 'Members',
    summary: 'Open the billing portal for a member',
    description: 'The url is valid for ten minutes.',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    body: z.object({ return_url: httpsUrl.optional().describe('HTTPS page the portal links back to') }),
    response: z.object({ url: z.string(), expires_at: timestamp }),
    idempotencyRefused: 'the portal url is a one-time credential, never kept to be replayed; asking again opens a fresh session and changes nothing else.',
    handler: async (ctx, input) => {
      const portal = await ctx.call<PortalInfo & { provider: ProviderName | null }>('portal_session_create', input);
      if (!portal.provider) throw new ApiError('payment_config_inactive', 'This community has no active payment provider.');
      const provider = ctx.services.payments.provider(portal.provider);
      if (!(await provider.ready(ctx))) throw new ApiError('payment_config_inactive', 'The payment provider of this community is not configured on this deployment.');
      const { url, stored_url: storedUrl } = await provider.createPortal(ctx, portal);
      await ctx.call('portal_session_set_url', { id: portal.id, url: storedUrl ?? url });
      return { url, expires_at: portal.expires_at };
    },
  }),
  defineOperation({
    name: 'create_link_code',
    method: 'POST',
    path: '/v1/members/{id}/link-codes',
    scope: 'members:write',
    tag: 'Members',
    summary: 'Create a one-time code linking a platform identity to a member',
    description: 'Valid for ten minutes; a new code for the same member and platform invalidates the earlier one.',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    body: z.object({ intended_platform: platform.describe('First-party platform the code is for') }),
    response: z.object({ code: z.string(), member_id: z.string(), intended_platform: platform, expires_at: timestamp }),
    idempotencyRefused: 'the code is a one-time credential, never kept to be replayed; asking again gives a fresh code that replaces the earlier one.',
    sql: 'link_code_create',
  }),
  defineOperation({
    name: 'redeem_link_code',
    method: 'POST',
    path: '/v1/link-codes/redeem',
    scope: 'members:write',
    tag: 'Members',
    summary: 'Redeem a link code from a platform bot',
    description: 'Attaches the platform identity to the code\'s member. 404 for an unknown, expired, used or replaced code; '
      + '409 when the identity belongs to another member. Additive endpoint (not in the spec\'s table).',
    body: z.object({
      code: z.string().min(1).max(100),
      platform,
      platform_uid: z.string().min(1).max(200),
      username: z.string().min(1).max(200).optional(),
    }),
    response: member,
    idempotent: true,
    sql: 'link_code_redeem',
  }),
];
