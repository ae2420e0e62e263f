// The catalog file (../shared/design/operator-cli.md): an operator's declaration of
// payment provider, platforms, entitlements, tiers with plans, and discount codes.
// parseCatalog validates a file (strict: unknown fields are errors); applyCatalog
// creates or updates rows by their `key` in one transaction. Applying the same file
// twice updates no row; rows the file does not list are left alone. Entitlements, tiers,
// plans and discount codes are written through the database's puts
// (functions/20-catalog-write.sql), which hold their rules for every door: this file,
// the /v1/catalog operations and the dashboard's Catalog page.
import fs from 'node:fs';
import type pg from 'pg';
import { z } from 'zod';
import { PaymentSecretBox, storePaymentSecrets } from '../checkout/payment-secrets';
import { PlatformSecretBox, storePlatformSecret } from './platform-secrets';

/** A catalog problem, always naming the field: `tiers[1].plans[0].amount_cents: ...`. */
export class CatalogError extends Error {
  /**
   * The API's problem code of the same refusal (invalid_request): a rule the database
   * holds answers the same from the file, the API and the dashboard.
   */
  readonly code = 'invalid_request';

  constructor(readonly field: string, readonly problem: string) {
    super(field ? `${field}: ${problem}` : problem);
    this.name = 'CatalogError';
  }
}

// ---------------------------------------------------------------------------------
// Schema

