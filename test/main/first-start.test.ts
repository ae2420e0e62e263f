// Issue 26 item 13: a first start with NODE_ENV=production creates nothing unasked (no
// demo community, no all-scopes key or sign-in link in its output) unless
// BILLING_DEMO=true; /readyz answers ready only once start-up is complete and its
// banner printed; the operator CLI prints sign-in links on the running server's
// address, whatever PORT its own shell has.
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { withDatabase } from '../../src/db/migrate';
import { runCli } from '../support/cli-process';

const ROOT = path.resolve(__dirname, '../..');
const server = () => {
  const url = process.env.BILLING_TEST_SERVER;
  if (!url) throw new Error('BILLING_TEST_SERVER is not set: run tests through jest (globalSetup)');
  return url;
};

const databases: string[] = [];
const dirs: string[] = [];

async function admin<T>(fn: (c: pg.Client) => Promise<T>, database = 'postgres'): Promise<T> {
  const c = new pg.Client({ connectionString: withDatabase(server(), database) });
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

async function freshDatabase(tag: string): Promise<string> {
  const name = `billing_first_${tag}_${Date.now()}_${process.pid}`;
  await admin((c) => c.query(`create database ${name}`));
  databases.push(name);
  return name;
}

afterAll(async () => {
  for (const name of databases) await admin((c) => c.query(`drop database if exists ${name} with (force)`));
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

interface Started {
  child: ChildProcess;
  port: number;
  dataDir: string;
  database: string;
  stdout: () => string;
  stderr: () => string;
  /** The stdout printed when /readyz first answered 200 (read after the answer arrived). */
  stdoutWhenReady: string;
  exited: Promise<number | null>;
}

const BANNER_END = /(Dashboard sign-in for owner@example\.com[^\n]*\n\n {2}\S+\n|operators invite --community <id> --email <you> --role owner\n)/;

/** Starts src/main.ts on a known port and polls /readyz from the first moment until it answers 200. */
async function start(database: string, env: Record<string, string>): Promise<Started> {
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-first-start-'));
  dirs.push(dataDir);
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env, DATABASE_URL: withDatabase(server(), database), PORT: String(port), HOST: '127.0.0.1',
      BILLING_DATA_DIR: dataDir, WEBHOOK_ENCRYPTION_KEY: '', LOG_LEVEL: 'info', BILLING_DEMO: '', ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => { exitCode = code; resolve(code); }));
  const deadline = Date.now() + 300_000; // a fresh database's migrations, on a loaded machine
  let stdoutWhenReady: string | null = null;
  while (stdoutWhenReady === null) {
    if (exitCode !== undefined) throw new Error(`exited ${exitCode} before ready; stderr: ${err}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`not ready in 300 s; stdout: ${out}; stderr: ${err}`);
    }
    try {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) });
      await r.text();
      if (r.status === 200) {
        // Output written before the answer has reached this process's pipe by now.
        await new Promise((resolve) => setTimeout(resolve, 50));
        stdoutWhenReady = out;
      }
    } catch {
      // not listening yet
    }
    if (stdoutWhenReady === null) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return { child, port, dataDir, database, stdout: () => out, stderr: () => err, stdoutWhenReady, exited };
}

async function stop(s: Started): Promise<number | null> {
  s.child.kill('SIGINT');
  return s.exited;
}

async function communities(database: string): Promise<number> {
  return admin(async (c) => (await c.query<{ n: number }>('select count(*)::int as n from billing.communities')).rows[0].n, database);
}

test('a first start in production creates no demo and prints no key or sign-in link; /readyz waits for the banner; the CLI links to the server\'s address', async () => {
  const database = await freshDatabase('prod');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const s = await start(database, { NODE_ENV: 'production', PUBLIC_BASE_URL: base, PORT: String(port) });
  try {
    // Ready only once the whole banner is out.
    expect(s.stdoutWhenReady).toContain(`Billing API listening on ${base}`);
    expect(s.stdoutWhenReady).toMatch(BANNER_END);
    expect(s.stdout()).toContain('No community yet');
    const everything = s.stdout() + s.stderr();
    expect(everything).not.toMatch(/bk_\w+/);
    expect(everything).not.toContain('/dashboard/link?t=');
    expect(await communities(database)).toBe(0);

    // The CLI in another shell, without PORT or PUBLIC_BASE_URL: the link names the
    // address the server recorded when it started, not localhost:3000.
    const cliEnv = { DATABASE_URL: withDatabase(server(), database), BILLING_DATA_DIR: s.dataDir, PORT: '', PUBLIC_BASE_URL: '', NODE_ENV: 'production' };
    const created = await runCli(['communities', 'create', '--name', 'Real community', '--json'], cliEnv);
    expect(created.code).toBe(0);
    const communityId = JSON.parse(created.stdout).id as string;
    const invited = await runCli(['operators', 'invite', '--community', communityId, '--email', 'op@example.com', '--role', 'owner', '--json'], cliEnv);
    expect(invited.code).toBe(0);
    expect(JSON.parse(invited.stdout).url).toMatch(new RegExp(`^${base.replace(/\./g, '\\.')}/dashboard/link\\?t=`));
  } finally {
    expect(await stop(s)).toBe(0);
  }
}, 600_000);

test('BILLING_DEMO=true asks for the demo in production too; a development first start makes it and is ready only after printing it', async () => {
  const database = await freshDatabase('demo');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const s = await start(database, { NODE_ENV: 'production', PUBLIC_BASE_URL: base, PORT: String(port), BILLING_DEMO: 'true' });
  try {
    expect(s.stdout()).toMatch(/Authorization: Bearer bk_\w+/);
    expect(await communities(database)).toBe(1);
    expect(s.stdoutWhenReady).toMatch(/Authorization: Bearer bk_\w+/);
    expect(s.stdoutWhenReady).toMatch(BANNER_END);
  } finally {
    expect(await stop(s)).toBe(0);
  }
  const dev = await freshDatabase('dev');
  const d = await start(dev, { NODE_ENV: 'development' });
  try {
    expect(d.stdoutWhenReady).toMatch(/Authorization: Bearer bk_\w+/);
    expect(d.stdoutWhenReady).toMatch(BANNER_END);
    // The CLI of this machine names the server's port, not its own default (3000).
    const invited = await runCli(['operators', 'invite', '--community', /Created a demo community (com_\w+)/.exec(d.stdout())![1],
      '--email', 'second@example.com', '--role', 'admin', '--json'],
    { DATABASE_URL: withDatabase(server(), dev), BILLING_DATA_DIR: d.dataDir, PORT: '', PUBLIC_BASE_URL: '', NODE_ENV: 'development' });
    expect(invited.code).toBe(0);
    expect(JSON.parse(invited.stdout).url).toMatch(new RegExp(`^http://localhost:${d.port}/dashboard/link\\?t=`));
  } finally {
    expect(await stop(d)).toBe(0);
  }
}, 900_000);
