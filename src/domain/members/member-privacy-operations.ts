// A member's data exported and erased (issue 31 item 4): GET /v1/members/{id}/export
// (members:export) and POST /v1/members/{id}/erase (members:erase). The SQL does the
// work (db/migrations/fixtures/functions/30-member-privacy.sql); the erase handler then
// cancels at the payment provider the subscriptions it ended, in the same transaction,
// so a provider failure undoes the erasure. Neither is an MCP tool
// (docs/decisions/member-export.md, member-erasure.md, member-privacy-scopes.md).
import { z } from 'zod';
import { ApiError } from '../../core/errors';
import type { SubscriptionRef } from '../checkout/payment-port';
import { idParam } from '../fields';
import { defineOperation, Operation } from '../operation';
import { memberErasure, memberExport } from './member-privacy-schema';

const params = z.object({ id: idParam('Member id (mem_...)') });

/** What billing_api.member_erase answers: the public erasure, and the subscriptions to cancel at their provider. */
interface EraseResult {
  erasure: z.infer<typeof memberErasure>;
  provider: SubscriptionRef[];
}

export const memberPrivacyOperations: Operation[] = [
  defineOperation({
    name: 'export_member',
    method: 'GET',
    path: '/v1/members/{id}/export',
    scope: 'members:export',
    tag: 'Members',
    summary: 'Export everything the service holds about a member (JSON)',
    description: 'Additive endpoint (not in the spec\'s table), for a member\'s request to see their data: the member '
      + '(identities, external subjects, email, billing details), subscriptions, purchases, grants, invoices with their '
      + 'buyer details, credit notes, payment attempts, every entitlement ledger row, benefit deliveries and platform '
      + 'actions, mail messages (without bodies), unsubscribes, link codes (without the code), checkout sessions, discount '
      + 'redemptions and every event naming the member. format names the document\'s version. Needs members:export, a '
      + 'scope of its own: the document holds what several read scopes guard.',
    params,
    response: memberExport,
    sql: 'member_export',
  }),
  defineOperation({
    name: 'erase_member',
    method: 'POST',
    path: '/v1/members/{id}/erase',
    scope: 'members:erase',
    tag: 'Members',
    summary: "Erase a member's personal data and end their access",
    description: 'Additive endpoint (not in the spec\'s table). Irreversible. Removes the member\'s identities, external '
      + 'subjects, email, billing details, note and tags; cancels their subscriptions now (no refund; at Stripe too), revokes '
      + 'their grants, ends their purchases\' access and expires their open checkouts, so the platforms remove what they '
      + 'granted; strips mail of addresses and bodies; removes unsubscribes, link codes and portal sessions (signed links '
      + 'stop working); redacts the events that named them; keeps invoices with the fields the law requires (a business '
      + 'buyer\'s name, address and tax id; a consumer\'s country only). Emits member.erased. A repeat answers the same '
      + 'erasure with changed false and does nothing.',
    params,
    response: memberErasure,
    idempotent: true,
    handler: async (ctx, input) => {
      const out = await ctx.call<EraseResult>('member_erase', input);
      for (const ref of out.provider) {
        const provider = ctx.services.payments.provider(ref.provider);
        if (!(await provider.ready(ctx))) {
          throw new ApiError('payment_config_inactive', 'The payment provider of this member\'s subscriptions is not configured on this deployment.');
        }
        await provider.cancelNow(ctx, ref);
      }
      return out.erasure;
    },
  }),
];