const NON_NEG_INT = 'expected a non-negative integer';
const POS_INT = 'expected a positive integer';
const nonNegInt = z.number({ error: NON_NEG_INT }).int({ error: NON_NEG_INT }).min(0, { error: NON_NEG_INT }).max(2147483647, { error: NON_NEG_INT });
const posInt = z.number({ error: POS_INT }).int({ error: POS_INT }).min(1, { error: POS_INT }).max(2147483647, { error: POS_INT });
const int = z.number({ error: 'expected an integer' }).int({ error: 'expected an integer' }).min(-2147483648, { error: 'expected an integer' }).max(2147483647, { error: 'expected an integer' });
const text = (max = 200) => z.string({ error: 'expected a string' }).trim().min(1, { error: 'expected a non-empty string' }).max(max, { error: `expected at most ${max} characters` });
const key = z.string({ error: 'expected a key (a string)' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/, { error: 'expected a key: letters, digits, "_", ".", ":" or "-", at most 100 characters' });
const bool = z.boolean({ error: 'expected true or false' });
const currency = z.string({ error: 'expected a currency code' }).regex(/^[a-z]{3}$/, { error: 'expected a lowercase three-letter currency code, e.g. "usd"' });
const timestamp = z.iso.datetime({ offset: true, error: 'expected an ISO 8601 timestamp, e.g. "2026-01-01T00:00:00Z"' });
const oneOf = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.map((v) => `"${v}"`).join(', ')}` });
const list = <T extends z.ZodType>(item: T) => z.array(item, { error: 'expected an array' });

const platformName = oneOf(['discord', 'telegram'] as const);

// Error messages never quote the value: a secret must not reach a terminal or a log.
const stripeSecretKey = z.string({ error: 'expected a Stripe secret key (sk_... or rk_...)' })
  .regex(/^(sk|rk)_(test|live)_[A-Za-z0-9_]{8,250}$/, { error: 'expected a Stripe secret key (sk_test_..., sk_live_... or a restricted rk_... key)' });
const stripeWebhookSecret = z.string({ error: 'expected a Stripe webhook signing secret (whsec_...)' })
  .regex(/^whsec_[A-Za-z0-9+/=_-]{8,250}$/, { error: 'expected a Stripe webhook signing secret (whsec_...)' });

const paymentProvider = z.union([
  z.strictObject({ type: z.literal('sandbox') }),
  // The community's own Stripe account: secret_key and webhook_secret are encrypted
  // into billing_private.payment_secrets (null removes one; absent leaves it as it is;
  // without them the deployment's STRIPE_* keys are used). Other Stripe settings are
  // the provider's own business: kept as the community's payment_config.
  z.looseObject({
    type: z.literal('stripe'),
    secret_key: stripeSecretKey.nullable().optional(),
    webhook_secret: stripeWebhookSecret.nullable().optional(),
    // Stripe Tax computes the tax of this community's Stripe checkouts (Checkout's
    // automatic_tax; the page then asks for the address and a tax id). Stripe's tax is
    // what invoices record (docs/decisions/tax.md).
    automatic_tax: z.boolean({ error: 'expected true or false' }).optional(),
  }),
], { error: 'expected {"type": "sandbox"}, {"type": "stripe", ...} or null' }).nullable();

// A connection's settings (issue 29): which keys each platform takes and their formats
// are checked by the database (billing.platform_settings_problem), where every door
// into the table meets them. bot_token is the exception: a secret, checked here and
// encrypted into billing_private.platform_secrets (null removes it; absent keeps the
// stored one), so it never reaches the database, a log or an error message in clear.
const platform = z.strictObject({
  key,
  platform: platformName,
  name: text().nullable().optional(),
  settings: z.record(z.string(), z.unknown(), { error: 'expected an object' }).optional(),
});

/** Bot token formats; the messages never quote the value. */
export const BOT_TOKEN: Record<'discord' | 'telegram', { pattern: RegExp; expected: string }> = {
  discord: { pattern: /^[A-Za-z0-9_-]{16,100}\.[A-Za-z0-9_-]{4,20}\.[A-Za-z0-9_-]{20,100}$/,
    expected: 'expected a Discord bot token (three dot-separated parts, from the application\'s Bot page) or null' },
  telegram: { pattern: /^[0-9]{3,20}:[A-Za-z0-9_-]{30,100}$/,
    expected: 'expected a Telegram bot token (<bot id>:<secret>, from BotFather) or null' },
};

/** A platform entry's settings without its secrets, and its bot token (undefined: not in the file). */
/** A Discord application's OAuth2 client secret ("Connect Discord"): write-only as bot_token. */
export const CLIENT_SECRET = { pattern: /^[A-Za-z0-9_-]{16,64}$/, expected: 'expected the Discord application\'s OAuth2 client secret (from its OAuth2 page) or null' };

/** A platform entry's settings without its secrets, and its secrets (undefined: not in the file). */
export function splitPlatformSettings(p: { settings?: Record<string, unknown> }): {
  settings: Record<string, unknown>; botToken: string | null | undefined; clientSecret: string | null | undefined;
} {
  const { bot_token: botToken, client_secret: clientSecret, ...settings } = p.settings ?? {};
  return { settings, botToken: botToken as string | null | undefined, clientSecret: clientSecret as string | null | undefined };
}

const benefit = z.strictObject({
  platform: key,
  type: text(100),
  value: text(500),
});

const entitlement = z.strictObject({
  key,
  name: text(),
  benefits: list(benefit).optional(),
});

const perk = z.strictObject({
  title: text(),
  detail: text(1000).nullable().optional(),
});

const plan = z.strictObject({
  key,
  name: text().nullable().optional(),
  amount_cents: nonNegInt,
  currency,
  interval: oneOf(['month', 'year'] as const).nullable().optional(),
  trial_days: nonNegInt.optional(),
  access_days: posInt.nullable().optional(),
  active: bool.optional(),
  // Set when given; left as it is when absent (a Stripe sync may fill it in).
  stripe_price_id: text().nullable().optional(),
});

const tier = z.strictObject({
  key,
  name: text(),
  description: text(2000).nullable().optional(),
  kind: oneOf(['subscription', 'one_time'] as const).optional(),
  billing_mode: oneOf(['recurring', 'one_time'] as const).optional(),
  rank: int.optional(),
  active: bool.optional(),
  features: list(text(500)).optional(),
  perks: list(perk).optional(),
  entitlements: list(key).optional(),
  plans: list(plan).optional(),
});

const discountMember = z.strictObject({
  platform: platformName,
  platform_uid: text(),
  username: text().nullable().optional(),
});

const discount = z.strictObject({
  code: z.string({ error: 'expected a string' }).regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'expected 1 to 64 letters, digits, "_" or "-"' }),
  name: text().nullable().optional(),
  value_type: oneOf(['percent', 'amount'] as const),
  percent_off: z.number({ error: 'expected a number above 0 and at most 100' }).gt(0, { error: 'expected a number above 0 and at most 100' }).lte(100, { error: 'expected a number above 0 and at most 100' }).nullable().optional(),
  amount_off_cents: posInt.nullable().optional(),
  currency: currency.nullable().optional(),
  duration: oneOf(['once', 'repeating', 'forever'] as const).optional(),
  duration_months: posInt.nullable().optional(),
  use_limit: posInt.nullable().optional(),
  min_spend_cents: nonNegInt.nullable().optional(),
  max_spend_cents: nonNegInt.nullable().optional(),
  starts_at: timestamp.nullable().optional(),
  expires_at: timestamp.nullable().optional(),
  is_active: bool.optional(),
  tiers: list(key).optional(),
  members: list(discountMember).optional(),
});

// Retries of a failed renewal: days after the due time, ascending, 1 to 28 each
// (billing.dunning_valid holds the same rule in SQL); what happens when the last fails.
const dunning = z.strictObject({
  retry_days: z.array(z.number({ error: 'expected whole days from 1 to 28' }).int({ error: 'expected whole days from 1 to 28' })
    .min(1, { error: 'expected whole days from 1 to 28' }).max(28, { error: 'expected whole days from 1 to 28' }), { error: 'expected an array of days' })
    .min(1, { error: 'expected 1 to 8 retry days' }).max(8, { error: 'expected 1 to 8 retry days' })
    .refine((d) => d.every((v, i) => i === 0 || v > d[i - 1]), { error: 'expected ascending retry days' }),
  final_action: oneOf(['cancel'] as const),
});

// The seller its invoices name (docs/decisions/invoice-pdf.md): the community's legal
// fields, also set by `billing communities set-legal`. Listed, the four are set as the
// file says (absent: cleared); left out, they stay. The country decides the tax of a
// buyer whose country is unknown, and the EU reverse charge (docs/decisions/tax.md).
const countryCode = z.string({ error: 'expected a two-letter ISO 3166-1 country code, e.g. "IE"' })
  .regex(/^[A-Z]{2}$/, { error: 'expected a two-letter ISO 3166-1 country code in capitals, e.g. "IE"' });
const seller = z.strictObject({
  legal_name: text().nullable().optional(),
  address_lines: list(text()).max(6, { error: 'expected at most 6 lines' }).nullable().optional(),
  country: countryCode.nullable().optional(),
  tax_id: text(50).nullable().optional(),
});

// A tax rate per buyer country (docs/decisions/tax.md): rate_ppm in parts per million,
// exact (20% = 200000); inclusive when the prices hold the tax. Matched by country;
// a rate the file leaves out stays (set active: false to stop charging it).
const RATE = 'expected parts per million, a whole number from 0 to 1000000 (20% = 200000)';
const taxRate = z.strictObject({
  country: countryCode,
  name: text(40),
  rate_ppm: z.number({ error: RATE }).int({ error: RATE }).min(0, { error: RATE }).max(1_000_000, { error: RATE }),
  inclusive: bool.optional(),
  active: bool.optional(),
});

export const catalogSchema = z.strictObject({
  payment_provider: paymentProvider.optional(),
  dunning: dunning.optional(),
  seller: seller.optional(),
  tax_rates: list(taxRate).optional(),
  platforms: list(platform).optional(),
  entitlements: list(entitlement).optional(),
  tiers: list(tier).optional(),
  discounts: list(discount).optional(),
}, { error: 'expected a JSON object' });

export type CatalogFile = z.infer<typeof catalogSchema>;

// ---------------------------------------------------------------------------------
// Validation

function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

function join(base: string, field: string): string {
  return base ? `${base}.${field}` : field;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v = input;
  for (const p of path) v = v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[p] : undefined;
  return v;
}

function firstIssue(error: z.ZodError, input: unknown): CatalogError {
  const issue = error.issues[0];
  const at = fieldPath(issue.path);
  if (issue.code === 'unrecognized_keys') {
    return new CatalogError(join(at, issue.keys[0]), 'unknown field');
  }
  if (issue.code === 'invalid_type' && issue.path.length > 0 && valueAt(input, issue.path) === undefined) {
    return new CatalogError(at, 'required');
  }
  return new CatalogError(at, issue.message);
}

function duplicates<T>(items: T[], name: (item: T) => string, field: (i: number) => string, what: string) {
  const seen = new Set<string>();
  items.forEach((item, i) => {
    const n = name(item);
    if (seen.has(n)) throw new CatalogError(field(i), `duplicate ${what} "${n}"`);
    seen.add(n);
  });
}

/** Rules across fields that the shape alone does not say. */
function checkRules(c: CatalogFile): void {
  const platforms = c.platforms ?? [];
  const entitlements = c.entitlements ?? [];
  const tiers = c.tiers ?? [];
  const discounts = c.discounts ?? [];
  duplicates(c.tax_rates ?? [], (r) => r.country, (i) => `tax_rates[${i}].country`, 'country');
  duplicates(platforms, (p) => p.key, (i) => `platforms[${i}].key`, 'key');
  platforms.forEach((p, i) => {
    const token = p.settings?.bot_token;
    if (token !== undefined && token !== null && (typeof token !== 'string' || !BOT_TOKEN[p.platform].pattern.test(token))) {
      throw new CatalogError(`platforms[${i}].settings.bot_token`, BOT_TOKEN[p.platform].expected);
    }
    const secret = p.settings?.client_secret;
    if (secret !== undefined && p.platform !== 'discord') {
      throw new CatalogError(`platforms[${i}].settings.client_secret`, 'only a Discord connection has an OAuth2 client secret');
    }
    if (secret !== undefined && secret !== null && (typeof secret !== 'string' || !CLIENT_SECRET.pattern.test(secret))) {
      throw new CatalogError(`platforms[${i}].settings.client_secret`, CLIENT_SECRET.expected);
    }
  });
  duplicates(entitlements, (e) => e.key, (i) => `entitlements[${i}].key`, 'key');
  duplicates(tiers, (t) => t.key, (i) => `tiers[${i}].key`, 'key');
  duplicates(discounts, (d) => d.code.toLowerCase(), (i) => `discounts[${i}].code`, 'code (codes match case-insensitively)');
  // A plan key is unique across the file's tiers. The rules of each object (a plan's
  // shape for its tier's billing mode, a discount's value and window, a benefit its
  // platform carries out) are the database's, checked as each object is written
  // (functions/20-catalog-write.sql), where the API and the dashboard meet them too.
  const planKeys = new Set<string>();
  tiers.forEach((t, ti) => {
    (t.plans ?? []).forEach((p, pi) => {
      if (planKeys.has(p.key)) throw new CatalogError(`tiers[${ti}].plans[${pi}].key`, `duplicate plan key "${p.key}"`);
      planKeys.add(p.key);
    });
  });
}

/** Validates a parsed JSON value as a catalog; throws CatalogError naming the field. */
export function parseCatalog(input: unknown): CatalogFile {
  const parsed = catalogSchema.safeParse(input);
  if (!parsed.success) throw firstIssue(parsed.error, input);
  checkRules(parsed.data);
  return parsed.data;
}

export function readCatalogFile(file: string): CatalogFile {
  let textContent: string;
  try {
    textContent = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new CatalogError('', `cannot read ${file}: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(textContent);
  } catch (err) {
    throw new CatalogError('', `${file} is not valid JSON: ${(err as Error).message}`);
  }
  return parseCatalog(json);
}

