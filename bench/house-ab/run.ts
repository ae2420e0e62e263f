// Issue 10's check, "the benchmarks stay within 10%" of the code before the house:
// `npx tsx bench/house-ab/run.ts [--base <commit>] [ledger] [read] [webhooks]`.
// It checks the base (default 7f7f583, the last commit before the house) out into a
// temporary worktree with its own `npm install`, then runs each benchmark of the base and of
// this checkout back to back in one sitting, each side's own script unchanged, on the
// same PostgreSQL, and writes the figures side by side under "## House A/B (issue 10)".
// This checkout's benchmarks write their usual sections to a scratch file, not to
// RESULTS.md: their conditions here (the base's 3 s warm-up) are the A/B's.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeResultsSection } from '../support';

const ROOT = path.join(__dirname, '..', '..');
const args = process.argv.slice(2);
const baseAt = args.indexOf('--base');
const BASE = baseAt >= 0 ? args[baseAt + 1] : '7f7f583';
const SECTIONS = ['ledger', 'read', 'webhooks'] as const;
type Section = (typeof SECTIONS)[number];
const asked = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--base') as Section[];
const sections = asked.length > 0 ? asked : [...SECTIONS];

const log = (line: string) => process.stderr.write(`[house-ab] ${line}\n`);
function sh(cmd: string, argv: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(cmd, argv, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} in ${cwd} exited ${r.status}`);
  return r.stdout;
}

function prepareBase(): string {
  const sha = sh('git', ['rev-parse', BASE], ROOT).trim();
  const dir = path.join(os.tmpdir(), `billing-house-ab-${sha.slice(0, 12)}`);
  if (!fs.existsSync(path.join(dir, 'package.json'))) {
    spawnSync('git', ['worktree', 'prune'], { cwd: ROOT });
    log(`worktree of ${sha.slice(0, 12)} in ${dir}`);
    sh('git', ['worktree', 'add', '--detach', '--force', dir, sha], ROOT);
  }
  if (!fs.existsSync(path.join(dir, 'node_modules', '.bin', 'tsx'))) {
    // The base's lock file lacks other platforms' optional packages (fixed after it), so
    // npm ci refuses it: npm install, from the cache where it can.
    log('npm install in the base worktree (about a minute)');
    sh('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], dir);
  }
  return dir;
}

/** One benchmark of one tree, its own script, stdout kept. */
function runBench(tree: string, section: Section, scratch: string): string {
  const started = Date.now();
  log(`${section} on ${tree === ROOT ? 'this checkout' : 'the base'} ...`);
  const out = sh(path.join(tree, 'node_modules', '.bin', 'tsx'), [path.join('bench', section, 'run.ts')], tree, {
    ...process.env,
    BENCH_RESULTS_FILE: scratch,
    // The base warms its read benchmark 3 s; this checkout's is configurable: the same here.
    BENCH_WARMUP: '3',
    // The base's read benchmark has no database name option; each side gets its own.
    BENCH_DB: 'billing_bench_read_ab',
  });
  log(`${section} done in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return out;
}

/** The number in column `col` (0 = the label) of the markdown row whose label starts with `label`. */
function cell(out: string, label: string, col: number): number | undefined {
  for (const line of out.split('\n')) {
    if (!line.startsWith('|')) continue;
    const cells = line.split('|').slice(1, -1).map((c) => c.trim());
    if (cells[0]?.startsWith(label)) {
      const n = Number(cells[col]?.replace(/,/g, '').replace(/ .*$/, ''));
      return Number.isFinite(n) ? n : undefined;
    }
  }
  return undefined;
}

function jsonPhase(out: string, phase: string): number | undefined {
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const o = JSON.parse(line) as { phase?: string; deliveries_per_second?: number };
      if (o.phase?.startsWith(phase)) return o.deliveries_per_second;
    } catch { /* not a result line */ }
  }
  return undefined;
}

const FIGURES: Record<Section, { name: string; unit: string; pick: (out: string) => number | undefined }[]> = {
  ledger: [
    ['new subscription (grant)', 'new subscriptions'], ['cancel at period end', 'cancels at period end'],
    ['plan switch', 'plan switches'], ['purchase, 1 day access', 'purchases'],
    ['ledger_sweep', 'ledger sweep'], ['single-row status change', 'single-row changes, 4 connections'],
  ].map(([label, name]) => ({ name, unit: 'rows/s', pick: (out: string) => cell(out, label, 2) })),
  read: [
    { name: 'GET /v1/entitlements/check', unit: 'req/s', pick: (out) => cell(out, 'GET /v1/entitlements/check', 1) },
    { name: 'GET /v1/subscriptions?limit=100', unit: 'req/s', pick: (out) => cell(out, 'GET /v1/subscriptions?limit=100', 1) },
  ],
  webhooks: [
    { name: 'sustained deliveries', unit: 'deliveries/s', pick: (out) => jsonPhase(out, 'sustained') },
    { name: 'backlog drain', unit: 'deliveries/s', pick: (out) => jsonPhase(out, 'backlog') },
  ],
};

function main(): void {
  const base = prepareBase();
  const scratch = path.join(os.tmpdir(), `billing-house-ab-results-${process.pid}.md`);
  const head = sh('git', ['rev-parse', '--short', 'HEAD'], ROOT).trim();
  const baseSha = sh('git', ['rev-parse', '--short', BASE], ROOT).trim();
  const loadBefore = os.loadavg()[0];
  const rows: string[] = [];
  let worst = Infinity;
  for (const section of sections) {
    const baseOut = runBench(base, section, path.join(base, 'bench', 'RESULTS.md'));
    const headOut = runBench(ROOT, section, scratch);
    for (const f of FIGURES[section]) {
      const b = f.pick(baseOut);
      const h = f.pick(headOut);
      const ratio = b && h ? h / b : undefined;
      if (ratio !== undefined) worst = Math.min(worst, ratio);
      rows.push(`| ${section} | ${f.name} (${f.unit}) | ${b ?? 'not printed'} | ${h ?? 'not printed'} | ${ratio === undefined ? '-' : `${(100 * ratio).toFixed(0)}%`} |`);
    }
  }
  const body = [
    `Run ${new Date().toISOString()} by \`npx tsx bench/house-ab/run.ts\`: the base \`${baseSha}\` (before the house) and \`${head}\` (this checkout), `
      + `each side's own benchmark script, back to back in one sitting on ${os.cpus().length} vCPU (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}; `
      + `load average ${loadBefore.toFixed(1)} before, ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} after. The read benchmark warms 3 s on both sides (the base's fixed warm-up).`,
    '',
    '| benchmark | figure | base | this checkout | this / base |',
    '|---|---|---:|---:|---:|',
    ...rows,
    '',
    `Lowest ratio: ${worst === Infinity ? '-' : `${(100 * worst).toFixed(0)}%`} (issue 10 asks for no figure below 90%).`,
  ].join('\n');
  process.stdout.write(`${body}\n`);
  writeResultsSection('## House A/B (issue 10)', body);
  fs.rmSync(scratch, { force: true });
}

main();
