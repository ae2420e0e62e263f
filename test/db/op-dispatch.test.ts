// Operations run by name through billing_private.op_dispatch, a CASE written from the
// catalog by db/migrations/fixtures/98-dispatch.sql (a static call is planned once per
// session; EXECUTE planned every request). An operation the CASE does not name still
// runs, through EXECUTE, only slower: this test fails until a migration that adds or
// changes an operation includes 98-dispatch.sql again.
import pg from 'pg';
import { TEST_DB } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';

let owner: pg.Pool;
beforeAll(() => { owner = createOwnerPool(TEST_DB()); });
afterAll(() => owner.end());

test('op_dispatch names every billing_api operation taking (p_args jsonb) and returning jsonb', async () => {
  const { rows: ops } = await owner.query<{ name: string }>(
    `select p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'billing_api' and p.prorettype = 'jsonb'::regtype
       and pg_get_function_identity_arguments(p.oid) = 'p_args jsonb' order by 1`);
  expect(ops.length).toBeGreaterThan(40);
  const { rows: [{ src }] } = await owner.query<{ src: string }>(
    `select prosrc as src from pg_proc where oid = 'billing_private.op_dispatch(text, jsonb)'::regprocedure`);
  const named = [...src.matchAll(/when '(\w+)' then return billing_api\.(\w+)\(p_args\);/g)].map((m) => [m[1], m[2]]);
  expect(named.map(([op]) => op)).toEqual(ops.map((o) => o.name));
  for (const [op, fn] of named) expect(fn).toBe(op);
});

test('the API calls operations through op_dispatch, never EXECUTE of its own', async () => {
  for (const fn of ['billing.api_call']) {
    const { rows } = await owner.query<{ src: string }>(`select prosrc as src from pg_proc where oid = $1::regproc`, [fn]);
    expect(rows[0].src).toContain('billing_private.op_dispatch(p_op, p_args)');
    expect(rows[0].src).not.toMatch(/execute format\('select billing_api/);
  }
});

test('an operation the CASE does not name still runs, by EXECUTE', async () => {
  const client = await owner.connect();
  try {
    await client.query('begin');
    await client.query(`create function billing_api.zz_probe(p_args jsonb) returns jsonb language sql as $$ select jsonb_build_object('echo', p_args) $$`);
    const { rows } = await client.query(`select billing_private.op_dispatch('zz_probe', '{"a":1}') as r`);
    expect(rows[0].r).toEqual({ echo: { a: 1 } });
  } finally {
    await client.query('rollback');
    client.release();
  }
});

// plpgsql sets up each WHEN it reaches again in every transaction: one CASE over all
// the operations cost the entitlement check (31st) about 100,000 instructions a
// request (issue 33). The names are found by halving, then a CASE of at most four.
test('op_dispatch finds a name by halving: no CASE of more than four names', async () => {
  const { rows: [{ src }] } = await owner.query<{ src: string }>(
    `select prosrc as src from pg_proc where oid = 'billing_private.op_dispatch(text, jsonb)'::regprocedure`);
  const cases = src.split(/\bcase p_op\b/).slice(1).map((c) => c.split(/\bend case;/)[0]);
  expect(cases.length).toBeGreaterThan(10);
  for (const c of cases) expect((c.match(/\bwhen '/g) ?? []).length).toBeLessThanOrEqual(4);
  expect((src.match(/if p_op collate "C" < '/g) ?? []).length).toBe(cases.length - 1);
});

test('every operation is reached through the halving, and an unknown name falls to EXECUTE', async () => {
  const { rows: ops } = await owner.query<{ name: string }>(
    `select p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'billing_api' and p.prorettype = 'jsonb'::regtype
       and pg_get_function_identity_arguments(p.oid) = 'p_args jsonb' order by 1`);
  const client = await owner.connect();
  try {
    await client.query('begin');
    // Each operation replaced by one answering its own name: op_dispatch must call the one it was asked for.
    for (const { name } of ops) {
      await client.query(`create or replace function billing_api.${name}(p_args jsonb) returns jsonb language sql as $$ select to_jsonb('${name}'::text) $$`);
    }
    for (const { name } of ops) {
      const { rows } = await client.query(`select billing_private.op_dispatch($1, '{}') as r`, [name]);
      expect(rows[0].r).toBe(name);
    }
    await client.query(`create function billing_api.zzz_unknown(p_args jsonb) returns jsonb language sql as $$ select '"dyn"'::jsonb $$`);
    expect((await client.query(`select billing_private.op_dispatch('zzz_unknown', '{}') as r`)).rows[0].r).toBe('dyn');
    await client.query(`create function billing_api.aaa_unknown(p_args jsonb) returns jsonb language sql as $$ select '"dyn"'::jsonb $$`);
    expect((await client.query(`select billing_private.op_dispatch('aaa_unknown', '{}') as r`)).rows[0].r).toBe('dyn');
  } finally {
    await client.query('rollback');
    client.release();
  }
});
