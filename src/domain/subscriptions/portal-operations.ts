// Operations of the member portal's pages (not under /v1: src/operations/index.ts
// pageOperations): the proration a switch would charge, and the sandbox's simulated
// card. The rules are SQL's (82-member-portal.sql; the proration is
// billing.switch_proration, which the switch itself applies).
import { z } from 'zod';
import { idParam, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';
import { invoiceTaxLine } from '../invoices/invoice-schema';

const params = z.object({ id: idParam('Subscription id (sub_...)') });

export const switchPreview = z.object({
  subscription_id: z.string(),
  plan_id: z.string(),
  applies: z.enum(['now', 'period_end']),
  applies_at: timestamp.nullable(),
  currency: z.string(),
  charge_cents: z.number().int().describe('The new plan over the rest of the period'),
  credit_cents: z.number().int().describe('Unused time of the current plan set against the charge'),
  tax_cents: z.number().int().min(0).describe('The tax of what is charged now, as its invoice will compute it (docs/decisions/tax.md)'),
  tax_lines: z.array(invoiceTaxLine),
  due_now_cents: z.number().int().describe('What is charged now: charge_cents - credit_cents, plus a tax added on top'),
  period_end: timestamp.nullable(),
});

const card = z.object({ subscription_id: z.string(), card: z.enum(['pays', 'declines']) });

export const portalOperations: Operation[] = [
  defineOperation({
    name: 'preview_switch',
    method: 'GET',
    path: '/portal/subscriptions/{id}/switch-preview',
    scope: 'subscriptions:read',
    tag: 'Subscriptions',
    summary: 'What switching to plan_id would charge now (proration), or when a downgrade applies',
    params,
    query: z.object({ plan_id: z.string().min(1).max(100) }),
    response: switchPreview,
    sql: 'subscription_switch_preview',
  }),
  defineOperation({
    name: 'get_sandbox_card',
    method: 'GET',
    path: '/portal/subscriptions/{id}/card',
    scope: 'subscriptions:read',
    tag: 'Subscriptions',
    summary: 'The simulated card a sandbox subscription pays with',
    params,
    response: card,
    sql: 'subscription_card_get',
  }),
  defineOperation({
    name: 'set_sandbox_card',
    method: 'POST',
    path: '/portal/subscriptions/{id}/card',
    scope: 'subscriptions:write',
    tag: 'Subscriptions',
    summary: 'Change the payment method of a sandbox subscription to a simulated card that pays or declines',
    params,
    body: z.object({ card: z.enum(['pays', 'declines']) }),
    response: z.object({ subscription_id: z.string(), declines: z.boolean() }),
    sql: 'subscription_card_set',
  }),
];
