import { z } from 'zod';
import { queryInteger, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';

export const analyticsSummary = z.object({
  mrr_cents: z.number().int().describe('Monthly recurring revenue in `currency`: active, past_due and cancelling subscriptions; annual plans count amount/12.'),
  currency: z.string().nullable().describe('The currency most billing subscriptions use; null when the community has none and no active plan.'),
  active_subscribers: z.number().int().describe('Members with an active, trialing, past_due or cancelling subscription.'),
  recent_signups: z.number().int().describe('Subscriptions created in the last 30 days (community clock).'),
  recent_cancels: z.number().int().describe('Subscriptions cancelled or set to cancel in the last 30 days.'),
  window_start: timestamp.describe('Start of the 30-day window of the recent_* figures.'),
  mrr_by_currency: z.array(z.object({ currency: z.string(), mrr_cents: z.number().int() })),
  mrr_movements: z.object({
    new_cents: z.number().int().describe('MRR added by subscriptions that started billing, of members who never billed before.'),
    expansion_cents: z.number().int().describe('MRR added by subscriptions that bill more (upgrades, price or discount changes).'),
    contraction_cents: z.number().int().describe('MRR taken by subscriptions that bill less (negative or 0).'),
    churn_cents: z.number().int().describe('MRR taken by subscriptions that stopped billing: cancelled, paused, ended (negative or 0).'),
    reactivation_cents: z.number().int().describe('MRR added by subscriptions that billed again (a resume), or of members who billed before.'),
    net_cents: z.number().int().describe('The change of MRR over the window: the sum of the five.'),
  }).describe('MRR movements in `currency` over the same 30 days as the recent_* figures, as recorded when they happened (each figure rounded once).'),
});

export const mrrMovementsFields = {
  new_cents: z.number().int(),
  expansion_cents: z.number().int(),
  contraction_cents: z.number().int(),
  churn_cents: z.number().int(),
  reactivation_cents: z.number().int(),
};

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

export const analyticsSeries = z.object({
  currency: z.string().nullable(),
  past_due: z.number().int().describe('Subscriptions past_due now'),
  days: z.array(z.object({ day: z.string(), mrr_cents: z.number().int(), signups: z.number().int(), cancels: z.number().int(), ...mrrMovementsFields })),
  months: z.array(z.object({
    month: z.string().describe('First day of the month (UTC)'),
    opening_mrr_cents: z.number().int(),
    ...mrrMovementsFields,
    net_cents: z.number().int(),
    closing_mrr_cents: z.number().int(),
  })).describe('MRR movements per month, this month and the 11 before, in `currency`'),
});

const seriesDays = z.object({ days: queryInteger(z.number().int().refine((d) => d === 30 || d === 90, { error: 'must be 30 or 90' }).default(30)) });

/** The dashboard overview's series and page (not under /v1: src/operations/index.ts dashboardOperations). */
export const analyticsDashboardOperations: Operation[] = [
  defineOperation({
    name: 'get_analytics_series',
    method: 'GET',
    path: '/dashboard/analytics/series',
    scope: 'analytics:read',
    tag: 'Analytics',
    summary: 'MRR, signups and cancels per day over the last 30 or 90 days, and the past_due count',
    query: seriesDays,
    response: analyticsSeries,
    sql: 'analytics_series',
  }),
  defineOperation({
    name: 'get_analytics_overview',
    method: 'GET',
    path: '/dashboard/analytics/overview',
    scope: 'analytics:read',
    tag: 'Analytics',
    summary: 'The overview page: the summary and the series, from one read of the subscriptions',
    query: seriesDays,
    response: z.object({ summary: analyticsSummary, series: analyticsSeries }),
    sql: 'analytics_overview',
  }),
];
