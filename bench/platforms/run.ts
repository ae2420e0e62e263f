// Platform delivery benchmark (issue 29 item 6): `npx tsx bench/platforms/run.ts
// [--members 10000] [--limit 50] [--concurrency 8] [--api-connections 4]`.
//
// Its own database (on DATABASE_URL's server, or postgres://postgres@127.0.0.1:5432), one
// community with a Discord connection (its bot token encrypted as `catalog apply` stores
// it) whose entitlement grants one role, --members members with linked Discord accounts,
// all of them in the local Discord stand-in's guild (test/support/discord-server.ts: every
// request checked against Discord's OpenAPI), which enforces --limit role changes per
// second on the guild's bucket, as Discord does per route. The API (bench/read/server.ts)
// and one worker process (bench/platforms/worker.ts) run as child processes.
//
//   1. anchor: the API's entitlement check under --api-connections concurrent clients,
//      nothing else running: p50/p99;
//   2. delivery: every member is granted the tier (500 grants per statement), and the
//      worker delivers the role through @discordjs/rest while the same API load runs:
//      deliveries/s against the ceiling the stand-in enforces (--limit/s), 429s seen,
//      the API's p50/p99 meanwhile;
//   3. check: every member holds the role, each PUT answered 204 once.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { PlatformSecretBox, storePlatformSecret } from '../../src/domain/catalog/platform-secrets';
import { startDiscordServer } from '../../test/support/discord-server';
import { adminQuery, createBenchDatabase, machineLine, writeResultsSection } from '../support';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const MEMBERS = arg('members', 10_000);
const LIMIT = arg('limit', 50);
const CONCURRENCY = arg('concurrency', 8);
const API_CONNECTIONS = arg('api-connections', 4);
const ANCHOR_SECONDS = arg('anchor-seconds', 15);
const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = 'billing_bench_platforms';
const PORT = Number(process.env.BENCH_PORT ?? 3911);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function child(script: string, env: NodeJS.ProcessEnv, ready: string): Promise<ChildProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: path.resolve(__dirname, '../..'),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', fs.openSync(path.join(os.tmpdir(), `bench-platforms-${path.basename(script, '.ts')}.log`), 'w')],
  });
  return new Promise((resolve, reject) => {
    readline.createInterface({ input: proc.stdout! }).on('line', (line) => { if (line.includes(ready)) resolve(proc); });
    proc.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

/** Runs the API load until stop() and returns each request's latency (ms). */
function apiLoad(key: string, uids: string[]): { stop(): Promise<{ latencies: number[]; errors: number }> } {
  let running = true;
  const latencies: number[] = [];
  let errors = 0;
  const loops = Array.from({ length: API_CONNECTIONS }, async (_, c) => {
    for (let i = c; running; i += API_CONNECTIONS) {
      const t0 = performance.now();
      const res = await fetch(`http://127.0.0.1:${PORT}/v1/entitlements/check?platform=discord&platform_uid=${uids[i % uids.length]}`,
        { headers: { authorization: `Bearer ${key}` } });
      await res.arrayBuffer();
      latencies.push(performance.now() - t0);
      if (res.status !== 200) errors++;
    }
  });
  return { stop: async () => { running = false; await Promise.all(loops); return { latencies: latencies.sort((a, b) => a - b), errors }; } };
}

async function main() {
  const url = await createBenchDatabase(SERVER, DB);
  const owner = new pg.Pool({ connectionString: url, max: 4 });
  const children: ChildProcess[] = [];
  const discord = await startDiscordServer();
  try {
    const { rows: [{ server_version: pgVersion }] } = await owner.query<{ server_version: string }>('show server_version');
    const encryptionKey = crypto.randomBytes(32).toString('base64');
    const community = await createCommunity(owner, 'bench');
    const { key } = await createKey(owner, community.id, ['members:read']);
    const guild = discord.addGuild({ botRolePosition: 10, roles: [{ name: 'Member', position: 2 }] });
    const role = [...guild.roles.values()].find((r) => r.name === 'Member')!.id;
    discord.limit('add_guild_member_role', { limit: LIMIT, windowMs: 1000 });

    const { rows: [pcfg] } = await owner.query<{ id: string }>(
      `insert into billing.platform_configs (community_id, key, platform, settings) values ($1, 'discord', 'discord', $2) returning id`,
      [community.id, { guild_id: guild.id }]);
    await storePlatformSecret(owner, new PlatformSecretBox(encryptionKey), community.id, pcfg.id, 'bot_token', discord.token);
    const { rows: [tier] } = await owner.query<{ id: string }>(`insert into billing.tiers (community_id, key, name) values ($1, 'member', 'Member') returning id`, [community.id]);
    const { rows: [ent] } = await owner.query<{ id: string }>(`insert into billing.entitlements (community_id, key, name) values ($1, 'member', 'Member role') returning id`, [community.id]);
    await owner.query(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)`, [community.id, tier.id, ent.id]);
    await owner.query(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value) values ($1, $2, $3, 'role', $4)`,
      [community.id, ent.id, pcfg.id, role]);
    const uids = Array.from({ length: MEMBERS }, () => discord.addMember(guild.id).userId);
    await owner.query(
      `with m as (insert into billing.members (community_id) select $1 from generate_series(1, $2) returning id)
       insert into billing.member_identities (community_id, member_id, platform, platform_uid)
       select $1, m.id, 'discord', u.uid from (select id, row_number() over (order by id) as n from m) m
       join unnest($3::text[]) with ordinality as u(uid, n) on u.n = m.n`, [community.id, MEMBERS, uids]);
    await owner.query('vacuum analyze');

    children.push(await child('bench/read/server.ts', {
      DATABASE_URL: url, NODE_ENV: 'production', BENCH_PORT: String(PORT), PG_POOL_SIZE: '8', LOG_LEVEL: 'warn',
      RATE_LIMIT_KEY_PER_MINUTE: '100000000', RATE_LIMIT_KEY_BURST: '100000000', RATE_LIMIT_IP_PER_MINUTE: '100000000', RATE_LIMIT_IP_BURST: '100000000',
    }, 'listening'));
    children.push(await child('bench/platforms/worker.ts', {
      BENCH_DATABASE_URL: url, BENCH_ENCRYPTION_KEY: encryptionKey, BENCH_DISCORD_URL: discord.url, BENCH_CONCURRENCY: String(CONCURRENCY), LOG_LEVEL: 'warn',
    }, 'ready'));

    // Warm-up, then the anchor: the API alone.
    await (apiLoad(key, uids)).stop();
    const warm = apiLoad(key, uids);
    await new Promise((r) => setTimeout(r, 3000));
    await warm.stop();
    const anchorLoad = apiLoad(key, uids);
    await new Promise((r) => setTimeout(r, ANCHOR_SECONDS * 1000));
    const anchor = await anchorLoad.stop();

    // Deliveries while the same load runs.
    const puts = () => discord.requestsTo('add_guild_member_role');
    const load = apiLoad(key, uids);
    const t0 = performance.now();
    const { rows: members } = await owner.query<{ id: string }>(`select id from billing.members where community_id = $1 order by id`, [community.id]);
    for (let i = 0; i < members.length; i += 500) {
      await owner.query(`insert into billing.grants (community_id, member_id, tier_id, created_at)
        select $1, unnest($2::text[]), $3, now()`, [community.id, members.slice(i, i + 500).map((m) => m.id), tier.id]);
    }
    const committed = performance.now() - t0;
    const deadline = Date.now() + Math.max(120_000, (MEMBERS / LIMIT) * 3000);
    while (puts().filter((r) => r.status === 204).length < MEMBERS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const during = await load.stop();
    const ok = puts().filter((r) => r.status === 204);
    const seconds = (Math.max(...ok.map((r) => r.at)) - Math.min(...puts().map((r) => r.at))) / 1000;
    const rateLimited = puts().filter((r) => r.status === 429).length;

    // Every member holds the role, granted once.
    const holders = uids.filter((u) => discord.memberRoles(guild.id, u)?.includes(role)).length;
    const perMember = new Map<string, number>();
    for (const r of ok) perMember.set(r.params.user_id, (perMember.get(r.params.user_id) ?? 0) + 1);
    const twice = [...perMember.values()].filter((n) => n > 1).length;
    const { rows: [rows] } = await owner.query<{ delivered: number; other: number }>(
      `select count(*) filter (where status = 'delivered')::int as delivered, count(*) filter (where status <> 'delivered')::int as other from billing.benefit_deliveries`);
    discord.assertClean();

    const stats = (l: { latencies: number[]; errors: number }) => ({
      requests: l.latencies.length, errors: l.errors,
      p50_ms: Number(percentile(l.latencies, 50).toFixed(1)), p99_ms: Number(percentile(l.latencies, 99).toFixed(1)),
    });
    const result = {
      members: MEMBERS, ceiling_per_second: LIMIT, grants_committed_ms: Math.round(committed),
      deliveries: ok.length, seconds: Number(seconds.toFixed(1)), deliveries_per_second: Number((ok.length / seconds).toFixed(1)),
      of_ceiling: `${Math.round((ok.length / seconds / LIMIT) * 100)}%`, answered_429: rateLimited,
      holders, granted_twice: twice, delivery_rows: rows,
      api_anchor: stats(anchor), api_during: stats(during),
      worker_rss_mb: null as number | null,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    writeResultsSection('## Platform delivery', [
      `Run ${new Date().toISOString()} by \`npx tsx bench/platforms/run.ts\` (${MEMBERS.toLocaleString('en')} members, one Discord role each; `
        + `the local Discord stand-in enforces ${LIMIT} role changes per second on the guild's bucket and checks every request against Discord's OpenAPI; `
        + `one worker process with concurrency ${CONCURRENCY}; the API's entitlement check under ${API_CONNECTIONS} concurrent clients) on ${machineLine(pgVersion)}.`,
      '',
      '| deliveries | seconds | deliveries/s | ceiling/s | of ceiling | 429s answered | members holding the role | granted twice |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|',
      `| ${ok.length.toLocaleString('en')} | ${result.seconds} | ${result.deliveries_per_second} | ${LIMIT} | ${result.of_ceiling} | ${rateLimited} | ${holders.toLocaleString('en')} | ${twice} |`,
      '',
      '| API entitlement check | requests | errors | p50 ms | p99 ms |',
      '|---|---:|---:|---:|---:|',
      `| anchor (nothing else running, ${ANCHOR_SECONDS} s) | ${result.api_anchor.requests} | ${result.api_anchor.errors} | ${result.api_anchor.p50_ms} | ${result.api_anchor.p99_ms} |`,
      `| during the deliveries (${result.seconds} s) | ${result.api_during.requests} | ${result.api_during.errors} | ${result.api_during.p50_ms} | ${result.api_during.p99_ms} |`,
      '',
      `The ${MEMBERS.toLocaleString('en')} grants were committed in ${(committed / 1000).toFixed(1)} s (500 per statement; the ledger and the delivery jobs in the same transactions). `
        + `Delivery rows: ${rows.delivered.toLocaleString('en')} delivered, ${rows.other} other.`,
    ].join('\n'));
    if (holders !== MEMBERS || twice > 0) process.exitCode = 1;
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    for (const c of children) c.kill('SIGKILL');
    await owner.end();
    await discord.close();
    if (process.env.BENCH_KEEP_DB !== '1') await adminQuery(SERVER, `drop database if exists ${DB} with (force)`);
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
