// The one-scope agreement (issue 28 item 1, docs/decisions/one-request-gate.md): an
// operation's scope is declared once, op.scope in the registry, and the request gate
// (billing.gate_open) checks it on every door. No SQL function checks a scope of its
// own, so the two can never disagree: a key without op.scope is refused naming it,
// and a key holding op.scope alone is never refused for a scope.
import fs from 'node:fs';
import path from 'node:path';
import { OPERATOR_SCOPES, SCOPES, type Scope } from '../../src/core/scopes';
import { hashKey } from '../../src/core/ids';
import { tools } from '../../src/mcp/tools';
import { dashboardOperations, findOperation, operations } from '../../src/operations';
import type { Operation } from '../../src/domain/operation';
import { call, createTenant, startApp, TestApp } from '../support/app';
import { createExecutor } from '../support/dashboard';
import { callTool, connect, resultJson } from '../support/mcp-client';

const ALL_SCOPES = [...SCOPES, ...OPERATOR_SCOPES] as readonly string[];
const LIMITS = { key_per_minute: 1e6, key_burst: 1e6, ip_per_minute: 1e6, ip_burst: 1e6 };

let app: TestApp;

beforeAll(async () => {
  app = await startApp();
});
afterAll(() => app.close());

/** A key of a new community holding these scopes. */
const keyWith = (scopes: readonly string[]) => createTenant(app.owner, scopes as Scope[]);
const allBut = (scope: string) => ALL_SCOPES.filter((s) => s !== scope);
const scoped = (ops: readonly Operation[]) => ops.filter((op): op is Operation & { scope: string } => op.scope !== null);

const missing = (scope: string) => ({ status: 403, code: 'missing_scope', required_scope: scope, detail: `This key lacks the scope ${scope}.` });

describe("the one-scope agreement", () => {
  test('every REST operation refuses a key without its op.scope, naming that scope', async () => {
    const ops = scoped(operations);
    expect(ops.length).toBeGreaterThan(40);
    for (const op of ops) {
      const tenant = await keyWith(allBut(op.scope));
      const r = await call(app.url, op.method, op.path.replace(/\{\w+\}/g, 'x_0'), { key: tenant.key });
      expect({ op: op.name, ...r.body as object }).toMatchObject({ op: op.name, ...missing(op.scope) });
    }
  });

  test('every MCP tool refuses a key without its operation\'s op.scope, naming that scope', async () => {
    for (const tool of tools) {
      const scope = findOperation(tool.operation)!.scope!;
      const tenant = await keyWith(allBut(scope));
      const client = await connect(app.url, tenant.key);
      try {
        const result = await callTool(client, tool.name, {});
        expect({ tool: tool.name, isError: result.isError, ...resultJson(result) as object })
          .toMatchObject({ tool: tool.name, isError: true, ...missing(scope) });
      } finally {
        await client.close();
      }
    }
  });

  test('every page-only operation refuses a credential without its op.scope, naming that scope', async () => {
    const executor = createExecutor(app);
    for (const op of scoped(dashboardOperations)) {
      const tenant = await keyWith(allBut(op.scope));
      const outcome = await executor.run(op, { key: tenant.key, ip: '127.0.0.1' }, {});
      expect({ op: op.name, status: outcome.status, ...outcome.body as object }).toMatchObject({ op: op.name, ...missing(op.scope) });
    }
  });

  /** Fields without which an operation's SQL fails before it answers (zod requires them on every door). */
  const REQUIRED: Record<string, Record<string, unknown>> = {
    redeem_link_code: { code: 'x_0', platform: 'discord', platform_uid: '1' },
  };

  test('a key holding only op.scope is never refused for a scope by the operation\'s SQL', async () => {
    const sqlOps = scoped([...operations, ...dashboardOperations]).filter((op) => op.sql);
    expect(sqlOps.length).toBeGreaterThan(30);
    for (const op of sqlOps) {
      const tenant = await keyWith([op.scope]);
      // Ids that name nothing: whatever the operation answers (404 mostly), it ran.
      const args = { ...Object.fromEntries([...op.path.matchAll(/\{(\w+)\}/g)].map((m) => [m[1], 'x_0'])), ...REQUIRED[op.name] };
      const { rows } = await app.api.query(`select billing.api_call($1, '127.0.0.1', $2, $3, $4, $5) as r`,
        [hashKey(tenant.key), LIMITS, op.scope, op.sql, args]).catch((err: Error) => { throw new Error(`${op.name}: ${err.message}`); });
      const r = rows[0].r as { ok: boolean; error?: { sqlstate: string } };
      expect({ op: op.name, ok: r.ok, refused: r.error?.sqlstate === 'BL403' }).toEqual({ op: op.name, ok: true, refused: false });
    }
  });

  test('no SQL function checks a scope of its own: the registry\'s op.scope is the only declaration', async () => {
    const { rows } = await app.owner.query<{ fn: string }>(
      `select p.oid::regprocedure::text as fn from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname in ('billing', 'billing_api', 'billing_private', 'analytics', 'billing_graphql')
         and (p.prosrc ~ 'require_scope' or p.proname = 'require_scope')
       order by 1`);
    expect(rows.map((r) => r.fn)).toEqual([]);
    const fixtures = path.resolve(__dirname, '../../db/migrations/fixtures');
    for (const file of fs.readdirSync(fixtures, { recursive: true }).map(String).filter((f) => f.endsWith('.sql'))) {
      expect({ file, text: /require_scope/.test(fs.readFileSync(path.join(fixtures, file), 'utf8')) }).toEqual({ file, text: false });
    }
  });
});
