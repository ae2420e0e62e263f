import { z } from 'zod';
import { SUBSCRIPTION_STATUSES } from '../../core/statuses';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation, Operation } from '../operation';
import { subscription } from './subscription-schema';

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
