// Ledger and events-feed benchmark: `npx tsx bench/ledger/run.ts`.
// Creates its own database on DATABASE_URL's server (default: the machine's
// PostgreSQL at 127.0.0.1:5432), bulk-seeds 100,000 members (80,000 subscribed, with
// their ledger rows), then measures source changes applied through the triggers
// (lifecycle event + ledger refresh + entitlement events, all written):
//   - batched statements (1,000 rows per statement): new subscriptions, cancels,
//     plan switches, purchases, and the sweep revoking expired purchases;
//   - single-row autocommit changes from concurrent connections (like API requests);
// and, in the same run, two anchors, each the same statements on a clone of the seeded
// database: one whose ledger refresh does nothing (what the ledger's own work costs)
// and one whose source tables' triggers are disabled (the bare statement), so each
// ratio compares figures from one sitting.
// Then the feed: the exact SQL of GET /v1/events (billing_api.events_list, as the API
// role) on a community with 10,000 events and one with 1,000,000: first page, a deep
// page (cursor in the middle), a type filter, an after_id poll. Keyset: page time must
// not grow with the feed.
// Prints the figures and writes them under "## Ledger" in bench/RESULTS.md.
// Env: BENCH_CONCURRENCY (4), BENCH_SECONDS (10), BENCH_ANCHOR_ROUNDS (3), BENCH_KEEP_DB=1,
// BENCH_FEED_ONLY=1 (the seed and the feed's pages only, printed, RESULTS.md untouched).
import os from 'node:os';
import pg from 'pg';
import { createCommunity } from '../../src/domain/communities/community-admin';
import { withDatabase } from '../../src/db/migrate';
import { adminQuery, createBenchDatabase, writeResultsSection } from '../support';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = 'billing_bench_ledger';
const DB_ANCHOR = 'billing_bench_ledger_anchor';
// The bare batches take under a second each, and one such run varies by a third from
// the next: each anchor keeps the best of ANCHOR_ROUNDS, each on a fresh clone of its
// seed (a higher anchor only lowers the ratio). Its single-row phase runs once, as long
// as the ledger's.
const ANCHOR_ROUNDS = Number(process.env.BENCH_ANCHOR_ROUNDS ?? 3);

/**
 * The same statements on a clone of the seeded database with part of the work taken
 * away: `setup` runs on the clone's seed, as its owner.
 */
interface Anchor { key: string; seed: string; column: string; setup: string[] }
const ANCHORS: Anchor[] = [
  {
    // the ledger's refresh (its rows and entitlement events) costs nothing; the
    // lifecycle events and the rollup are still written
    key: 'no-ledger', seed: 'billing_bench_ledger_seed_no_ledger', column: 'no ledger refresh, rows/s',
    setup: [`create or replace function billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[],
      p_reasons text[], p_trigger_event_ids text[]) returns void language plpgsql as $$ begin end $$`],
  },
  {
    // "user" triggers: every trigger but the foreign keys' (the ledger's, the outbox's, the rollup's)
    key: 'bare', seed: 'billing_bench_ledger_seed_bare', column: 'bare statement (no triggers), rows/s',
    setup: ['alter table billing.subscriptions disable trigger user', 'alter table billing.purchases disable trigger user'],
  },
];
const MEMBERS = 100_000;
const SUBSCRIBED = 80_000;
const BATCH = 1_000;
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const lines: string[] = [];
const out = (line: string) => { lines.push(line); process.stdout.write(line + '\n'); };

const createDatabase = () => createBenchDatabase(SERVER, DB);

interface Catalog { communityId: string; plans: string[] }

