#!/usr/bin/env node
// The compiled build: src/ and worker/ in TypeScript -> dist/ in CommonJS (tsc with
// tsconfig.build.json), so `npm start`, the worker and the `billing` CLI run plain
// node (docs/decisions/compiled-build.md).
//
//   node bin/build.js            `npm run build`: compile now (tsc --incremental)
//   node bin/build.js --prepare  npm's `prepare` (npm install / npm ci): compile when
//                                TypeScript and the sources are there; a production
//                                install (--omit=dev) has no TypeScript: skipped
//   require('./build').ensureBuilt()
//                                the entry points (bin/start.js, bin/billing): compile
//                                first when a source is newer than the last build, so
//                                a stale dist/ never runs old code
//
// dist/.built records when the last build started; any file or directory under src/
// and worker/ (a deleted or renamed file changes its directory) or a tsconfig changed
// after that makes dist/ stale. Two processes that find it stale at once (tests that
// spawn the CLI in parallel) build one after the other: dist/.lock is held during a build.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..');
const DIST = path.join(ROOT, 'dist');
const STAMP = path.join(DIST, '.built');
const LOCK = path.join(DIST, '.lock');
const SOURCE_DIRS = ['src', 'worker'];
const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json'];

/** The newest modification time (ms) under the sources, or null when there are none (a production image). */
function newestSource(root = ROOT) {
  let newest = null;
  const see = (ms) => { if (newest === null || ms > newest) newest = ms; };
  const walk = (dir) => {
    see(fs.statSync(dir).mtimeMs);
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else see(fs.statSync(p).mtimeMs);
    }
  };
  for (const d of SOURCE_DIRS) if (fs.existsSync(path.join(root, d))) walk(path.join(root, d));
  if (newest === null) return null;
  for (const f of SOURCE_FILES) if (fs.existsSync(path.join(root, f))) see(fs.statSync(path.join(root, f)).mtimeMs);
  return newest;
}

/** When the build in dist/ started (ms), or null when there is none. */
function builtAt(root = ROOT) {
  try {
    const ms = Number(fs.readFileSync(path.join(root, 'dist/.built'), 'utf8'));
    return Number.isFinite(ms) ? ms : null;
  } catch {
    return null;
  }
}

/** 'fresh', 'stale' (sources changed since the build), 'missing' (never built) or 'no-sources'. */
function state(root = ROOT) {
  const source = newestSource(root);
  const built = builtAt(root);
  if (source === null) return built === null && !fs.existsSync(path.join(root, 'dist/src/main.js')) ? 'missing' : 'no-sources';
  if (built === null) return 'missing';
  return source > built ? 'stale' : 'fresh';
}

function typescript() {
  try {
    return require.resolve('typescript/bin/tsc', { paths: [ROOT] });
  } catch {
    return null;
  }
}

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; } };

/** Runs fn holding dist/.lock (a directory: mkdir is atomic); a lock left by a dead process is taken over. */
function withLock(fn) {
  fs.mkdirSync(DIST, { recursive: true });
  for (;;) {
    try {
      fs.mkdirSync(LOCK);
      fs.writeFileSync(path.join(LOCK, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      let pid = NaN;
      try { pid = Number(fs.readFileSync(path.join(LOCK, 'pid'), 'utf8')); } catch { /* being written */ }
      if (Number.isInteger(pid) && pid > 0 && !alive(pid)) fs.rmSync(LOCK, { recursive: true, force: true });
      else sleep(200);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmSync(LOCK, { recursive: true, force: true });
  }
}

/**
 * Compiles src/ and worker/ into dist/. tsc's diagnostics go to stderr (the CLI's
 * stdout carries only its result). Type errors still emit JavaScript (exit 2): they
 * are reported, and `npm test` (tsc --noEmit) fails on them. Returns tsc's exit code.
 */
function build() {
  const tsc = typescript();
  if (!tsc) throw new Error('TypeScript is not installed (a production install, npm ci --omit=dev): build dist/ where dev dependencies are installed.');
  const started = Date.now();
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json')], { cwd: ROOT, stdio: ['ignore', 2, 2] });
  if (r.error) throw r.error;
  if (r.status !== 0 && r.status !== 2) throw new Error(`tsc -p tsconfig.build.json exited ${r.status ?? r.signal}; dist/ not built`);
  fs.writeFileSync(STAMP, String(started));
  return r.status;
}

/** Before running dist/: builds it when missing or older than the sources. */
function ensureBuilt() {
  const s = state();
  if (s === 'fresh' || s === 'no-sources') return;
  if (!typescript()) {
    throw new Error(s === 'missing'
      ? 'dist/ is not built and TypeScript is not installed: run `npm install` (or `npm run build` with dev dependencies).'
      : 'the sources are newer than dist/ and TypeScript is not installed to rebuild it: run `npm run build` where dev dependencies are installed.');
  }
  withLock(() => {
    const again = state(); // another process may have built it while this one waited
    if (again === 'fresh') return;
    process.stderr.write(`billing: compiling src/ and worker/ into dist/ (${again === 'missing' ? 'first build' : 'sources changed'}) ...\n`);
    if (build() === 2) process.stderr.write('billing: dist/ built with type errors (above); running it anyway.\n');
  });
}

module.exports = { ensureBuilt, state, newestSource, builtAt, ROOT, DIST };

if (require.main === module) {
  const prepare = process.argv.includes('--prepare');
  if (prepare && !typescript()) {
    process.stderr.write('prepare: TypeScript is not installed (production install): dist/ is not built here.\n');
    process.exit(0);
  }
  if (prepare && newestSource() === null) {
    process.stderr.write('prepare: no src/ here yet: dist/ is not built.\n');
    process.exit(0);
  }
  try {
    const code = withLock(build);
    process.exit(prepare ? 0 : code);
  } catch (err) {
    process.stderr.write(`build: ${err.message}\n`);
    process.exit(1);
  }
}
