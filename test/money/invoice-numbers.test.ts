// Numbers a tax office accepts (issue 30 item 4; docs/decisions/invoice-numbers.md):
// every finalized invoice is numbered <series>-NNNNNN, gapless and unique per
// community and series (the year of its date unless the community set its own), by a
// counter row written in the paying transaction, so concurrent payments never share a
// number and a rolled back one gives its number back; each refund writes a credit note
// numbered CN-<series>-NNNNNN in its own sequence, naming its invoice.
import pg from 'pg';
import { call, startApp, TestApp, TEST_DB } from '../support/app';
import { asTenant } from '../support/tenant';
import { advance, checkout, createShop, externalSubject, pay, Shop, subscribe } from '../support/shop';

let app: TestApp;
let db: pg.Pool;

beforeAll(async () => {
  app = await startApp();
  // One connection per concurrent transaction below (20 at once).
  db = new pg.Pool({ connectionString: TEST_DB(), max: 24 });
});
afterAll(async () => {
  await db.end();
  await app.close();
});

type Numbered = { id: string; number: string | null; status: string; year: string };

/** The community's invoices, oldest first, with the UTC year of each one's date. */
async function invoices(communityId: string): Promise<Numbered[]> {
  const { rows } = await app.owner.query<Numbered>(
    `select id, number, status, to_char(created_at at time zone 'UTC', 'YYYY') as year
     from billing.invoices where community_id = $1 order by id`, [communityId]);
  return rows;
}

/** Asserts the numbers are exactly <series>-000001 .. -00000n per series, each once. */
function expectGapless(numbers: string[], seriesOf: (n: string) => string) {
  const bySeries = new Map<string, number[]>();
  for (const n of numbers) {
    const m = /^(.+)-(\d{6,})$/.exec(n);
    expect(m).not.toBeNull();
    expect(m![1]).toBe(seriesOf(n));
    bySeries.set(m![1], [...(bySeries.get(m![1]) ?? []), Number(m![2])]);
  }
  for (const [, ns] of bySeries) {
    expect([...ns].sort((a, b) => a - b)).toEqual(ns.map((_, i) => i + 1));
  }
  expect(new Set(numbers).size).toBe(numbers.length);
}

/** Every invoice is numbered, in its date's year series, gapless in id (= finalization) order. */
async function expectInvoicesGapless(communityId: string): Promise<Numbered[]> {
  const rows = await invoices(communityId);
  expect(rows.every((r) => r.number !== null)).toBe(true);
  const year = new Map(rows.map((r) => [r.number!, r.year]));
  expectGapless(rows.map((r) => r.number!), (n) => year.get(n)!);
  return rows;
}

const refund = (shop: Shop, invoiceId: string, body: Record<string, unknown> = {}) =>
  call(app.url, 'POST', `/v1/invoices/${invoiceId}/refunds`, { key: shop.key, body });

test('invoices are numbered <year>-000001, -000002, ... per community, in the order they were finalized', async () => {
  const shop = await createShop(app);
  const subs = [];
  for (let i = 0; i < 3; i++) subs.push(await subscribe(app, shop, 'silver'));
  const rows = await expectInvoicesGapless(shop.communityId);
  expect(rows.map((r) => r.number)).toEqual([1, 2, 3].map((n) => `${rows[0].year}-00000${n}`));
  // The API shows it (additive field), and GraphQL's invoice view carries it.
  const one = await call(app.url, 'GET', `/v1/invoices/${rows[1].id}`, { key: shop.key });
  expect(one.status).toBe(200);
  expect(one.body).toMatchObject({ id: rows[1].id, number: rows[1].number, credit_notes: [] });
  const listed = await call(app.url, 'GET', `/v1/invoices?subscription_id=${subs[2].subscriptionId}`, { key: shop.key });
  expect(listed.body.data.map((i: { number: string }) => i.number)).toEqual([rows[2].number]);
  const gql = await asTenant(app.owner, shop.communityId, (c) => c.query(
    `select number from billing_graphql.invoices where id = $1`, [rows[0].id]), { role: 'billing_api', scopes: 'invoices:read' });
  expect(gql.rows).toEqual([{ number: rows[0].number }]);
  // The invoice.created event carries the number given at finalization.
  const { rows: ev } = await app.owner.query(
    `select data->'invoice'->>'number' as number from billing.events where community_id = $1 and type = 'invoice.created' order by id`, [shop.communityId]);
  expect(ev.map((e) => e.number)).toEqual(rows.map((r) => r.number));
});