// ---------------------------------------------------------------------------------
// Apply

export interface CatalogResult {
  tiers: Record<string, string>;
  plans: Record<string, string>;
  entitlements: Record<string, string>;
  platforms: Record<string, string>;
  discounts: Record<string, string>;
  /** Tax rates by country. */
  tax_rates: Record<string, string>;
  /** What this apply created or updated (rows the file lists unchanged are not here), in file order. */
  changes: CatalogChange[];
  /**
   * Plans whose amount_cents this apply changed: new buyers pay the new price; existing
   * subscribers keep the price they pay (docs/decisions/price-changes-keep-existing-subscribers.md)
   * until `billing plans migrate` moves them with notice. Names those subscribers.
   */
  price_changes: PriceChange[];
}

export interface CatalogChange {
  kind: 'payment_provider' | 'dunning' | 'seller' | 'tax_rate' | 'platform' | 'entitlement' | 'tier' | 'plan' | 'discount';
  key: string;
  id: string | null;
  action: 'created' | 'updated';
  /** The fields that changed (names only, never a value: some are secrets). */
  fields: string[];
}

export interface PriceChange {
  plan: string;
  plan_id: string;
  from_cents: number;
  to_cents: number;
  currency: string;
  /** Subscriptions of the plan, not cancelled, that pay another price than the new one. */
  subscriptions: number;
  /** How many of them already have a price migration pending. */
  pending_migration: number;
  /** Their ids, the first PRICE_CHANGE_IDS (in id order). */
  subscription_ids: string[];
}

