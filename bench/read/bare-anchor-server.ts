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
//
// BENCH_FLOOR=1: the rules' floor instead, the same server plus the least the check's
// rules ask of any server (what bounds issue 33's item 2): the request's key, shape
// checked as the API checks it (KEY_PATTERN) and hashed (sha256), looked up in the
// database by its hash in the same statement, which refuses a revoked or unknown key
// and a missing scope and takes the tenant from the key
// (bench_bare.check_entitlements_keyed); a token counted per key in the process; one
// access log line per request through pino, as the API writes its own. More generous than any real gate: the key table is readable by billing_api (no
// security definer), the bucket is never touched, no request id, no metrics.
import crypto from 'node:crypto';
import express from 'express';
import pg from 'pg';
import pino from 'pino';
import { KEY_PATTERN } from '../../src/core/ids';

const url = process.env.DATABASE_URL;
const community = process.env.BENCH_COMMUNITY;
if (!url || !community) throw new Error('DATABASE_URL and BENCH_COMMUNITY are required');
const floor = process.env.BENCH_FLOOR === '1';
const pool = new pg.Pool({ connectionString: url, max: Number(process.env.PG_POOL_SIZE ?? 8), options: '-c role=billing_api' });
const CHECK = 'select * from bench_bare.check_entitlements($1, $2, $3)';
const CHECK_KEYED = `select * from bench_bare.check_entitlements_keyed($1, 'members:read', $2, $3)`;
const accessLog = pino({ base: { pid: process.pid } }, pino.destination({ dest: 2, sync: false }));
const tokens = new Map<string, number>();
const app = express();
app.get('/__rss', (_req, res) => {
  const cpu = process.cpuUsage();
  res.json({ rss: process.memoryUsage().rss, cpuMicros: cpu.user + cpu.system });
});
app.get('/v1/entitlements/check', async (req, res) => {
  if (!floor) {
    const { rows } = await pool.query({ name: 'bare_check', text: CHECK, values: [community, req.query.platform, req.query.platform_uid] });
    res.json({ entitled: rows.length > 0, entitlements: rows });
    return;
  }
  const started = process.hrtime.bigint();
  res.on('finish', () => accessLog.info({ kind: 'access', method: req.method, route: '/v1/entitlements/check', status: res.statusCode,
    duration_ms: Number(process.hrtime.bigint() - started) / 1e6 }, 'request'));
  // The key's shape is the API's own (a copy of it had lacked '-' and refused real keys).
  const key = /^Bearer (\S+)$/.exec(req.header('authorization') ?? '')?.[1];
  if (!key || !KEY_PATTERN.test(key)) return void res.status(401).json({ code: 'unauthorized' });
  const hash = crypto.hash('sha256', key, 'hex');
  tokens.set(hash, (tokens.get(hash) ?? 1e9) - 1);
  try {
    const { rows } = await pool.query({ name: 'floor_check', text: CHECK_KEYED, values: [hash, req.query.platform, req.query.platform_uid] });
    res.json({ entitled: rows.length > 0, entitlements: rows });
  } catch (err) {
    const code = (err as { code?: string }).code;
    res.status(code === 'BL401' ? 401 : code === 'BL403' ? 403 : 500).json({ code });
  }
});
const server = app.listen(Number(process.env.BENCH_PORT ?? 3903), '127.0.0.1', () => process.stdout.write('listening\n'));
server.keepAliveTimeout = 60_000;
process.on('SIGTERM', () => process.exit(0));