test('two communities number independently, each from 000001', async () => {
  const a = await createShop(app);
  const b = await createShop(app);
  await subscribe(app, a, 'silver');
  await subscribe(app, b, 'gold', 'gold-monthly');
  await subscribe(app, a, 'gold', 'gold-monthly');
  const ra = await expectInvoicesGapless(a.communityId);
  const rb = await expectInvoicesGapless(b.communityId);
  expect(ra.map((r) => r.number)).toEqual([`${ra[0].year}-000001`, `${ra[0].year}-000002`]);
  expect(rb.map((r) => r.number)).toEqual([`${rb[0].year}-000001`]);
});

test('20 checkouts paid at once: consecutive numbers, no gap and no duplicate', async () => {
  const shop = await createShop(app);
  const links = [];
  for (let i = 0; i < 20; i++) {
    const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject('par') });
    expect(link.status).toBe(200);
    links.push(link.body.url as string);
  }
  const paid = await Promise.all(links.map((url) => pay(url)));
  expect(paid.map((p) => p.status)).toEqual(Array(20).fill(303));
  expect(await expectInvoicesGapless(shop.communityId)).toHaveLength(20);
  // Their renewals, one batch (billing.renew_batch numbers a block at once), go on from there.
  await advance(app, shop, 31);
  const rows = await expectInvoicesGapless(shop.communityId);
  expect(rows).toHaveLength(40);
  const { rows: renewed } = await app.owner.query(`select count(*)::int as n from billing.invoices where community_id = $1 and billing_reason = 'subscription_cycle' and status = 'paid'`, [shop.communityId]);
  expect(renewed[0].n).toBe(20);
});

test('20 connections renewing at once, a quarter of them rolled back: the committed numbers have no gap and no duplicate', async () => {
  const shop = await createShop(app);
  const subs = [];
  for (let i = 0; i < 20; i++) subs.push((await subscribe(app, shop, 'silver')).subscriptionId);
  const before = (await invoices(shop.communityId)).length;
  // Each connection renews one subscription (billing.subscription_advance, the sandbox's
  // renewal: an invoice finalized and paid) and holds its transaction open a moment, so
  // the others queue on the community's counter; every fourth rolls back.
  const results = await Promise.allSettled(subs.map((id, i) => asTenant(db, shop.communityId, async (c) => {
    await c.query(`select billing.subscription_advance($1, billing.now() + interval '32 days')`, [id]);
    await c.query('select pg_sleep(random() * 0.05)');
  }, { commit: i % 4 !== 3 })));
  expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
  const rows = await expectInvoicesGapless(shop.communityId);
  expect(rows.length - before).toBe(15);
});

test('a payment rolled back after its invoice was numbered gives the number back', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  const [first] = await invoices(shop.communityId);
  // The renewal's invoice is finalized (numbered 000002) and paid, then the
  // transaction fails: nothing of it stays, its number included.
  const taken = await asTenant(db, shop.communityId, async (c) => {
    await c.query(`select billing.subscription_advance($1, billing.now() + interval '32 days')`, [subscriptionId]);
    const { rows } = await c.query(`select number from billing.invoices where subscription_id = $1 order by id desc limit 1`, [subscriptionId]);
    return rows[0].number as string;
  });
  expect(taken).toBe(`${first.year}-000002`);
  const again = await subscribe(app, shop, 'gold', 'gold-monthly');
  const rows = await expectInvoicesGapless(shop.communityId);
  expect(rows.map((r) => r.number)).toEqual([first.number, taken]);
  const { rows: owner } = await app.owner.query('select subscription_id from billing.invoices where id = $1', [rows[1].id]);
  expect(owner[0].subscription_id).toBe(again.subscriptionId);
});