/** How many subscriber ids a price change lists (the count is always whole). */
export const PRICE_CHANGE_IDS = 1000;

type Queryable = Pick<pg.PoolClient, 'query'>;

/** A column value with the SQL type it is compared and stored as. */
type Col = [name: string, value: unknown, type: string];

/**
 * Finds the row whose match expression equals `match`, then inserts it, or updates
 * it only when some column differs (`is distinct from`, compared in SQL so numeric,
 * jsonb and timestamp values compare by value). An unchanged row gets no UPDATE
 * statement at all, so neither row nor statement triggers fire. Table and column
 * names are constants of this file, never input.
 */
async function upsert(
  db: Queryable, table: string, communityId: string,
  match: { expr: string; value: string }, cols: Col[],
  opts: { touch?: string; report?: { log: CatalogChange[]; kind: CatalogChange['kind']; key: string }; before?: (row: Record<string, unknown>) => void } = {},
): Promise<string> {
  const names = cols.map((c) => `"${c[0]}"`);
  const params = cols.map(([, value, type]) => (type === 'jsonb' ? JSON.stringify(value) : value));
  const casts = (from: number) => cols.map(([, , type], i) => `$${i + from}::${type}`);
  const fieldChanged = names.map((n, i) => `case when ${n} is distinct from ${casts(3)[i]} then '${cols[i][0]}' end`);
  const found = await db.query<{ id: string; changed: boolean; fields: string[]; row: Record<string, unknown> }>(
    `select id::text as id, (${names.join(', ')}) is distinct from (${casts(3).join(', ')}) as changed,
       array_remove(array[${fieldChanged.join(', ')}]::text[], null) as fields, to_jsonb(t) as row
     from ${table} t where community_id = $1 and ${match.expr} = $2 for update`,
    [communityId, match.value, ...params]);
  const row = found.rows[0];
  if (!row) {
    const { rows } = await db.query<{ id: string }>(
      `insert into ${table} (community_id, ${names.join(', ')})
       values ($1, ${casts(2).join(', ')}) returning id::text as id`,
      [communityId, ...params]);
    opts.report?.log.push({ kind: opts.report.kind, key: opts.report.key, id: rows[0].id, action: 'created', fields: [] });
    return rows[0].id;
  }
  opts.before?.(row.row);
  if (row.changed) {
    opts.report?.log.push({ kind: opts.report.kind, key: opts.report.key, id: row.id, action: 'updated', fields: row.fields });
    const sets = names.map((n, i) => `${n} = ${casts(3)[i]}`);
    if (opts.touch) sets.push(`${opts.touch} = now()`);
    await db.query(
      `update ${table} set ${sets.join(', ')} where community_id = $1 and id::text = $2`,
      [communityId, row.id, ...params]);
  }
  return row.id;
}

