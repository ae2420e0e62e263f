import { z } from 'zod';
import { idParam } from '../fields';
import { defineOperation } from '../operation';
import { tier } from './plan-schema';

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
