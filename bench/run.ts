// All benchmarks, one after another: `npm run bench` (or `npm run bench -- read`).
// Each creates its own database on DATABASE_URL's server (default: the machine's
// PostgreSQL at 127.0.0.1:5432), prints its figures and writes its section of
// bench/RESULTS.md. They are measurements, never tests.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ALL = ['ledger', 'read', 'members', 'webhooks', 'platforms', 'graphql', 'renewals', 'soak', 'startup', 'cluster'] as const;
const asked = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const unknown = asked.filter((a) => !(ALL as readonly string[]).includes(a));
if (unknown.length > 0) {
  process.stderr.write(`unknown benchmark ${unknown.join(', ')}; choose from ${ALL.join(', ')}\n`);
  process.exit(2);
}
let failed = false;
for (const name of asked.length > 0 ? asked : ALL) {
  process.stderr.write(`\n=== bench/${name}\n`);
  const r = spawnSync(process.execPath, [require.resolve('tsx/cli'), path.join(__dirname, name, 'run.ts')], { stdio: 'inherit', env: process.env });
  if (r.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
