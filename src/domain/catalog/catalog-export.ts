// The catalog file as a person reads it: the file's fields in the order
// src/domain/catalog/catalog-file.ts declares them (PostgreSQL's jsonb keeps its own
// order). The file itself comes from the database (billing_api.catalog_file).
type Json = Record<string, unknown>;

const ORDER: Record<string, readonly string[]> = {
  file: ['payment_provider', 'dunning', 'seller', 'tax_rates', 'platforms', 'entitlements', 'tiers', 'discounts'],
  payment_provider: ['type'],
  dunning: ['retry_days', 'final_action'],
  seller: ['legal_name', 'address_lines', 'country', 'tax_id'],
  tax_rates: ['country', 'name', 'rate_ppm', 'inclusive', 'active'],
  platforms: ['key', 'platform', 'name', 'settings'],
  entitlements: ['key', 'name', 'benefits'],
  benefits: ['platform', 'type', 'value'],
  tiers: ['key', 'name', 'description', 'kind', 'billing_mode', 'rank', 'active', 'features', 'perks', 'entitlements', 'plans'],
  perks: ['title', 'detail'],
  plans: ['key', 'name', 'amount_cents', 'currency', 'interval', 'trial_days', 'access_days', 'active', 'stripe_price_id'],
  discounts: ['code', 'name', 'value_type', 'percent_off', 'amount_off_cents', 'currency', 'duration', 'duration_months',
    'use_limit', 'min_spend_cents', 'max_spend_cents', 'starts_at', 'expires_at', 'is_active', 'tiers', 'members'],
  members: ['platform', 'platform_uid', 'username'],
};

function ordered(value: unknown, kind: string): unknown {
  if (Array.isArray(value)) return value.map((v) => ordered(v, kind));
  if (value === null || typeof value !== 'object') return value;
  const obj = value as Json;
  const order = ORDER[kind] ?? [];
  const keys = [...order.filter((k) => k in obj), ...Object.keys(obj).filter((k) => !order.includes(k)).sort()];
  // Nested objects of these fields are themselves file objects; others (settings, the
  // provider's own config) keep their keys sorted.
  return Object.fromEntries(keys.map((k) => [k, ORDER[k] && kind !== 'payment_provider' ? ordered(obj[k], k) : obj[k]]));
}

/** The file with its fields in the order a file is written. */
export function orderedCatalogFile(file: Json): Json {
  return ordered(file, 'file') as Json;
}