/** Records that a listed row's `field` changed (its links or benefits), unless it was just created. */
function noteChanged(out: CatalogResult, kind: CatalogChange['kind'], key: string, id: string | null, field: string) {
  const entry = out.changes.find((c) => c.kind === kind && c.key === key);
  if (entry?.action === 'created') return;
  if (entry) { if (!entry.fields.includes(field)) entry.fields.push(field); return; }
  out.changes.push({ kind, key, id, action: 'updated', fields: [field] });
}

async function existingKeys(db: Queryable, table: string, communityId: string): Promise<Map<string, string>> {
  const { rows } = await db.query<{ key: string; id: string }>(
    `select key, id from ${table} where community_id = $1`, [communityId]);
  return new Map(rows.map((r) => [r.key, r.id]));
}

/** Test and live mode never share customers; nor do the deployment's account and a community's own. */
function sameStripeAccountLikely(before: string | null, after: string | null): boolean {
  if (before === null || after === null) return before === after;
  return before.includes('_live_') === after.includes('_live_');
}

async function applyPaymentProvider(db: Queryable, communityId: string, provider: CatalogFile['payment_provider'], opts: ApplyOptions, out: CatalogResult) {
  if (provider === undefined) return;
  const type = provider?.type ?? null;
  let config: Record<string, unknown> = {};
  if (provider) {
    const { type: _type, ...rest } = provider;
    if (provider.type === 'stripe') {
      const { secret_key: secretKey, webhook_secret: webhookSecret, ...settings } = rest as Record<string, unknown> & {
        secret_key?: string | null; webhook_secret?: string | null };
      config = settings;
      for (const name of await applyStripeSecrets(db, communityId, { secret_key: secretKey, webhook_secret: webhookSecret }, opts)) {
        noteChanged(out, 'payment_provider', 'payment_provider', null, name);
      }
    } else {
      config = rest;
    }
  }
  const { rows } = await db.query<{ changed: boolean }>(
    `select (payment_provider, payment_config) is distinct from ($2::text, $3::jsonb) as changed
     from billing.communities where id = $1`, [communityId, type, JSON.stringify(config)]);
  if (!rows[0]?.changed) return;
  await db.query('update billing.communities set payment_provider = $2, payment_config = $3::jsonb where id = $1',
    [communityId, type, JSON.stringify(config)]);
  noteChanged(out, 'payment_provider', 'payment_provider', null, 'type');
}

