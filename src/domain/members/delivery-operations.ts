// Benefit delivery shown to people (issue 29 item 5): an operator's retry of a member's
// deliveries (API, the dashboard's member page); the dashboard's Platforms page reads
// (each connection's health, the log of calls made to the platforms); the member's own
// benefits in the sandbox portal.
// docs/decisions/platform-delivery-views.md
import { z } from 'zod';
import { memberEntitlement } from '../entitlements/entitlement-schema';
import { idParam, listOf, pageQuery, platform, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';

export const deliveryOperations: Operation[] = [
  defineOperation({
    name: 'retry_member_deliveries',
    method: 'POST',
    path: '/v1/members/{id}/deliveries/retry',
    scope: 'members:write',
    tag: 'Members',
    summary: "Queue a member's benefit deliveries again now (answers 202 with the member's entitlements)",
    description: 'Every benefit of the member not yet delivered (failed, action_required, pending) is tried again at once, '
      + 'skipping any backoff; delivered ones are left alone, so a retry is harmless. Use it after fixing what an '
      + 'action_required error names (the bot\'s permissions, the role order, the member joining the server). '
      + 'Answers 202 with the member\'s active entitlements and each benefit\'s delivery as it stands before the job runs. '
      + 'Additive endpoint (not in the spec\'s table).',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    response: z.object({ data: z.array(memberEntitlement) }),
    status: 202,
    idempotent: true,
    sql: 'member_deliveries_retry',
  }),
];

const actionSummary = z.object({ at: timestamp, action: z.string(), target: z.string() });

const platformConnection = z.object({
  id: z.string(),
  key: z.string(),
  name: z.string().nullable(),
  platform,
  guild_id: z.string().nullable(),
  chat_id: z.string().nullable(),
  bot_token_set: z.boolean().describe('whether the connection stores its own bot token (never the token)'),
  last_success: actionSummary.nullable(),
  last_error: actionSummary.extend({
    outcome: z.enum(['retry', 'action_required']), status_code: z.number().int().nullable(), error: z.string().nullable(),
  }).nullable(),
  waiting: z.object({ pending: z.number().int(), failed: z.number().int(), action_required: z.number().int() }),
});

const platformAction = z.object({
  id: z.string(),
  member_id: z.string(),
  platform_config_id: z.string(),
  action: z.string(),
  target: z.string(),
  outcome: z.enum(['ok', 'retry', 'action_required']),
  status_code: z.number().int().nullable(),
  error: z.string().nullable(),
  created_at: timestamp,
});

export const deliveryDashboardOperations: Operation[] = [
  defineOperation({
    name: 'list_platform_connections',
    method: 'GET',
    path: '/dashboard/platforms',
    scope: 'members:read',
    tag: 'Platforms',
    summary: 'Each platform connection with its health: token set, last success, last error, benefits waiting',
    response: z.object({ data: z.array(platformConnection) }),
    sql: 'platform_connections_health',
  }),
  defineOperation({
    name: 'list_platform_actions',
    method: 'GET',
    path: '/dashboard/platforms/actions',
    scope: 'members:read',
    tag: 'Platforms',
    summary: 'The calls made to the platforms, newest first, optionally of one connection',
    query: z.object({ platform_config_id: idParam('Connection id (pcfg_...)').optional(), ...pageQuery }),
    response: listOf(platformAction),
    sql: 'platform_actions_list',
  }),
  defineOperation({
    name: 'get_portal_benefits',
    method: 'GET',
    path: '/portal/benefits',
    // What a member portal session holds (billing_private.member_portal_scopes): the SQL
    // answers only a portal session's own member, so no key or operator reads through it.
    scope: 'subscriptions:read',
    tag: 'Members',
    summary: "The portal member's active entitlements with each benefit's delivery (the error only when action is required)",
    response: z.object({
      data: z.array(z.object({
        key: z.string(),
        name: z.string(),
        benefits: z.array(z.object({
          platform, connection: z.string().nullable(), type: z.string(), value: z.string(),
          delivery: z.object({ status: z.enum(['pending', 'delivered', 'failed', 'action_required']), updated_at: timestamp.nullable(), error: z.string().nullable() }),
        })),
      })),
    }),
    sql: 'member_portal_benefits',
  }),
];
