// The embedded PostgreSQL (src/db/embedded.ts) starts and keeps its data across
// restarts both as root from a project in a directory no other user may enter (root's
// home, `mktemp -d`), and as an ordinary user in a directory of their own.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { packagedInstallDir, startEmbedded } from '../../src/db/embedded';

const ROOT = path.resolve(__dirname, '../..');
const isRoot = process.getuid!() === 0;
const cleanup: string[] = [];
afterAll(() => {
  for (const dir of cleanup) fs.rmSync(dir, { recursive: true, force: true });
});

/** A copy of `src` at `dest` (hard links when the file system allows: 60 MB of binaries). */
function copyTree(src: string, dest: string) {
  try {
    execFileSync('cp', ['-al', src, dest], { stdio: 'ignore' });
  } catch {
    fs.rmSync(dest, { recursive: true, force: true });
    execFileSync('cp', ['-a', src, dest]);
  }
}

async function query(url: string, sql: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try { return (await client.query(sql)).rows; } finally { await client.end(); }
}

test('from a project in a 0700 directory the embedded PostgreSQL starts, keeps its data, and starts afresh when .data is deleted', async () => {
  const privateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-private-'));
  cleanup.push(privateDir);
  expect(fs.statSync(privateDir).mode & 0o777).toBe(0o700);
  // A project inside it: its own copy of the binaries and its .data directory.
  const project = path.join(privateDir, 'project');
  fs.mkdirSync(project, { mode: 0o755 });
  const installDir = path.join(project, 'native');
  copyTree(packagedInstallDir(), installDir);
  const dataDir = path.join(project, '.data');
  // Where binaries and data go that the postgres user cannot reach (/var/lib/... by default).
  const sharedDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-shared-'));
  cleanup.push(sharedDir);
  fs.chmodSync(sharedDir, 0o755);
  const opts = { installDir, sharedDir };

  const first = await startEmbedded(dataDir, opts);
  try {
    await query(first.url('postgres'), `create table kept (note text); insert into kept values ('first start')`);
  } finally {
    await first.stop();
  }
  const link = path.join(dataDir, 'postgres');
  if (isRoot) {
    // The server runs as the postgres user, which cannot enter privateDir: the binaries
    // were copied, and the data lives in sharedDir, .data/postgres pointing to it.
    expect(fs.readdirSync(sharedDir).filter((d) => d.startsWith('postgres-'))).toHaveLength(1);
    expect(fs.lstatSync(link).isSymbolicLink()).toBe(true);
    expect(fs.realpathSync(link).startsWith(path.join(sharedDir, 'data') + path.sep)).toBe(true);
    const postgresUid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    expect(fs.statSync(path.join(link, 'PG_VERSION')).uid).toBe(postgresUid);
  } else {
    expect(fs.lstatSync(link).isDirectory()).toBe(true);
  }

  const second = await startEmbedded(dataDir, opts);
  try {
    expect(await query(second.url('postgres'), 'select note from kept')).toEqual([{ note: 'first start' }]);
    const [{ dir }] = await query(second.url('postgres'), `select current_setting('data_directory') as dir`);
    expect(fs.realpathSync(dir)).toBe(fs.realpathSync(link));
  } finally {
    await second.stop();
  }

  // Deleting .data starts afresh (README), and the data it pointed to goes too.
  const before = fs.realpathSync(link);
  fs.rmSync(dataDir, { recursive: true });
  const third = await startEmbedded(dataDir, opts);
  try {
    expect(await query(third.url('postgres'), `select to_regclass('public.kept') as t`)).toEqual([{ t: null }]);
  } finally {
    await third.stop();
  }
  if (isRoot) {
    expect(fs.existsSync(before)).toBe(false);
    expect(fs.readdirSync(path.join(sharedDir, 'data'))).toHaveLength(1);
  }
}, 120_000);

test('a project with a database moved into a 0700 directory keeps its data', async () => {
  const open = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-open-'));
  const privateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-private-'));
  const sharedDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-shared-'));
  cleanup.push(open, privateDir, sharedDir);
  fs.chmodSync(open, 0o755);
  fs.chmodSync(sharedDir, 0o755);
  const before = path.join(open, 'project');
  fs.mkdirSync(before);
  const first = await startEmbedded(path.join(before, '.data'), { sharedDir });
  try {
    await query(first.url('postgres'), `create table kept (note text); insert into kept values ('before the move')`);
  } finally {
    await first.stop();
  }
  expect(fs.lstatSync(path.join(before, '.data', 'postgres')).isDirectory()).toBe(true); // reachable: in place

  const after = path.join(privateDir, 'project');
  fs.renameSync(before, after);
  const second = await startEmbedded(path.join(after, '.data'), { sharedDir });
  try {
    expect(await query(second.url('postgres'), 'select note from kept')).toEqual([{ note: 'before the move' }]);
  } finally {
    await second.stop();
  }
  // As root the postgres user cannot follow it there: the cluster moved to sharedDir.
  expect(fs.lstatSync(path.join(after, '.data', 'postgres')).isSymbolicLink()).toBe(isRoot);
}, 120_000);

test('as an ordinary user, in a directory of their own, it starts and keeps its data', async () => {
  // As root, the script runs as nobody; otherwise we are the ordinary user already.
  const user = isRoot ? { uid: Number(execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'nobody'], { encoding: 'utf8' })) } : null;
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-user-'));
  cleanup.push(home);
  // Everything the script needs sits in the user's directory: this project may be
  // where the user cannot reach it (a 0700 clone), so copy node, the binaries and a bundle.
  const node = path.join(home, 'node');
  copyTree(process.execPath, node);
  copyTree(packagedInstallDir(), path.join(home, 'native'));
  const { buildSync } = require('esbuild') as typeof import('esbuild');
  buildSync({
    entryPoints: [path.join(ROOT, 'test/install/ordinary-user-driver.ts')],
    outfile: path.join(home, 'driver.js'),
    bundle: true, platform: 'node', format: 'cjs', logLevel: 'error',
  });
  const dataDir = path.join(home, 'data');
  fs.mkdirSync(dataDir);
  if (user) {
    fs.chownSync(home, user.uid, user.gid);
    fs.chownSync(dataDir, user.uid, user.gid);
  }

  const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(node, [path.join(home, 'driver.js'), dataDir, path.join(home, 'native')], {
      ...(user ?? {}), cwd: home, env: { PATH: process.env.PATH, HOME: home }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
  expect(result).toMatchObject({ code: 0, stderr: '' });
  const found = JSON.parse(result.stdout);
  expect(found.uid).toBe(user ? user.uid : process.getuid!());
  expect(found.rows).toEqual([{ note: `written by ${found.uid}` }]);
  // In place: nothing moved, owned by that user.
  expect(found.databaseDir).toBe(path.join(dataDir, 'postgres'));
  expect(fs.realpathSync(found.dir)).toBe(fs.realpathSync(path.join(dataDir, 'postgres')));
  expect(fs.statSync(path.join(dataDir, 'postgres', 'PG_VERSION')).uid).toBe(found.uid);
}, 120_000);
