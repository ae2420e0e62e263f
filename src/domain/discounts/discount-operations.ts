import { z } from 'zod';
import { defineOperation, Operation } from '../operation';
import { discount } from './discount-schema';

export const discountOperations: Operation[] = [
  defineOperation({
    name: 'list_discounts',
    method: 'GET',
    path: '/v1/discounts',
    scope: 'discounts:read',
    tag: 'Discounts',
    summary: 'List unarchived discount codes with redemption counts',
    response: z.object({ data: z.array(discount) }),
    sql: 'discounts_list',
  }),
];