/** Catalog, members, identities, subscriptions and their ledger rows, in bulk (no triggers). */
async function seed(db: pg.Client): Promise<Catalog> {
  const { id: c } = await createCommunity(db as unknown as pg.Pool, 'Ledger bench');
  await db.query('set session_replication_role = replica');
  await db.query('set synchronous_commit = off');
  await db.query(`insert into billing.platform_configs (community_id, key, platform, settings) values ($1, 'main', 'discord', '{"guild_id": "1"}')`, [c]);
  await db.query(`insert into billing.tiers (community_id, key, name, rank) values ($1, 't0', 'Silver', 0), ($1, 't1', 'Gold', 1), ($1, 't2', 'Platinum', 2)`, [c]);
  await db.query(`insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
    select community_id, id, key || '-m', name || ' monthly', 500 * (rank + 1), 'usd', 'month' from billing.tiers where community_id = $1`, [c]);
  await db.query(`insert into billing.entitlements (community_id, key, name) values ($1, 'chat', 'Chat'), ($1, 'vip', 'VIP'), ($1, 'stage', 'Stage')`, [c]);
  await db.query(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id)
    select t.community_id, t.id, e.id from billing.tiers t join billing.entitlements e on e.community_id = t.community_id
    where t.community_id = $1 and (e.key = 'chat' or (e.key = 'vip' and t.rank >= 1) or (e.key = 'stage' and t.rank = 2))`, [c]);
  await db.query(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value)
    select e.community_id, e.id, pc.id, 'role', e.key from billing.entitlements e
    join billing.platform_configs pc on pc.community_id = e.community_id where e.community_id = $1`, [c]);
  const { rows: plans } = await db.query<{ id: string }>(`select p.id from billing.plans p join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id where p.community_id = $1 order by t.rank`, [c]);
  await db.query(`create temp table bm as select g, billing.gen_id('mem') as id from generate_series(1, ${MEMBERS}) g`);
  await db.query(`insert into billing.members (community_id, id) select $1, id from bm order by g`, [c]);
  await db.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    select $1, id, 'discord', 'd' || g, 'user' || g from bm`, [c]);
  // price_cents by hand: the seed runs without triggers (billing.tg_subscriptions__price)
  await db.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end, price_cents)
    select $1, bm.id, p.id, 'active', now(), now() + interval '30 days', p.amount_cents
    from bm join billing.plans p on p.community_id = $1 and p.id = ($2::text[])[1 + g % 3] where g <= ${SUBSCRIBED} order by g`,
    [c, plans.map((p) => p.id)]);
  // The ledger exactly as the triggers would have built it (one event-free pass).
  await db.query(`insert into billing.member_entitlements (community_id, member_id, entitlement_id, status, revision,
      sources, benefits, identities, granted_at, next_check_at)
    select $1, m.id, d.entitlement_id, 'active', 1, d.sources, d.benefits,
      (select jsonb_build_object('identities', j->'identities', 'external_subjects', j->'external_subjects')
       from billing.member_json($1, m.id) j), now(), d.next_check_at
    from bm m cross join lateral billing.ledger_desired($1, m.id, now()) d`, [c]);
  await db.query('set session_replication_role = origin');
  await db.query('analyze');
  // The overview's rollup as the triggers would have kept it (48-analytics.sql): the
  // changes below then update facts that exist, as they do in a live community.
  await db.query('select billing_private.analytics_rebuild($1)', [c]);
  return { communityId: c, plans: plans.map((p) => p.id) };
}

async function count(db: pg.Client, sql: string, args: unknown[]): Promise<number> {
  const { rows: [r] } = await db.query<{ n: string }>(sql, args);
  return Number(r.n);
}

const events = (db: pg.Client, c: string) => count(db, 'select count(*) as n from billing.events where community_id = $1', [c]);

/** One phase's figures: source changes and the events they wrote, over the measured time. */
interface Phase { name: string; rows: number; seconds: number; events: number }

/** Runs `statement` once per batch of ids; measures source changes/s and events/s. */
async function batched(db: pg.Client, c: string, name: string, ids: string[], statement: string, extra: unknown[] = []): Promise<Phase> {
  const e0 = await events(db, c);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ids.length; i += BATCH) {
    await db.query(statement, [c, ids.slice(i, i + BATCH), ...extra]);
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { name, rows: ids.length, seconds, events: (await events(db, c)) - e0 };
}

async function ids(db: pg.Client, sql: string, args: unknown[]): Promise<string[]> {
  return (await db.query<{ id: string }>(sql, args)).rows.map((r) => r.id);
}

const SINGLE_ROW = `single-row status change, ${CONCURRENCY} connections, autocommit`;

/**
 * The source changes, in order, on the database at `url`. `anchor`: that database is
 * an anchor's clone (see ANCHORS), which runs no sweep (the ledger's own work).
 * `singleRow`: with the single-row phase.
 */
