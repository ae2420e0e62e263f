// Subscription lifecycle (the spec's states table): cancel at period end, reactivate,
// switch options, switch, cancel a scheduled switch. The state change is SQL
// (billing_api.subscription_cancel and its siblings); the provider call (Stripe;
// nothing for the sandbox) follows in the same transaction, so a provider failure
// undoes the change.
import { z } from 'zod';
import { ApiError } from '../../core/errors';
import type { SubscriptionRef } from '../checkout/payment-port';
import { idParam, timestamp } from '../fields';
import { defineOperation, OpContext, Operation } from '../operation';
import { subscription, switchOption } from './subscription-schema';

const params = z.object({ id: idParam('Subscription id (sub_...)') });

/**
 * What a lifecycle function of 40-subscriptions.sql returns: the public answer, whether
 * the call changed anything (false: a repeat, no provider call) and the facts the
 * provider call needs. Only `subscription` is ever answered.
 */
interface LifecycleResult<T = Record<string, unknown>> {
  subscription: T;
  changed: boolean;
  provider: SubscriptionRef;
}

/** Runs the provider call for a Stripe subscription when the call changed anything; answers the public part. */
async function withProvider<T>(ctx: OpContext, out: LifecycleResult<T>, call: (ref: SubscriptionRef) => Promise<void>): Promise<T> {
  if (out.changed && out.provider.provider !== 'sandbox') {
    const provider = ctx.services.payments.provider(out.provider.provider);
    if (!(await provider.ready(ctx))) throw new ApiError('payment_config_inactive', 'The payment provider of this subscription is not configured on this deployment.');
    await call(out.provider);
  }
  return out.subscription;
}

function provider(ctx: OpContext, ref: SubscriptionRef) {
  return ctx.services.payments.provider(ref.provider);
}

export const lifecycleOperations: Operation[] = [
  defineOperation({
    name: 'cancel_subscription',
    method: 'POST',
    path: '/v1/subscriptions/{id}/cancel',
    scope: 'subscriptions:write',
    tag: 'Subscriptions',
    summary: 'Cancel at the end of the current period (or now)',
    description: 'Access is kept until the current period ends. A repeat on a cancelling subscription answers 202 again without a second provider call. '
      + 'Additive option: the body {"at": "now"} ends the subscription at once and revokes its access (status cancelled).',
    params,
    body: z.object({ at: z.literal('now').optional().describe('"now": end it at once instead of at the period end') }),
    response: z.object({ status: z.enum(['cancelling', 'cancelled']) }),
    status: 202,
    idempotent: true,
    handler: async (ctx, input) => {
      const out = await ctx.call<LifecycleResult>('subscription_cancel', input);
      return withProvider(ctx, out, (ref) => (ref.at === 'now' ? provider(ctx, ref).cancelNow(ctx, ref) : provider(ctx, ref).cancelAtPeriodEnd(ctx, ref)));
    },
  }),
  defineOperation({
    name: 'pause_subscription',
    method: 'POST',
    path: '/v1/subscriptions/{id}/pause',
    scope: 'subscriptions:write',
    tag: 'Subscriptions',
    summary: 'Pause: no invoices; access until the paid period ends',
    description: 'From active or trialing (409 otherwise). Status paused with paused_until = resumes_at. No invoice while paused; the period '
      + 'already paid (or the trial) is kept: access lasts until its end (current_period_end), then stops until it resumes, by the clock at '
      + 'resumes_at or by POST resume.',
    params,
    body: z.object({ resumes_at: timestamp.pipe(z.iso.datetime({ offset: true })).optional().describe('When it resumes by itself; omit to resume on request') }),
    response: subscription,
    idempotent: true,
    handler: async (ctx, input) => {
      const out = await ctx.call<LifecycleResult>('subscription_pause', input);
      return withProvider(ctx, out, (ref) => provider(ctx, ref).pause(ctx, ref));
    },
  }),
  defineOperation({
    name: 'resume_subscription',
    method: 'POST',
    path: '/v1/subscriptions/{id}/resume',
    scope: 'subscriptions:write',
    tag: 'Subscriptions',
    summary: 'Resume a paused subscription now',
    description: 'Before the end of the period paid when it was paused, that period simply goes on: active again, nothing charged. Later, '
      + 'the billing period restarts now with a new invoice; access is granted again (or past_due if that payment fails). 409 unless paused.',
    params,
    response: subscription,
    idempotent: true,
    handler: async (ctx, input) => {
      const out = await ctx.call<LifecycleResult>('subscription_resume', input);
      return withProvider(ctx, out, (ref) => provider(ctx, ref).resume(ctx, ref));
    },
  }),
  defineOperation({
    name: 'reactivate_subscription',
    method: 'POST',
    path: '/v1/subscriptions/{id}/reactivate',
    scope: 'subscriptions:write',
    tag: 'Subscriptions',
    summary: 'Undo a period-end cancellation',
    description: '409 conflict unless the subscription is cancelling.',
    params,
    response: subscription,
    idempotent: true,
    handler: async (ctx, input) => {
      const out = await ctx.call<LifecycleResult>('subscription_reactivate', input);
      return withProvider(ctx, out, (ref) => provider(ctx, ref).reactivate(ctx, ref));
    },
  }),
  defineOperation({
    name: 'get_switch_options',
    method: 'GET',
    path: '/v1/subscriptions/{id}/switch-options',
    scope: 'subscriptions:read',
    tag: 'Subscriptions',
    summary: 'Plans this subscription can switch to, grouped by tier rank',
    description: '409 conflict unless the subscription is active or trialing.',
    params,
    response: z.object({ same_tier: z.array(switchOption), upgrades: z.array(switchOption), downgrades: z.array(switchOption) }),
    sql: 'subscription_switch_options',
  }),
  defineOperation({
    name: 'switch_subscription',
    method: 'POST',
    path: '/v1/subscriptions/{id}/switch',
    scope: 'subscriptions:write',
    tag: 'Subscriptions',
    summary: 'Switch to another plan',
    description: 'A same-tier plan or an upgrade applies now with proration; a downgrade is scheduled for the period end '
      + '(scheduled_plan_id, scheduled_at). A plan that is not among the switch options answers 422 invalid_request.',
    params,
    body: z.object({ plan_id: z.string().min(1).max(100).describe('A plan_id from the switch options') }),
    response: subscription,
    idempotent: true,
    handler: async (ctx, input) => {
      const out = await ctx.call<LifecycleResult>('subscription_switch', input);
      return withProvider(ctx, out, (ref) => provider(ctx, ref).switchPlan(ctx, ref));
    },
  }),
  defineOperation({
    name: 'cancel_scheduled_switch',
    method: 'POST',
    path: '/v1/subscriptions/{id}/cancel-scheduled-switch',
    scope: 'subscriptions:write',
    tag: 'Subscriptions',
    summary: 'Remove a scheduled period-end plan change',
    description: '409 conflict when nothing is scheduled.',
    params,
    response: subscription,
    idempotent: true,
    handler: async (ctx, input) => {
      const out = await ctx.call<LifecycleResult>('subscription_cancel_scheduled_switch', input);
      return withProvider(ctx, out, (ref) => provider(ctx, ref).cancelScheduledSwitch(ctx, ref));
    },
  }),
];
