-- Every resource of the spec. Each tenant table leads its primary key and unique
-- constraints with community_id; ids are text in the "C" collation so they sort by
-- creation time.

create table billing.communities (
  id text collate "C" primary key default billing.gen_id('com'),
  name text not null check (length(name) between 1 and 200),
  payment_provider text check (payment_provider in ('sandbox', 'stripe')),
  payment_config jsonb not null default '{}',
  clock_offset interval not null default '0',
  created_at timestamptz not null default now()
);

-- The time every rule reads: the community's sandbox test clock, or the real time.
create or replace function billing.now() returns timestamptz
  language sql stable parallel safe
as $$
  select now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = billing.current_community_id()),
    '0'::interval)
$$;

create table billing_private.api_keys (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('key'),
  name text,
  prefix text not null,
  key_hash text not null,
  scopes text[] not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  primary key (community_id, id)
);
create unique index api_keys_hash on billing_private.api_keys (key_hash);
create unique index api_keys_id on billing_private.api_keys (id);

create table billing.platform_configs (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('pcfg'),
  key text not null,
  platform text not null check (platform in ('discord', 'telegram')),
  name text,
  settings jsonb not null default '{}',
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key)
);

create table billing.tiers (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('tier'),
  key text not null,
  name text not null,
  description text,
  kind text not null default 'subscription' check (kind in ('subscription', 'one_time')),
  billing_mode text not null default 'recurring' check (billing_mode in ('recurring', 'one_time')),
  rank integer not null default 0,
  active boolean not null default true,
  features text[] not null default '{}',
  perks jsonb not null default '[]',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key)
);

create table billing.plans (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('plan'),
  tier_id text collate "C" not null,
  key text not null,
  name text,
  amount_cents integer not null check (amount_cents >= 0),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  interval text check (interval in ('month', 'year')),
  trial_days integer not null default 0 check (trial_days >= 0),
  access_days integer check (access_days > 0),
  active boolean not null default true,
  stripe_price_id text,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key),
  foreign key (community_id, tier_id) references billing.tiers on delete cascade
);
create index plans_tier on billing.plans (community_id, tier_id);

create table billing.entitlements (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('ent'),
  key text not null,
  name text not null,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key)
);

create table billing.entitlement_benefits (
  community_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  platform_config_id text collate "C" not null,
  type text not null,
  value text not null,
  primary key (community_id, entitlement_id, platform_config_id, type, value),
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade,
  foreign key (community_id, platform_config_id) references billing.platform_configs on delete cascade
);

create table billing.tier_entitlements (
  community_id text collate "C" not null,
  tier_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  primary key (community_id, tier_id, entitlement_id),
  foreign key (community_id, tier_id) references billing.tiers on delete cascade,
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade
);
create index tier_entitlements_ent on billing.tier_entitlements (community_id, entitlement_id);

create table billing.members (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('mem'),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id)
);

create table billing.member_identities (
  community_id text collate "C" not null,
  member_id text collate "C" not null,
  platform text not null check (platform in ('discord', 'telegram')),
  platform_uid text not null,
  username text,
  created_at timestamptz not null default now(),
  primary key (community_id, platform, platform_uid),
  unique (community_id, member_id, platform),
  foreign key (community_id, member_id) references billing.members on delete cascade
);

create table billing.external_subjects (
  community_id text collate "C" not null,
  member_id text collate "C" not null,
  namespace text not null check (length(namespace) between 1 and 200),
  external_user_id text not null check (length(external_user_id) between 1 and 200),
  created_at timestamptz not null default now(),
  primary key (community_id, namespace, external_user_id),
  unique (community_id, member_id, namespace),
  foreign key (community_id, member_id) references billing.members on delete cascade
);

create table billing.discount_codes (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id uuid not null default gen_random_uuid(),
  code text not null,
  name text,
  value_type text not null check (value_type in ('percent', 'amount')),
  percent_off numeric check (percent_off > 0 and percent_off <= 100),
  amount_off_cents integer check (amount_off_cents > 0),
  currency text,
  duration text not null default 'once' check (duration in ('once', 'repeating', 'forever')),
  duration_months integer,
  use_limit integer check (use_limit > 0),
  min_spend_cents integer,
  max_spend_cents integer,
  starts_at timestamptz,
  expires_at timestamptz,
  is_active boolean not null default true,
  archived_at timestamptz,
  tier_ids text[] not null default '{}',
  members jsonb not null default '[]',
  created_at timestamptz not null default now(),
  primary key (community_id, id)
);
create unique index discount_codes_code on billing.discount_codes (community_id, lower(code));

create table billing.checkout_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('cs'),
  member_id text collate "C" not null,
  tier_id text collate "C" not null,
  plan_id text collate "C" not null,
  discount_id uuid,
  amount_cents integer not null,
  discount_cents integer not null default 0,
  currency text not null,
  client_reference_id text,
  return_url text,
  subject_kind text not null check (subject_kind in ('member', 'external', 'platform')),
  status text not null default 'open' check (status in ('open', 'completed', 'expired')),
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  url text,
  expires_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict,
  foreign key (community_id, discount_id) references billing.discount_codes on delete restrict
);
create index checkout_sessions_member on billing.checkout_sessions (community_id, member_id);

create table billing.discount_redemptions (
  community_id text collate "C" not null,
  discount_id uuid not null,
  checkout_id text collate "C" not null,
  member_id text collate "C" not null,
  status text not null check (status in ('pending', 'redeemed', 'released')),
  created_at timestamptz not null default now(),
  primary key (community_id, discount_id, checkout_id),
  foreign key (community_id, discount_id) references billing.discount_codes on delete cascade,
  foreign key (community_id, checkout_id) references billing.checkout_sessions on delete cascade
);