/** The seller's four legal fields, set as listed (the table's CHECK has the last word); an unchanged seller writes nothing. */
async function applySeller(db: Queryable, communityId: string, seller: CatalogFile['seller'], out: CatalogResult) {
  if (seller === undefined) return;
  const values = [seller.legal_name ?? null, seller.address_lines ?? null, seller.country ?? null, seller.tax_id ?? null];
  const { rows } = await db.query<{ fields: string[] }>(
    `select array_remove(array[case when legal_name is distinct from $2 then 'legal_name' end,
       case when address_lines is distinct from $3::text[] then 'address_lines' end,
       case when country is distinct from $4 then 'country' end,
       case when tax_id is distinct from $5 then 'tax_id' end], null) as fields
     from billing.communities where id = $1`, [communityId, ...values]);
  const fields = rows[0]?.fields ?? [];
  if (fields.length === 0) return;
  await db.query('update billing.communities set legal_name = $2, address_lines = $3::text[], country = $4, tax_id = $5 where id = $1',
    [communityId, ...values]);
  for (const f of fields) noteChanged(out, 'seller', 'seller', null, f);
}

/** Tax rates by country: created or updated as listed; those the file leaves out stay. */
async function applyTaxRates(db: Queryable, communityId: string, c: CatalogFile, out: CatalogResult) {
  for (const r of c.tax_rates ?? []) {
    out.tax_rates[r.country] = await upsert(db, 'billing.tax_rates', communityId, { expr: 'country', value: r.country }, [
      ['country', r.country, 'text'],
      ['name', r.name, 'text'],
      ['rate_ppm', r.rate_ppm, 'integer'],
      ['inclusive', r.inclusive ?? false, 'boolean'],
      ['active', r.active ?? true, 'boolean'],
    ], { touch: 'updated_at', report: { log: out.changes, kind: 'tax_rate', key: r.country } });
  }
}

