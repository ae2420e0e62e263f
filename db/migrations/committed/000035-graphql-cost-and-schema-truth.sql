--! Previous: sha1:52c6061dd47632ff7f992801437f7ebbfd24bdb5
--! Hash: sha1:8d7371b05b48841cc1c68b403d776bd6911bf0ef
--! Message: GraphQL cost and schema truth

--! split: 1-current.sql
-- Enter migration here

--! split: 70-graphql.sql
-- GraphQL that tells the truth and pays for what it reads (issues 26.12, 27.1).
-- The definitions live in fixtures/95-graphql.sql; this is the delta.

-- Smart tags: @scope on each view, @notNull and @enumValues on its columns.
comment on view billing_graphql.tiers is E'@primaryKey id\n@scope plans:read\n@behavior -insert -update -delete\nPlan tiers (customer-facing offerings). Needs plans:read.';
comment on column billing_graphql.tiers.id is E'@notNull';
comment on column billing_graphql.tiers.key is E'@notNull';
comment on column billing_graphql.tiers.name is E'@notNull';
comment on column billing_graphql.tiers.kind is E'@notNull';
comment on column billing_graphql.tiers.billing_mode is E'@notNull';
comment on column billing_graphql.tiers.rank is E'@notNull';
comment on column billing_graphql.tiers.active is E'@notNull';
comment on column billing_graphql.tiers.features is E'@notNull';
comment on column billing_graphql.tiers.perks is E'@notNull';
comment on column billing_graphql.tiers.created_at is E'@notNull';
comment on column billing_graphql.tiers.updated_at is E'@notNull';
comment on view billing_graphql.plans is E'@primaryKey id\n@foreignKey (tier_id) references billing_graphql.tiers (id)\n@scope plans:read\n@behavior -insert -update -delete\nBilling plans (priced options of a tier). Needs plans:read.';
comment on column billing_graphql.plans.id is E'@notNull';
comment on column billing_graphql.plans.tier_id is E'@notNull';
comment on column billing_graphql.plans.key is E'@notNull';
comment on column billing_graphql.plans.amount_cents is E'@notNull';
comment on column billing_graphql.plans.currency is E'@notNull';
comment on column billing_graphql.plans.trial_days is E'@notNull';
comment on column billing_graphql.plans.active is E'@notNull';
comment on column billing_graphql.plans.created_at is E'@notNull';
comment on view billing_graphql.entitlements is E'@primaryKey id\n@scope plans:read\n@behavior -insert -update -delete\nEntitlements of the catalog (logical permissions). Needs plans:read.';
comment on column billing_graphql.entitlements.id is E'@notNull';
comment on column billing_graphql.entitlements.key is E'@notNull';
comment on column billing_graphql.entitlements.name is E'@notNull';
comment on column billing_graphql.entitlements.created_at is E'@notNull';
comment on view billing_graphql.discounts is E'@primaryKey id\n@scope discounts:read\n@behavior -insert -update -delete\nUnarchived discount codes. Needs discounts:read.';
comment on column billing_graphql.discounts.id is E'@notNull';
comment on column billing_graphql.discounts.code is E'@notNull';
comment on column billing_graphql.discounts.value_type is E'@notNull';
comment on column billing_graphql.discounts.duration is E'@notNull';
comment on column billing_graphql.discounts.is_active is E'@notNull';
comment on column billing_graphql.discounts.tier_ids is E'@notNull';
comment on column billing_graphql.discounts.created_at is E'@notNull';
comment on view billing_graphql.members is E'@primaryKey id\n@scope members:read\n@behavior -insert -update -delete\nMembers. Needs members:read.';
comment on column billing_graphql.members.id is E'@notNull';
comment on column billing_graphql.members.created_at is E'@notNull';
comment on column billing_graphql.members.updated_at is E'@notNull';
comment on view billing_graphql.member_identities is E'@primaryKey platform,platform_uid\n@foreignKey (member_id) references billing_graphql.members (id)\n@scope members:read\n@behavior -insert -update -delete\nPlatform identities linked to members. Needs members:read.';
comment on column billing_graphql.member_identities.platform is E'@notNull';
comment on column billing_graphql.member_identities.platform_uid is E'@notNull';
comment on column billing_graphql.member_identities.member_id is E'@notNull';
comment on column billing_graphql.member_identities.created_at is E'@notNull';
comment on view billing_graphql.external_subjects is E'@primaryKey namespace,external_user_id\n@foreignKey (member_id) references billing_graphql.members (id)\n@scope members:read\n@behavior -insert -update -delete\nOperator-owned identities mapped to members. Needs members:read.';
comment on column billing_graphql.external_subjects.namespace is E'@notNull';
comment on column billing_graphql.external_subjects.external_user_id is E'@notNull';
comment on column billing_graphql.external_subjects.member_id is E'@notNull';
comment on column billing_graphql.external_subjects.created_at is E'@notNull';
comment on view billing_graphql.member_entitlements is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (entitlement_id) references billing_graphql.entitlements (id)\n@scope members:read\n@behavior -insert -update -delete\nThe entitlement ledger: one row per member and entitlement. Needs members:read.';
comment on column billing_graphql.member_entitlements.id is E'@notNull';
comment on column billing_graphql.member_entitlements.member_id is E'@notNull';
comment on column billing_graphql.member_entitlements.entitlement_id is E'@notNull';
comment on column billing_graphql.member_entitlements.status is E'@notNull\n@enumValues active inactive';
comment on column billing_graphql.member_entitlements.revision is E'@notNull';
comment on column billing_graphql.member_entitlements.sources is E'@notNull';
comment on column billing_graphql.member_entitlements.benefits is E'@notNull';
comment on column billing_graphql.member_entitlements.updated_at is E'@notNull';
comment on view billing_graphql.subscriptions is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (plan_id) references billing_graphql.plans (id)\n@scope subscriptions:read\n@behavior -insert -update -delete\nSubscriptions. Needs subscriptions:read.';
comment on column billing_graphql.subscriptions.id is E'@notNull';
comment on column billing_graphql.subscriptions.member_id is E'@notNull';
comment on column billing_graphql.subscriptions.plan_id is E'@notNull';
comment on column billing_graphql.subscriptions.status is E'@notNull\n@enumValues active trialing past_due cancelling cancelled paused';
comment on column billing_graphql.subscriptions.created_at is E'@notNull';
comment on column billing_graphql.subscriptions.updated_at is E'@notNull';
comment on view billing_graphql.purchases is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (plan_id) references billing_graphql.plans (id)\n@scope purchases:read\n@behavior -insert -update -delete\nOne-time purchases. Needs purchases:read.';
comment on column billing_graphql.purchases.id is E'@notNull';
comment on column billing_graphql.purchases.member_id is E'@notNull';
comment on column billing_graphql.purchases.plan_id is E'@notNull';
comment on column billing_graphql.purchases.status is E'@notNull\n@enumValues completed refunded disputed';
comment on column billing_graphql.purchases.amount_cents is E'@notNull';
comment on column billing_graphql.purchases.currency is E'@notNull';
comment on column billing_graphql.purchases.paid_at is E'@notNull';
comment on column billing_graphql.purchases.created_at is E'@notNull';
comment on view billing_graphql.invoices is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (subscription_id) references billing_graphql.subscriptions (id)\n@foreignKey (purchase_id) references billing_graphql.purchases (id)\n@scope invoices:read\n@behavior -insert -update -delete\nInvoices. Needs invoices:read.';
comment on column billing_graphql.invoices.id is E'@notNull';
comment on column billing_graphql.invoices.member_id is E'@notNull';
comment on column billing_graphql.invoices.status is E'@notNull\n@enumValues draft open paid void uncollectible';
comment on column billing_graphql.invoices.billing_reason is E'@notNull';
comment on column billing_graphql.invoices.currency is E'@notNull';
comment on column billing_graphql.invoices.lines is E'@notNull';
comment on column billing_graphql.invoices.subtotal_cents is E'@notNull';
comment on column billing_graphql.invoices.discount_cents is E'@notNull';
comment on column billing_graphql.invoices.total_cents is E'@notNull';
comment on column billing_graphql.invoices.amount_paid_cents is E'@notNull';
comment on column billing_graphql.invoices.amount_refunded_cents is E'@notNull';
comment on column billing_graphql.invoices.attempt_count is E'@notNull';
comment on column billing_graphql.invoices.created_at is E'@notNull';
comment on column billing_graphql.invoices.updated_at is E'@notNull';
comment on view billing_graphql.payment_attempts is E'@primaryKey id\n@foreignKey (invoice_id) references billing_graphql.invoices (id)\n@scope invoices:read\n@behavior -insert -update -delete\nAttempts to collect invoices. Needs invoices:read.';
comment on column billing_graphql.payment_attempts.id is E'@notNull';
comment on column billing_graphql.payment_attempts.invoice_id is E'@notNull';
comment on column billing_graphql.payment_attempts.status is E'@notNull\n@enumValues succeeded failed';
comment on column billing_graphql.payment_attempts.amount_cents is E'@notNull';
comment on column billing_graphql.payment_attempts.attempted_at is E'@notNull';
comment on column billing_graphql.payment_attempts.created_at is E'@notNull';
comment on view billing_graphql.events is E'@primaryKey id\n@scope events:read\n@behavior -insert -update -delete\nThe event outbox (the envelopes of GET /v1/events). Needs events:read.';
comment on column billing_graphql.events.id is E'@notNull';
comment on column billing_graphql.events.type is E'@notNull';
comment on column billing_graphql.events.created_at is E'@notNull';
comment on column billing_graphql.events.api_version is E'@notNull';
comment on column billing_graphql.events.data is E'@notNull';
comment on view billing_graphql.mrr is E'@primaryKey currency\n@scope analytics:read\n@behavior -insert -update -delete\nMonthly recurring revenue now, per currency. Needs analytics:read.';
comment on view billing_graphql.mrr_by_tier is E'@primaryKey tier_id,currency\n@foreignKey (tier_id) references billing_graphql.tiers (id)\n@scope analytics:read\n@behavior -insert -update -delete\nMRR now per tier and currency. Needs analytics:read.';
comment on view billing_graphql.mrr_daily is E'@primaryKey day,currency\n@scope analytics:read\n@behavior -insert -update -delete\nMRR by day (last 90 days) and currency, as it was at each day''s end (the recorded MRR movements). Needs analytics:read.';
comment on view billing_graphql.subscribers is E'@primaryKey id\n@scope analytics:read\n@behavior -insert -update -delete\nMembers with access through a subscription now. Needs analytics:read.';
comment on view billing_graphql.daily_activity is E'@primaryKey day\n@scope analytics:read\n@behavior -insert -update -delete\nSignups, cancels and ended subscriptions per day. Needs analytics:read.';
comment on view billing_graphql.churn is E'@primaryKey window_start\n@scope analytics:read\n@behavior -insert -update -delete\nChurn over the last 30 days. Needs analytics:read.';
comment on view billing_graphql.trial_conversion is E'@primaryKey id\n@scope analytics:read\n@behavior -insert -update -delete\nTrials started, ended and converted. Needs analytics:read.';
comment on view billing_graphql.paid_invoices_daily is E'@primaryKey day,currency\n@scope analytics:read\n@behavior -insert -update -delete\nPaid invoices by day and currency. Needs analytics:read.';
comment on view billing_graphql.revenue_daily is E'@primaryKey day,currency\n@scope analytics:read\n@behavior -insert -update -delete\nRevenue from subscriptions (paid invoices) and purchases by day. Needs analytics:read.';
comment on view billing_graphql.entitlement_activity_daily is E'@primaryKey day\n@scope analytics:read\n@behavior -insert -update -delete\nEntitlement grants and revokes per day. Needs analytics:read.';

