// Mail to members, sent for real (issue 30 items 2 and 6): a sandbox checkout with an
// email and a declined renewal leave, in an in-process SMTP server (smtp-server; parsed
// with mailparser), a receipt and a failed-payment notice whose portal links open the
// member's portal; a message goes out at most once per (event, template) even when its
// job runs twice; an SMTP refusal is retried; no address reaches the logs; without
// SMTP the worker keeps messages. Other files' workers never take mail jobs (the
// worker's mail option is off unless given), and every check here is filtered by this
// file's own communities and addresses.
import crypto from 'node:crypto';
import type { JobHelpers } from 'graphile-worker';
import pg from 'pg';
import { mailMessagesRemind } from '../../worker/tasks/mail_messages__remind';
import { migratePlanPrice } from '../../src/domain/catalog/price-migrations';
import { captureLogs } from '../../src/core/log';
import type { WorkerHandle } from '../../worker';
import { call, startApp, TestApp, TEST_WORKER_DB } from '../support/app';
import { advance, checkout, createShop, events, externalSubject, pay, Shop } from '../support/shop';
import { startSmtpServer, SmtpStandIn } from '../support/smtp-server';
import { asTenant } from '../support/tenant';
import { waitFor, worker } from '../support/webhooks';

const KEY = crypto.randomBytes(32).toString('base64');
let app: TestApp;
let smtp: SmtpStandIn;
let sender: WorkerHandle | null = null;

beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: KEY });
  smtp = await startSmtpServer();
  sender = await worker({ mail: { smtpUrl: smtp.url, from: 'billing@example.test', baseUrl: app.url, key: KEY } });
});
afterAll(async () => {
  await sender?.stop();
  await smtp.close();
  await app.close();
});

const address = (name: string) => `${name}.${crypto.randomBytes(4).toString('hex')}@Example.test`;

async function messages(shop: Shop) {
  const { rows } = await app.owner.query<{ id: string; template: string; status: string; attempts: number; to_address: string; event_id: string; last_error: string | null }>(
    'select id, template, status, attempts, to_address, event_id, last_error from billing.mail_messages where community_id = $1 order by id', [shop.communityId]);
  return rows;
}

async function buy(shop: Shop, email: string) {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(), customer_email: email });
  expect(link.status).toBe(200);
  expect((await pay(link.body.url)).status).toBe(303);
  const { rows } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  return { memberId: link.body.member_id as string, subscriptionId: rows[0].id };
}

/** Follows a portal link of a message: the signed link, then the sandbox portal it opens. */
async function openPortal(url: string): Promise<string> {
  const first = await fetch(url, { redirect: 'manual' });
  expect(first.status).toBe(303);
  const portal = first.headers.get('location')!;
  expect(portal).toMatch(/\/sandbox\/portal\/ps_[0-9a-f]{26}\?t=/);
  const page = await fetch(portal);
  expect(page.status).toBe(200);
  return page.text();
}

const receipts = (email: string) => smtp.to(email).filter((r) => /^Receipt from /.test(r.mail.subject ?? ''));
const linkIn = (text: string) => /(https?:\/\/\S+\/mail\/portal\/\S+)/.exec(text)?.[1];