async function sourceChanges(url: string, cat: Catalog, anchor: boolean, singleRow = true): Promise<Phase[]> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const c = cat.communityId;
  const phases: Phase[] = [];
  const unsubscribed = await ids(db, `select m.id from billing.members m where m.community_id = $1
    and not exists (select 1 from billing.subscriptions s where s.community_id = m.community_id and s.member_id = m.id) order by m.id`, [c]);
  phases.push(await batched(db, c, 'new subscription (grant)', unsubscribed,
    // with its price, as a checkout gives it (the bare anchor runs no price trigger)
    `insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end, price_cents)
     select $1, m, $3, 'active', now(), now() + interval '30 days',
       (select p.amount_cents from billing.plans p where p.community_id = $1 and p.id = $3) from unnest($2::text[]) m`, [cat.plans[1]]));
  const active = await ids(db, `select id from billing.subscriptions where community_id = $1 and status = 'active' order by id limit 20000`, [c]);
  phases.push(await batched(db, c, 'cancel at period end (update)', active,
    `update billing.subscriptions set status = 'cancelling', cancel_at = current_period_end where community_id = $1 and id = any ($2)`));
  const switching = await ids(db, `select s.id from billing.subscriptions s where s.community_id = $1 and s.status = 'active' and s.plan_id = $2 order by s.id limit 20000`, [c, cat.plans[0]]);
  phases.push(await batched(db, c, 'plan switch t0 -> t2 (grant + update)', switching,
    `update billing.subscriptions set plan_id = $3 where community_id = $1 and id = any ($2)`, [cat.plans[2]]));
  const buyers = await ids(db, `select id from billing.members where community_id = $1 order by id desc limit 20000`, [c]);
  phases.push(await batched(db, c, 'purchase, 1 day access', buyers,
    `insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency, access_expires_at)
     select $1, m, $3, 900, 'usd', now() + interval '1 day' from unnest($2::text[]) m`, [cat.plans[2]]));
  if (!anchor) {
    // Time passing: the sweep revokes/updates every row whose purchase expired. It is
    // the ledger's own work: the anchors run no sweep.
    await db.query(`update billing.communities set clock_offset = interval '2 days' where id = $1`, [c]);
    const e0 = await events(db, c);
    const t0 = process.hrtime.bigint();
    const { rows: [{ n }] } = await db.query<{ n: number }>('select billing.ledger_sweep($1) as n', [c]);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    phases.push({ name: 'ledger_sweep after purchases expired (rows changed)', rows: n, seconds, events: (await events(db, c)) - e0 });
    await db.query(`update billing.communities set clock_offset = interval '0' where id = $1`, [c]);
  }

  if (!singleRow) {
    await db.end();
    return phases;
  }
  // Single-row changes, autocommit, from concurrent connections.
  const pool = await ids(db, `select id from billing.subscriptions where community_id = $1 and status in ('active', 'past_due') order by id`, [c]);
  const ev0 = await events(db, c);
  const clients = await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    const cl = new pg.Client({ connectionString: url });
    await cl.connect();
    return cl;
  }));
  let done = 0;
  const lat: number[] = [];
  const started = Date.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(clients.map(async (cl, k) => {
    let i = k;
    while (Date.now() < deadline) {
      const id = pool[(i * 7919) % pool.length];
      i += CONCURRENCY;
      const t = process.hrtime.bigint();
      await cl.query(`update billing.subscriptions set status = case when status = 'active' then 'past_due' else 'active' end
        where community_id = $1 and id = $2`, [c, id]);
      lat.push(Number(process.hrtime.bigint() - t) / 1e6);
      done++;
    }
  }));
  // The measured time: the last statement may end after the deadline.
  const elapsed = (Date.now() - started) / 1000;
  lat.sort((a, b) => a - b);
  phases.push({
    name: `${SINGLE_ROW} (p50 ${lat[Math.floor(lat.length / 2)].toFixed(2)} ms, p99 ${lat[Math.floor(lat.length * 0.99)].toFixed(2)} ms)`,
    rows: done, seconds: elapsed, events: (await events(db, c)) - ev0,
  });
  await Promise.all(clients.map((cl) => cl.end()));
  await db.end();
  return phases;
}

