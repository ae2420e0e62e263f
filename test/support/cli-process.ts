// Runs the operator CLI as a separate process, the way an operator does.
import { spawn } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '../..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

export interface CliResult { code: number | null; stdout: string; stderr: string }

export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, [path.join(ROOT, 'src/cli/index.ts'), ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: process.env.BILLING_TEST_DB, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs a command with --json, expecting success and exactly one JSON document on stdout. */
export async function runJson<T = any>(args: string[], env: NodeJS.ProcessEnv = {}): Promise<T> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await runCli([...args, '--json'], env);
  if (r.code !== 0) throw new Error(`billing ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
  if (lines.length !== 1) throw new Error(`expected one JSON line on stdout, got: ${JSON.stringify(r.stdout)}`);
  return JSON.parse(lines[0]) as T;
}

/** A failure: a non-zero exit, nothing on stdout, one line on stderr. */
export async function runFailing(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult & { message: string }> {
  const r = await runCli([...args, '--json'], env);
  expect(r.code).not.toBe(0);
  expect(r.stdout).toBe('');
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('npm warn'));
  expect(lines).toHaveLength(1);
  return { ...r, message: lines[0] };
}
