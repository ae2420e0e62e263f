// Issue 28 item 2: a migration applied while the service reads takes no ACCESS
// EXCLUSIVE lock on a tenant table unless it changes that table. Since 000030 every
// committed migration is a delta (only the functions and tables it changes); this test
// applies each of them, and current/ when it holds anything, to a database at the state
// just before it, the way graphile-migrate does (the body after the `--!` headers, in
// one transaction), while another connection reads every tenant table in a loop as a
// community. Before the migration commits, it lists the tables its backend holds in
// AccessExclusiveLock (an index or TOAST table counts as its table: a read plans with
// every index of its table). Each tenant table there must be
//  - named by a changing statement of the migration text (alter table, create or drop
//    of a trigger, policy or index on it, ...), and
//  - really changed: its catalog description (columns, constraints, indexes, triggers,
//    policies, RLS, grants, comments) differs afterwards. Re-running a fixture's
//    `drop trigger` + `create trigger` for an unchanged trigger (including a whole
//    fixture again) locks the table out for nothing, and fails here.
// And the reader, which reads every tenant table the text does not change, never
// waits longer than READ_BOUND_MS: the migration holds its transaction open until the
// reader has read each of them once more (or the bound has passed) before it commits.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { runMigrations as runWorkerMigrations, Logger as WorkerLogger } from 'graphile-worker';
import { parseMigrationText } from 'graphile-migrate/dist/migration';
import { readCurrentMigration, getCurrentMigrationLocation } from 'graphile-migrate/dist/current';
import type { ParsedSettings } from 'graphile-migrate/dist/settings';
import { migrationsFolder, withDatabase } from '../../src/db/migrate';

/** The first committed migration that is a delta; the earlier ones build the base. */
const FIRST_DELTA = '000030';
/** How long one tenant read may take, lock waits included (a loaded 2-core machine). */
const READ_BOUND_MS = 2000;

const database = `billing_locks_${Date.now()}_${process.pid}`;
const server = () => process.env.BILLING_TEST_SERVER!;
const dbUrl = () => withDatabase(server(), database);

interface Step { name: string; sql: string }

const committedDir = path.join(migrationsFolder, 'committed');
const committed: Step[] = fs.readdirSync(committedDir).filter((f) => /^\d{6}.*\.sql$/.test(f)).sort().map((f) => {
  const file = path.join(committedDir, f);
  return { name: f, sql: parseMigrationText(file, fs.readFileSync(file, 'utf8')).body };
});
const base = committed.filter((m) => m.name < FIRST_DELTA);
const deltas = committed.filter((m) => m.name >= FIRST_DELTA);

const currentDir = path.join(migrationsFolder, 'current');

/** Whether current/ holds any SQL (an `--!include` counts), as opposed to comments only. */
function currentHasSql(): boolean {
  if (!fs.existsSync(currentDir)) return false;
  return fs.readdirSync(currentDir).filter((f) => f.endsWith('.sql')).some((f) => {
    const text = fs.readFileSync(path.join(currentDir, f), 'utf8');
    return /^--!\s*include\b/m.test(text) || stripComments(text).trim() !== '';
  });
}

/** current/ as graphile-migrate's watch runs it: its files in order, includes compiled. */
async function readCurrent(): Promise<string> {
  const settings = { migrationsFolder } as ParsedSettings;
  return readCurrentMigration(settings, await getCurrentMigrationLocation(settings));
}

// ---- what the migration text changes -------------------------------------------------

function stripComments(sql: string): string {
  return sql.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/--[^\n]*/g, '');
}

const IDENT = String.raw`(?:"[^"]+"|[a-z_][a-z0-9_$]*)`;
const NAME = String.raw`(${IDENT}(?:\s*\.\s*${IDENT})?)`;
const LIST = String.raw`(${IDENT}(?:\s*\.\s*${IDENT})?(?:\s*,\s*${IDENT}(?:\s*\.\s*${IDENT})?)*)`;
const ON = String.raw`[^;]*?\bon\s+(?:only\s+)?${NAME}`;

