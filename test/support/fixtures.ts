// The fixtures' layout (docs/development.md, Migrations): db/migrations/fixtures/tables/
// (created once) and functions/ (safely replaced), one or more files per numbered domain,
// and 98-dispatch.sql, last, at the top. Tests and the bench read the files through here.
import fs from 'node:fs';
import path from 'node:path';

export const fixturesDir = path.resolve(__dirname, '../../db/migrations/fixtures');

/** Every fixture, relative to fixturesDir, in load order: by domain number, each domain's
 *  tables/ file before its functions/ files, the top-level files (98-dispatch.sql) in their
 *  number's place. */
export function fixtureFiles(): string[] {
  const list = (dir: string) => fs.readdirSync(path.join(fixturesDir, dir), { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.sql')).map((e) => (dir ? `${dir}/${e.name}` : e.name));
  const rank = (file: string) => (file.startsWith('tables/') ? 0 : file.startsWith('functions/') ? 1 : 2);
  return [...list('tables'), ...list('functions'), ...list('')].sort((a, b) =>
    path.basename(a).slice(0, 2).localeCompare(path.basename(b).slice(0, 2)) || rank(a) - rank(b) || a.localeCompare(b));
}

export const readFixture = (file: string): string => fs.readFileSync(path.join(fixturesDir, file), 'utf8');

/** The statements of a SQL text, each ending with its `;` (comments, strings, quoted
 *  identifiers and dollar-quoted bodies are skipped when looking for the `;`). */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let start = -1;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (sql.startsWith('--', i)) { const j = sql.indexOf('\n', i); i = j < 0 ? sql.length : j; continue; }
    if (sql.startsWith('/*', i)) {
      let depth = 0;
      do {
        if (sql.startsWith('/*', i)) { depth++; i += 2; } else if (sql.startsWith('*/', i)) { depth--; i += 2; } else i++;
      } while (depth > 0 && i < sql.length);
      continue;
    }
    if (/\s/.test(c)) { i++; continue; }
    if (start < 0) start = i;
    if (c === "'") {
      const escapes = /[eE]/.test(sql[i - 1] ?? '') && !/\w/.test(sql[i - 2] ?? '');
      for (i++; i < sql.length; i++) {
        if (escapes && sql[i] === '\\') { i++; continue; }
        if (sql[i] === "'") { if (sql[i + 1] === "'") { i++; continue; } break; }
      }
      i++;
      continue;
    }
    if (c === '"') { i = sql.indexOf('"', i + 1) + 1; continue; }
    if (c === '$' && !/\w/.test(sql[i - 1] ?? '')) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) { i = sql.indexOf(tag[0], i + tag[0].length) + tag[0].length; continue; }
    }
    if (c === ';') { out.push(sql.slice(start, i + 1)); start = -1; }
    i++;
  }
  if (start >= 0) throw new Error(`SQL after the last ";": ${sql.slice(start, start + 80)}`);
  return out;
}
