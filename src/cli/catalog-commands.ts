// billing catalog apply FILE --community ID
import { resolveEncryptionKey } from '../db/encryption-key';
import { applyCatalog, CatalogResult, readCatalogFile } from '../domain/catalog/catalog-file';
import { defineCommand, defineGroup, requireString } from './command';

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
      // Payment secrets in the file are encrypted with the service's key; the output
      // lists ids only, never a secret.
      const provider = catalog.payment_provider as { secret_key?: unknown; webhook_secret?: unknown } | null | undefined;
      const encryptionKey = provider?.secret_key || provider?.webhook_secret ? resolveEncryptionKey(ctx.config, ctx.log) : null;
      return applyCatalog(await ctx.ownerPool(), community, catalog, { encryptionKey });
    },
    print: (r: CatalogResult) => {
      const lines = ['Applied catalog:'];
      for (const [what, map] of Object.entries(r)) {
        for (const [k, id] of Object.entries(map as Record<string, string>)) lines.push(`  ${what.padEnd(13)} ${k.padEnd(24)} ${id}`);
      }
      return lines.join('\n');
    },
  })],
});
