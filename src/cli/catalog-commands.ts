// billing catalog apply FILE --community ID
import { resolveEncryptionKey } from '../db/encryption-key';
import { applyCatalog, CatalogResult, readCatalogFile, splitPlatformSettings } from '../domain/catalog/catalog-file';
import { defineCommand, defineGroup, requireString } from './command';
import { idList, money } from './plans-commands';

/**
 * What an apply did, for a person: what it created and updated (by key, with the
 * fields), then each price edit with the subscribers it concerns (they keep their
 * price) and the command that would move them, then every key's id.
 */
export function catalogReport(r: CatalogResult, communityId: string): string {
  const total = (['tiers', 'plans', 'entitlements', 'platforms', 'discounts', 'tax_rates'] as const).reduce((n, k) => n + Object.keys(r[k]).length, 0);
  const created = r.changes.filter((c) => c.action === 'created').length;
  const updated = r.changes.length - created;
  const lines = [r.changes.length === 0 ? `Applied catalog: nothing changed (${total} listed)`
    : `Applied catalog: ${created} created, ${updated} updated, ${total - r.changes.filter((c) => c.id !== null).length} unchanged`];
  for (const c of r.changes) {
    lines.push(`  ${c.action.padEnd(8)} ${c.kind.padEnd(16)} ${c.key}${c.fields.length ? ` (${c.fields.join(', ')})` : ''}`);
  }
  for (const p of r.price_changes) {
    lines.push('', `Price of plan ${p.plan}: ${money(p.from_cents, p.currency)} -> ${money(p.to_cents, p.currency)} for new buyers.`);
    if (p.subscriptions === 0) {
      lines.push('  No existing subscriber pays another price.');
      continue;
    }
    lines.push(`  ${p.subscriptions.toLocaleString('en-US')} existing subscriptions keep the price they pay: ${idList(p.subscription_ids, p.subscriptions)}`);
    if (p.pending_migration > 0) lines.push(`  ${p.pending_migration.toLocaleString('en-US')} of them have a price migration pending (billing plans migrations --community ${communityId} --plan ${p.plan}).`);
    lines.push(`  To move them to the new price with notice: billing plans migrate --community ${communityId} --plan ${p.plan} --notice-days 30`);
  }
  lines.push('', 'Ids:');
  for (const what of ['tiers', 'plans', 'entitlements', 'platforms', 'discounts', 'tax_rates'] as const) {
    for (const [k, id] of Object.entries(r[what])) lines.push(`  ${what.padEnd(13)} ${k.padEnd(24)} ${id}`);
  }
  return lines.join('\n');
}

export default defineGroup({
  name: 'catalog',
  summary: "apply a catalog file to a community",
  commands: [defineCommand({
    name: 'apply',
    summary: "creates or updates the community's catalog from FILE (never deletes)",
    args: ['FILE'],
    options: { community: { type: 'string', required: true, value: 'ID', description: 'community id' } },
    async run(ctx, input) {
      const community = requireString(input, 'community');
      // Validate before touching the database: a bad file changes nothing.
      const catalog = readCatalogFile(input.args[0]);
      // Payment secrets and bot tokens in the file are encrypted with the service's key;
      // the output lists ids and field names only, never a secret.
      const provider = catalog.payment_provider as { secret_key?: unknown; webhook_secret?: unknown } | null | undefined;
      const secrets = provider?.secret_key || provider?.webhook_secret || (catalog.platforms ?? []).some((p) => { const x = splitPlatformSettings(p); return x.botToken || x.clientSecret; });
      const encryptionKey = secrets ? resolveEncryptionKey(ctx.config, ctx.log) : null;
      return { community_id: community, ...await applyCatalog(await ctx.ownerPool(), community, catalog, { encryptionKey }) };
    },
    print: (r: CatalogResult & { community_id: string }) => catalogReport(r, r.community_id),
  })],
});