test('a refund makes a credit note with its own sequence, naming the invoice; the invoice lists it', async () => {
  const shop = await createShop(app);
  await subscribe(app, shop, 'gold', 'gold-monthly');
  await subscribe(app, shop, 'silver');
  const [gold, silver] = await invoices(shop.communityId);
  const r1 = await refund(shop, gold.id, { amount_cents: 500 });
  expect(r1.status).toBe(200);
  const r2 = await refund(shop, silver.id);
  const r3 = await refund(shop, gold.id);
  const cnYear = `CN-${gold.year}`;
  expect([r1, r2, r3].map((r) => r.body.credit_note_number)).toEqual([`${cnYear}-000001`, `${cnYear}-000002`, `${cnYear}-000003`]);
  // Invoice numbers go on from where they were: credit notes take none of theirs.
  await subscribe(app, shop, 'silver');
  await expectInvoicesGapless(shop.communityId);
  const { rows: notes } = await app.owner.query(
    `select id, invoice_id, refund_id, number, amount_cents::int, currency from billing.credit_notes where community_id = $1 order by number`, [shop.communityId]);
  expect(notes).toEqual([
    { id: expect.stringMatching(/^cn_/), invoice_id: gold.id, refund_id: r1.body.id, number: `${cnYear}-000001`, amount_cents: 500, currency: 'usd' },
    { id: expect.stringMatching(/^cn_/), invoice_id: silver.id, refund_id: r2.body.id, number: `${cnYear}-000002`, amount_cents: 800, currency: 'usd' },
    { id: expect.stringMatching(/^cn_/), invoice_id: gold.id, refund_id: r3.body.id, number: `${cnYear}-000003`, amount_cents: 1000, currency: 'usd' },
  ]);
  expect(r3.body.invoice.credit_notes).toEqual([
    { id: notes[0].id, number: notes[0].number, refund_id: r1.body.id, amount_cents: 500, tax_cents: 0, created_at: expect.any(String) },
    { id: notes[2].id, number: notes[2].number, refund_id: r3.body.id, amount_cents: 1000, tax_cents: 0, created_at: expect.any(String) },
  ]);
  const got = await call(app.url, 'GET', `/v1/invoices/${gold.id}`, { key: shop.key });
  expect(got.body.credit_notes).toEqual(r3.body.invoice.credit_notes);
  expect(got.body.number).toBe(gold.number);
  // Another community's first credit note is its own 000001.
  const other = await createShop(app);
  await subscribe(app, other, 'silver');
  const [inv] = await invoices(other.communityId);
  expect((await refund(other, inv.id)).body.credit_note_number).toBe(`CN-${inv.year}-000001`);
});

test('an operator\'s own series numbers from 1, credit notes too; a number never changes, voided or not', async () => {
  const shop = await createShop(app);
  await subscribe(app, shop, 'silver');
  await app.owner.query(`update billing.communities set invoice_series = 'A' where id = $1`, [shop.communityId]);
  await subscribe(app, shop, 'silver');
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  // Its renewal declines: an open invoice, numbered when it was finalized.
  await asTenant(db, shop.communityId, async (c) => {
    await c.query('select billing.sandbox_set_card($1, true)', [subscriptionId]);
    await c.query(`select billing.subscription_advance($1, billing.now() + interval '32 days')`, [subscriptionId]);
  }, { commit: true });
  const rows = await invoices(shop.communityId);
  expect(rows.map((r) => [r.number, r.status])).toEqual([
    [`${rows[0].year}-000001`, 'paid'], ['A-000001', 'paid'], ['A-000002', 'paid'], ['A-000003', 'open']]);
  expect((await refund(shop, rows[1].id)).body.credit_note_number).toBe('CN-A-000001');
  await expect(app.owner.query(`update billing.communities set invoice_series = 'bad series' where id = $1`, [shop.communityId]))
    .rejects.toThrow(/communities_invoice_series_valid/);
  // Void keeps the number; nothing renumbers an invoice.
  await app.owner.query(`update billing.invoices set status = 'void', next_attempt_at = null where id = $1`, [rows[3].id]);
  expect((await invoices(shop.communityId))[3]).toMatchObject({ status: 'void', number: 'A-000003' });
  await expect(app.owner.query(`update billing.invoices set number = 'A-000009' where id = $1`, [rows[3].id]))
    .rejects.toThrow(/its number cannot change/);
  // The database refuses a second invoice with a number the community has given.
  await expect(app.owner.query(`insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
      subtotal_cents, discount_cents, total_cents, provider, created_at, number)
    select community_id, member_id, subscription_id, 'open', billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, provider, created_at, number
    from billing.invoices where id = $1`, [rows[1].id])).rejects.toThrow(/invoices_number/);
});