/** Each anchor's best round for a phase (matched by the name's start), and every round's figure. */
function anchorCell(rounds: Phase[][], key: string): { best?: number; cell: string } {
  const rates = rounds.flatMap((r) => r.filter((x) => x.name.startsWith(key)).map((x) => x.rows / x.seconds));
  if (rates.length === 0) return { cell: '-' };
  const best = Math.max(...rates);
  return { best, cell: `${best.toFixed(0)}${rates.length > 1 ? ` (${rates.map((x) => x.toFixed(0)).join(', ')})` : ''}` };
}

/** The ledger's figures beside its anchors'. */
function printChanges(ledger: Phase[], anchors: Map<Anchor, Phase[][]>): void {
  out('');
  out(`Source changes through the triggers, ${MEMBERS.toLocaleString('en')} members (${SUBSCRIBED.toLocaleString('en')} subscribed), statements of ${BATCH.toLocaleString('en')} rows, one connection. `
    + 'Two anchors, in the same run, each the same statements on a clone of the same seeded database: without the ledger\'s refresh '
    + '(billing.ledger_refresh_list does nothing: no ledger rows, no entitlement events; the lifecycle events and the rollup are written), '
    + 'and the bare statement (the source tables\' own triggers disabled, constraints and foreign keys kept). '
    + `Each anchor's batches are the best of ${ANCHOR_ROUNDS} rounds, each on a fresh clone (the rounds in brackets); its single-row phase runs once.`);
  out('');
  out(`| change | rows | rows/s | events written | events/s | ${ANCHORS.map((a) => a.column).join(' | ')} | ledger / bare |`);
  out(`|---|---:|---:|---:|---:|${ANCHORS.map(() => '---:|').join('')}---:|`);
  for (const p of ledger) {
    const rate = p.rows / p.seconds;
    const key = p.name.startsWith(SINGLE_ROW) ? SINGLE_ROW : p.name;
    const cells = ANCHORS.map((a) => anchorCell(anchors.get(a) ?? [], key));
    const bare = cells[cells.length - 1].best;
    out(`| ${p.name} | ${p.rows.toLocaleString('en')} | ${rate.toFixed(0)} | ${p.events.toLocaleString('en')} | ${(p.events / p.seconds).toFixed(0)} `
      + `| ${cells.map((c) => c.cell).join(' | ')} | ${bare === undefined ? '-' : `${((100 * rate) / bare).toFixed(0)}%`} |`);
  }
  out('');
  for (const a of ANCHORS) {
    const single = (anchors.get(a) ?? []).flat().find((x) => x.name.startsWith(SINGLE_ROW));
    if (single) out(`Single-row change, ${a.column.replace(/, rows\/s$/, '')}: ${single.name.slice(SINGLE_ROW.length).trim()}.`);
  }
}

/** An anchor's seed: a clone of the seeded database with its setup applied. */
async function createAnchorSeed(url: string, anchor: Anchor): Promise<void> {
  await adminQuery(SERVER, `drop database if exists ${anchor.seed} with (force)`, `create database ${anchor.seed} template ${DB}`);
  const db = new pg.Client({ connectionString: withDatabase(url, anchor.seed) });
  await db.connect();
  for (const sql of anchor.setup) await db.query(sql);
  await db.end();
}

/** The rounds of an anchor, each on a fresh clone of its seed; the last one with the single-row phase. */
async function anchorRounds(url: string, cat: Catalog, anchor: Anchor): Promise<Phase[][]> {
  const rounds: Phase[][] = [];
  for (let r = 0; r < ANCHOR_ROUNDS; r++) {
    await adminQuery(SERVER, `drop database if exists ${DB_ANCHOR} with (force)`, `create database ${DB_ANCHOR} template ${anchor.seed}`);
    rounds.push(await sourceChanges(withDatabase(url, DB_ANCHOR), cat, true, r === ANCHOR_ROUNDS - 1));
  }
  return rounds;
}

const NOTE_CHANGES = 'A row is one source change; each writes its lifecycle event, refreshes the member\'s ledger (one ' +
  'plpgsql recompute, member row locked) and writes one entitlement event per ledger row that changed, in the ' +
  'statement\'s transaction. Single-row changes pay a commit each (synchronous_commit on).';
const NOTE_FEED = 'Keyset by id (primary key (community_id, id); each type of a filter scans events_type ' +
  '(community_id, type, id) and the scans are merged).';

