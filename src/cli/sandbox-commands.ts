// billing sandbox complete CHECKOUT_ID
// billing sandbox advance --community ID --days N
// billing sandbox decline|accept --subscription SUB_ID
// billing sandbox dispute --invoice INV_ID
import { sandboxAdvance, sandboxComplete, sandboxDispute, sandboxSetCard } from '../domain/checkout/checkout-completion';
import { defineCommand, defineGroup, requireString, UsageError } from './command';

/** `sandbox decline` and `sandbox accept`: one command each, setting the subscription's card. */
function cardCommand(name: string, declines: boolean, summary: string) {
  return defineCommand({
    name,
    summary,
    options: {
      subscription: { type: 'string', required: true, value: 'SUB_ID', description: 'a sandbox subscription' },
    },
    async run(ctx, input) {
      return sandboxSetCard(await ctx.ownerPool(), requireString(input, 'subscription'), declines);
    },
    print: (r: { subscription_id: string; declines: boolean }) =>
      `Future charges of ${r.subscription_id} will ${r.declines ? 'be declined' : 'succeed'}`,
  });
}

export default defineGroup({
  name: 'sandbox',
  summary: 'pay sandbox checkouts and move the sandbox test clock',
  commands: [
    defineCommand({
      name: 'complete',
      summary: 'pays a sandbox checkout, exactly as the buyer\'s click on its page would',
      args: ['CHECKOUT_ID'],
      async run(ctx, input) {
        const done = await sandboxComplete(await ctx.ownerPool(), input.args[0]);
        const made: { subscription_id: string } | { purchase_id: string } = done.subscription_id
          ? { subscription_id: done.subscription_id } : { purchase_id: done.purchase_id ?? '' };
        return { checkout_id: done.checkout_id, ...made, member_id: done.member_id };
      },
      print: (r: { checkout_id: string; subscription_id?: string; purchase_id?: string; member_id: string }) =>
        `Paid checkout ${r.checkout_id}: ${r.subscription_id ? `subscription ${r.subscription_id}` : `purchase ${r.purchase_id}`} for member ${r.member_id}`,
    }),
    defineCommand({
      name: 'advance',
      summary: 'moves a sandbox community\'s clock forward N days and applies everything that became due',
      options: {
        community: { type: 'string', required: true, value: 'ID', description: 'community id (its payment provider must be sandbox)' },
        days: { type: 'string', required: true, value: 'N', description: 'days to move forward (a positive number, fractions allowed)' },
      },
      async run(ctx, input) {
        const community = requireString(input, 'community');
        const raw = requireString(input, 'days');
        const days = Number(raw);
        if (!Number.isFinite(days) || days <= 0 || days > 36500) throw new UsageError(`--days: expected a positive number of days, got "${raw}"`);
        return sandboxAdvance(await ctx.ownerPool(), community, days);
      },
      print: (r: { now: string }) => `The sandbox clock now reads ${r.now}`,
    }),
    cardCommand('decline', true, 'makes a sandbox subscription\'s future charges fail (renewals, retries, plan changes)'),
    cardCommand('accept', false, 'makes a sandbox subscription\'s future charges succeed again'),
    defineCommand({
      name: 'dispute',
      summary: 'opens a dispute against a paid sandbox invoice: the access it paid for ends at once',
      options: {
        invoice: { type: 'string', required: true, value: 'INV_ID', description: 'a paid sandbox invoice' },
      },
      async run(ctx, input) {
        return sandboxDispute(await ctx.ownerPool(), requireString(input, 'invoice'));
      },
      print: (r: { invoice_id: string; dispute_id: string }) => `Dispute ${r.dispute_id} opened on invoice ${r.invoice_id}: its access ended`,
    }),
  ],
});
