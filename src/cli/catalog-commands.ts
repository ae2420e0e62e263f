// billing catalog apply FILE --community ID
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
      return applyCatalog(await ctx.ownerPool(), community, catalog);
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
