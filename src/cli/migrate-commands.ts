// billing migrate: applies pending migrations (committed ones, then, outside
// production, the current/ directory still being written).
import { migrateAndReport } from '../db/migration-status';
import { defineCommand, defineGroup } from './command';

export default defineGroup({
  name: 'migrate',
  summary: 'apply pending migrations',
  commands: [defineCommand({
    name: '',
    summary: 'applies pending migrations',
    async run(ctx) {
      const url = await ctx.databaseUrl();
      return { applied: await migrateAndReport(url) };
    },
    print: (r: { applied: string[] }) => (r.applied.length ? `Applied: ${r.applied.join(', ')}` : 'Already up to date.'),
  })],
});
