// The operator CLI (../shared/design/operator-cli.md): communities, keys, migrate.
import pg from 'pg';
import { createOwnerPool } from '../../src/db/pool';
import { SCOPES } from '../../src/core/scopes';
import { call, startApp, TestApp, TEST_DB } from '../support/app';
import { runCli, runFailing, runJson } from '../support/cli-process';

let app: TestApp;
let owner: pg.Pool;

beforeAll(async () => {
  app = await startApp();
  owner = createOwnerPool(TEST_DB());
});
afterAll(async () => {
  await owner.end();
  await app.close();
});

test('migrate on a migrated database applies nothing and prints {"applied": []}', async () => {
  expect(await runJson(['migrate'])).toEqual({ applied: [] });
});

test('communities create prints the new community id, and the community exists', async () => {
  const out = await runJson(['communities', 'create', '--name', 'CLI community']);
  expect(Object.keys(out)).toEqual(['id']);
  expect(out.id).toMatch(/^com_/);
  const { rows } = await owner.query('select name from billing.communities where id = $1', [out.id]);
  expect(rows).toEqual([{ name: 'CLI community' }]);
});

test('a created key works against the API at once, and keys revoke makes the next request 401', async () => {
  const { id: communityId } = await runJson(['communities', 'create', '--name', 'Key community']);
  const key = await runJson(['keys', 'create', '--community', communityId, '--scopes', 'all', '--name', 'ops']);
  expect(Object.keys(key).sort()).toEqual(['id', 'key', 'prefix', 'scopes']);
  expect(key.key.startsWith(`${key.prefix}_`)).toBe(true);
  expect(key.prefix).toMatch(/^bk_[A-Za-z0-9]{8}$/);
  expect(key.scopes).toEqual([...SCOPES]);

  expect((await call(app.url, 'GET', '/v1/plans', { key: key.key })).status).toBe(200);

  const revoked = await runJson(['keys', 'revoke', key.id]);
  expect(revoked.id).toBe(key.id);
  expect(revoked.revoked_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const after = await call(app.url, 'GET', '/v1/plans', { key: key.key });
  expect(after.status).toBe(401);
  expect(after.body).toMatchObject({ code: 'unauthorized' });
});

test('keys create with a scope list stores exactly those scopes', async () => {
  const { id: communityId } = await runJson(['communities', 'create', '--name', 'Scoped community']);
  const key = await runJson(['keys', 'create', '--community', communityId, '--scopes', 'plans:read, members:read']);
  expect(key.scopes).toEqual(['plans:read', 'members:read']);
  const { rows } = await owner.query('select scopes, community_id from billing_private.api_keys where id = $1', [key.id]);
  expect(rows).toEqual([{ scopes: ['plans:read', 'members:read'], community_id: communityId }]);
});

test('an unknown scope is a usage error (exit 2) that creates no key', async () => {
  const { id: communityId } = await runJson(['communities', 'create', '--name', 'Bad scope community']);
  const r = await runFailing(['keys', 'create', '--community', communityId, '--scopes', 'plans:read,plans:write']);
  expect(r.code).toBe(2);
  expect(r.message).toMatch(/unknown scope "plans:write"/);
  const { rows } = await owner.query('select count(*)::int as n from billing_private.api_keys where community_id = $1', [communityId]);
  expect(rows[0].n).toBe(0);
});

test('failures exit non-zero with one line on stderr and nothing on stdout', async () => {
  expect((await runFailing(['keys', 'revoke', 'key_doesnotexist'])).message).toBe('billing: no key key_doesnotexist');
  expect((await runFailing(['keys', 'create', '--community', 'com_nope', '--scopes', 'all'])).message).toBe('billing: no community com_nope');
  expect((await runFailing(['keys', 'create', '--scopes', 'all'])).message).toMatch(/^billing: --community is required/);
  expect((await runFailing(['communities', 'create', '--name', 'x', '--colour', 'red'])).code).toBe(2);
  expect((await runFailing(['nonsense'])).message).toMatch(/unknown command "nonsense"/);
});

test('an unreachable DATABASE_URL fails with one line, not a stack trace', async () => {
  const r = await runFailing(['communities', 'create', '--name', 'x'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nothing' });
  expect(r.code).toBe(1);
  expect(r.message).toMatch(/^billing: .*ECONNREFUSED/);
});

test('without --json a command prints text for people, not JSON', async () => {
  const r = await runCli(['communities', 'create', '--name', 'Text community']);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/^Created community com_\w+\n$/);
});
