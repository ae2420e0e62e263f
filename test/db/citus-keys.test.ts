// The key rule (docs/decisions/citus-key-rule.md): the schema stays one Citus can
// distribute by community. Every tenant table (a table of the project's schemas with a
// community_id column) has a primary key, or replica identity full where it keeps none
// (an append-only log: a shard move by logical replication needs one or the other), and
// its primary key, every unique constraint
// or unique index, and every foreign key from or to it lead with community_id (a foreign
// key to billing.communities leads with community_id -> id). The exceptions are named
// here, each with its home under Citus written in docs/scale.md: the global lookups (a
// unique index found by a credential or an id, no community known yet) and the tables
// without community_id (the communities themselves, reference tables, local tables).
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { TEST_DB } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';

const SCHEMAS = ['billing', 'billing_private', 'billing_api', 'analytics', 'billing_graphql'];

// Unique indexes that do not lead with community_id: found before any community is known.
const GLOBAL_LOOKUPS = [
  'billing_private.api_keys_hash',                  // the gate finds a key by its hash
  'billing_private.api_keys_id',                    // key ids, globally unique by gen_id
  'billing_private.operator_sessions_token',        // a dashboard session by its cookie
  'billing_private.member_portal_sessions_token',   // a portal session by its cookie
  'billing_private.operator_links_token',           // a one-time sign-in link by its token
];

// Tables without community_id: what they are under Citus.
const NOT_TENANT: Record<string, string> = {
  'billing.communities': 'the tenants themselves, distributed by id',
  'billing_private.event_types': 'reference table',
  'billing_private.platform_defaults': 'reference table',
  'billing_private.rate_buckets': 'local table on the coordinator',
  'billing_private.worker_heartbeats': 'local table on the coordinator',
};

/** What breaks the key rule among the tables of `schemas` (one line each; none: []). */
async function keyRuleBreaks(db: pg.Pool | pg.PoolClient, schemas: string[]): Promise<string[]> {
  const { rows } = await db.query<{ problem: string }>(`
    with t as (
      select c.oid, n.nspname || '.' || c.relname as name,
             exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'community_id'
                     and a.attnum > 0 and not a.attisdropped) as tenant, c.relreplident
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = any($1::text[]) and c.relkind in ('r', 'p')
    )
    select t.name || ': no primary key' as problem from t
    where t.tenant and t.relreplident <> 'f' and not exists (select 1 from pg_constraint k where k.conrelid = t.oid and k.contype = 'p')
    union all
    select t.name || ': ' || case when k.contype = 'p' then 'primary key' when k.contype = 'u' then 'unique constraint'
                                  else 'unique index' end || ' ' || i.indexrelid::regclass::text || ' '
           || pg_get_indexdef(i.indexrelid) || ' does not lead with community_id'
    from t join pg_index i on i.indrelid = t.oid and i.indisunique
    left join pg_constraint k on k.conindid = i.indexrelid and k.conrelid = t.oid
    where t.tenant and i.indexrelid::regclass::text <> all ($2::text[])
      and (i.indkey[0] = 0 or (select a.attname from pg_attribute a where a.attrelid = t.oid and a.attnum = i.indkey[0]) <> 'community_id')
    union all
    select f.conrelid::regclass::text || ': foreign key ' || f.conname || ' ' || pg_get_constraintdef(f.oid)
           || ' does not lead with community_id'
    from pg_constraint f
    where f.contype = 'f'
      and f.conrelid in (select t.oid from t)
      and exists (select 1 from pg_attribute a where a.attrelid in (f.conrelid, f.confrelid) and a.attname = 'community_id'
                  and a.attnum > 0 and not a.attisdropped)
      and not ((select a.attname from pg_attribute a where a.attrelid = f.conrelid and a.attnum = f.conkey[1]) = 'community_id'
               and ((select a.attname from pg_attribute a where a.attrelid = f.confrelid and a.attnum = f.confkey[1]) = 'community_id'
                    or (f.confrelid = 'billing.communities'::regclass and f.confkey = array[(select a.attnum from pg_attribute a
                        where a.attrelid = f.confrelid and a.attname = 'id')]::int2[])))
    union all
    select t.name || ': a table without community_id that the key rule does not list' from t
    where not t.tenant and t.name <> all ($3::text[])
    order by 1`, [schemas, GLOBAL_LOOKUPS, Object.keys(NOT_TENANT)]);
  return rows.map((r) => r.problem);
}

