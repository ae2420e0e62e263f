// The fixtures are split by rule (docs/development.md, Migrations): tables/ holds what is
// created once and changed afterwards by explicit statements in a migration, functions/
// what a migration may replace by running it again; and everything on a table (its
// triggers, policies, indexes, grants) stands beside the table's `create table`, so one
// file says all that happens to a table's rows, whichever domain needs it.
import { fixtureFiles, readFixture, splitStatements } from '../support/fixtures';

const statements = fixtureFiles().flatMap((file) => splitStatements(readFixture(file)).map((sql) => ({ file, sql: sql.replace(/\s+/g, ' ') })));
const NAME = String.raw`([a-z_]+\.[a-z_]+)`;

test('every fixture is tables/NN-*.sql, functions/NN-*.sql or 98-dispatch.sql, the last', () => {
  const files = fixtureFiles();
  for (const file of files) expect([file, /^(?:(?:tables|functions)\/\d\d-[a-z0-9-]+|98-dispatch)\.sql$/.test(file)]).toEqual([file, true]);
  expect(files.at(-1)).toBe('98-dispatch.sql');
  expect(files.filter((f) => f.startsWith('tables/')).length).toBeGreaterThan(10);
  expect(files.filter((f) => f.startsWith('functions/')).length).toBeGreaterThan(10);
});

test('tables/ creates no function or view; functions/ creates no table, index, trigger, policy or type', () => {
  const misplaced: string[] = [];
  for (const { file, sql } of statements) {
    if (file.startsWith('tables/') && /^(?:create (?:or replace )?(?:function|view)|(?:grant|revoke) [^;]* on function|alter function)\b/i.test(sql)) misplaced.push(`${file}: ${sql.slice(0, 100)}`);
    if (file.startsWith('functions/') && /^(?:create (?:unlogged )?table|alter table|create (?:unique )?index|create (?:constraint )?trigger|create policy|create type)\b/i.test(sql)) misplaced.push(`${file}: ${sql.slice(0, 100)}`);
  }
  expect(misplaced).toEqual([]);
});

test('every trigger, policy, index and grant on a table is in the file of its create table', () => {
  const home = new Map<string, string>();
  for (const { file, sql } of statements) {
    const m = new RegExp(String.raw`^create (?:unlogged )?table (?:if not exists )?${NAME}`, 'i').exec(sql);
    if (m) home.set(m[1], file);
  }
  expect(home.get('billing.subscriptions')).toBe('tables/40-subscriptions.sql');
  const onTable = [
    String.raw`^(?:create|drop) (?:constraint )?trigger (?:if exists )?\w+ .*?\bon ${NAME}`,
    String.raw`^(?:create|drop) policy (?:if exists )?\w+ on ${NAME}`,
    String.raw`^create (?:unique )?index (?:if not exists )?\w+ on (?:only )?${NAME}`,
    String.raw`^(?:grant|revoke) [^;]*? on (?:table )?${NAME} (?:to|from) `,
  ].map((p) => new RegExp(p, 'i'));
  const away: string[] = [];
  let triggers = 0;
  for (const { file, sql } of statements) {
    for (const re of onTable) {
      const table = re.exec(sql)?.[1];
      if (!table || !home.has(table)) continue;
      if (/^create (?:constraint )?trigger/i.test(sql)) triggers++;
      if (home.get(table) !== file) away.push(`${file} (${home.get(table)} creates ${table}): ${sql.slice(0, 100)}`);
    }
  }
  expect(triggers).toBeGreaterThan(30);
  expect(away).toEqual([]);
});