test('a checkout with an email and a declined renewal leave a receipt and a failed-payment notice with working portal links', async () => {
  const logs = captureLogs('debug');
  try {
    const shop = await createShop(app);
    const email = address('Buyer');
    const { memberId, subscriptionId } = await buy(shop, email);
    const receipt = await waitFor('the receipt', () => smtp.to(email).find((r) => /^Receipt from /.test(r.mail.subject ?? '')));
    expect(receipt.mail.to && 'value' in receipt.mail.to ? receipt.mail.to.value[0].address?.toLowerCase() : null).toBe(email.toLowerCase());
    expect(receipt.mail.from?.value[0]).toMatchObject({ address: 'billing@example.test' });
    expect(receipt.mail.subject).toMatch(/^Receipt from Test community \d+: 15\.00 USD$/);
    expect(receipt.mail.text).toContain('Amount paid: 15.00 USD');
    expect(receipt.mail.html).toContain('15.00 USD');
    const receiptLink = linkIn(receipt.mail.text!)!;
    expect(receiptLink).toContain(`/mail/portal/${shop.communityId}/${memberId}?`);
    expect(await openPortal(receiptLink)).toContain('Gold');
    // the HTML part carries the same kind of link, escaped as HTML
    expect(receipt.mail.html).toMatch(/href="http:\/\/127\.0\.0\.1:\d+\/mail\/portal\//);

    // The access email tells how to link Discord, with a code that works.
    const access = await waitFor('the access email', () => smtp.to(email).find((r) => /^Your access to /.test(r.mail.subject ?? '')));
    expect(access.mail.subject).toMatch(/^Your access to Member chat, VIP chat at /);
    const code = /use the \/link command in the server with the code ([0-9A-F]{10})\./.exec(access.mail.text!)?.[1];
    expect(code).toBeDefined();
    const redeemed = await call(app.url, 'POST', '/v1/link-codes/redeem', { key: shop.key, body: { code, platform: 'discord', platform_uid: `d-${memberId}` } });
    expect(redeemed.status).toBe(200);
    expect(redeemed.body.id).toBe(memberId);

    // The renewal is declined: a failed-payment notice with the amount, the next retry and the portal.
    await asTenant(app.owner, shop.communityId, (c) => c.query('select billing.sandbox_set_card($1, true)', [subscriptionId]), { commit: true });
    await advance(app, shop, 31);
    const failed = await waitFor('the failed-payment notice', () => smtp.to(email).find((r) => /^Payment failed/.test(r.mail.subject ?? '')));
    expect(failed.mail.subject).toMatch(/^Payment failed: 15\.00 USD to /);
    expect(failed.mail.text).toMatch(/We will try again on \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\./);
    expect(failed.mail.text).toContain('Change your card: ');
    expect(await openPortal(linkIn(failed.mail.text!)!)).toContain('Gold');

    // The retries decline too: the subscription ends, and the member is told.
    await advance(app, shop, 10);
    const ended = await waitFor('the subscription-ended notice', () => smtp.to(email).find((r) => /has ended$/.test(r.mail.subject ?? '')));
    expect(ended.mail.subject).toMatch(/^Your Gold subscription at .+ has ended$/);

    const rows = await waitFor('every message recorded as sent', async () => {
      const all = await messages(shop);
      return all.every((m) => m.status === 'sent') ? all : null;
    });
    expect(rows.filter((m) => m.template === 'receipt')).toHaveLength(1);
    expect(rows.filter((m) => m.template === 'payment_failed').length).toBeGreaterThan(0);
    // No address in any log line, in either spelling.
    const text = logs.text().toLowerCase();
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(email.toLowerCase());
    // Nor in any event (webhook payloads are events).
    expect(JSON.stringify(await events(app.owner, shop.communityId)).toLowerCase()).not.toContain(email.toLowerCase());
  } finally {
    logs.stop();
  }
});

test('a refund sends a refund notice with the amount and the credit note', async () => {
  const shop = await createShop(app);
  const email = address('Refund');
  const { subscriptionId } = await buy(shop, email);
  const { rows } = await app.owner.query<{ id: string }>('select id from billing.invoices where subscription_id = $1', [subscriptionId]);
  const refund = await call(app.url, 'POST', `/v1/invoices/${rows[0].id}/refunds`, { key: shop.key, body: { amount_cents: 500 } });
  expect(refund.status).toBeLessThan(300);
  const notice = await waitFor('the refund notice', () => smtp.to(email).find((r) => /^Refund from /.test(r.mail.subject ?? '')));
  expect(notice.mail.subject).toMatch(/: 5\.00 USD$/);
  expect(notice.mail.text).toMatch(/We refunded 5\.00 USD of invoice \S+\.\nCredit note: \S+/);
});

/** The reminders' cron task, run once for one community as the worker's login runs it. */
async function remind(shop: Shop) {
  const client = new pg.Client({ connectionString: TEST_WORKER_DB() });
  await client.connect();
  try {
    await mailMessagesRemind({ community_id: shop.communityId }, { withPgClient: async <T>(fn: (c: pg.Client) => Promise<T>) => fn(client) } as unknown as JobHelpers);
  } finally {
    await client.end();
  }
}

test('a trial ending in 3 days and a yearly renewal in 7 each send one reminder, however often the cron runs', async () => {
  const shop = await createShop(app);
  const email = address('Yearly');
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject(), customer_email: email });
  await pay(link.body.url);
  await remind(shop); // a 7-day trial: not within 3 days yet
  expect((await messages(shop)).map((m) => m.template)).toEqual(['access_granted']);
  await advance(app, shop, 5);
  await remind(shop);
  await remind(shop);
  const trial = await waitFor('the trial reminder', () => smtp.to(email).find((r) => /^Your free trial at /.test(r.mail.subject ?? '')));
  expect(trial.mail.text).toMatch(/your card will be charged 150\.00 USD/);
  expect(await openPortal(linkIn(trial.mail.text!)!)).toContain('Gold');
  // the trial converts (day 7), then a year later the renewal is 7 days away
  await advance(app, shop, 2 + 365 - 6);
  await remind(shop);
  await remind(shop);
  const renewal = await waitFor('the renewal reminder', () => smtp.to(email).find((r) => /renews on/.test(r.mail.subject ?? '')));
  expect(renewal.mail.text).toMatch(/Your card will be charged 150\.00 USD for the next year/);
  const rows = await messages(shop);
  expect(rows.filter((m) => m.template === 'trial_ending')).toHaveLength(1);
  expect(rows.filter((m) => m.template === 'renewal_upcoming')).toHaveLength(1);
  expect(rows.filter((m) => m.template === 'receipt').length).toBeGreaterThanOrEqual(1);
}, 60_000);

