// The anchor of the read benchmark: the least a server can do to answer the
// entitlement question from the same data with tenancy still in the database. A bare
// Express 5 app, one pg pool whose connections are the API role with the community
// set, one RLS function call per request (bench_anchor.entitlements, created by
// run.ts), rows sent as JSON. No key, no scope, no rate limit, no logs, no metrics.
// Prints "listening" when ready.
import express from 'express';
import pg from 'pg';

const url = process.env.DATABASE_URL;
const community = process.env.BENCH_COMMUNITY;
if (!url || !community) throw new Error('DATABASE_URL and BENCH_COMMUNITY are required');
const pool = new pg.Pool({
  connectionString: url, max: Number(process.env.PG_POOL_SIZE ?? 8),
  options: `-c role=billing_api -c app.community_id=${community}`,
});
const app = express();
app.get('/__rss', (_req, res) => {
  const cpu = process.cpuUsage();
  res.json({ rss: process.memoryUsage().rss, cpuMicros: cpu.user + cpu.system });
});
app.get('/check', async (req, res) => {
  const { rows } = await pool.query('select * from bench_anchor.entitlements($1, $2)', [req.query.platform, req.query.platform_uid]);
  res.json({ entitled: rows.length > 0, entitlements: rows });
});
const server = app.listen(Number(process.env.BENCH_PORT ?? 3902), '127.0.0.1', () => process.stdout.write('listening\n'));
server.keepAliveTimeout = 60_000;
process.on('SIGTERM', () => process.exit(0));
