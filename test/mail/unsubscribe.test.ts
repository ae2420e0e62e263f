// Unsubscribing from optional mail (issue 30 item 2; docs/decisions/mail-unsubscribe.md):
// the trial and yearly renewal reminders are optional and carry a signed unsubscribe
// link; its page unsubscribes and subscribes again (a GET changes nothing), its URL
// takes an RFC 8058 one-click POST; transactional mail carries none and cannot be left;
// a template the operator marks required is sent without the link and never skipped.
// No mail worker here (test/mail/mail-delivery.test.ts has the one that sends): the
// messages are read from the outbox, and the worker's claim is called as it calls it.
import crypto from 'node:crypto';
import pg from 'pg';
import { captureLogs } from '../../src/core/log';
import { fillLinks, unsubscribeLink } from '../../src/domain/mail/mail-links';
import { startApp, TestApp, TEST_WORKER_DB } from '../support/app';
import { asTenant } from '../support/tenant';
import { advance, checkout, createShop, externalSubject, pay, Shop } from '../support/shop';

const KEY = crypto.randomBytes(32).toString('base64');
let app: TestApp;

beforeAll(async () => { app = await startApp({ webhookEncryptionKey: KEY }); });
afterAll(() => app.close());

interface Message { id: string; template: string; status: string; unsubscribable: boolean; text_body: string; html_body: string }

/**
 * A member with an email on the yearly plan (a 7-day trial), five days in: the trial
 * reminder is made (after `first`, run before it is).
 */
async function trialEndingSoon(first: (shop: Shop, memberId: string) => Promise<unknown> = async () => {}) {
  const shop = await createShop(app);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject(),
    customer_email: `unsub.${crypto.randomBytes(4).toString('hex')}@example.test` });
  expect((await pay(link.body.url)).status).toBe(303);
  await first(shop, link.body.member_id);
  await advance(app, shop, 5);
  await app.owner.query('select billing_private.mail_reminders($1)', [shop.communityId]);
  return { shop, memberId: link.body.member_id as string };
}

async function message(shop: Shop, memberId: string, template: string): Promise<Message> {
  const { rows } = await app.owner.query<Message>(
    `select id, template, status, unsubscribable, text_body, html_body from billing.mail_messages
     where community_id = $1 and member_id = $2 and template = $3 order by id desc limit 1`, [shop.communityId, memberId, template]);
  return rows[0];
}

async function unsubscribed(shop: Shop, memberId: string): Promise<string[]> {
  const { rows } = await app.owner.query<{ template: string }>(
    'select template from billing.mail_unsubscribes where community_id = $1 and member_id = $2 order by template', [shop.communityId, memberId]);
  return rows.map((r) => r.template);
}

const fill = (shop: Shop, memberId: string, m: Message, part: 'text' | 'html') =>
  fillLinks(part === 'text' ? m.text_body : m.html_body, { baseUrl: app.url, key: KEY, communityId: shop.communityId, memberId, template: m.template }, part === 'html');

const form = (fields: Record<string, string>) => ({ method: 'POST', redirect: 'manual' as const,
  headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() });

/** The worker's claim of one message, as the worker's login runs it (test/mail/mail-delivery.test.ts sends). */
async function claim(shop: Shop, id: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_WORKER_DB() });
  await client.connect();
  try {
    await client.query('select * from billing_private.mail_claim($1, $2)', [shop.communityId, [id]]);
  } finally {
    await client.end();
  }
}