-- ---- cost (src/graphql/graphql-limits.ts) ------------------------------------------------

-- A GraphQL query pays rate tokens by its cost: the request took one token when it
-- was authenticated (billing_private.authenticate); this takes the rest from the
-- key's bucket, all or none (a query it cannot pay for is refused, and leaves the
-- bucket as it was). Answers the bucket as take_tokens does (allowed, limit,
-- remaining, reset, retry_after; retry_after: until p_n tokens are there).
create or replace function billing_private.charge_key_tokens(p_key_id text, p_n integer, p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_per_minute double precision := coalesce((p_limits->>'key_per_minute')::float8, 300);
  v_burst double precision := coalesce((p_limits->>'key_burst')::float8, 60);
  v_rate double precision := v_per_minute / 60.0;
  v_n integer := greatest(0, least(p_n, floor(v_burst)::integer));
  v_now timestamptz := clock_timestamp();
  v_tokens double precision;
  v_ok boolean;
begin
  -- Refill as take_tokens does (never negatively, updated_at never moves back), then
  -- take v_n only when all of them are there.
  insert into billing_private.rate_buckets as b (bucket, tokens, allowed, granted, updated_at)
  values ('key:' || p_key_id, v_burst - v_n, true, v_n, v_now)
  on conflict (bucket) do update set
    tokens = least(v_burst, b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate)
      - case when least(v_burst, b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= v_n
          then v_n else 0 end,
    granted = case when least(v_burst, b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= v_n
          then v_n else 0 end,
    allowed = least(v_burst, b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= v_n,
    updated_at = greatest(b.updated_at, v_now)
  returning tokens, allowed into v_tokens, v_ok;
  return jsonb_build_object(
    'allowed', v_ok,
    'limit', v_per_minute::bigint,
    'remaining', floor(greatest(v_tokens, 0))::bigint,
    'reset', ceil(greatest(v_burst - v_tokens, 0) / v_rate)::bigint,
    'retry_after', greatest(ceil((v_n - v_tokens) / v_rate), 1)::bigint);
end
$$;

grant execute on function billing_private.charge_key_tokens(text,integer,jsonb) to billing_api;

-- The MRR movement views (30-mrr-history.sql) name their scope too.
comment on view billing_graphql.mrr_movements_daily is E'@primaryKey day,currency\n@scope analytics:read\n@behavior -insert -update -delete\nMRR movements (new, expansion, contraction, churn, reactivation) per day and currency, as recorded when they happened. Needs analytics:read.';
comment on view billing_graphql.mrr_movements_monthly is E'@primaryKey month,currency\n@scope analytics:read\n@behavior -insert -update -delete\nMRR movements per calendar month and currency, with the MRR at the month''s start and end. Needs analytics:read.';
