// Shared by the benchmarks: a freshly migrated database of their own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { applyMigrations, withDatabase } from '../src/db/migrate';

/** Runs `statements` in order on `server`'s postgres database (creating and dropping databases). */
export async function adminQuery(server: string, ...statements: string[]): Promise<void> {
  const admin = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
  await admin.connect();
  try {
    for (const sql of statements) await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/** Drops and recreates `name` on `server`, migrates it and returns its URL. */
export async function createBenchDatabase(server: string, name: string): Promise<string> {
  await adminQuery(server, `drop database if exists ${pg.escapeIdentifier(name)} with (force)`,
    `create database ${pg.escapeIdentifier(name)}`);
  const url = withDatabase(server, name);
  await applyMigrations(url, { includeCurrent: true });
  return url;
}

/**
 * Replaces the section under `heading` ("## ...") of bench/RESULTS.md with `body`, or
 * appends it: each benchmark writes its own figures, in the run that measured them.
 */
export function writeResultsSection(heading: string, body: string): void {
  const file = path.join(__dirname, 'RESULTS.md');
  const md = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmark results\n';
  const start = md.indexOf(`\n${heading}\n`);
  const next = start < 0 ? -1 : md.indexOf('\n## ', start + heading.length + 2);
  const section = `${heading}\n\n${body.trim()}\n`;
  const updated = start < 0
    ? `${md.trimEnd()}\n\n${section}`
    : `${md.slice(0, start + 1)}${section}${next < 0 ? '' : md.slice(next)}`;
  fs.writeFileSync(file, updated);
}

/** One line on the machine and its load, for a section of bench/RESULTS.md. */
export function machineLine(pgVersion: string): string {
  const load = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  return `${os.cpus().length} vCPU (${os.cpus()[0]?.model ?? '?'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, `
    + `PostgreSQL ${pgVersion}, Node ${process.version}; load average (1, 5, 15 min) ${load}`;
}

// autocannon ships no type declarations: the part the benchmarks use.
export interface AutocannonResult { requests: { average: number; total?: number }; latency: { p50: number; p99: number }; errors: number; non2xx: number }
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const autocannon = require('autocannon') as (opts: Record<string, unknown>) => Promise<AutocannonResult>;

/** The machine's CPU time so far (/proc/stat's first line, in ticks): busy, and in all. */
export function machineCpu(): { busy: number; total: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + (f[4] ?? 0);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/**
 * The V8 flags `npm start` runs the service with (package.json "start", as the
 * Dockerfile's CMD): a benchmark's API process runs with them, so it measures the heap
 * production has (the young generation's size decides how often requests pause for GC).
 */
export function serviceNodeFlags(): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '../package.json'), 'utf8')) as { scripts: { start: string } };
  return pkg.scripts.start.split(/\s+/).filter((arg) => arg.startsWith('--'));
}
