// billing plans migrate --community ID --plan KEY_OR_ID --notice-days N
// billing plans migrations --community ID [--plan KEY_OR_ID]
// A plan's price edit (catalog apply) reaches new buyers only; `plans migrate` moves
// its existing subscribers to the current price, each at its first period end on or
// after the notice date (docs/decisions/price-changes-keep-existing-subscribers.md).
import { listPriceMigrations, migratePlanPrice, PriceMigration, PriceMigrationMade } from '../domain/catalog/price-migrations';
import { defineCommand, defineGroup, requireString, UsageError } from './command';

/** At most `shown` ids, then how many more: readable for any count. */
export function idList(ids: string[], total: number, shown = 10): string {
  if (total === 0) return 'none';
  const head = ids.slice(0, shown).join(', ');
  return total > shown ? `${head}, ... and ${(total - shown).toLocaleString('en-US')} more` : head;
}

export function money(cents: number, currency: string): string {
  return `${cents.toLocaleString('en-US')} ${currency}`;
}

function migrationLine(m: PriceMigration): string {
  return `${m.id}  plan ${m.plan_key}  to ${money(m.price_cents, m.currency)}  notice ${m.notice_days} days (until ${m.notice_ends_at})  `
    + `${m.subscriptions.toLocaleString('en-US')} concerned, ${m.pending_subscriptions.toLocaleString('en-US')} still pending`;
}

export default defineGroup({
  name: 'plans',
  summary: "move a plan's existing subscribers to its current price, with notice",
  commands: [
    defineCommand({
      name: 'migrate',
      summary: "schedules a plan's subscribers' move to its current price at their first period end on or after now + N days",
      options: {
        community: { type: 'string', required: true, value: 'ID', description: 'community id' },
        plan: { type: 'string', required: true, value: 'KEY_OR_ID', description: 'the plan (its catalog key or id)' },
        'notice-days': { type: 'string', required: true, value: 'N', description: 'days of notice before the new price can apply (0 to 3650)' },
      },
      async run(ctx, input) {
        const raw = requireString(input, 'notice-days');
        const days = Number(raw);
        if (!/^[0-9]{1,4}$/.test(raw) || days > 3650) throw new UsageError(`--notice-days: expected whole days from 0 to 3650, got "${raw}"`);
        return migratePlanPrice(await ctx.ownerPool(), requireString(input, 'community'), requireString(input, 'plan'), days);
      },
      print: (m: PriceMigrationMade) => [
        `Price migration ${m.id}: plan ${m.plan_key} subscribers move to ${money(m.price_cents, m.currency)}`,
        `  at each one's first period end on or after ${m.notice_ends_at} (${m.notice_days} days of notice)`,
        `  ${m.subscriptions.toLocaleString('en-US')} subscriptions: ${idList(m.subscription_ids, m.subscriptions)}`,
        ...(m.cleared_subscriptions > 0 ? [`  ${m.cleared_subscriptions.toLocaleString('en-US')} already at this price: their earlier pending migration dropped`] : []),
        ...(m.subscriptions > 0 ? ['  Tell them now: each gets subscription.updated when the new price applies.'] : []),
      ].join('\n'),
    }),
    defineCommand({
      name: 'migrations',
      summary: "lists a community's price migrations, newest first",
      options: {
        community: { type: 'string', required: true, value: 'ID', description: 'community id' },
        plan: { type: 'string', value: 'KEY_OR_ID', description: 'only this plan\'s (its catalog key or id)' },
      },
      async run(ctx, input) {
        const plan = typeof input.options.plan === 'string' && input.options.plan !== '' ? input.options.plan : undefined;
        return { data: await listPriceMigrations(await ctx.ownerPool(), requireString(input, 'community'), plan) };
      },
      print: (r: { data: PriceMigration[] }) => (r.data.length ? r.data.map(migrationLine).join('\n') : 'No price migrations'),
    }),
  ],
});