test('a trial reminder carries its unsubscribe link; the page unsubscribes and subscribes again, a GET changes nothing', async () => {
  const { shop, memberId } = await trialEndingSoon();
  const m = await message(shop, memberId, 'trial_ending');
  expect(m.unsubscribable).toBe(true);
  const text = fill(shop, memberId, m, 'text');
  const url = /You may stop these emails \(receipts and payment notices still come\): (\S+)/.exec(text)![1];
  expect(url).toContain(`/mail/unsubscribe/${shop.communityId}/${memberId}/trial_ending?exp=`);
  expect(fill(shop, memberId, m, 'html')).toContain(`href="${url.replace('&', '&amp;')}">Unsubscribe from these emails</a>`);

  const page = await fetch(url);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-security-policy')).toContain("form-action 'self'");
  const body = await page.text();
  expect(body).toContain('You receive <strong>Trial ending in 3 days</strong> emails from Test community');
  expect(body).toContain('Unsubscribe from Trial ending in 3 days emails</button>');
  expect(await unsubscribed(shop, memberId)).toEqual([]);

  const done = await fetch(url, form({ action: 'unsubscribe' }));
  expect(done.status).toBe(303);
  expect(done.headers.get('location')).toBe(`${new URL(url).pathname}${new URL(url).search}&done=1`);
  expect(await unsubscribed(shop, memberId)).toEqual(['trial_ending']);
  const after = await (await fetch(new URL(done.headers.get('location')!, app.url))).text();
  expect(after).toContain('role="status">You are unsubscribed from <strong>Trial ending in 3 days</strong> emails');
  expect(after).toContain('Subscribe again</button>');

  expect((await fetch(url, form({ action: 'resubscribe' }))).status).toBe(303);
  expect(await unsubscribed(shop, memberId)).toEqual([]);
});

test('RFC 8058 one-click: a POST of List-Unsubscribe=One-Click, url-encoded or multipart, unsubscribes; the worker skips what was left', async () => {
  // The member leaves both reminders before the trial's is made (a link of an earlier mail).
  const { shop, memberId } = await trialEndingSoon(async (s, member) => {
    const click = await fetch(unsubscribeLink(app.url, KEY, s.communityId, member, 'trial_ending'), form({ 'List-Unsubscribe': 'One-Click' }));
    expect(click.status).toBe(200);
    expect(await click.text()).toContain('You are unsubscribed');
    expect(await unsubscribed(s, member)).toEqual(['trial_ending']);
    const multipart = new FormData();
    multipart.set('List-Unsubscribe', 'One-Click');
    const renewal = unsubscribeLink(app.url, KEY, s.communityId, member, 'renewal_upcoming');
    expect((await fetch(renewal, { method: 'POST', body: multipart })).status).toBe(200);
    expect(await unsubscribed(s, member)).toEqual(['renewal_upcoming', 'trial_ending']);
  });
  // The message is made (nothing lost), and the worker's claim skips it (nothing sent).
  const m = await message(shop, memberId, 'trial_ending');
  expect(m.unsubscribable).toBe(true);
  await claim(shop, m.id);
  expect((await message(shop, memberId, 'trial_ending')).status).toBe('skipped');
});

test('transactional mail carries no unsubscribe link, and a link made for it records nothing', async () => {
  const shop = await createShop(app);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(),
    customer_email: `receipt.${Date.now()}@example.test` });
  await pay(link.body.url);
  const memberId = link.body.member_id as string;
  for (const template of ['receipt', 'access_granted']) {
    const m = await message(shop, memberId, template);
    expect([template, m.unsubscribable]).toEqual([template, false]);
    expect(m.text_body + m.html_body).not.toContain('unsubscribe');
  }
  const url = unsubscribeLink(app.url, KEY, shop.communityId, memberId, 'receipt');
  const page = await (await fetch(url)).text();
  expect(page).toContain('<strong>Receipt (invoice paid)</strong> emails from');
  expect(page).toContain('they cannot be unsubscribed from');
  expect(page).not.toContain('<button');
  expect((await fetch(url, form({ 'List-Unsubscribe': 'One-Click' }))).status).toBe(200);
  expect(await unsubscribed(shop, memberId)).toEqual([]);
});

