// Start-up and footprint of the compiled build (issue 28 item 4): `npx tsx
// bench/startup/run.ts` or `npm run bench -- startup`. Never part of npm test.
//
// In a data directory of its own (embedded PostgreSQL, as `npm install && npm start`):
//   1. first start (creates and migrates the embedded database, the demo community);
//   2. restart with that existing database: spawn to /readyz 200 (target < 3 s);
//   3. idle RSS of the API process after a warm-up (REST, GraphQL introspection, MCP
//      tools list, the dashboard's sign-in page) and 10 s idle (target < 200 MB);
//   4. the CLI warm: `billing --help` and a read command (`sql-access list`) against
//      the running service's embedded database, the median of 5 (target < 1 s).
// With --compare, the same with `node --import tsx src/main.ts` and the tsx CLI, the
// way main ran them before the build. Writes its section of bench/RESULTS.md.
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serviceNodeFlags, writeResultsSection } from '../support';

const ROOT = path.resolve(__dirname, '../..');
const compare = process.argv.includes('--compare');
const START_FLAGS = serviceNodeFlags(); // package.json "start"'s, as the Dockerfile's CMD

interface Mode {
  name: string;
  server: string[];
  cli: string[];
}
const MODES: Mode[] = [
  { name: 'compiled (dist/, plain node)', server: [...START_FLAGS, 'bin/start.js'], cli: ['bin/billing'] },
  ...(compare ? [{ name: 'tsx (before)', server: ['--import', 'tsx', 'src/main.ts'], cli: [require.resolve('tsx/cli'), 'src/cli/index.ts'] }] : []),
];

const load = () => os.loadavg().map((l) => l.toFixed(1)).join(' ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Running { child: ChildProcess; url: string; out: () => string; readyMs: number; readyCpu: number }

async function start(mode: Mode, dataDir: string): Promise<Running> {
  const t0 = performance.now();
  const child = spawn(process.execPath, mode.server, {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: '', BILLING_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn', NODE_ENV: 'development' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const url = await Promise.race([
    (async () => {
      for (;;) {
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) return m[1];
        await sleep(20);
      }
    })(),
    exited.then((code) => { throw new Error(`the service exited ${code} before listening:\n${err}`); }),
  ]);
  for (;;) {
    const ok = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ok) break;
    await sleep(20);
  }
  const readyMs = performance.now() - t0;
  const readyCpu = cpuSeconds(child.pid!);
  if (/compiling src\//.test(err)) process.stderr.write(`${mode.name}: this start compiled dist/ first (${(readyMs / 1000).toFixed(1)} s)\n`);
  return { child, url, out: () => out, readyMs, readyCpu };
}

async function stop(r: Running): Promise<void> {
  const exited = new Promise((res) => r.child.once('exit', res));
  r.child.kill('SIGTERM');
  await exited;
}

const TICK = 100; // clock ticks per second (USER_HZ) on Linux
/** CPU seconds (user + system) of a process from /proc/<pid>/stat; children: of its waited-for children. */
function cpuSeconds(pid: number | 'self', children = false): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  // After "(comm) ": state is field 3, so utime (14) is index 11, stime 12, cutime 13, cstime 14.
  return children ? (Number(fields[13]) + Number(fields[14])) / TICK : (Number(fields[11]) + Number(fields[12])) / TICK;
}

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function warmUp(url: string, key: string) {
  const auth = { Authorization: `Bearer ${key}` };
  for (let i = 0; i < 20; i++) {
    await fetch(`${url}/v1/plans`, { headers: auth }).then((r) => r.text());
    await fetch(`${url}/v1/subscriptions`, { headers: auth }).then((r) => r.text());
  }
  await fetch(`${url}/graphql`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ __schema { types { name fields { name } } } }' }) }).then((r) => r.text());
  await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '0' } } }),
  }).then((r) => r.text(), () => '');
  await fetch(`${url}/dashboard/login`).then((r) => r.text());
}

function cli(mode: Mode, dataDir: string, args: string[]): { ms: number; cpu: number; ok: boolean; stderr: string } {
  const t0 = performance.now();
  const c0 = cpuSeconds('self', true);
  const r = spawnSync(process.execPath, [...mode.cli, ...args], {
    cwd: ROOT, env: { ...process.env, DATABASE_URL: '', BILLING_DATA_DIR: dataDir, LOG_LEVEL: 'warn' }, encoding: 'utf8',
  });
  return { ms: performance.now() - t0, cpu: cpuSeconds('self', true) - c0, ok: r.status === 0, stderr: r.stderr };
}

interface Figures { mode: string; firstMs: number; restartMs: number; restartCpu: number; rss: number; help: number[]; read: number[]; helpCpu: number[]; readCpu: number[] }

