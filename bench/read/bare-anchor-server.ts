// The bare anchor of the read benchmark (issue 33): the least a server can do to answer
// GET /v1/entitlements/check from the same seeded entitlement data with tenancy still
// in the database, and nothing of the project's. A bare Express 5 app, one pg pool of
// PG_POOL_SIZE connections (the API's pool size in that run) as billing_api, and per
// request one NAMED prepared statement (parsed and planned once per connection) calling
// one plain plpgsql function, bench_bare.check_entitlements (created by run.ts, BARE_SQL),
// that sets the tenant with set_config and reads bench_bare's copies of the ledger under
// their own RLS policy: no billing.* function, policy or table. The community comes from
// BENCH_COMMUNITY (no key, no scope, no rate limit, no logs, no metrics); rows go out
// as JSON in the check's shape. Prints "listening" when ready.
import express from 'express';
import pg from 'pg';

const url = process.env.DATABASE_URL;
const community = process.env.BENCH_COMMUNITY;
if (!url || !community) throw new Error('DATABASE_URL and BENCH_COMMUNITY are required');
const pool = new pg.Pool({ connectionString: url, max: Number(process.env.PG_POOL_SIZE ?? 8), options: '-c role=billing_api' });
const CHECK = 'select * from bench_bare.check_entitlements($1, $2, $3)';
const app = express();
app.get('/__rss', (_req, res) => {
  const cpu = process.cpuUsage();
  res.json({ rss: process.memoryUsage().rss, cpuMicros: cpu.user + cpu.system });
});
app.get('/v1/entitlements/check', async (req, res) => {
  const { rows } = await pool.query({ name: 'bare_check', text: CHECK, values: [community, req.query.platform, req.query.platform_uid] });
  res.json({ entitled: rows.length > 0, entitlements: rows });
});
const server = app.listen(Number(process.env.BENCH_PORT ?? 3903), '127.0.0.1', () => process.stdout.write('listening\n'));
server.keepAliveTimeout = 60_000;
process.on('SIGTERM', () => process.exit(0));