test('a template the operator marks required is sent without the link and never skipped, even to a member who left it', async () => {
  const { shop, memberId } = await trialEndingSoon();
  const first = await message(shop, memberId, 'trial_ending');
  // The member leaves the trial reminders; then the operator's jurisdiction requires them.
  await fetch(unsubscribeLink(app.url, KEY, shop.communityId, memberId, 'trial_ending'), form({ action: 'unsubscribe' }));
  expect(await unsubscribed(shop, memberId)).toEqual(['trial_ending']);
  await app.owner.query(`update billing.communities set mail_templates_required = '{trial_ending}' where id = $1`, [shop.communityId]);
  // A message made before, carrying the link, is not skipped either: the requirement wins.
  await claim(shop, first.id);
  expect((await message(shop, memberId, 'trial_ending')).status).not.toBe('skipped');
  // A new reminder (another member, the same community) has no link and is not optional.
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject(),
    customer_email: `required.${Date.now()}@example.test` });
  await pay(link.body.url);
  await advance(app, shop, 5);
  await app.owner.query('select billing_private.mail_reminders($1)', [shop.communityId]);
  const m = await message(shop, link.body.member_id, 'trial_ending');
  expect(m.unsubscribable).toBe(false);
  expect(m.text_body + m.html_body).not.toContain('unsubscribe');
  // Its page says why, and a one-click records nothing.
  const url = unsubscribeLink(app.url, KEY, shop.communityId, link.body.member_id, 'trial_ending');
  expect(await (await fetch(url)).text()).toContain('they cannot be unsubscribed from');
  await fetch(url, form({ 'List-Unsubscribe': 'One-Click' }));
  expect(await unsubscribed(shop, link.body.member_id)).toEqual([]);
});

test('set_mail_template marks an optional template required and back; a transactional one cannot be made optional', async () => {
  const shop = await createShop(app);
  const set = (args: Record<string, unknown>) => asTenant(app.api, shop.communityId, async (c) =>
    (await c.query('select billing_api.mail_template_set($1) as r', [args])).rows[0].r, { commit: true });
  expect(await set({ template: 'renewal_upcoming', required: true })).toEqual({ template: 'renewal_upcoming', enabled: true, required: true });
  expect(await set({ template: 'trial_ending', enabled: false })).toEqual({ template: 'trial_ending', enabled: false, required: false });
  expect(await set({ template: 'receipt', required: true })).toEqual({ template: 'receipt', enabled: true, required: true });
  await expect(set({ template: 'receipt', required: false })).rejects.toMatchObject({ code: 'BL422' });
  await expect(set({ template: 'receipt' })).rejects.toMatchObject({ code: 'BL422' });
  const { rows } = await app.owner.query('select mail_templates_off, mail_templates_required from billing.communities where id = $1', [shop.communityId]);
  expect(rows[0]).toEqual({ mail_templates_off: ['trial_ending'], mail_templates_required: ['renewal_upcoming'] });
  expect(await set({ template: 'renewal_upcoming', required: false })).toMatchObject({ required: false });
});

test('a tampered, foreign or expired unsubscribe link answers a 404 page and changes nothing; no link is logged', async () => {
  const logs = captureLogs('debug');
  try {
    const { shop, memberId } = await trialEndingSoon();
    const good = unsubscribeLink(app.url, KEY, shop.communityId, memberId, 'trial_ending');
    const sig = new URL(good).searchParams.get('sig')!;
    const other = await createShop(app);
    const bad = [
      good.replace(`sig=${sig}`, `sig=${sig.slice(0, -1)}${sig.endsWith('A') ? 'B' : 'A'}`),
      good.replace('/trial_ending?', '/renewal_upcoming?'),
      unsubscribeLink(app.url, 'another key', shop.communityId, memberId, 'trial_ending'),
      unsubscribeLink(app.url, KEY, other.communityId, memberId, 'trial_ending'),
      unsubscribeLink(app.url, KEY, shop.communityId, memberId, 'no_such_template'),
      unsubscribeLink(app.url, KEY, shop.communityId, memberId, 'trial_ending', Date.now() - 401 * 86400_000),
    ];
    for (const url of bad) {
      for (const init of [{}, form({ 'List-Unsubscribe': 'One-Click' })]) {
        const res = await fetch(url, init);
        expect([res.status, res.headers.get('content-type')]).toEqual([404, 'text/html; charset=utf-8']);
      }
    }
    expect(await unsubscribed(shop, memberId)).toEqual([]);
    expect(await unsubscribed(other, memberId)).toEqual([]);
    expect(logs.text()).toContain('/mail/unsubscribe/{communityId}/{memberId}/{template}');
    expect(logs.text()).not.toContain(sig);
  } finally {
    logs.stop();
  }
});
