#!/usr/bin/env node
// The Dockerfile's build and start, without Docker (CI has no daemon):
//   1. a clean copy of the tracked files; the Dockerfile's COPY steps into an app
//      directory, with `npm ci --omit=dev` after package*.json as in the image;
//   2. a PostgreSQL: the machine's on 127.0.0.1:5432 when it answers (a scratch owner
//      role and database, dropped afterwards), else an embedded one from the dev install;
//   3. the documented production procedure (docs/operations.md): `billing migrate` as
//      the owner role, a community, its catalog and a key with the CLI, then the
//      Dockerfile's CMD with its ENV, NODE_ENV=production and DATABASE_URL;
//   4. /readyz answers 200, GET /v1/plans with the key answers the catalog, no demo
//      community was created, and SIGTERM during a request in flight lets it finish
//      and exits 0.
// Needs the dev install (node_modules) in the repository: run after `npm ci`.
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..');
const pg = require(path.join(REPO, 'node_modules/pg'));
const started = Date.now();
const step = (msg) => process.stderr.write(`[container-smoke ${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-container-'));
const cleanups = [];

function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${stderr}${stdout}`))));
  });
}

/** COPY, ENV and CMD of the Dockerfile (the only instructions it needs beyond RUN npm ci). */
function readDockerfile(file) {
  const lines = fs.readFileSync(file, 'utf8').replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const copies = [];
  const env = {};
  let cmd = null;
  for (const line of lines) {
    const [instr, ...rest] = line.split(/\s+/);
    const args = line.slice(instr.length).trim();
    if (instr === 'COPY') {
      if (rest.some((r) => r.startsWith('--'))) throw new Error(`COPY with flags is not reproduced: ${line}`);
      copies.push({ sources: rest.slice(0, -1), dest: rest[rest.length - 1] });
    } else if (instr === 'ENV') {
      for (const m of args.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env[m[1]] = m[2].replace(/^"|"$/g, '');
    } else if (instr === 'CMD') {
      cmd = JSON.parse(args);
    } else if (instr === 'RUN' && /npm ci/.test(args) && !/--omit=dev/.test(args)) {
      throw new Error(`expected the image to install with npm ci --omit=dev: ${line}`);
    }
  }
  if (!cmd) throw new Error('the Dockerfile has no CMD');
  return { copies, env, cmd };
}

async function postgres() {
  const machine = 'postgres://postgres@127.0.0.1:5432/postgres';
  const probe = new pg.Client({ connectionString: machine, connectionTimeoutMillis: 3000 });
  try {
    await probe.connect();
    await probe.end();
    step('using the PostgreSQL on 127.0.0.1:5432');
    return machine;
  } catch {
    await probe.end().catch(() => {});
  }
  step('no PostgreSQL on 127.0.0.1:5432: starting an embedded one');
  const script = `require('./src/db/embedded').startEmbedded(process.argv[1]).then((db) => {
    process.stdout.write(db.url('postgres') + '\\n');
    process.stdin.on('end', () => db.stop().then(() => process.exit(0)));
    process.stdin.resume();
  }, (err) => { console.error(err); process.exit(1); })`;
  const child = spawn(path.join(REPO, 'node_modules/.bin/tsx'), ['-e', script, path.join(tmp, 'embedded')], { cwd: REPO, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  cleanups.push(async () => { child.stdin.end(); await exited; });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve(out.trim()); });
    exited.then((code) => reject(new Error(`the embedded PostgreSQL did not start (${code})`)));
  });
}

function request(url, { method = 'GET', headers = {} } = {}) {
  return fetch(url, { method, headers }).then(async (r) => ({ status: r.status, body: await r.text() }));
}

