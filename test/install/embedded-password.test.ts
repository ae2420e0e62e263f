// The embedded PostgreSQL's owner (a superuser, on 127.0.0.1 where every local user can
// connect) has a random password kept in <dataDir>/owner-password, readable by this user
// only; a cluster made with the old fixed password gets a random one on its next start.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbedded } from '../../src/db/embedded';

const dirs: string[] = [];
afterAll(() => { for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true }); });

async function connects(url: string): Promise<true | string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch (err) {
    return (err as { code?: string }).code ?? (err as Error).message;
  } finally {
    await client.end().catch(() => {});
  }
}

const withPassword = (url: string, password: string) => {
  const u = new URL(url);
  u.password = password;
  return u.toString();
};

test('a new cluster\'s owner password is random, private to this user, and the same after a restart', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-pw-'));
  dirs.push(dataDir);
  const first = await startEmbedded(dataDir);
  let url: string;
  try {
    url = first.url('postgres');
    const password = decodeURIComponent(new URL(url).password);
    expect(password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const file = path.join(dataDir, 'owner-password');
    expect(fs.readFileSync(file, 'utf8').trim()).toBe(password);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(await connects(url)).toBe(true);
    expect(await connects(withPassword(url, 'postgres'))).toBe('28P01');
  } finally {
    await first.stop();
  }
  const second = await startEmbedded(dataDir);
  try {
    expect(second.url('postgres')).toBe(url);
    expect(await connects(second.url('postgres'))).toBe(true);
  } finally {
    await second.stop();
  }
}, 120_000);

test('a cluster made with the old fixed password gets a random one on its next start', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-pw-'));
  dirs.push(dataDir);
  const made = await startEmbedded(dataDir);
  try {
    // As clusters were made before: the owner's password "postgres", no password file.
    const client = new pg.Client({ connectionString: made.url('postgres') });
    await client.connect();
    await client.query(`alter role postgres with password 'postgres'`);
    await client.end();
  } finally {
    await made.stop();
  }
  fs.rmSync(path.join(dataDir, 'owner-password'));
  const notices: string[] = [];
  const again = await startEmbedded(dataDir, { notice: (line) => notices.push(line) });
  try {
    const url = again.url('postgres');
    expect(decodeURIComponent(new URL(url).password)).not.toBe('postgres');
    expect(await connects(url)).toBe(true);
    expect(await connects(withPassword(url, 'postgres'))).toBe('28P01');
    expect(fs.readFileSync(path.join(dataDir, 'owner-password'), 'utf8').trim()).toBe(decodeURIComponent(new URL(url).password));
    expect(notices.join('\n')).toContain('random password');
  } finally {
    await again.stop();
  }
}, 120_000);