/** n synthetic events (envelopes shaped like real ones, 1% revoked) in bulk, ids in time order. */
async function fillEvents(db: pg.Client, c: string, n: number, sample: unknown): Promise<void> {
  await db.query('set session_replication_role = replica');
  await db.query('set synchronous_commit = off');
  const step = 200_000;
  for (let from = 1; from <= n; from += step) {
    const to = Math.min(n, from + step - 1);
    await db.query(`insert into billing.events (community_id, id, type, created_at, data)
      select $1, 'evt_' || lpad(to_hex(1700000000000 + g), 12, '0') || lpad(to_hex(g % 16777216), 6, '0') || substr(md5(g::text), 1, 8),
        case when g % 100 = 0 then 'member.entitlement.revoked' when g % 3 = 0 then 'subscription.updated' else 'member.entitlement.updated' end,
        now(), $2::jsonb
      from generate_series($3::int, $4::int) g`, [c, JSON.stringify(sample), from, to]);
  }
  await db.query('set session_replication_role = origin');
}

interface Timing { p50: number; p95: number; rows: number }

/**
 * The same page of each feed, `runs` times, alternating between the feeds run by run
 * (one client each), so that whatever else the machine does weighs on every size alike
 * and their ratio holds even when the absolute figures move.
 */
async function timeAlternating(clients: pg.Client[], args: unknown[], runs = 200): Promise<Timing[]> {
  const times: number[][] = clients.map(() => []);
  const rows: number[] = clients.map(() => 0);
  for (let i = 0; i < runs; i++) {
    for (let j = 0; j < clients.length; j++) {
      const t = process.hrtime.bigint();
      const { rows: [r] } = await clients[j].query<{ r: { data: unknown[] } }>('select billing_api.events_list($1) as r', [args[j]]);
      times[j].push(Number(process.hrtime.bigint() - t) / 1e6);
      rows[j] = r.r.data.length;
    }
  }
  return times.map((ts, j) => {
    ts.sort((x, y) => x - y);
    return { p50: ts[Math.floor(runs / 2)], p95: ts[Math.floor(runs * 0.95)], rows: rows[j] };
  });
}

// Issue 33 item 4: every page and filter at 1,000,000 events within 1.2x of 10,000.
const FEED_FLAT = 1.2;

