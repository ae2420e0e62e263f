import { z } from 'zod';
import { INVOICE_STATUSES } from '../../core/statuses';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation, Operation } from '../operation';
import { invoice } from './invoice-schema';

export const invoiceOperations: Operation[] = [
  defineOperation({
    name: 'list_invoices',
    method: 'GET',
    path: '/v1/invoices',
    scope: 'invoices:read',
    tag: 'Invoices',
    summary: 'List invoices, newest first',
    description: 'Every charge (checkout, renewal, plan change, one-time purchase) is an invoice. Filters: member_id, subscription_id, status.',
    query: z.object({
      ...pageQuery,
      member_id: z.string().min(1).max(100).optional().describe('Only this member\'s invoices'),
      subscription_id: z.string().min(1).max(100).optional().describe('Only this subscription\'s invoices'),
      status: z.enum(INVOICE_STATUSES).optional(),
    }),
    response: listOf(invoice),
    sql: 'invoices_list',
  }),
  defineOperation({
    name: 'get_invoice',
    method: 'GET',
    path: '/v1/invoices/{id}',
    scope: 'invoices:read',
    tag: 'Invoices',
    summary: 'Get one invoice',
    params: z.object({ id: idParam('Invoice id (inv_...)') }),
    response: invoice,
    sql: 'invoices_get',
  }),
];
