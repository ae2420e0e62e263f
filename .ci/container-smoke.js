#!/usr/bin/env node
// The Dockerfile's build and start, without Docker (CI has no daemon):
//   1. a clean copy of the tracked files; each stage of the Dockerfile replayed in a
//      directory of its own: the build stage compiles dist/ (npm's prepare, with the
//      repository's dev install), the image stage runs `npm ci --omit=dev` and copies
//      dist/ from the build stage (COPY --from);
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

/**
 * The Dockerfile's stages (FROM ... [AS name]), each with its COPY (also --from=<stage>)
 * and RUN steps in order, and the last stage's ENV and CMD.
 */
function readDockerfile(file) {
  const lines = fs.readFileSync(file, 'utf8').replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const stages = [];
  let env = {};
  let cmd = null;
  for (const line of lines) {
    const [instr, ...rest] = line.split(/\s+/);
    const args = line.slice(instr.length).trim();
    const stage = stages[stages.length - 1];
    if (instr === 'FROM') {
      stages.push({ name: /\bAS\s+(\S+)/i.exec(args)?.[1] ?? String(stages.length), workdir: '/', steps: [] });
      env = {};
      cmd = null;
    } else if (instr === 'WORKDIR') {
      stage.workdir = args;
    } else if (instr === 'COPY') {
      const flags = rest.filter((r) => r.startsWith('--'));
      const paths = rest.filter((r) => !r.startsWith('--'));
      const from = flags.map((f) => /^--from=(.+)$/.exec(f)?.[1]).find(Boolean) ?? null;
      if (flags.length !== (from ? 1 : 0)) throw new Error(`COPY with flags other than --from is not reproduced: ${line}`);
      stage.steps.push({ copy: { from, sources: paths.slice(0, -1), dest: paths[paths.length - 1] } });
    } else if (instr === 'RUN') {
      stage.steps.push({ run: args });
    } else if (instr === 'ENV') {
      for (const m of args.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env[m[1]] = m[2].replace(/^"|"$/g, '');
    } else if (instr === 'CMD') {
      cmd = JSON.parse(args);
    }
  }
  if (!cmd) throw new Error('the Dockerfile has no CMD');
  const final = stages[stages.length - 1];
  if (!final.steps.some((st) => st.run && /npm ci/.test(st.run) && /--omit=dev/.test(st.run))) {
    throw new Error('expected the image to install with npm ci --omit=dev');
  }
  return { stages, env, cmd };
}

/**
 * Replays one stage in its own directory (its WORKDIR). `npm ci --omit=dev` runs as in
 * the image; a full `npm ci` (a build stage) uses the repository's dev install, the
 * same lock file, and runs what npm ci runs after installing: the `prepare` script.
 * Other RUN steps (mkdir, chown) are not needed outside a container.
 */
async function replayStage(stage, dirs, context) {
  const dir = dirs.get(stage.name);
  fs.mkdirSync(dir, { recursive: true });
  const inStage = (p, base) => path.join(base, path.posix.relative(stage.workdir, path.posix.resolve(stage.workdir, p)));
  for (const st of stage.steps) {
    if (st.copy) {
      const { from, sources, dest } = st.copy;
      const target = inStage(dest, dir);
      for (const source of sources) {
        const src = from ? inStage(source, dirs.get(from)) : path.join(context, source);
        if (!fs.existsSync(src)) throw new Error(`COPY ${from ? `--from=${from} ` : ''}${source}: not there`);
        const to = dest.endsWith('/') || sources.length > 1 ? path.join(target, path.basename(source)) : target;
        fs.cpSync(src, to, { recursive: true });
      }
    } else if (/npm ci/.test(st.run) && /--omit=dev/.test(st.run)) {
      step(`stage ${stage.name}: npm ci --omit=dev`);
      await run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir });
    } else if (/npm ci/.test(st.run)) {
      step(`stage ${stage.name}: npm ci (the repository's dev install), then npm run prepare`);
      fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
      const nodeBin = path.dirname(fs.realpathSync(path.join(REPO, 'node_modules/.bin/node')));
      await run('npm', ['run', 'prepare'], { cwd: dir, env: { ...process.env, PATH: `${path.join(REPO, 'node_modules/.bin')}:${nodeBin}:${process.env.PATH}` } });
    }
  }
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
  const timer = setTimeout(() => { step('timed out after 10 minutes'); process.exit(1); }, 10 * 60_000);
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
  const dirs = new Map(docker.stages.map((st, i) => [st.name, path.join(tmp, `stage-${i}`)]));
  for (const stage of docker.stages) await replayStage(stage, dirs, context);
  const app = dirs.get(docker.stages[docker.stages.length - 1].name);
  if (!fs.existsSync(path.join(app, 'node_modules'))) throw new Error('the Dockerfile never copies package-lock.json: no npm ci');
  if (fs.existsSync(path.join(app, 'node_modules/jest'))) throw new Error('dev dependencies were installed');
  // (node_modules/typescript is there: the lock file marks it a production package, as
  // the optional peer of cosmiconfig, which graphile-migrate uses.)
  if (fs.existsSync(path.join(app, 'src'))) throw new Error('the image holds the TypeScript sources');
  if (!fs.existsSync(path.join(app, 'dist/src/main.js'))) throw new Error('the image has no compiled dist/src/main.js');

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