/** Statements that change the table they name (last capture group: the table or list). */
const TABLE_CHANGES = [
  String.raw`\balter\s+table\s+(?:if\s+exists\s+)?(?:only\s+)?${NAME}`,
  String.raw`\b(?:create|drop)\s+(?:unlogged\s+)?table\s+(?:if\s+(?:not\s+)?exists\s+)?${LIST}`,
  String.raw`\b(?:create\s+(?:or\s+replace\s+)?(?:constraint\s+)?|drop\s+|alter\s+)trigger\s+(?:if\s+exists\s+)?${IDENT}${ON}`,
  String.raw`\b(?:create|drop|alter)\s+policy\s+(?:if\s+exists\s+)?${IDENT}${ON}`,
  String.raw`\bcreate\s+(?:unique\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?(?:${IDENT}\s+)?${ON}`,
  String.raw`\bcreate\s+(?:or\s+replace\s+)?rule\s+${IDENT}\s+as\s+on\s+\w+\s+to\s+${NAME}`,
  String.raw`\bcomment\s+on\s+table\s+${NAME}`,
  String.raw`\breindex\s+table\s+${NAME}`,
  String.raw`\bcluster\s+(?:verbose\s+)?${NAME}`,
  String.raw`\btruncate\s+(?:table\s+)?(?:only\s+)?${LIST}`,
].map((re) => new RegExp(re, 'gi'));
/** Statements on an index: they change the index's table. */
const INDEX_CHANGES = [
  String.raw`\b(?:drop|alter)\s+index\s+(?:concurrently\s+)?(?:if\s+exists\s+)?${LIST}`,
  String.raw`\breindex\s+index\s+${NAME}`,
].map((re) => new RegExp(re, 'gi'));
const COLUMN_COMMENT = new RegExp(String.raw`\bcomment\s+on\s+column\s+(${IDENT}(?:\s*\.\s*${IDENT})?)\s*\.\s*${IDENT}\s+is`, 'gi');

function splitNames(list: string): string[] {
  return list.split(',').map((n) => n.trim().split(/\s*\.\s*/)
    .map((part) => (part.startsWith('"') ? part.slice(1, -1) : part.toLowerCase())).join('.'));
}

/** The tables (as written, schema-qualified or not) and indexes the text changes. */
function changedByText(sql: string): { tables: Set<string>; indexes: Set<string> } {
  const text = stripComments(sql);
  const tables = new Set<string>();
  const indexes = new Set<string>();
  for (const re of TABLE_CHANGES) for (const m of text.matchAll(re)) splitNames(m[m.length - 1]).forEach((n) => tables.add(n));
  for (const m of text.matchAll(COLUMN_COMMENT)) splitNames(m[1]).forEach((n) => tables.add(n));
  for (const re of INDEX_CHANGES) for (const m of text.matchAll(re)) splitNames(m[m.length - 1]).forEach((n) => indexes.add(n));
  return { tables, indexes };
}

// ---- the catalog ----------------------------------------------------------------------

interface TenantTable { oid: number; name: string; relname: string; apiReads: boolean }

/** Tables of billing and billing_private under RLS or with a community_id column. */
const TENANT_TABLE = `c.relkind in ('r', 'p')
  and c.relnamespace in ('billing'::regnamespace, 'billing_private'::regnamespace)
  and (c.relrowsecurity or exists (select 1 from pg_attribute a
         where a.attrelid = c.oid and a.attname = 'community_id' and not a.attisdropped))`;

async function tenantTables(db: pg.ClientBase): Promise<TenantTable[]> {
  const { rows } = await db.query<TenantTable>(`
    select c.oid::int as oid, c.oid::regclass::text as name, c.relname,
      has_schema_privilege('billing_api', c.relnamespace, 'usage')
        and has_table_privilege('billing_api', c.oid, 'select') as "apiReads"
    from pg_class c where ${TENANT_TABLE} order by 2`);
  return rows;
}

/** Everything ALTER TABLE and its kin can change about a table, by table oid. */
async function describeTables(db: pg.ClientBase): Promise<Map<number, string>> {
  const { rows } = await db.query<{ oid: number; d: unknown }>(`
    select c.oid::int as oid, jsonb_build_object(
      'name', c.oid::regclass::text, 'kind', c.relkind, 'rls', c.relrowsecurity, 'force', c.relforcerowsecurity,
      'options', c.reloptions, 'acl', c.relacl::text[], 'owner', c.relowner::regrole::text,
      'replica_identity', c.relreplident, 'persistence', c.relpersistence,
      'comment', obj_description(c.oid, 'pg_class'),
      'columns', (select jsonb_agg(jsonb_build_array(a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
          pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated, a.attcollation::regcollation::text,
          a.attstattarget, a.attstorage, a.attcompression, a.attacl::text[], col_description(c.oid, a.attnum)) order by a.attnum)
        from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where a.attrelid = c.oid and a.attnum > 0),
      'constraints', (select jsonb_agg(jsonb_build_array(k.conname, pg_get_constraintdef(k.oid), k.convalidated,
          obj_description(k.oid, 'pg_constraint')) order by k.conname)
        from pg_constraint k where k.conrelid = c.oid),
      'indexes', (select jsonb_agg(jsonb_build_array(pg_get_indexdef(i.indexrelid), i.indisclustered, i.indisvalid,
          i.indisreplident, obj_description(i.indexrelid, 'pg_class')) order by i.indexrelid::regclass::text)
        from pg_index i where i.indrelid = c.oid),
      'triggers', (select jsonb_agg(jsonb_build_array(pg_get_triggerdef(t.oid), t.tgenabled) order by t.tgname)
        from pg_trigger t where t.tgrelid = c.oid and not t.tgisinternal),
      'policies', (select jsonb_agg(jsonb_build_array(p.polname, p.polcmd, p.polpermissive, p.polroles::regrole[]::text[],
          pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)) order by p.polname)
        from pg_policy p where p.polrelid = c.oid),
      'rules', (select jsonb_agg(pg_get_ruledef(r.oid) order by r.rulename) from pg_rewrite r where r.ev_class = c.oid),
      'statistics', (select jsonb_agg(s.stxname order by s.stxname) from pg_statistic_ext s where s.stxrelid = c.oid)
    ) as d
    from pg_class c where ${TENANT_TABLE}`);
  return new Map(rows.map((r) => [r.oid, JSON.stringify(r.d)]));
}