async function measure(mode: Mode): Promise<Figures> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-bench-startup-'));
  try {
    process.stderr.write(`${mode.name}: first start ...\n`);
    const first = await start(mode, dataDir);
    const key = /(bk_\S+)/.exec(first.out())?.[1];
    const community = /demo community (com_\w+)/.exec(first.out())?.[1];
    if (!key || !community) throw new Error(`no demo community in:\n${first.out()}`);
    await stop(first);

    process.stderr.write(`${mode.name}: restart with the existing database ...\n`);
    const again = await start(mode, dataDir);
    try {
      await warmUp(again.url, key);
      await sleep(10_000);
      const rss = rssMb(again.child.pid!);

      process.stderr.write(`${mode.name}: CLI ...\n`);
      cli(mode, dataDir, ['--help']); // warm: the OS file cache, the compile cache
      const help: number[] = [];
      const read: number[] = [];
      const helpCpu: number[] = [];
      const readCpu: number[] = [];
      for (let i = 0; i < 5; i++) {
        const h = cli(mode, dataDir, ['--help']);
        help.push(h.ms);
        helpCpu.push(h.cpu);
        const r = cli(mode, dataDir, ['sql-access', 'list', '--json']);
        if (!r.ok) throw new Error(`billing sql-access list failed:\n${r.stderr}`);
        read.push(r.ms);
        readCpu.push(r.cpu);
      }
      return { mode: mode.name, firstMs: first.readyMs, restartMs: again.readyMs, restartCpu: again.readyCpu, rss, help, read, helpCpu, readCpu };
    } finally {
      await stop(again); // also after a failure: no service or embedded PostgreSQL left behind
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  // Build first (outside the timings), as npm install's `prepare` does.
  const build = spawnSync(process.execPath, ['bin/build.js'], { cwd: ROOT, stdio: 'inherit' });
  if (build.status !== 0 && build.status !== 2) throw new Error('npm run build failed');
  const loadBefore = load();
  const results: Figures[] = [];
  for (const mode of MODES) results.push(await measure(mode));
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const verdict = (ok: boolean) => (ok ? 'met' : 'missed');
  const cpu = (xs: number[]) => `${median(xs).toFixed(2)} s`;
  const rows = results.map((r) => [
    `| ${r.mode} | CLI \`billing --help\`, warm (median of 5) | ${s(median(r.help))} (${r.help.map(s).join(', ')}) | ${cpu(r.helpCpu)} | < 1 s | ${verdict(median(r.help) < 1000)} |`,
    `| ${r.mode} | CLI \`billing sql-access list\`, warm (median of 5) | ${s(median(r.read))} (${r.read.map(s).join(', ')}) | ${cpu(r.readCpu)} | < 1 s | ${verdict(median(r.read) < 1000)} |`,
    `| ${r.mode} | restart with an existing embedded database, spawn to /readyz 200 | ${s(r.restartMs)} | ${r.restartCpu.toFixed(2)} s (the service; the embedded PostgreSQL's own processes not counted) | < 3 s | ${verdict(r.restartMs < 3000)} |`,
    `| ${r.mode} | idle RSS of the API process after a warm-up and 10 s idle | ${r.rss.toFixed(0)} MB | - | < 200 MB | ${verdict(r.rss < 200)} |`,
    `| ${r.mode} | first start (new embedded database, migrations, demo) | ${s(r.firstMs)} | - | - | - |`,
  ].join('\n')).join('\n');
  for (const line of rows.split('\n')) process.stdout.write(`${line}\n`);
  const body = `Run ${new Date().toISOString()} by \`npx tsx bench/startup/run.ts${compare ? ' --compare' : ''}\`, ${os.cpus().length} vCPU (${os.cpus()[0]?.model ?? '?'}), `
    + `Node ${process.version}; load average (1, 5, 15 min) ${loadBefore} before, ${load()} after.\n\n`
    + 'Each mode in a data directory of its own with the embedded PostgreSQL (what `npm install && npm start` runs). '
    + 'The warm-up before the RSS reading: 20 times GET /v1/plans and /v1/subscriptions, a GraphQL introspection, an MCP initialize and the dashboard sign-in page. '
    + 'Wall-clock times: on a loaded machine (2 vCPU shared by eight engineers building and testing at once) they measure the load as much as the code. '
    + 'What held the memory and where the start-up time goes: docs/decisions/compiled-build.md.\n\n'
    + '| mode | measure | wall clock | CPU (median) | target | |\n|---|---|---:|---:|---:|---|\n' + rows;
  writeResultsSection('## Start-up and footprint (issue 28)', body);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
