import { z } from 'zod';
import { defineOperation, idParam, listOf, Operation, pageQuery, timestamp } from './registry';

export const SUBSCRIPTION_STATUSES = ['active', 'trialing', 'past_due', 'cancelling', 'cancelled', 'paused'] as const;

/** Built by billing.subscription_json: amount, currency and interval of the current plan. */
export const subscription = z.object({
  id: z.string(),
  status: z.enum(SUBSCRIPTION_STATUSES),
  plan_id: z.string(),
  plan_name: z.string().nullable(),
  tier_id: z.string().nullable(),
  tier_name: z.string().nullable(),
  member_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.string(),
  interval: z.enum(['month', 'year']).nullable(),
  current_period_end: timestamp.nullable(),
  cancel_at: timestamp.nullable(),
  paused_until: timestamp.nullable(),
  scheduled_plan_id: z.string().nullable(),
  scheduled_at: timestamp.nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const subscriptionOperations: Operation[] = [
  defineOperation({
    name: 'list_subscriptions',
    method: 'GET',
    path: '/v1/subscriptions',
    scope: 'subscriptions:read',
    tag: 'Subscriptions',
    summary: 'List subscriptions, newest first',
    query: z.object({
      ...pageQuery,
      status: z.enum(SUBSCRIPTION_STATUSES).optional().describe('Only subscriptions in this status.'),
      plan_id: z.string().min(1).max(100).optional().describe('Only subscriptions on this billing plan.'),
      tier_id: z.string().min(1).max(100).optional().describe('Only subscriptions on a plan of this tier.'),
      member_id: z.string().min(1).max(100).optional().describe('Only subscriptions of this member.'),
    }),
    response: listOf(subscription),
    sql: 'subscriptions_list',
  }),
  defineOperation({
    name: 'get_subscription',
    method: 'GET',
    path: '/v1/subscriptions/{id}',
    scope: 'subscriptions:read',
    tag: 'Subscriptions',
    summary: 'Get one subscription',
    params: z.object({ id: idParam('Subscription id (sub_...)') }),
    response: subscription,
    sql: 'subscriptions_get',
  }),
];