/**
 * Tenant tables this backend holds in AccessExclusiveLock, directly or through an index
 * or TOAST table of theirs. Only relations that existed before the migration (existed:
 * their oids) count: a table or index it creates is locked too, but no other
 * transaction sees it before the commit, so no read waits on it.
 */
async function exclusivelyLocked(db: pg.ClientBase, existed: number[]): Promise<{ oid: number; name: string }[]> {
  const { rows } = await db.query<{ oid: number; name: string }>(`
    with held as (
      select coalesce((select i.indrelid from pg_index i where i.indexrelid = l.relation),
                      (select t.oid from pg_class t where t.reltoastrelid = l.relation),
                      l.relation) as relation
      from pg_locks l
      where l.pid = pg_backend_pid() and l.locktype = 'relation' and l.mode = 'AccessExclusiveLock' and l.granted
        and l.database = (select oid from pg_database where datname = current_database())
        and l.relation = any ($1::oid[]))
    select distinct c.oid::int as oid, c.oid::regclass::text as name
    from held h join pg_class c on c.oid = h.relation
    where ${TENANT_TABLE} order by 2`, [existed]);
  return rows;
}

/** The tables of the indexes named (looked up before the migration, which may drop them). */
async function tablesOfIndexes(db: pg.ClientBase, indexes: Set<string>): Promise<Set<number>> {
  if (indexes.size === 0) return new Set();
  const { rows } = await db.query<{ oid: number }>(`
    select distinct i.indrelid::int as oid from pg_index i join pg_class x on x.oid = i.indexrelid
    where x.oid::regclass::text = any ($1) or x.relname = any ($1)
       or x.relnamespace::regnamespace::text || '.' || x.relname = any ($1)`, [[...indexes]]);
  return new Set(rows.map((r) => r.oid));
}

// ---- the reader -----------------------------------------------------------------------

interface Reader { reads(): number; stop(): Promise<{ worst: { table: string; ms: number }; failures: string[] }> }

/** Reads one row of each table in a loop, each in its own transaction, as a community. */
async function startReader(tables: TenantTable[]): Promise<Reader> {
  const client = new pg.Client({ connectionString: dbUrl(), application_name: 'migration-locks-reader' });
  await client.connect();
  let stopped = false;
  let reads = 0;
  let worst = { table: '', ms: 0 };
  const failures: string[] = [];
  const loop = (async () => {
    while (!stopped) {
      for (const t of tables) {
        if (stopped) break;
        const started = performance.now();
        try {
          await client.query(`begin; ${t.apiReads ? 'set local role billing_api;' : ''}
            select set_config('app.community_id', 'com_migration_locks', true);
            select 1 from ${t.name} limit 1; commit`);
        } catch (err) {
          failures.push(`${t.name}: ${(err as Error).message}`);
          await client.query('rollback').catch(() => undefined);
        }
        const ms = performance.now() - started;
        if (ms > worst.ms) worst = { table: t.name, ms };
        reads++;
      }
    }
  })();
  return {
    reads: () => reads,
    async stop() {
      stopped = true;
      await loop;
      await client.end();
      return { worst, failures };
    },
  };
}

// ---- one migration --------------------------------------------------------------------

interface Outcome { problems: string[]; locked: string[]; worstRead: { table: string; ms: number } }