/** The raw value of a header as it arrived (mailparser keeps every header line). */
const header = (r: { mail: { headerLines: readonly { key: string; line: string }[] } }, name: string) =>
  r.mail.headerLines.find((h) => h.key === name)?.line.replace(/^[^:]+:\s*/, '').replace(/\r?\n\s+/g, ' ') ?? null;

test('optional reminders carry List-Unsubscribe one-click headers; one click and the next renewal reminder is skipped, not sent', async () => {
  const shop = await createShop(app);
  const email = address('Leaver');
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject(), customer_email: email });
  await pay(link.body.url);
  const access = await waitFor('the access email', () => smtp.to(email).find((r) => /^Your access to /.test(r.mail.subject ?? '')));
  expect(header(access, 'list-unsubscribe')).toBeNull();
  // The trial converts (day 7): its receipt, transactional, has no unsubscribe either.
  await advance(app, shop, 365 + 1);
  const receipt = await waitFor('the receipt', () => receipts(email)[0]);
  expect(header(receipt, 'list-unsubscribe')).toBeNull();
  expect(receipt.mail.text).not.toContain('/mail/unsubscribe/');
  // A year on, the renewal is 7 days away: the reminder carries the headers and the link.
  await remind(shop);
  const reminder = await waitFor('the renewal reminder', () => smtp.to(email).find((r) => /renews on/.test(r.mail.subject ?? '')));
  const listUnsubscribe = header(reminder, 'list-unsubscribe')!;
  expect(listUnsubscribe).toMatch(/^<http:\/\/127\.0\.0\.1:\d+\/mail\/unsubscribe\/com_\w+\/mem_\w+\/renewal_upcoming\?exp=\d+&sig=[\w-]+>$/);
  expect(header(reminder, 'list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click');
  const url = listUnsubscribe.slice(1, -1);
  expect(reminder.mail.text).toContain(`You may stop these emails (receipts and payment notices still come): ${url}`);
  // The mail client's one click (RFC 8058).
  const click = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
  expect(click.status).toBe(200);
  // The next year: the renewal is charged (a receipt arrives) and its reminder is made but skipped.
  await advance(app, shop, 365);
  await remind(shop);
  await waitFor('the second receipt', () => receipts(email).length === 2);
  const rows = await waitFor('the second reminder skipped', async () => {
    const all = (await messages(shop)).filter((m) => m.template === 'renewal_upcoming');
    return all.length === 2 && all[1].status === 'skipped' ? all : null;
  });
  expect(rows.map((m) => [m.status, m.attempts])).toEqual([['sent', 1], ['skipped', 0]]);
  expect(smtp.to(email).filter((r) => /renews on/.test(r.mail.subject ?? ''))).toHaveLength(1);
}, 60_000);

test('a price migration sends each subscriber one notice with the old and new price and the date', async () => {
  const shop = await createShop(app);
  const email = address('Price');
  await buy(shop, email);
  await app.owner.query(`update billing.plans set amount_cents = 2000 where community_id = $1 and key = 'gold-monthly'`, [shop.communityId]);
  const made = await migratePlanPrice(app.owner, shop.communityId, 'gold-monthly', 30);
  await remind(shop);
  await remind(shop);
  const notice = await waitFor('the price notice', () => smtp.to(email).find((r) => /^A price change/.test(r.mail.subject ?? '')));
  expect(notice.mail.text).toContain(`It applies from your first renewal on or after ${made.notice_ends_at.slice(0, 10)}`);
  expect(notice.mail.text).toMatch(/changes from 15\.00 USD to 20\.00 USD per month/);
  expect((await messages(shop)).filter((m) => m.template === 'price_change')).toHaveLength(1);
});

