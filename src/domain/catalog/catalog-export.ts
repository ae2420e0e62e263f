// The catalog file (src/domain/catalog/catalog-file.ts) that reproduces what the API
// shows of a catalog: tiers with their plans, and discount codes. Keys are the ids
// (the API does not show catalog keys), so applied to another community (staging, a
// copy) it recreates the same offer; entitlements and platforms are not in the API's
// tier shape and are left out.
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const dropNull = (o: Json): Json => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));

export function catalogFileOf(tiers: Json[], discounts: Json[]): Json {
  return {
    tiers: tiers.map((t) => dropNull({
      key: t.id, name: t.name, description: t.description, kind: t.kind, billing_mode: t.billing_mode, rank: t.rank,
      features: t.features, perks: (t.perks as Json[]).map(dropNull),
      plans: (t.plans as Json[]).map((p) => dropNull({
        key: p.id, name: p.name, amount_cents: p.amount_cents, currency: p.currency, interval: p.interval,
        trial_days: p.trial_days, access_days: p.access_days,
      })),
    })),
    discounts: discounts.map((d) => dropNull({
      code: d.code, name: d.name, value_type: d.value_type, percent_off: d.percent_off, amount_off_cents: d.amount_off_cents,
      currency: d.currency, duration: d.duration, duration_months: d.duration_months, use_limit: d.use_limit,
      min_spend_cents: d.min_spend_cents, max_spend_cents: d.max_spend_cents, starts_at: d.starts_at, expires_at: d.expires_at,
      is_active: d.is_active, tiers: (d.tier_ids as string[]).length ? d.tier_ids : undefined,
      members: (d.members as Json[]).length ? (d.members as Json[]).map(dropNull) : undefined,
    })),
  };
}
