// Seeds a database for the check's instruction-count profile (bench/read/profile-check.sh):
// the read benchmark's seed (BENCH_MEMBERS members, BENCH_EVENTS events) and one key with
// members:read; prints "<database url> <key hash>". Env: BENCH_DB (billing_prof_check).
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { hashKey } from '../../src/core/ids';
import { createBenchDatabase } from '../support';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = process.env.BENCH_DB ?? 'billing_prof_check';

async function main() {
  const url = await createBenchDatabase(SERVER, DB);
  const owner = new pg.Pool({ connectionString: url, max: 1 });
  const community = await createCommunity(owner, 'Bench community');
  const key = await createKey(owner, community.id, ['members:read', 'subscriptions:read']);
  await owner.end();
  execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-v', `community=${community.id}`,
    '-v', `members=${process.env.BENCH_MEMBERS ?? 100000}`, '-v', `events=${process.env.BENCH_EVENTS ?? 10000}`,
    '-d', url, '-f', path.join(__dirname, 'seed.sql')], { stdio: ['ignore', 'ignore', 'inherit'] });
  process.stdout.write(`${url} ${hashKey(key.key)}\n`);
}
main().catch((e) => { console.error(e); process.exit(1); });
