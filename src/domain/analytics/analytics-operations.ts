import { z } from 'zod';
import { timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';

export const analyticsSummary = z.object({
  mrr_cents: z.number().int().describe('Monthly recurring revenue in `currency`: active, past_due and cancelling subscriptions; annual plans count amount/12.'),
  currency: z.string().nullable().describe('The currency most billing subscriptions use; null when the community has none and no active plan.'),
  active_subscribers: z.number().int().describe('Members with an active, trialing, past_due or cancelling subscription.'),
  recent_signups: z.number().int().describe('Subscriptions created in the last 30 days (community clock).'),
  recent_cancels: z.number().int().describe('Subscriptions cancelled or set to cancel in the last 30 days.'),
  window_start: timestamp.describe('Start of the 30-day window of the recent_* figures.'),
  mrr_by_currency: z.array(z.object({ currency: z.string(), mrr_cents: z.number().int() })),
});

export const analyticsOperations: Operation[] = [
  defineOperation({
    name: 'get_analytics_summary',
    method: 'GET',
    path: '/v1/analytics/summary',
    scope: 'analytics:read',
    tag: 'Analytics',
    summary: 'MRR, subscribers, and the last 30 days of signups and cancellations',
    response: analyticsSummary,
    sql: 'analytics_summary',
  }),
];
