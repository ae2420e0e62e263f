import { z } from 'zod';
import { INVOICE_STATUSES } from '../../core/statuses';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation, Operation } from '../operation';
import { ApiError } from '../../core/errors';
import type { PaymentProviderName } from '../../core/statuses';
import { invoicePdf } from './invoice-pdf';
import { invoice, refund } from './invoice-schema';

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
  defineOperation({
    name: 'get_invoice_pdf',
    method: 'GET',
    path: '/v1/invoices/{id}/pdf',
    scope: 'invoices:read',
    tag: 'Invoices',
    summary: 'Get one invoice as a PDF',
    description: 'The invoice (or, once paid, the receipt) as application/pdf, shown inline and saved as <number>.pdf '
      + '(<id>.pdf for a draft): the community\'s legal name, address and tax id, the buyer as far as known, the number, '
      + 'dates, lines, discount, tax, total, the paid date and method, and the credit notes of its refunds, with money in '
      + 'the currency\'s own decimal places.',
    params: z.object({ id: idParam('Invoice id (inv_...)') }),
    document: invoicePdf,
    sql: 'invoices_document',
  }),
  defineOperation({
    name: 'refund_invoice',
    method: 'POST',
    path: '/v1/invoices/{id}/refunds',
    scope: 'invoices:write',
    tag: 'Invoices',
    summary: 'Refund all or part of a paid invoice',
    description: 'Refunds through the invoice\'s provider. amount_cents defaults to what is left to refund; amount_refunded_cents never exceeds '
      + 'amount_paid_cents. revoke_access: true ends the subscription or purchase the invoice paid for at once and revokes its access. '
      + 'Answers the refund with the updated invoice. 409 unless the invoice is paid and not fully refunded, and 409 when its payment is disputed '
      + '(invoice.dispute is set): the dispute decides where that money goes.',
    params: z.object({ id: idParam('Invoice id (inv_...)') }),
    body: z.object({
      amount_cents: z.number().int().min(1).max(1_000_000_000_00).optional().describe('Minor units; default: all that is left to refund'),
      revoke_access: z.boolean().optional().describe('End the covered subscription or purchase now (default false)'),
    }),
    response: refund.extend({ invoice }),
    idempotent: true,
    handler: async (ctx, input) => {
      const prep = await ctx.call<{ invoice_id: string; provider: PaymentProviderName; status: string; currency: string; left_cents: number; payment_ref: string | null }>(
        'invoice_refund_prepare', input);
      let providerRef: string | null = null;
      const amount = typeof input.amount_cents === 'number' ? input.amount_cents : prep.left_cents;
      // The amount rules are the database's; the provider is asked only for a refund it would accept.
      if (prep.provider !== 'sandbox' && prep.status === 'paid' && amount > 0 && amount <= prep.left_cents) {
        const provider = ctx.services.payments.provider(prep.provider);
        if (!(await provider.ready(ctx))) throw new ApiError('payment_config_inactive', 'The payment provider of this invoice is not configured on this deployment.');
        providerRef = await provider.refund(ctx, { invoice_id: prep.invoice_id, payment_ref: prep.payment_ref, amount_cents: amount, currency: prep.currency });
      }
      const out = await ctx.call<{ invoice: Record<string, unknown>; refund: Record<string, unknown> }>('invoice_refund', { ...input, provider_ref: providerRef });
      return { ...out.refund, invoice: out.invoice };
    },
  }),
];