async function main() {
  const timer = setTimeout(() => { step('timed out after 5 minutes'); process.exit(1); }, 5 * 60_000);
  timer.unref();

  // 1. The build.
  step(`clean copy of the tracked files in ${tmp}/src`);
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: REPO, encoding: 'utf8' }).split('\0').filter(Boolean);
  const context = path.join(tmp, 'src');
  for (const f of files) {
    if (!fs.existsSync(path.join(REPO, f))) continue; // deleted in the work tree
    fs.mkdirSync(path.dirname(path.join(context, f)), { recursive: true });
    fs.copyFileSync(path.join(REPO, f), path.join(context, f));
    fs.chmodSync(path.join(context, f), fs.statSync(path.join(REPO, f)).mode);
  }
  const docker = readDockerfile(path.join(context, 'Dockerfile'));
  const app = path.join(tmp, 'app');
  fs.mkdirSync(app);
  for (const { sources, dest } of docker.copies) {
    const target = path.resolve(app, dest);
    for (const source of sources) {
      const from = path.join(context, source);
      const to = dest.endsWith('/') || sources.length > 1 ? path.join(target, path.basename(source)) : target;
      fs.cpSync(from, to, { recursive: true });
    }
    if (sources.includes('package-lock.json')) {
      step('npm ci --omit=dev');
      await run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app });
    }
  }
  if (!fs.existsSync(path.join(app, 'node_modules'))) throw new Error('the Dockerfile never copies package-lock.json: no npm ci');
  if (fs.existsSync(path.join(app, 'node_modules/jest'))) throw new Error('dev dependencies were installed');

  // The image runs Node 24 (node:24-bookworm-slim); here that is the dev install's.
  const nodeDir = path.join(tmp, 'node-bin');
  fs.mkdirSync(nodeDir);
  fs.symlinkSync(fs.realpathSync(path.join(REPO, 'node_modules/.bin/node')), path.join(nodeDir, 'node'));
  const baseEnv = { PATH: `${nodeDir}:${process.env.PATH}`, HOME: tmp };

  // 2. The database, and an owner role as docs/operations.md asks (not a superuser).
  const server = await postgres();
  const id = `${process.pid}_${Date.now()}`;
  const owner = `billing_smoke_owner_${id}`;
  const database = `billing_smoke_${id}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  cleanups.unshift(async () => {
    const c = new pg.Client({ connectionString: server });
    await c.connect();
    await c.query(`drop database if exists ${database} with (force)`);
    await c.query(`drop role if exists ${owner}`);
    await c.end();
  });
  await admin.query(`create role ${owner} login createrole password 'smoke'`);
  await admin.query(`create database ${database} owner ${owner}`);
  await admin.end();
  const u = new URL(server);
  u.username = owner;
  u.password = 'smoke';
  u.pathname = `/${database}`;
  // What docs/operations.md says production sets at least (the rest keeps the image's defaults).
  const env = {
    ...baseEnv, ...docker.env, NODE_ENV: 'production', DATABASE_URL: u.toString(),
    WEBHOOK_ENCRYPTION_KEY: require('node:crypto').randomBytes(32).toString('base64'),
  };
  if (docker.env.NODE_ENV !== 'production') throw new Error('the Dockerfile does not set NODE_ENV=production');

  // 3. Release step and operator setup with the image's CLI, then the image's CMD.
  const cli = (...args) => run(path.join(app, 'bin/billing'), [...args, '--json'], { cwd: app, env }).then(JSON.parse);
  step('billing migrate');
  const migrated = await cli('migrate');
  if (!migrated.applied.length || migrated.applied.includes('current')) throw new Error(`unexpected migrations: ${JSON.stringify(migrated)}`);
  const community = await cli('communities', 'create', '--name', 'Smoke');
  await cli('catalog', 'apply', 'db/demo/demo-catalog.json', '--community', community.id);
  const key = await cli('keys', 'create', '--community', community.id, '--scopes', 'plans:read', '--name', 'smoke');

  step(`start: ${docker.cmd.join(' ')} (NODE_ENV=production)`);
  // Production requires PUBLIC_BASE_URL (links are never built from a Host header): a
  // free local port, and the base URL that names it.
  const port = await new Promise((resolve, reject) => {
    const probe = require('node:net').createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => { const p = probe.address().port; probe.close(() => resolve(p)); });
  });
  const service = spawn(docker.cmd[0], docker.cmd.slice(1), {
    cwd: app, env: { ...env, PORT: String(port), HOST: '127.0.0.1', PUBLIC_BASE_URL: `http://127.0.0.1:${port}` }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  service.stderr.on('data', (d) => (err += d));
  const exited = new Promise((resolve) => service.on('exit', (code, signal) => resolve({ code, signal })));
  cleanups.unshift(async () => { if (service.exitCode === null && service.signalCode === null) { service.kill('SIGKILL'); await exited; } });
  const url = await new Promise((resolve, reject) => {
    service.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    exited.then((r) => reject(new Error(`the service exited (${JSON.stringify(r)}) before listening:\n${err}`)));
  });

  // 4. Ready, a first request, and SIGTERM with a request in flight.
  let ready = null;
  for (let i = 0; i < 50 && ready?.status !== 200; i++) {
    ready = await request(`${url}/readyz`).catch(() => null);
    if (ready?.status !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  if (ready?.status !== 200) throw new Error(`/readyz: ${JSON.stringify(ready)}`);
  step('/readyz 200');
  const plans = await request(`${url}/v1/plans`, { headers: { Authorization: `Bearer ${key.key}` } });
  const names = plans.status === 200 ? JSON.parse(plans.body).data.map((t) => t.name).sort() : null;
  if (JSON.stringify(names) !== JSON.stringify(['Gold', 'Guide', 'Silver'])) throw new Error(`GET /v1/plans: ${plans.status} ${plans.body}`);
  step('GET /v1/plans 200: Gold, Guide, Silver');
  if (/bk_/.test(out) || !/Communities:\n {2}com_\w+ {2}Smoke\n/.test(out)) throw new Error(`expected no demo community, only Smoke:\n${out}`);

  const inFlight = new Promise((resolve, reject) => {
    const target = new URL(`${url}/healthz`);
    const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: 'GET', headers: { 'content-length': '5' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.write('ab');
    setTimeout(() => {
      service.kill('SIGTERM');
      setTimeout(() => req.end('cde'), 500);
    }, 200);
  });
  const inFlightStatus = await inFlight;
  const { code, signal } = await exited;
  if (inFlightStatus !== 200) throw new Error(`the request in flight got ${inFlightStatus}`);
  if (code !== 0 || !/SIGTERM: draining requests/.test(err)) throw new Error(`SIGTERM: exit ${code} ${signal}:\n${err}`);
  step('SIGTERM: the request in flight answered 200, exit 0');
}

main().then(
  () => 0,
  (e) => { step(`FAILED: ${e.stack ?? e.message}`); return 1; },
).then(async (code) => {
  for (const c of cleanups) await c().catch((e) => step(`cleanup: ${e.message}`));
  step('cleaned up the database');
  fs.rmSync(tmp, { recursive: true, force: true });
  step(code === 0 ? 'passed' : 'failed');
  process.exit(code);
});
