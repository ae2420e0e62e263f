// Issue 10's check, "the benchmarks stay within 10%" of the code before the house:
// `npx tsx bench/house-ab/run.ts [--base <commit>] [--heading '## ...'] [ledger] [read] [webhooks]`.
// --heading writes the table under another section (issue 17's ledger ratios, say), so
// a run for another question leaves issue 10's table as it stood.
// It checks the base (default 7f7f583, the last commit before the house) out into a
// temporary worktree with its own `npm install`, then runs each benchmark of the base and of
// this checkout back to back in one sitting, each side's own script unchanged, on the
// same PostgreSQL, alternating (BENCH_AB_ROUNDS rounds, default 2), and writes each
// side's best figures side by side under "## House A/B (issue 10)".
// This checkout's benchmarks write their usual sections to a scratch file, not to
// RESULTS.md: their conditions here are the A/B's.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeResultsSection } from '../support';

const ROOT = path.join(__dirname, '..', '..');
const args = process.argv.slice(2);
const baseAt = args.indexOf('--base');
const HOUSE_BASE = '7f7f583';
const BASE = baseAt >= 0 ? args[baseAt + 1] : HOUSE_BASE;
const headingAt = args.indexOf('--heading');
const HEADING = headingAt >= 0 ? args[headingAt + 1] : '## House A/B (issue 10)';
const FOR_HOUSE = HEADING === '## House A/B (issue 10)';
const SECTIONS = ['ledger', 'read', 'webhooks'] as const;
type Section = (typeof SECTIONS)[number];
const asked = args.filter((a, i) => !a.startsWith('--') && !['--base', '--heading'].includes(args[i - 1])) as Section[];
const sections = asked.length > 0 ? asked : [...SECTIONS];
// Rounds, alternating base and this checkout: on a shared 2-vCPU machine one run of the
// same code varies by 20% from the next, so each side keeps its best of ROUNDS.
const ROUNDS = Number(process.env.BENCH_AB_ROUNDS ?? 2);

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
    // Each side warms as its own script does: the base 3 s (fixed), this checkout 15 s
    // (its process builds the GraphQL schema and compiles more code after it starts).
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
    const baseOuts: string[] = [];
    const headOuts: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      baseOuts.push(runBench(base, section, path.join(base, 'bench', 'RESULTS.md')));
      headOuts.push(runBench(ROOT, section, scratch));
    }
    for (const f of FIGURES[section]) {
      const bs = baseOuts.map(f.pick).filter((x): x is number => x !== undefined);
      const hs = headOuts.map(f.pick).filter((x): x is number => x !== undefined);
      const b = bs.length ? Math.max(...bs) : undefined;
      const h = hs.length ? Math.max(...hs) : undefined;
      const ratio = b && h ? h / b : undefined;
      if (ratio !== undefined) worst = Math.min(worst, ratio);
      rows.push(`| ${section} | ${f.name} (${f.unit}) | ${b ?? 'not printed'} (${bs.join(', ')}) | ${h ?? 'not printed'} (${hs.join(', ')}) `
        + `| ${ratio === undefined ? '-' : `${(100 * ratio).toFixed(0)}%`} |`);
    }
  }
  const body = [
    `Run ${new Date().toISOString()} by \`npx tsx bench/house-ab/run.ts${process.argv.slice(2).map((a) => (a.includes(' ') ? ` '${a}'` : ` ${a}`)).join('')}\`: `
      + `the base \`${baseSha}\`${BASE === HOUSE_BASE ? ' (before the house)' : ''} and \`${head}\` (this checkout), `
      + `each side's own benchmark script, back to back in one sitting on ${os.cpus().length} vCPU (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}; `
      + `load average ${loadBefore.toFixed(1)} before, ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} after. `
      + `${ROUNDS} rounds per benchmark, base and this checkout alternating; each side's best (its runs in brackets).`
      + (BASE === HOUSE_BASE && sections.includes('read')
        ? ' The read benchmark warms each side as its own script does: the base 3 s, this checkout 15 s.' : ''),
    '',
    '| benchmark | figure | base, best (runs) | this checkout, best (runs) | this / base |',
    '|---|---|---:|---:|---:|',
    ...rows,
    '',
    `Lowest ratio: ${worst === Infinity ? '-' : `${(100 * worst).toFixed(0)}%`}${FOR_HOUSE ? ' (issue 10 asks for no figure below 90%)' : ''}.`,
  ].join('\n');
  process.stdout.write(`${body}\n`);
  writeResultsSection(HEADING, body);
  fs.rmSync(scratch, { force: true });
}

main();