async function applyStripeSecrets(db: Queryable, communityId: string, secrets: { secret_key?: string | null; webhook_secret?: string | null }, opts: ApplyOptions): Promise<string[]> {
  if (secrets.secret_key === undefined && secrets.webhook_secret === undefined) return [];
  let box: PaymentSecretBox | null = null;
  if (secrets.secret_key || secrets.webhook_secret) {
    if (!opts.encryptionKey) {
      throw new CatalogError('payment_provider', 'secret_key and webhook_secret are stored encrypted: set WEBHOOK_ENCRYPTION_KEY (the one the service uses)');
    }
    box = new PaymentSecretBox(opts.encryptionKey);
  }
  let before: string | null = null;
  const stored = await db.query<{ ciphertext: string }>(
    `select ciphertext from billing_private.payment_secrets where community_id = $1 and provider = 'stripe' and name = 'secret_key'`, [communityId]);
  if (stored.rows[0] && box) {
    try { before = box.decrypt(communityId, 'stripe', 'secret_key', stored.rows[0].ciphertext); } catch { before = '?'; }
  } else if (stored.rows[0]) {
    before = '?';
  }
  const changed = await storePaymentSecrets(db, box, communityId, 'stripe', secrets);
  // Customers belong to one Stripe account (and mode): forget them when the account
  // plainly changes, so the next checkout makes a customer where it will be charged.
  if (changed.includes('secret_key') && !sameStripeAccountLikely(before, secrets.secret_key ?? null)) {
    await db.query(`delete from billing.member_provider_customers where community_id = $1 and provider = 'stripe'`, [communityId]);
  }
  return changed;
}

async function applyPlatforms(db: Queryable, communityId: string, c: CatalogFile, ids: Map<string, string>, opts: ApplyOptions, out: CatalogResult) {
  let box: PlatformSecretBox | null = null;
  for (const [i, p] of (c.platforms ?? []).entries()) {
    const { settings, botToken, clientSecret } = splitPlatformSettings(p);
    // The database's rule (the constraint platform_configs_settings_valid), asked first
    // so the problem names its field in the file.
    const { rows } = await db.query<{ problem: string | null }>('select billing.platform_settings_problem($1, $2::jsonb) as problem',
      [p.platform, JSON.stringify(settings)]);
    const problem = rows[0]?.problem;
    if (problem) {
      const at = problem.indexOf(': ');
      throw new CatalogError(`platforms[${i}].${problem.slice(0, at)}`, problem.slice(at + 2));
    }
    const id = await upsert(db, 'billing.platform_configs', communityId, { expr: 'key', value: p.key }, [
      ['key', p.key, 'text'],
      ['platform', p.platform, 'text'],
      ['name', p.name ?? null, 'text'],
      ['settings', settings, 'jsonb'],
    ], { report: { log: out.changes, kind: 'platform', key: p.key } });
    ids.set(p.key, id);
    out.platforms[p.key] = id;
    for (const [name, value] of [['bot_token', botToken], ['client_secret', clientSecret]] as const) {
      if (value && !box) {
        if (!opts.encryptionKey) {
          throw new CatalogError(`platforms[${i}].settings.${name}`, `${name === 'bot_token' ? 'bot tokens' : 'client secrets'} are stored encrypted: set WEBHOOK_ENCRYPTION_KEY (the one the service uses)`);
        }
        box = new PlatformSecretBox(opts.encryptionKey);
      }
      if (await storePlatformSecret(db, box, communityId, id, name, value)) noteChanged(out, 'platform', p.key, id, name);
    }
  }
}

/** What a put (db/migrations/fixtures/functions/20-catalog-write.sql) answers. */
interface PutResult {
  id: string;
  key: string;
  action: 'created' | 'updated' | 'unchanged';
  fields: string[];
  price_change?: Omit<PriceChange, 'plan' | 'plan_id'> | null;
}

/**
 * Writes one object through the database's put for it, the one place that holds the
 * catalog's rules (the API's and the dashboard's operations call the same functions).
 * A problem it names (BL422, the field in its detail) becomes a CatalogError naming
 * the field's place in the file (`at`, e.g. tiers[1].plans[0]).
 */
async function put(db: Queryable, fn: 'catalog_tier_put' | 'catalog_plan_put' | 'catalog_entitlement_put' | 'catalog_discount_put',
  input: unknown, at: string, report: { log: CatalogChange[]; kind: CatalogChange['kind'] }): Promise<PutResult> {
  let r: PutResult;
  try {
    const { rows } = await db.query<{ r: PutResult }>(`select billing.${fn}($1::jsonb) as r`, [JSON.stringify(input)]);
    r = rows[0].r;
  } catch (err) {
    const e = err as { code?: string; detail?: string; message: string };
    if (e.code !== 'BL422') throw err;
    const field = e.detail ?? '';
    const problem = field && e.message.startsWith(`${field}: `) ? e.message.slice(field.length + 2) : e.message;
    throw new CatalogError(field ? `${at}.${field}` : at, problem);
  }
  if (r.action !== 'unchanged') {
    report.log.push({ kind: report.kind, key: r.key, id: r.id, action: r.action, fields: r.action === 'updated' ? r.fields : [] });
  }
  return r;
}

