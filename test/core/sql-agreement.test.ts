// The value lists, the API version and the cursor format are written once in
// TypeScript (src/core/) and once in SQL (CHECK constraints, billing.api_version(),
// billing.encode_cursor). This holds each pair equal, reading the constraints from
// pg_catalog of the migrated test database (not from SQL file text, which moves).
import pg from 'pg';
import { API_VERSION } from '../../src/core/api-version';
import { decodeCursor, encodeCursor, filtersDigest } from '../../src/core/cursor';
import * as lists from '../../src/core/statuses';
import { TEST_DB } from '../support/app';

let pool: pg.Pool;
let checks: Map<string, string[]>;

/** billing.<table>.<column> -> the values of its `column = ANY (ARRAY[...])` CHECK. */
async function checkLists(): Promise<Map<string, string[]>> {
  const { rows } = await pool.query<{ tbl: string; col: string; def: string }>(`
    select c.conrelid::regclass::text as tbl, a.attname as col, pg_get_constraintdef(c.oid) as def
    from pg_constraint c
    join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
    where c.contype = 'c' and c.connamespace = 'billing'::regnamespace and cardinality(c.conkey) = 1`);
  const out = new Map<string, string[]>();
  for (const r of rows) {
    const m = /= ANY \(ARRAY\[(.*)\]\)/.exec(r.def);
    if (m) out.set(`${r.tbl}.${r.col}`, [...m[1].matchAll(/'((?:[^']|'')*)'::text/g)].map((v) => v[1]));
  }
  return out;
}

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: TEST_DB(), max: 1 });
  checks = await checkLists();
});
afterAll(() => pool.end());

const AGREEMENTS: [string, readonly string[]][] = [
  ['billing.subscriptions.status', lists.SUBSCRIPTION_STATUSES],
  ['billing.subscriptions.cancellation_reason', lists.CANCELLATION_REASONS],
  ['billing.invoices.status', lists.INVOICE_STATUSES],
  ['billing.invoices.billing_reason', lists.INVOICE_BILLING_REASONS],
  ['billing.payment_attempts.status', lists.PAYMENT_ATTEMPT_STATUSES],
  ['billing.disputes.status', lists.DISPUTE_STATUSES],
  ['billing.purchases.status', lists.PURCHASE_STATUSES],
  ['billing.checkout_sessions.status', lists.CHECKOUT_STATUSES],
  ['billing.checkout_sessions.subject_kind', lists.CHECKOUT_SUBJECT_KINDS],
  ['billing.member_entitlements.status', lists.MEMBER_ENTITLEMENT_STATUSES],
  ['billing.webhook_deliveries.status', lists.WEBHOOK_DELIVERY_STATUSES],
  ['billing.webhook_endpoints.disabled_reason', lists.WEBHOOK_DISABLED_REASONS],
  ['billing.plans.interval', lists.BILLING_INTERVALS],
  ['billing.tiers.kind', lists.TIER_KINDS],
  ['billing.tiers.billing_mode', lists.TIER_BILLING_MODES],
  ['billing.discount_codes.value_type', lists.DISCOUNT_VALUE_TYPES],
  ['billing.discount_codes.duration', lists.DISCOUNT_DURATIONS],
  ['billing.member_identities.platform', lists.PLATFORMS],
  ['billing.platform_configs.platform', lists.PLATFORMS],
  ['billing.link_codes.intended_platform', lists.PLATFORMS],
  ['billing.communities.payment_provider', lists.PAYMENT_PROVIDERS],
  ['billing.checkout_sessions.provider', lists.PAYMENT_PROVIDERS],
  ['billing.subscriptions.provider', lists.PAYMENT_PROVIDERS],
  ['billing.audit_log.actor_type', lists.AUDIT_ACTOR_TYPES],
  ['billing.audit_log.operation', lists.AUDIT_OPERATIONS],
];

test.each(AGREEMENTS)('%s: the CHECK constraint allows exactly the TypeScript list', (column, list) => {
  expect({ column, values: checks.get(column) }).toEqual({ column, values: [...list] });
});

test('the constraint reader is not vacuous: it finds the subscription statuses', () => {
  expect(checks.get('billing.subscriptions.status')).toContain('past_due');
});

test('billing.api_version() is the API_VERSION of src/core/api-version.ts', async () => {
  const { rows } = await pool.query<{ v: string }>('select billing.api_version() as v');
  expect(rows[0].v).toBe(API_VERSION);
});

test('billing.encode_cursor writes the cursor format src/core/cursor.ts encodes and decodes, bound to the transaction\'s list and filters', async () => {
  const decodeJson = (cursor: string) => JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  const binding = { list: 'list_subscriptions', filters: filtersDigest({ status: 'active' }) };
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(`select set_config('app.cursor_list', $1, true), set_config('app.cursor_filters', $2, true)`, [binding.list, binding.filters]);
    for (const id of ['x', 'sub_0193a4b5c6d7e8f9a0b1c2d3e4', '0b3f4c3e-8a5e-4a3b-9a4e-2d8f1c6b7a90']) {
      const { rows } = await client.query<{ c: string }>('select billing.encode_cursor($1) as c', [id]);
      // Same format (base64url of {"id", "list", "filters"}, no padding); the JSON spacing may differ.
      expect({ id, sql: decodeJson(rows[0].c), ts: decodeJson(encodeCursor(id, binding)) }).toEqual({ id, sql: { id, ...binding }, ts: { id, ...binding } });
      expect(rows[0].c).toMatch(/^[A-Za-z0-9_-]+$/);
      // What SQL hands out, the API reads back exactly as it reads its own cursors.
      expect({ id, decoded: decodeCursor(rows[0].c) }).toEqual({ id, decoded: decodeCursor(encodeCursor(id, binding)) });
    }
    const { rows } = await client.query<{ c: string }>(`select billing.encode_cursor('sub_0193a4b5c6d7e8f9a0b1c2d3e4') as c`);
    expect(decodeCursor(rows[0].c)).toEqual({ id: 'sub_0193a4b5c6d7e8f9a0b1c2d3e4', ...binding });
  } finally {
    await client.query('rollback');
    client.release();
  }
  // Outside a bound listing SQL writes an unbound cursor, which the API reads as one
  // from before binding (and the executor refuses).
  const { rows } = await pool.query<{ c: string }>(`select billing.encode_cursor('sub_0193a4b5c6d7e8f9a0b1c2d3e4') as c`);
  expect(decodeCursor(rows[0].c)).toEqual({ id: 'sub_0193a4b5c6d7e8f9a0b1c2d3e4', list: null, filters: null });
  // 'x' is not an id: both encode it, and the API refuses it as a cursor.
  expect(decodeCursor(encodeCursor('x', binding))).toBeNull();
});
