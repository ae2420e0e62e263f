// Issue 30's "Done when", with real parts: the service as `npm start` runs it
// (src/main.ts in its own process, its own database, the demo community), SMTP_URL
// pointing at an SMTP server in this process (smtp-server; each message parsed with
// mailparser). A sandbox checkout with an email and a declined renewal leave in that
// server a receipt whose PDF link downloads the invoice (its text read by pdf-parse:
// number and amount), and a failed-payment notice with the amount, the next retry and
// a portal link that opens the member's portal. Recipients, senders and subjects are
// checked; the address never reaches the service's output.
import { ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { decimalOf } from '../../src/core/money';
import { inCommunity } from '../../src/db/community-transaction';
import { withDatabase } from '../../src/db/migrate';
import { createOwnerPool } from '../../src/db/pool';
import { sandboxAdvance } from '../../src/domain/checkout/checkout-completion';
import { call } from '../support/app';
import { pdfText } from '../support/pdf-text';
import { pay } from '../support/shop';
import { Received, startSmtpServer, SmtpStandIn } from '../support/smtp-server';
import { waitFor } from '../support/webhooks';

const ROOT = path.resolve(__dirname, '../..');
const server = () => process.env.BILLING_TEST_SERVER!;
const database = `billing_mail_done_${Date.now()}_${process.pid}`;
let dataDir: string;
let smtp: SmtpStandIn;

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: withDatabase(server(), 'postgres') });
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-mail-done-'));
  smtp = await startSmtpServer();
  await admin((c) => c.query(`create database ${database}`));
});
afterAll(async () => {
  await smtp?.close();
  await admin((c) => c.query(`drop database if exists ${database} with (force)`));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

// Addresses compared as mail compares them: the domain case-insensitively (nodemailer lowercases it).
const lower = (a: string | undefined) => a?.toLowerCase();
const envelopeOf = (r: Received) => r.envelopeTo.map(lower);
const toOf = (r: Received) => (r.mail.to && !Array.isArray(r.mail.to) ? r.mail.to.value.map((a) => lower(a.address)) : []);
const linkIn = (text: string, route: string) => new RegExp(`(http://\\S+/mail/${route}/\\S+)`).exec(text)?.[1];

test('a sandbox checkout with an email and a declined renewal leave a receipt with a working PDF link and a failed-payment notice with a working portal link', async () => {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: withDatabase(server(), database), PORT: '0', HOST: '127.0.0.1', BILLING_DATA_DIR: dataDir,
      WEBHOOK_ENCRYPTION_KEY: crypto.randomBytes(32).toString('hex'), SMTP_URL: smtp.url, MAIL_FROM: 'billing@club.example', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const owner = createOwnerPool(withDatabase(server(), database));
  const email = `Done.When.${crypto.randomBytes(3).toString('hex')}@Example.test`;
  try {
    const url = await waitFor('the service', () => /listening on (http:\/\/\S+)/.exec(out)?.[1], 60_000);
    const key = await waitFor('the demo key', () => /Authorization: Bearer (bk_\S+)"/.exec(out)?.[1]);

    // 1. A sandbox checkout of Gold monthly with the member's email, paid on its page.
    const plans = await call(url, 'GET', '/v1/plans', { key });
    const gold = plans.body.data.find((t: { name: string }) => t.name === 'Gold');
    const plan = gold.plans.find((p: { interval: string }) => p.interval === 'month');
    const link = await call(url, 'POST', '/v1/checkout-links', { key, body: {
      tier_id: gold.id, plan_id: plan.id, subject: { external: { namespace: 'app', external_user_id: 'done-when' } }, customer_email: email } });
    expect(link.status).toBe(200);
    expect((await pay(link.body.url)).status).toBe(303);
    const memberId = link.body.member_id as string;
    const [invoice] = (await call(url, 'GET', `/v1/invoices?member_id=${memberId}`, { key })).body.data;
    const amount = `${decimalOf(invoice.total_cents, invoice.currency)} ${invoice.currency.toUpperCase()}`;
    expect(invoice).toMatchObject({ status: 'paid', number: expect.stringMatching(/^\d{4}-\d{6}$/) });

    // 2. The receipt arrived over SMTP: to the member, from the community, with the amount.
    const receipt = await waitFor('the receipt', () => smtp.to(email).find((r) => /^Receipt from /.test(r.mail.subject ?? '')), 30_000);
    expect(envelopeOf(receipt)).toEqual([lower(email)]);
    expect(toOf(receipt)).toEqual([lower(email)]);
    expect(receipt.mail.from?.value[0]).toEqual({ name: 'Demo community', address: 'billing@club.example' });
    expect(receipt.mail.subject).toBe(`Receipt from Demo community: ${amount}`);
    expect(receipt.mail.text).toContain(`Amount paid: ${amount}`);
    expect(receipt.mail.text).toContain(`Invoice: ${invoice.number}`);
    // Its PDF link downloads that invoice, without a key or a session.
    const pdfUrl = linkIn(receipt.mail.text!, 'invoices')!;
    expect(receipt.mail.html).toContain(`href="${pdfUrl.replace('&', '&amp;')}"`);
    const pdf = await fetch(pdfUrl);
    expect([pdf.status, pdf.headers.get('content-type')]).toEqual([200, 'application/pdf']);
    const pdfBody = await pdfText(Buffer.from(await pdf.arrayBuffer()));
    expect(pdfBody).toContain(`Number: ${invoice.number}`);
    expect(pdfBody).toMatch(new RegExp(`Total\\s+${amount.replace('.', '\\.')}`));

    // 3. The card declines and the test clock passes the renewal by an hour (the first
    //    retry, a day later, is not due yet): the renewal fails.
    const [sub] = (await call(url, 'GET', `/v1/subscriptions?member_id=${memberId}`, { key })).body.data;
    const { rows: [{ community_id: communityId, days }] } = await owner.query<{ community_id: string; days: string }>(
      `select s.community_id, extract(epoch from s.current_period_end - billing.community_now(s.community_id)) / 86400 + 1.0 / 24 as days
       from billing.subscriptions s where s.id = $1`, [sub.id]);
    await inCommunity(owner, communityId, (c) => c.query('select billing.sandbox_set_card($1, true)', [sub.id]));
    await sandboxAdvance(owner, communityId, Number(days));
    const [open] = (await call(url, 'GET', `/v1/invoices?subscription_id=${sub.id}&status=open`, { key })).body.data;
    expect(open).toMatchObject({ attempt_count: 1, next_attempt_at: expect.any(String) });

    // 4. The failed-payment notice: the amount, the next retry, a portal link that works.
    const failed = await waitFor('the failed-payment notice', () => smtp.to(email).find((r) => /^Payment failed/.test(r.mail.subject ?? '')), 30_000);
    expect(envelopeOf(failed)).toEqual([lower(email)]);
    expect(toOf(failed)).toEqual([lower(email)]);
    expect(failed.mail.subject).toBe(`Payment failed: ${amount} to Demo community`);
    expect(failed.mail.text).toContain(`We could not collect ${amount} for invoice ${open.number ?? open.id} from your card.`);
    expect(failed.mail.text).toContain(`We will try again on ${open.next_attempt_at.slice(0, 16).replace('T', ' ')} UTC.`);
    const portalUrl = linkIn(failed.mail.text!, 'portal')!;
    expect(failed.mail.text).toContain(`Change your card: ${portalUrl}`);
    const opened = await fetch(portalUrl, { redirect: 'manual' });
    expect(opened.status).toBe(303);
    const portal = await fetch(new URL(opened.headers.get('location')!, url));
    expect(portal.status).toBe(200);
    const page = await portal.text();
    expect(page).toContain('<h1>Your subscriptions</h1>');
    expect(page).toContain('<dd data-testid="status">past_due</dd>');
    expect(page).toContain('Test card that declines');

    expect(smtp.to(email).filter((r) => /^Payment failed/.test(r.mail.subject ?? ''))).toHaveLength(1);
    // Nothing else went to anyone else, and the address is nowhere in the service's output.
    expect(smtp.received.map(envelopeOf)).toEqual(smtp.received.map(() => [lower(email)]));
    expect(out.toLowerCase()).not.toContain(email.toLowerCase());
  } finally {
    await owner.end();
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  }
}, 120_000);