async function applyEntitlements(db: Queryable, c: CatalogFile, out: CatalogResult) {
  for (const [i, e] of (c.entitlements ?? []).entries()) {
    out.entitlements[e.key] = (await put(db, 'catalog_entitlement_put', e, `entitlements[${i}]`, { log: out.changes, kind: 'entitlement' })).id;
  }
}

async function applyTiers(db: Queryable, c: CatalogFile, out: CatalogResult) {
  for (const [i, t] of (c.tiers ?? []).entries()) {
    const { plans, ...tier } = t;
    const id = (await put(db, 'catalog_tier_put', tier, `tiers[${i}]`, { log: out.changes, kind: 'tier' })).id;
    out.tiers[t.key] = id;
    for (const [pi, p] of (plans ?? []).entries()) {
      const r = await put(db, 'catalog_plan_put', { ...p, tier_id: id }, `tiers[${i}].plans[${pi}]`, { log: out.changes, kind: 'plan' });
      out.plans[p.key] = r.id;
      // New buyers pay the new price; the plan's existing subscribers keep theirs (the
      // database: subscriptions.price_cents). Named here, for a `billing plans migrate`.
      if (r.price_change) out.price_changes.push({ plan: p.key, plan_id: r.id, ...r.price_change });
    }
  }
}

async function applyDiscounts(db: Queryable, c: CatalogFile, out: CatalogResult) {
  for (const [i, d] of (c.discounts ?? []).entries()) {
    out.discounts[d.code] = (await put(db, 'catalog_discount_put', d, `discounts[${i}]`, { log: out.changes, kind: 'discount' })).id;
  }
}

/**
 * Applies a validated catalog to one community, as the owner role, in one
 * transaction: everything or nothing. Omitted optional fields of a listed object take
 * their defaults; a listed tier's entitlement links and a listed entitlement's
 * benefits become exactly those listed.
 */
export interface ApplyOptions {
  /** WEBHOOK_ENCRYPTION_KEY: needed only when the file sets payment secrets or bot tokens. */
  encryptionKey?: string | null;
}

export async function applyCatalog(pool: pg.Pool, communityId: string, catalog: CatalogFile, opts: ApplyOptions = {}): Promise<CatalogResult> {
  const out: CatalogResult = { tiers: {}, plans: {}, entitlements: {}, platforms: {}, discounts: {}, tax_rates: {}, changes: [], price_changes: [] };
  const db = await pool.connect();
  try {
    await db.query('begin');
    // Triggers read billing.now() and the community of the transaction.
    await db.query(`select set_config('app.community_id', $1, true)`, [communityId]);
    // One apply at a time per community: lock its row (it may be updated below).
    const community = await db.query('select id from billing.communities where id = $1 for update', [communityId]);
    if (community.rowCount === 0) throw new Error(`no community ${communityId}`);
    await applyPaymentProvider(db, communityId, catalog.payment_provider, opts, out);
    if (catalog.dunning) {
      const dunning = await db.query('update billing.communities set dunning = $2::jsonb where id = $1 and dunning is distinct from $2::jsonb',
        [communityId, JSON.stringify(catalog.dunning)]);
      if (dunning.rowCount) noteChanged(out, 'dunning', 'dunning', null, 'retry_days');
    }
    await applySeller(db, communityId, catalog.seller, out);
    await applyTaxRates(db, communityId, catalog, out);
    const platformIds = await existingKeys(db, 'billing.platform_configs', communityId);
    await applyPlatforms(db, communityId, catalog, platformIds, opts, out);
    await applyEntitlements(db, catalog, out);
    await applyTiers(db, catalog, out);
    await applyDiscounts(db, catalog, out);
    await db.query('commit');
    return out;
  } catch (err) {
    await db.query('rollback').catch(() => {});
    throw err;
  } finally {
    db.release();
  }
}
