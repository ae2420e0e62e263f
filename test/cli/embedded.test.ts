// Without DATABASE_URL the CLI uses npm start's embedded database: it starts and stops
// it when it is not running, and connects to it (leaving it running) when it is.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { spawn } from 'node:child_process';
import { ROOT, runCli, runJson } from '../support/cli-process';

/** Starts the embedded server in another process, as npm start does. */
async function startServer(dir: string): Promise<{ url: string; stop(): Promise<void> }> {
  const script = `require('./src/db/embedded').startEmbedded(process.argv[1]).then((db) => {
    process.stdout.write(db.url('billing') + '\\n');
    process.stdin.on('end', () => db.stop().then(() => process.exit(0)));
    process.stdin.resume();
  })`;
  const child = spawn(path.join(ROOT, 'node_modules/.bin/tsx'), ['-e', script, dir], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => { out += d; if (out.includes('\n')) resolve(out.trim()); });
    void exited.then(() => reject(new Error('the embedded server did not start')));
  });
  return { url, stop: async () => { child.stdin!.end(); await exited; } };
}

let dataDir: string;
const env = () => ({ DATABASE_URL: '', BILLING_DATA_DIR: dataDir });

beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-cli-embedded-'));
});
afterAll(() => {
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test('a command starts the embedded database when it is not running, and stops it after', async () => {
  const migrated = await runJson(['migrate'], env());
  expect(migrated.applied.length).toBeGreaterThan(0);
  const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');
  expect(fs.existsSync(pidFile)).toBe(false);

  const again = await runCli(['communities', 'create', '--name', 'Embedded', '--json'], env());
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout).id).toMatch(/^com_/);
  expect(again.stderr).toContain('Starting the embedded PostgreSQL');
  expect(fs.existsSync(pidFile)).toBe(false);
}, 120_000);

test('a command connects to the embedded database that is already running and leaves it running', async () => {
  const db = await startServer(dataDir);
  try {
    const r = await runCli(['communities', 'create', '--name', 'While running', '--json'], env());
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('already running');
    const { id } = JSON.parse(r.stdout);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query('select name from billing.communities where id = $1', [id]);
      expect(rows).toEqual([{ name: 'While running' }]);
    } finally {
      await client.end();
    }
  } finally {
    await db.stop();
  }
}, 120_000);
