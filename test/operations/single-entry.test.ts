// The gate's single entry (issue 28 item 1, docs/decisions/one-request-gate.md): of
// the request's path (authentication, rate tokens, tenant, scope, idempotency), the
// database offers the API's role the gate's functions only, and only the gate module
// (src/operations/gate.ts, with its token leases) sends them. Every door (REST, MCP,
// GraphQL, the pages) reaches the database through it, for SQL and handler operations.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { createOwnerPool } from '../../src/db/pool';
import { TEST_DB } from '../support/app';

let owner: pg.Pool;
beforeAll(() => { owner = createOwnerPool(TEST_DB()); });
afterAll(() => owner.end());

const GATE = [
  'billing.api_call(text,text,jsonb,text,text,jsonb,jsonb,boolean,text)',
  'billing.gate_close(jsonb,jsonb,jsonb)',
  'billing.gate_open(text,text,jsonb,text,jsonb,boolean,text)',
  'billing.gate_run(text,text,text,jsonb,text)',
  'billing_private.lease_key_tokens(text,integer,jsonb,integer,text)',
];

describe("the gate's single entry", () => {
  test('billing_api may execute exactly the gate functions of the request path', async () => {
    const { rows } = await owner.query<{ fn: string }>(
      `select replace(p.oid::regprocedure::text, ' ', '') as fn from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname in ('billing', 'billing_private')
         and p.proname ~ '^(api_call|api_auth|gate_|authenticate|take_|lease_|idempotency_|require_scope)'
         and has_function_privilege('billing_api', p.oid, 'execute')
       order by 1`);
    expect(rows.map((r) => r.fn)).toEqual(GATE);
    // The variants the gate replaced are gone.
    const { rows: old } = await owner.query<{ fn: string }>(
      `select p.oid::regprocedure::text as fn from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname in ('billing', 'billing_private')
         and p.proname in ('api_auth', 'api_auth_deferred', 'api_call_deferred', 'api_call_leased', 'authenticate',
           'authenticate_deferred', 'authenticate_key', 'take_key_token', 'require_scope')`);
    expect(old.map((r) => r.fn)).toEqual([]);
  });

  /** Every .ts file under dir. */
  function sources(dir: string): string[] {
    return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
    });
  }

  test('only the gate module sends the gate functions; nothing sends the request path any other way', () => {
    const root = path.resolve(__dirname, '../..');
    const files = [...sources(path.join(root, 'src')), ...sources(path.join(root, 'worker'))];
    expect(files.length).toBeGreaterThan(50);
    // A call in SQL text: the name followed by its argument list.
    const gateCall = /\b(billing\.(gate_open|gate_close|gate_run|api_call)|billing_private\.lease_key_tokens)\s*\(/;
    const pathCall = /\bbilling(_private)?\.(idempotency_begin|idempotency_finish|take_tokens?|api_auth\w*|api_call_\w+|authenticate\w*|take_key_token|require_scope)\s*\(/;
    const senders: string[] = [];
    const bypasses: string[] = [];
    for (const file of files) {
      const text = fs.readFileSync(file, 'utf8');
      const rel = path.relative(root, file);
      if (gateCall.test(text)) senders.push(rel);
      if (pathCall.test(text)) bypasses.push(rel);
    }
    expect(senders.sort()).toEqual(['src/operations/gate.ts', 'src/operations/token-leases.ts']);
    expect(bypasses).toEqual([]);
  });

  test('every door runs operations through the executor, whose only way to the database is the gate', () => {
    const root = path.resolve(__dirname, '../..');
    const executor = fs.readFileSync(path.join(root, 'src/operations/executor.ts'), 'utf8');
    // The executor validates; it holds no pool query of its own.
    expect(executor).not.toMatch(/\.query\s*[<(]/);
    expect(executor).toMatch(/this\.gate\.run\(/);
    for (const door of ['src/http/rest-routes.ts', 'src/mcp/server.ts', 'src/graphql/index.ts', 'src/dashboard/dashboard-context.ts', 'src/dashboard/portal-routes.ts']) {
      expect({ door, usesExecutor: /executor\.(run|identify|authenticateOnly)\(/.test(fs.readFileSync(path.join(root, door), 'utf8')) })
        .toEqual({ door, usesExecutor: true });
    }
  });
});