async function applyWatched(db: pg.Client, step: Step): Promise<Outcome> {
  const tables = await tenantTables(db);
  const named = changedByText(step.sql);
  const byIndex = await tablesOfIndexes(db, named.indexes);
  // regclass text is schema-qualified (billing is not on the search path); the text may not be.
  const isNamed = (t: { oid: number; name: string }) => byIndex.has(t.oid) || named.tables.has(t.name)
    || named.tables.has(t.name.split('.').pop()!);
  const before = await describeTables(db);
  const existed = (await db.query<{ oid: number }>('select oid::int as oid from pg_class')).rows.map((r) => r.oid);
  const readerTables = tables.filter((t) => !isNamed(t));
  const reader = await startReader(readerTables);
  const problems: string[] = [];
  let locked: { oid: number; name: string }[] = [];
  try {
    await db.query('begin');
    await db.query(step.sql);
    // Hold the transaction (and its locks) until the reader has read every table once
    // more: a read that waits on one of our locks then waits at least READ_BOUND_MS.
    const readsBefore = reader.reads();
    const deadline = Date.now() + READ_BOUND_MS + 100;
    while (reader.reads() < readsBefore + readerTables.length && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    locked = await exclusivelyLocked(db, existed);
    const after = await describeTables(db);
    for (const t of locked) {
      if (!isNamed(t)) problems.push(`${t.name}: ACCESS EXCLUSIVE, but the migration text changes no ${t.name}`);
      else if (before.has(t.oid) && before.get(t.oid) === after.get(t.oid)) {
        problems.push(`${t.name}: ACCESS EXCLUSIVE, but the table is the same afterwards (re-created unchanged?)`);
      }
    }
    await db.query('commit');
  } catch (err) {
    await db.query('rollback').catch(() => undefined);
    await reader.stop();
    throw err;
  }
  const { worst, failures } = await reader.stop();
  problems.push(...failures.map((f) => `reader failed: ${f}`));
  if (worst.ms > READ_BOUND_MS) problems.push(`a read of ${worst.table} took ${Math.round(worst.ms)} ms (bound ${READ_BOUND_MS} ms)`);
  return { problems, locked: locked.map((t) => t.name), worstRead: worst };
}

// ---- the run --------------------------------------------------------------------------

let db: pg.Client;

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: withDatabase(server(), 'postgres') });
  await c.connect();
  try { await c.query(sql); } finally { await c.end(); }
}

/**
 * Roles are shared by every database of the server and our migrations grant and alter
 * them: another test run migrating at the same time can fail ours with "tuple
 * concurrently updated" (src/db/migrate.ts). The migration was rolled back whole: again.
 */
async function retryingRoleRaces<T>(name: string, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= 5 || !/tuple concurrently (updated|deleted)/.test((err as Error).message)) {
        throw new Error(`${name}: ${(err as Error).message}`);
      }
    }
  }
}

/** One migration in its own transaction, unwatched. */
function applyPlain(step: Step): Promise<void> {
  return retryingRoleRaces(step.name, async () => {
    try {
      await db.query('begin');
      await db.query(step.sql);
      await db.query('commit');
    } catch (err) {
      await db.query('rollback').catch(() => undefined);
      throw err;
    }
  });
}

beforeAll(async () => {
  await admin(`create database ${database}`);
  // graphile-worker's schema first, as src/db/migrate.ts and .gmrc.js's afterReset do.
  await runWorkerMigrations({ connectionString: dbUrl(), logger: new WorkerLogger(() => () => undefined) });
  db = new pg.Client({ connectionString: dbUrl(), application_name: 'migration-locks-migrator' });
  await db.connect();
  for (const step of base) await applyPlain(step);
}, 60_000);

afterAll(async () => {
  await db?.end();
  await admin(`drop database if exists ${database} with (force)`);
});

test('the migrations are found: a base, then deltas from 000030', () => {
  expect(base.length).toBeGreaterThan(0);
  expect(deltas[0]?.name.startsWith(FIRST_DELTA)).toBe(true);
});

/** Deltas applied so far: each test first brings the database to the state just before its own. */
let applied = 0;
async function catchUp(upTo: number): Promise<void> {
  while (applied < upTo) await applyPlain(deltas[applied++]);
}

deltas.forEach((step, i) => {
  test(`${step.name} takes ACCESS EXCLUSIVE only on tenant tables it changes`, async () => {
    await catchUp(i);
    applied = i + 1; // applied (and committed) below, or failed: the next test goes on from here
    const outcome = await retryingRoleRaces(step.name, () => applyWatched(db, step));
    if (process.env.MIGRATION_LOCKS_VERBOSE) console.log(step.name, outcome);
    expect(outcome.problems).toEqual([]);
  });
});

// current/ when it holds more than comments: the change in progress, applied last.
if (currentHasSql()) {
  test('current/ takes ACCESS EXCLUSIVE only on tenant tables it changes', async () => {
    await catchUp(deltas.length);
    const step: Step = { name: 'current/', sql: await readCurrent() };
    const outcome = await retryingRoleRaces(step.name, () => applyWatched(db, step));
    if (process.env.MIGRATION_LOCKS_VERBOSE) console.log(step.name, outcome);
    expect(outcome.problems).toEqual([]);
  });
}