create table billing.subscriptions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('sub'),
  member_id text collate "C" not null,
  plan_id text collate "C" not null,
  status text not null check (status in ('active', 'trialing', 'past_due', 'cancelling', 'cancelled', 'paused')),
  current_period_start timestamptz,
  current_period_end timestamptz,
  trial_end timestamptz,
  cancel_at timestamptz,
  cancelled_at timestamptz,
  paused_until timestamptz,
  scheduled_plan_id text collate "C",
  scheduled_at timestamptz,
  client_reference_id text,
  checkout_id text collate "C",
  provider text not null default 'sandbox' check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  provider_updated_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict,
  foreign key (community_id, scheduled_plan_id) references billing.plans on delete set null (scheduled_plan_id)
);
create index subscriptions_member on billing.subscriptions (community_id, member_id);
create index subscriptions_status on billing.subscriptions (community_id, status, id);
create index subscriptions_plan on billing.subscriptions (community_id, plan_id, id);
create index subscriptions_period_end on billing.subscriptions (current_period_end) where status in ('active', 'trialing', 'past_due', 'cancelling');
create unique index subscriptions_provider_ref on billing.subscriptions (community_id, provider_ref) where provider_ref is not null;

create table billing.purchases (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pur'),
  member_id text collate "C" not null,
  plan_id text collate "C" not null,
  status text not null default 'completed' check (status in ('completed', 'refunded')),
  amount_cents integer not null,
  currency text not null,
  access_expires_at timestamptz,
  paid_at timestamptz not null default now(),
  client_reference_id text,
  checkout_id text collate "C",
  provider_ref text,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict
);
create index purchases_member on billing.purchases (community_id, member_id);
create index purchases_expiry on billing.purchases (access_expires_at) where access_expires_at is not null;

create table billing.portal_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('ps'),
  member_id text collate "C" not null,
  return_url text,
  url text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade
);

create table billing.link_codes (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('lc'),
  member_id text collate "C" not null,
  code text not null,
  intended_platform text not null check (intended_platform in ('discord', 'telegram')),
  expires_at timestamptz not null,
  redeemed_at timestamptz,
  invalidated_at timestamptz,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, code),
  foreign key (community_id, member_id) references billing.members on delete cascade
);

-- The ledger: one row per (member, entitlement), maintained by triggers.
create table billing.member_entitlements (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('ment'),
  member_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  status text not null check (status in ('active', 'inactive')),
  revision bigint not null default 1,
  sources jsonb not null default '[]',
  benefits jsonb not null default '[]',
  identities jsonb not null default '{}',
  granted_at timestamptz,
  revoked_at timestamptz,
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, member_id, entitlement_id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade
);

-- The outbox: every event envelope, written in the transaction of its change.
create table billing.events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('evt'),
  type text not null,
  created_at timestamptz not null default now(),
  api_version text not null default billing.api_version(),
  data jsonb not null,
  primary key (community_id, id)
);
create index events_type on billing.events (community_id, type, id);

create table billing.webhook_endpoints (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('we'),
  url text not null,
  description text,
  event_types text[] not null default '{}',
  enabled boolean not null default true,
  disabled_reason text,
  failing_since timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id)
);

-- Encrypted signing secrets: owner only; the worker and API reach them through
-- SECURITY DEFINER functions.
create table billing_private.webhook_secrets (
  community_id text collate "C" not null,
  endpoint_id text collate "C" not null,
  secret_ciphertext text not null,
  previous_ciphertext text,
  previous_expires_at timestamptz,
  primary key (community_id, endpoint_id),
  foreign key (community_id, endpoint_id) references billing.webhook_endpoints on delete cascade
);

create table billing.webhook_deliveries (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('wd'),
  endpoint_id text collate "C" not null,
  event_id text collate "C" not null,
  event_type text not null,
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempt_count integer not null default 0,
  next_attempt_at timestamptz,
  last_status_code integer,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, endpoint_id, event_id),
  foreign key (community_id, endpoint_id) references billing.webhook_endpoints on delete cascade,
  foreign key (community_id, event_id) references billing.events on delete cascade
);
create index webhook_deliveries_endpoint on billing.webhook_deliveries (community_id, endpoint_id, id);

create table billing.webhook_attempts (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('wa'),
  delivery_id text collate "C" not null,
  endpoint_id text collate "C" not null,
  attempt integer not null,
  status_code integer,
  duration_ms integer,
  error text,
  response_excerpt text,
  started_at timestamptz not null,
  finished_at timestamptz,
  primary key (community_id, id),
  foreign key (community_id, delivery_id) references billing.webhook_deliveries on delete cascade
);
create index webhook_attempts_endpoint on billing.webhook_attempts (community_id, endpoint_id, id);

-- Idempotency records: scoped per community and endpoint, kept 24 hours.
create table billing.idempotency_keys (
  community_id text collate "C" not null references billing.communities on delete cascade,
  endpoint text not null,
  key text not null,
  request_hash text not null,
  response_status integer not null,
  response_body jsonb,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  primary key (community_id, endpoint, key)
);

-- Token buckets; losing them on a crash only refills them.
create unlogged table billing_private.rate_buckets (
  bucket text primary key,
  tokens double precision not null,
  allowed boolean not null default true,
  updated_at timestamptz not null
);

-- Inbound provider events applied exactly once.
create table billing.provider_events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  provider text not null,
  event_id text not null,
  type text not null,
  received_at timestamptz not null default now(),
  primary key (community_id, provider, event_id)
);