let owner: pg.Pool;
beforeAll(() => { owner = createOwnerPool(TEST_DB()); });
afterAll(() => owner.end());

test("every tenant table's keys and foreign keys lead with community_id", async () => {
  expect(await keyRuleBreaks(owner, SCHEMAS)).toEqual([]);
});

test('each exception is still there: the lists name only what exists', async () => {
  const { rows } = await owner.query<{ name: string }>(`
    select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = any($1::text[]) and c.relkind in ('r', 'p', 'i')`, [SCHEMAS]);
  const names = new Set(rows.map((r) => r.name));
  for (const name of [...GLOBAL_LOOKUPS, ...Object.keys(NOT_TENANT)]) expect([name, names.has(name)]).toEqual([name, true]);
});

test('docs/scale.md names the home of each global lookup and each table without community_id', () => {
  const doc = fs.readFileSync(path.join(__dirname, '../../docs/scale.md'), 'utf8');
  for (const name of [...GLOBAL_LOOKUPS, ...Object.keys(NOT_TENANT)]) {
    const short = name.split('.')[1];
    expect([name, doc.includes(`\`${short}\``)]).toEqual([name, true]);
  }
});

test('the rule fails on a new tenant table that breaks it (a schema of its own, rolled back)', async () => {
  const client = await owner.connect();
  try {
    await client.query('begin');
    await client.query('create schema citus_probe');
    await client.query(`create table citus_probe.good (
      community_id text collate "C" not null references billing.communities on delete cascade,
      id text collate "C" not null, member_id text collate "C" not null, code text,
      primary key (community_id, id), unique (community_id, code),
      foreign key (community_id, member_id) references billing.members)`);
    // an append-only log: no key, replica identity full
    await client.query('create table citus_probe.log (community_id text collate "C" not null, n integer)');
    await client.query('alter table citus_probe.log replica identity full');
    expect(await keyRuleBreaks(client, ['citus_probe'])).toEqual([]);
    await client.query(`create table citus_probe.keyed_by_id (
      community_id text collate "C" not null, id text collate "C" primary key, code text unique,
      member_id text collate "C", foreign key (member_id, community_id) references billing.members (id, community_id))`);
    await client.query('create unique index keyed_by_id_code_lower on citus_probe.keyed_by_id (lower(code), community_id)');
    await client.query('create table citus_probe.no_key (community_id text, n integer)');
    await client.query('create table citus_probe.lookup (k text primary key)');
    await client.query(`create table citus_probe.by_key (k text references citus_probe.lookup, key_id text references billing_private.api_keys (id))`);
    const breaks = await keyRuleBreaks(client, ['citus_probe']);
    const expected = [
      /^citus_probe\.by_key: a table without community_id/,
      /^citus_probe\.by_key: foreign key by_key_key_id_fkey /,
      /^citus_probe\.keyed_by_id: foreign key keyed_by_id_member_id_community_id_fkey /,
      /^citus_probe\.keyed_by_id: primary key citus_probe\.keyed_by_id_pkey /,
      /^citus_probe\.keyed_by_id: unique constraint citus_probe\.keyed_by_id_code_key /,
      /^citus_probe\.keyed_by_id: unique index citus_probe\.keyed_by_id_code_lower /,
      /^citus_probe\.lookup: a table without community_id/,
      /^citus_probe\.no_key: no primary key$/,
    ];
    expect(breaks).toHaveLength(expected.length);
    for (const re of expected) expect([re.source, breaks.filter((b) => re.test(b)).length]).toEqual([re.source, 1]);
  } finally {
    await client.query('rollback');
    client.release();
  }
});
