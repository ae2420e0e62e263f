import { z } from 'zod';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation, Operation } from '../operation';
import { purchase } from './purchase-schema';

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