test('a renewal in a new year starts that year\'s series at 000001', async () => {
  const shop = await createShop(app);
  await subscribe(app, shop, 'silver');
  // Monthly renewals across at least one new year.
  await advance(app, shop, 400);
  const rows = await expectInvoicesGapless(shop.communityId);
  const years = [...new Set(rows.map((r) => r.year))];
  expect(years.length).toBeGreaterThan(1);
  for (const y of years.slice(1)) expect(rows.find((r) => r.year === y)!.number).toBe(`${y}-000001`);
});

test('the migration numbers invoices and refunds written before numbering, in date order, and the counters go on', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  const [first] = await invoices(shop.communityId);
  await asTenant(db, shop.communityId, async (c) => {
    // Rows as they stood before numbering: written with triggers off (replica), so
    // nothing numbers them; the later-dated invoice is written first.
    await c.query(`set local session_replication_role = replica`);
    const insert = (days: number) => c.query<{ id: string }>(`insert into billing.invoices (community_id, member_id, subscription_id, status,
        billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, amount_paid_cents, attempt_count, paid_at, provider, created_at)
      select community_id, member_id, subscription_id, 'paid', 'subscription_cycle', currency, lines, subtotal_cents, discount_cents,
        total_cents, total_cents, 1, created_at + make_interval(mins => $2), provider, created_at + make_interval(mins => $2)
      from billing.invoices where id = $1 returning id`, [first.id, days]);
    const later = (await insert(2)).rows[0].id;
    const earlier = (await insert(1)).rows[0].id;
    const re = await c.query<{ id: string }>(`insert into billing.refunds (community_id, invoice_id, amount_cents, provider, created_at)
      values ($1, $2, 100, 'sandbox', billing.now()) returning id`, [shop.communityId, earlier]);
    await c.query(`set local session_replication_role = origin`);
    await c.query('select billing_private.number_backfill()');
    const { rows } = await c.query(`select id, number, credit_notes from billing.invoices where subscription_id = $1 order by number`, [subscriptionId]);
    expect(rows.map((r) => [r.id, r.number])).toEqual([[first.id, first.number], [earlier, `${first.year}-000002`], [later, `${first.year}-000003`]]);
    const { rows: notes } = await c.query(`select id, number, refund_id from billing.credit_notes where invoice_id = $1`, [earlier]);
    expect(notes).toEqual([{ id: expect.stringMatching(/^cn_/), number: expect.stringMatching(/^CN-\d{4}-000001$/), refund_id: re.rows[0].id }]);
    expect(rows[1].credit_notes).toEqual([expect.objectContaining({ id: notes[0].id, number: notes[0].number, amount_cents: 100 })]);
    // The next invoice goes on from there; a second backfill finds nothing to do.
    await c.query('select billing_private.number_backfill()');
    const next = await c.query(`select billing_private.number_next($1, 'invoice', $2) as n`, [shop.communityId, first.year]);
    expect(Number(next.rows[0].n)).toBe(4);
  });
});
