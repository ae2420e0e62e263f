// The compiled build (bin/build.js, docs/decisions/compiled-build.md): a dist/ older
// than any source is never run as it is, and the compiled CLI finds the package's
// files from dist/ as it does from src/.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const build = require('../../bin/build.js') as {
  state(root?: string): 'fresh' | 'stale' | 'missing' | 'no-sources';
  ensureBuilt(): void;
  ROOT: string;
};
const ROOT = path.resolve(__dirname, '../..');

describe('dist/ staleness', () => {
  let root: string;
  const write = (rel: string, text: string, mtimeMs: number) => {
    const file = path.join(root, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    fs.utimesSync(file, mtimeMs / 1000, mtimeMs / 1000);
  };
  const setDirTimes = (ms: number) => {
    for (const d of ['src', 'src/core', 'worker']) if (fs.existsSync(path.join(root, d))) fs.utimesSync(path.join(root, d), ms / 1000, ms / 1000);
  };
  const T = Date.parse('2026-01-01T00:00:00Z');
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-build-'));
    write('src/core/a.ts', 'export {}', T);
    write('worker/index.ts', 'export {}', T);
    setDirTimes(T);
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  test('sources and no build: missing', () => {
    expect(build.state(root)).toBe('missing');
  });

  test('a build started after every source change is fresh', () => {
    write('dist/.built', String(T + 1000), T + 60_000);
    expect(build.state(root)).toBe('fresh');
  });

  test('a source edited after the build started makes dist stale', () => {
    write('dist/.built', String(T + 1000), T + 60_000);
    write('src/core/a.ts', 'export const a = 1;', T + 2000);
    expect(build.state(root)).toBe('stale');
  });

  test('a source deleted after the build (its directory changed) makes dist stale', () => {
    write('src/core/b.ts', 'export {}', T);
    setDirTimes(T);
    write('dist/.built', String(T + 1000), T + 60_000);
    fs.rmSync(path.join(root, 'src/core/b.ts'));
    fs.utimesSync(path.join(root, 'src/core'), (T + 2000) / 1000, (T + 2000) / 1000);
    expect(build.state(root)).toBe('stale');
  });

  test('a changed tsconfig makes dist stale', () => {
    write('dist/.built', String(T + 1000), T + 60_000);
    write('tsconfig.build.json', '{}', T + 2000);
    expect(build.state(root)).toBe('stale');
  });

  test('an image with dist/ and no sources runs dist as it is', () => {
    fs.rmSync(path.join(root, 'src'), { recursive: true });
    fs.rmSync(path.join(root, 'worker'), { recursive: true });
    write('dist/src/main.js', '', T);
    expect(build.state(root)).toBe('no-sources');
  });
});

describe('the compiled CLI', () => {
  // Builds dist/ when it is missing or stale (tsc: a minute or two on a loaded machine).
  beforeAll(() => build.ensureBuilt(), 600_000);

  test('dist/ is fresh after ensureBuilt', () => {
    expect(build.state()).toBe('fresh');
  });

  test('the package root seen from dist/ is the package directory, not dist/', () => {
        const { packageRoot } = require(path.join(ROOT, 'dist/src/core/config.js')) as { packageRoot: string };
    expect(packageRoot).toBe(ROOT);
  });

  test('bin/billing answers --help with plain node, without tsx', () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/billing'), '--help'], {
      cwd: os.tmpdir(), encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '--require=' + path.join(__dirname, 'no-tsx.js') },
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Usage: billing <command>/);
  }, 60_000);
});
