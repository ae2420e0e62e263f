// `npm start` (src/main.ts) against a fresh database: migrates it, creates the demo
// community with a working key on first start only, serves the API, and exits 0 on
// SIGINT after draining.
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { withDatabase } from '../../src/db/migrate';
import { call } from '../support/app';

const ROOT = path.resolve(__dirname, '../..');
const server = () => {
  const url = process.env.BILLING_TEST_SERVER;
  if (!url) throw new Error('BILLING_TEST_SERVER is not set: run tests through jest (globalSetup)');
  return url;
};

const database = `billing_main_${Date.now()}_${process.pid}`;
let dataDir: string;

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: withDatabase(server(), 'postgres') });
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-main-test-'));
  await admin((c) => c.query(`create database ${database}`));
});
afterAll(async () => {
  await admin((c) => c.query(`drop database if exists ${database} with (force)`));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

interface Started { child: ChildProcess; url: string; stdout: () => string; stderr: () => string; exited: Promise<number | null> }

async function start(): Promise<Started> {
  // node --import tsx, not the tsx command: tsx relays signals to a child and kills it
  // when it does not answer within 30 ms (a loaded machine), cutting the drain short.
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: withDatabase(server(), database), PORT: '0', HOST: '127.0.0.1', BILLING_DATA_DIR: dataDir, WEBHOOK_ENCRYPTION_KEY: '', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL printed in 45 s; stderr: ${err}`)), 45_000);
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`exited ${code} before listening; stderr: ${err}`)); });
  });
  return { child, url, stdout: () => out, stderr: () => err, exited };
}

async function stop(s: Started): Promise<number | null> {
  s.child.kill('SIGINT');
  return s.exited;
}

test('first start migrates, creates the demo with a working key, serves the API, and SIGINT exits 0', async () => {
  const s = await start();
  try {
    // The key and curl line follow the URL on stdout.
    await new Promise((r) => setTimeout(r, 200));
    const key = /Authorization: Bearer (bk_\S+)"/.exec(s.stdout())?.[1];
    expect(key).toBeDefined();
    expect(s.stdout()).toContain(`curl -H "Authorization: Bearer ${key}" ${s.url}/v1/plans`);

    expect((await call(s.url, 'GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await call(s.url, 'GET', '/readyz')).body).toEqual({ status: 'ready' });
    const plans = await call(s.url, 'GET', '/v1/plans', { key });
    expect(plans.status).toBe(200);
    expect(plans.body.data.map((t: { name: string }) => t.name).sort()).toEqual(['Gold', 'Guide', 'Silver']);
    // GraphQL: where it lives is printed, the key works there, and Ruru is served (not production).
    expect(s.stdout()).toContain(`GraphQL (read-only, same bearer keys) at ${s.url}/graphql; GraphiQL (Ruru) at ${s.url}/graphiql`);
    const gql = await fetch(`${s.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: '{ tiers(first: 10, orderBy: NAME_ASC) { nodes { name } } }' }) });
    expect(await gql.json()).toEqual({ data: { tiers: { nodes: [{ name: 'Gold' }, { name: 'Guide' }, { name: 'Silver' }] } } });
    const ruru = await fetch(`${s.url}/graphiql`, { headers: { accept: 'text/html' } });
    expect(ruru.status).toBe(200);
    expect(ruru.headers.get('content-type')).toMatch(/text\/html/);

    const keyFile = path.join(dataDir, 'webhook-encryption.key');
    expect(fs.readFileSync(keyFile, 'utf8').trim()).toMatch(/^[A-Za-z0-9+/]{43}=$/);

    // The dashboard: its URL and a one-time sign-in link for the demo owner (issue 16).
    expect(s.stdout()).toContain(`Operator dashboard at ${s.url}/dashboard`);
    const link = new RegExp(`(${s.url.replace(/[.]/g, '\\.')}/dashboard/link\\?t=\\S+)`).exec(s.stdout())?.[1];
    expect(link).toBeDefined();
    const page = await fetch(link!);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('This one-time link signs you in to the dashboard.');
  } finally {
    expect(await stop(s)).toBe(0);
  }
  expect(s.stderr()).toContain('SIGINT: draining requests');
});

test('a later start finds a community and creates no demo; the webhook key is kept', async () => {
  const keyFile = path.join(dataDir, 'webhook-encryption.key');
  const before = fs.readFileSync(keyFile, 'utf8');
  const s = await start();
  try {
    await new Promise((r) => setTimeout(r, 200));
    expect(s.stdout()).not.toContain('bk_');
    expect(s.stdout()).toMatch(/Communities:\n  com_\w+  Demo community\n/);
    const { rows } = await admin(async () => {
      const c = new pg.Client({ connectionString: withDatabase(server(), database) });
      await c.connect();
      try { return await c.query(`select count(*)::int as n from billing.communities`); } finally { await c.end(); }
    });
    expect(rows[0].n).toBe(1);
    expect(fs.readFileSync(keyFile, 'utf8')).toBe(before);
  } finally {
    expect(await stop(s)).toBe(0);
  }
});

test('a request in flight when SIGINT arrives still gets its answer', async () => {
  const s = await start();
  // Hold a connection open with a slow upload: the server must wait for it.
  const http = await import('node:http');
  const u = new URL(`${s.url}/healthz`);
  const answer = new Promise<number | undefined>((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'GET', headers: { 'content-length': '5' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.write('ab');
    setTimeout(() => { req.end('cde'); }, 700);
  });
  await new Promise((r) => setTimeout(r, 200));
  s.child.kill('SIGINT');
  expect(await answer).toBe(200);
  expect(await s.exited).toBe(0);
});
