// "No two modules share a base name" (docs/development.md, Layout): a file's name
// says what it is wherever it is imported from. index.ts entry points are exempt.
import fs from 'node:fs';
import path from 'node:path';

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]);
}

test('no two modules under src/ and worker/ share a base name (index.ts aside)', () => {
  const root = path.resolve(__dirname, '../..');
  const byName = new Map<string, string[]>();
  for (const file of [...files(path.join(root, 'src')), ...files(path.join(root, 'worker'))]) {
    const base = path.basename(file);
    if (base === 'index.ts') continue;
    byName.set(base, [...(byName.get(base) ?? []), path.relative(root, file)]);
  }
  expect([...byName.values()].filter((paths) => paths.length > 1)).toEqual([]);
});

test('test files are named in kebab-case (test/**, lower case words joined by "-")', () => {
  const root = path.resolve(__dirname, '../..');
  // test/support/vendor/ keeps platforms' documents as they publish them (README, LICENSE).
  const names = files(path.join(root, 'test')).map((file) => path.relative(root, file))
    .filter((name) => !name.startsWith('test/support/vendor/'));
  expect(names.filter((name) => !/^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+)+$/.test(path.basename(name)))).toEqual([]);
});