test('a message is sent at most once per (event, template), even when its job runs twice', async () => {
  const shop = await createShop(app);
  const email = address('Twice');
  await buy(shop, email);
  await waitFor('the receipt', () => receipts(email).length === 1);
  // The SMTP server has it a moment before the worker records it as sent.
  const receipt = await waitFor('the receipt recorded as sent', async () =>
    (await messages(shop)).find((m) => m.template === 'receipt' && m.status === 'sent'));
  expect(receipt).toMatchObject({ template: 'receipt', status: 'sent', attempts: 1 });
  // The same job again, twice, and the trigger's insert again for the same event.
  const job = JSON.stringify({ community_id: shop.communityId, ids: [receipt.id] });
  await app.owner.query(`select graphile_worker.add_job('mail_messages__send', $1::json), graphile_worker.add_job('mail_messages__send', $1::json)`, [job]);
  await app.owner.query(`insert into billing.mail_messages (community_id, member_id, template, event_id, to_address, subject, text_body, html_body)
    select community_id, member_id, template, event_id, to_address, subject, text_body, html_body from billing.mail_messages where id = $1
    on conflict (community_id, event_id, template) do nothing`, [receipt.id]);
  await waitFor('the jobs to finish', async () => (await app.owner.query(
    `select 1 from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
     where t.identifier = 'mail_messages__send' and j.payload->>'community_id' = $1`, [shop.communityId])).rowCount === 0);
  expect(receipts(email)).toHaveLength(1);
  expect((await messages(shop)).filter((m) => m.template === 'receipt')).toEqual([expect.objectContaining({ id: receipt.id, status: 'sent', attempts: 1 })]);
});

test('a refusal the SMTP server says is temporary is retried, and the address is not logged', async () => {
  const logs = captureLogs('debug');
  try {
    const shop = await createShop(app);
    const email = address('Later');
    smtp.reject(email, 451);
    await buy(shop, email);
    await waitFor('a failed attempt', async () => (await messages(shop)).find((m) => m.last_error !== null));
    expect(smtp.to(email)).toHaveLength(0);
    smtp.accept(email);
    // graphile-worker's backoff runs the job again.
    await waitFor('the retried receipt', () => receipts(email).length === 1, 60_000);
    const sent = await waitFor('the receipt recorded as sent', async () => (await messages(shop)).find((m) => m.template === 'receipt' && m.status === 'sent'));
    expect(sent.attempts).toBe(2);
    expect(logs.text()).toContain('will retry');
    expect(logs.text().toLowerCase()).not.toContain(email.toLowerCase());
  } finally {
    logs.stop();
  }
}, 90_000);

test('members without an email get no mail, a template turned off makes no message, a tier\'s grants make one access email', async () => {
  const shop = await createShop(app);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject() });
  // an operator's code, made before the grant, keeps working
  const operatorCode = await call(app.url, 'POST', `/v1/members/${link.body.member_id}/link-codes`, { key: shop.key, body: { intended_platform: 'discord' } });
  await pay(link.body.url);
  const codes = await app.owner.query('select code, invalidated_at from billing.link_codes where community_id = $1 and member_id = $2', [shop.communityId, link.body.member_id]);
  expect(codes.rows).toEqual([{ code: operatorCode.body.code, invalidated_at: null }]);
  await app.owner.query(`update billing.communities set mail_templates_off = '{receipt}' where id = $1`, [shop.communityId]);
  const email = address('Off');
  const { memberId } = await buy(shop, email);
  const rows = await messages(shop);
  // the member without an email: nothing; the one with: no receipt, one access email
  expect(rows.map((m) => [m.template, m.to_address])).toEqual([['access_granted', email]]);
  const { rows: owners } = await app.owner.query('select member_id from billing.mail_messages where id = $1', [rows[0].id]);
  expect(owners[0].member_id).toBe(memberId);
  expect((await events(app.owner, shop.communityId, 'invoice.paid')).length).toBe(2);
});

test('without SMTP the worker keeps messages (status kept) instead of sending them', async () => {
  await sender?.stop();
  sender = null;
  const keeper = await worker({ mail: { smtpUrl: null, from: 'billing@example.test', baseUrl: app.url, key: KEY } });
  try {
    const shop = await createShop(app);
    const email = address('Kept');
    await buy(shop, email);
    await waitFor('the kept receipt', async () => (await messages(shop)).find((m) => m.status === 'kept'));
    expect(smtp.to(email)).toHaveLength(0);
  } finally {
    await keeper.stop();
  }
});
