// `npm start` (src/main.ts) without SMTP_URL keeps mail to members, as the README's
// walkthrough shows: a sandbox checkout of the demo with an email leaves its receipt
// kept, with a portal link signed by the generated key that opens the member's portal.
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { withDatabase } from '../../src/db/migrate';
import { fillLinks } from '../../src/domain/mail/mail-links';
import { call } from '../support/app';
import { pay } from '../support/shop';
import { waitFor } from '../support/webhooks';

const ROOT = path.resolve(__dirname, '../..');
const server = () => process.env.BILLING_TEST_SERVER!;
const database = `billing_mail_start_${Date.now()}_${process.pid}`;
let dataDir: string;

async function admin<T>(db: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: withDatabase(server(), db) });
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-mail-start-'));
  await admin('postgres', (c) => c.query(`create database ${database}`));
});
afterAll(async () => {
  await admin('postgres', (c) => c.query(`drop database if exists ${database} with (force)`));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test('npm start without SMTP_URL keeps a checkout\'s receipt, with a working portal link', async () => {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: withDatabase(server(), database), PORT: '0', HOST: '127.0.0.1', BILLING_DATA_DIR: dataDir,
      WEBHOOK_ENCRYPTION_KEY: '', SMTP_URL: '', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const url = await waitFor('the service', () => /listening on (http:\/\/\S+)/.exec(out)?.[1], 45_000);
    const key = await waitFor('the demo key', () => /Authorization: Bearer (bk_\S+)"/.exec(out)?.[1]);
    const plans = await call(url, 'GET', '/v1/plans', { key });
    const gold = plans.body.data.find((t: { name: string }) => t.name === 'Gold');
    const email = 'Walkthrough.Buyer@Example.test';
    const link = await call(url, 'POST', '/v1/checkout-links', { key, body: {
      tier_id: gold.id, plan_id: gold.plans.find((p: { trial_days: number }) => p.trial_days === 0)?.id ?? gold.plans[0].id,
      subject: { external: { namespace: 'app', external_user_id: 'walkthrough' } }, customer_email: email } });
    expect(link.status).toBe(200);
    expect((await pay(link.body.url)).status).toBe(303);
    const kept = await waitFor('the kept receipt', () => admin(database, async (c) => (await c.query(
      `select community_id, member_id, to_address, text_body from billing.mail_messages where template = 'receipt' and status = 'kept'`)).rows[0]), 30_000);
    expect(kept.to_address).toBe(email);
    const keyText = fs.readFileSync(path.join(dataDir, 'webhook-encryption.key'), 'utf8').trim();
    const text = fillLinks(kept.text_body, { baseUrl: url, key: keyText, communityId: kept.community_id, memberId: kept.member_id }, false);
    const portal = await fetch(/(http:\/\/\S+\/mail\/portal\/\S+)/.exec(text)![1], { redirect: 'manual' });
    expect(portal.status).toBe(303);
    expect(portal.headers.get('location')).toMatch(/\/sandbox\/portal\/ps_/);
    expect(err.toLowerCase()).not.toContain(email.toLowerCase());
  } finally {
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  }
}, 90_000);
