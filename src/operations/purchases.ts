import { z } from 'zod';
import { defineOperation, idParam, listOf, Operation, pageQuery, timestamp } from './registry';

/** Built by billing.purchase_json. */
export const purchase = z.object({
  id: z.string(),
  status: z.enum(['completed', 'refunded']),
  plan_id: z.string(),
  plan_name: z.string().nullable(),
  tier_id: z.string().nullable(),
  tier_name: z.string().nullable(),
  member_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.string(),
  access_expires_at: timestamp.nullable(),
  paid_at: timestamp,
  created_at: timestamp,
});

export const purchaseOperations: Operation[] = [
  defineOperation({
    name: 'list_purchases',
    method: 'GET',
    path: '/v1/purchases',
    scope: 'purchases:read',
    tag: 'Purchases',
    summary: 'List one-time purchases, newest first',
    query: z.object({ ...pageQuery }),
    response: listOf(purchase),
    sql: 'purchases_list',
  }),
  defineOperation({
    name: 'get_purchase',
    method: 'GET',
    path: '/v1/purchases/{id}',
    scope: 'purchases:read',
    tag: 'Purchases',
    summary: 'Get one purchase',
    params: z.object({ id: idParam('Purchase id (pur_...)') }),
    response: purchase,
    sql: 'purchases_get',
  }),
];