async function feed(url: string, sample: unknown): Promise<void> {
  const owner = new pg.Client({ connectionString: url });
  await owner.connect();
  const sizes = [10_000, 1_000_000];
  const communities: string[] = [];
  for (const n of sizes) {
    const { id } = await createCommunity(owner as unknown as pg.Pool, `Feed ${n}`);
    const t0 = Date.now();
    await fillEvents(owner, id, n, sample);
    log(`filled ${n} events in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    communities.push(id);
  }
  await owner.query('analyze billing.events');
  // each feed's middle (a deep cursor) and its tenth newest event (a poll)
  const marks = [];
  for (const c of communities) {
    const { rows: [mid] } = await owner.query<{ id: string }>(
      `select id from billing.events where community_id = $1 order by id desc offset (select count(*) / 2 from billing.events where community_id = $1) limit 1`, [c]);
    const { rows: [near] } = await owner.query<{ id: string }>(
      `select id from billing.events where community_id = $1 order by id desc offset 10 limit 1`, [c]);
    marks.push({ mid: mid.id, near: near.id });
  }
  await owner.end();

  out('');
  out('GET /v1/events: the SQL of list_events (billing_api.events_list as the API role, one connection per feed, '
    + '200 runs each, the two feeds alternating run by run), ms p50 / p95, and the larger feed\'s p50 over the smaller\'s '
    + `(target at most ${FEED_FLAT}):`);
  out('');
  out(`| page | ${sizes.map((n) => `${n.toLocaleString('en')} events`).join(' | ')} | p50 ratio |`);
  out(`|---|${sizes.map(() => '---:').join('|')}|---:|`);
  const clients: pg.Client[] = [];
  for (const c of communities) {
    const api = new pg.Client({ connectionString: url, options: '-c role=billing_api' });
    await api.connect();
    await api.query(`select set_config('app.community_id', $1, false), set_config('app.scopes', 'events:read', false)`, [c]);
    clients.push(api);
  }
  const cases: [string, (m: { mid: string; near: string }) => unknown][] = [
    ['first page, limit 25', () => ({ limit: 25 })],
    ['first page, limit 100', () => ({ limit: 100 })],
    ['deep page (cursor at the middle), limit 25', (m) => ({ limit: 25, cursor: m.mid })],
    ['type=member.entitlement.revoked (1%), limit 25', () => ({ limit: 25, type: ['member.entitlement.revoked'] })],
    ['type=granted,revoked,subscription.updated, deep, limit 25', (m) => ({ limit: 25, cursor: m.mid, type: ['member.entitlement.granted', 'member.entitlement.revoked', 'subscription.updated'] })],
    ['after_id poll (10 newer events)', (m) => ({ limit: 25, after_id: m.near })],
  ];
  let worst = 0;
  for (const [name, args] of cases) {
    // a warm-up round first, not counted
    await timeAlternating(clients, marks.map(args), 20);
    const r = await timeAlternating(clients, marks.map(args));
    const ratio = r[r.length - 1].p50 / r[0].p50;
    worst = Math.max(worst, ratio);
    out(`| ${name} | ${r.map((x) => `${x.p50.toFixed(2)} / ${x.p95.toFixed(2)} (${x.rows} rows)`).join(' | ')} | ${ratio.toFixed(2)} |`);
  }
  out('');
  out(`Largest p50 ratio: ${worst.toFixed(2)} (${worst <= FEED_FLAT ? 'within' : 'above'} ${FEED_FLAT}). ${NOTE_FEED}`);
  await Promise.all(clients.map((c) => c.end()));
}

function writeResults(): void {
  const load = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  writeResultsSection('## Ledger', [
    `Run ${new Date().toISOString()} by \`npx tsx bench/ledger/run.ts\` on ${SERVER.replace(/\/\/[^@]*@/, '//')}, `
      + `${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average at the end ${load}.`,
    ...lines].join('\n'));
}

/** A real entitlement event's data, the shape the feed's synthetic events copy. */
async function sampleEvent(url: string): Promise<unknown> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const { rows: [sample] } = await db.query<{ data: unknown }>(
    `select data from billing.events where type = 'member.entitlement.granted' order by id desc limit 1`);
  await db.end();
  return sample.data;
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const url = await createDatabase();
  log('migrated');
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  let t = Date.now();
  const cat = await seed(db);
  log(`seeded ${MEMBERS} members in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  await db.end();
  if (process.env.BENCH_FEED_ONLY) {
    // the seed writes no events: one checkout's, through the triggers, for the sample
    const one = new pg.Client({ connectionString: url });
    await one.connect();
    await one.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end, price_cents)
      select m.community_id, m.id, $2, 'active', now(), now() + interval '30 days', 900 from billing.members m
      where m.community_id = $1 and not exists (select 1 from billing.subscriptions s where s.community_id = m.community_id and s.member_id = m.id)
      limit 1`, [cat.communityId, cat.plans[0]]);
    await one.end();
    await feed(url, await sampleEvent(url));
    if (!process.env.BENCH_KEEP_DB) await adminQuery(SERVER, `drop database if exists ${DB} with (force)`);
    return;
  }
  t = Date.now();
  for (const a of ANCHORS) await createAnchorSeed(url, a);
  log(`anchors' seeds cloned in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  t = Date.now();
  const ledger = await sourceChanges(url, cat, false);
  log(`source changes in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  t = Date.now();
  const anchors = new Map<Anchor, Phase[][]>();
  for (const a of ANCHORS) {
    anchors.set(a, await anchorRounds(url, cat, a));
    log(`anchor ${a.key} (${ANCHOR_ROUNDS} rounds) in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    t = Date.now();
  }
  printChanges(ledger, anchors);
  out('');
  out(NOTE_CHANGES);
  t = Date.now();
  await feed(url, await sampleEvent(url));
  log(`feed in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  writeResults();
  if (!process.env.BENCH_KEEP_DB) {
    await adminQuery(SERVER, ...[DB, DB_ANCHOR, ...ANCHORS.map((a) => a.seed)].map((d) => `drop database if exists ${d} with (force)`));
  }
  log(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}

main().catch((err) => { console.error(err); process.exit(1); });
