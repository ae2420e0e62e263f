import { z } from 'zod';
import { defineOperation, idParam } from './registry';

export const billingPlan = z.object({
  id: z.string(),
  name: z.string().nullable(),
  amount_cents: z.number().int(),
  currency: z.string(),
  interval: z.enum(['month', 'year']).nullable(),
  trial_days: z.number().int(),
  access_days: z.number().int().nullable(),
});

export const tier = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  kind: z.enum(['subscription', 'one_time']),
  billing_mode: z.enum(['recurring', 'one_time']),
  rank: z.number().int(),
  features: z.array(z.string()),
  perks: z.array(z.object({ title: z.string(), detail: z.string().nullable().optional() })),
  plans: z.array(billingPlan),
});

export const planOperations = [
  defineOperation({
    name: 'list_plans',
    method: 'GET',
    path: '/v1/plans',
    scope: 'plans:read',
    tag: 'Plans',
    summary: 'List active plan tiers with their active billing plans',
    response: z.object({ data: z.array(tier) }),
    sql: 'plans_list',
  }),
  defineOperation({
    name: 'get_plan',
    method: 'GET',
    path: '/v1/plans/{tierId}',
    scope: 'plans:read',
    tag: 'Plans',
    summary: 'Get one plan tier',
    params: z.object({ tierId: idParam('Tier id (tier_...)') }),
    response: tier,
    sql: 'plans_get',
  }),
];
