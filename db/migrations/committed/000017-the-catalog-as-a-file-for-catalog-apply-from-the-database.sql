--! Previous: sha1:44af54346bfe96507bb5a8a1294596401168fc00
--! Hash: sha1:36867f82eafd45a92eb917eafd7ecd6d715ec810
--! Message: The catalog as a file for catalog apply, from the database

--! split: 1-current.sql
--! Included 20-catalog.sql
-- Catalog: platform configs, tiers with their plans, entitlements with their
-- benefits, tier -> entitlement links, and discount codes. Written by the operator
-- (owner: `billing catalog apply`, src/catalog.ts); the API only reads it. The rules
-- src/catalog.ts checks across fields are constraints here too, so every door into
-- these tables (SQL included) keeps them.
--
-- Each entitlement-feeding table carries a _500_ledger trigger: a change refreshes
-- the ledger of the members it reaches (functions in 50-ledger.sql).

-- ---- platform configs ---------------------------------------------------------------

create table if not exists billing.platform_configs (
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
alter table billing.platform_configs enable row level security;
alter table billing.platform_configs force row level security;
drop policy if exists tenant on billing.platform_configs;
create policy tenant on billing.platform_configs
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.platform_configs;
create policy owner_access on billing.platform_configs to current_user using (true) with check (true);
grant select on billing.platform_configs to billing_api;

-- A platform config's platform is part of each benefit object.
create or replace function billing.tg_platform_configs__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(new.community_id, coalesce((
    select array_agg(distinct b.entitlement_id) from billing.entitlement_benefits b
    where b.community_id = new.community_id and b.platform_config_id = new.id), '{}'));
  return null;
end
$$;

drop trigger if exists _500_ledger on billing.platform_configs;
create trigger _500_ledger after update of platform on billing.platform_configs
  for each row when (old.platform is distinct from new.platform)
  execute function billing.tg_platform_configs__ledger();

-- ---- tiers ---------------------------------------------------------------------------

create table if not exists billing.tiers (
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
  unique (community_id, key),
  -- src/catalog.ts: a one_time tier is billed "one_time".
  constraint tiers_one_time_billed_one_time check (kind <> 'one_time' or billing_mode = 'one_time')
);
alter table billing.tiers enable row level security;
alter table billing.tiers force row level security;
drop policy if exists tenant on billing.tiers;
create policy tenant on billing.tiers
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.tiers;
create policy owner_access on billing.tiers to current_user using (true) with check (true);
grant select on billing.tiers to billing_api;

-- ---- plans ---------------------------------------------------------------------------

create table if not exists billing.plans (
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
create index if not exists plans_tier on billing.plans (community_id, tier_id);
alter table billing.plans enable row level security;
alter table billing.plans force row level security;
drop policy if exists tenant on billing.plans;
create policy tenant on billing.plans
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.plans;
create policy owner_access on billing.plans to current_user using (true) with check (true);
grant select on billing.plans to billing_api;

-- The length of one billing period of a plan's interval.
create or replace function billing.plan_interval(p_interval text) returns interval
  language sql immutable parallel safe
as $$ select case p_interval when 'month' then interval '1 month' when 'year' then interval '1 year' end $$;

-- The catalog validator's plan rules (src/domain/catalog/catalog-file.ts), held here
-- for every door: the plans of a tier billed one_time have no interval and no trial;
-- those of a recurring tier have an interval and no access_days. The rule spans plans
-- and tiers, so constraint triggers on both tables check it, at commit (a catalog
-- apply may update a tier before its plans).
create or replace function billing.check_tier_plans(p_community_id text, p_tier_id text) returns void
  language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_mode text;
begin
  select t.billing_mode into v_mode from billing.tiers t where t.community_id = p_community_id and t.id = p_tier_id;
  select p.* into v_plan from billing.plans p
  where p.community_id = p_community_id and p.tier_id = p_tier_id
    and case v_mode
      when 'one_time' then p.interval is not null or p.trial_days <> 0
      else p.interval is null or p.access_days is not null end
  order by p.id
  limit 1;
  if v_plan.id is null then return; end if;
  if v_mode = 'one_time' then
    raise exception using errcode = 'check_violation',
      message = 'Plan ' || v_plan.key || ' belongs to a tier billed one_time: it has no interval and no trial.',
      detail = case when v_plan.interval is not null then 'interval' else 'trial_days' end;
  end if;
  raise exception using errcode = 'check_violation',
    message = 'Plan ' || v_plan.key || ' belongs to a recurring tier: it has an interval (month or year) and no access_days.',
    detail = case when v_plan.interval is null then 'interval' else 'access_days' end;
end
$$;

create or replace function billing.tg_plans__tier_plan_rules() returns trigger
  language plpgsql
as $$
begin
  perform billing.check_tier_plans(new.community_id, new.tier_id);
  return null;
end
$$;

drop trigger if exists _100_one_time_rules on billing.plans;
drop trigger if exists _100_tier_plan_rules on billing.plans;
create constraint trigger _100_tier_plan_rules after insert or update of tier_id, interval, trial_days, access_days
  on billing.plans deferrable initially deferred for each row execute function billing.tg_plans__tier_plan_rules();

create or replace function billing.tg_tiers__tier_plan_rules() returns trigger
  language plpgsql
as $$
begin
  perform billing.check_tier_plans(new.community_id, new.id);
  return null;
end
$$;

drop trigger if exists _100_one_time_rules on billing.tiers;
drop trigger if exists _100_tier_plan_rules on billing.tiers;
create constraint trigger _100_tier_plan_rules after update of billing_mode on billing.tiers
  deferrable initially deferred for each row when (new.billing_mode is distinct from old.billing_mode)
  execute function billing.tg_tiers__tier_plan_rules();

-- Replaced by the above (they checked the one_time side only).
drop function if exists billing.tg_plans__one_time_rules();
drop function if exists billing.tg_tiers__one_time_rules();
drop function if exists billing.check_one_time_plans(text, text);

-- A plan moved to another tier: its subscribers' and buyers' sources now reach other
-- entitlements (reason tier_entitlements_changed, as for a link edit).
create or replace function billing.tg_plans__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_refresh_members(new.community_id, coalesce((
    select array_agg(distinct m.member_id) from (
      select s.member_id from billing.subscriptions s where s.community_id = new.community_id and s.plan_id = new.id
      union all
      select u.member_id from billing.purchases u where u.community_id = new.community_id and u.plan_id = new.id) m),
    '{}'), 'tier_entitlements_changed', null);
  return null;
end
$$;

drop trigger if exists _500_ledger on billing.plans;
create trigger _500_ledger after update of tier_id on billing.plans
  for each row when (old.tier_id is distinct from new.tier_id)
  execute function billing.tg_plans__ledger();

-- ---- entitlements and their benefits ---------------------------------------------------

create table if not exists billing.entitlements (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('ent'),
  key text not null,
  name text not null,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key)
);
alter table billing.entitlements enable row level security;
alter table billing.entitlements force row level security;
drop policy if exists tenant on billing.entitlements;
create policy tenant on billing.entitlements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.entitlements;
create policy owner_access on billing.entitlements to current_user using (true) with check (true);
grant select on billing.entitlements to billing_api;

create table if not exists billing.entitlement_benefits (
  community_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  platform_config_id text collate "C" not null,
  type text not null,
  value text not null,
  primary key (community_id, entitlement_id, platform_config_id, type, value),
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade,
  foreign key (community_id, platform_config_id) references billing.platform_configs on delete cascade
);
alter table billing.entitlement_benefits enable row level security;
alter table billing.entitlement_benefits force row level security;
drop policy if exists tenant on billing.entitlement_benefits;
create policy tenant on billing.entitlement_benefits
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.entitlement_benefits;
create policy owner_access on billing.entitlement_benefits to current_user using (true) with check (true);
grant select on billing.entitlement_benefits to billing_api;

-- Entitlement benefits changed: refresh every member whose row for those
-- entitlements is active (inactive rows carry no benefits).
create or replace function billing.tg_entitlement_benefits__ledger_insert() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from new_rows t group by t.community_id;
  return null;
end
$$;

create or replace function billing.tg_entitlement_benefits__ledger_delete() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from old_rows t group by t.community_id;
  return null;
end
$$;

create or replace function billing.tg_entitlement_benefits__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from (select community_id, entitlement_id from new_rows
        union all select community_id, entitlement_id from old_rows) t
  group by t.community_id;
  return null;
end
$$;

drop trigger if exists _500_ledger_insert on billing.entitlement_benefits;
drop trigger if exists _500_ledger_update on billing.entitlement_benefits;
drop trigger if exists _500_ledger_delete on billing.entitlement_benefits;
create trigger _500_ledger_insert after insert on billing.entitlement_benefits
  referencing new table as new_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger_insert();
create trigger _500_ledger_update after update on billing.entitlement_benefits
  referencing new table as new_rows old table as old_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger();
create trigger _500_ledger_delete after delete on billing.entitlement_benefits
  referencing old table as old_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger_delete();

-- ---- tier -> entitlement links ---------------------------------------------------------

create table if not exists billing.tier_entitlements (
  community_id text collate "C" not null,
  tier_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  primary key (community_id, tier_id, entitlement_id),
  foreign key (community_id, tier_id) references billing.tiers on delete cascade,
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade
);
create index if not exists tier_entitlements_ent on billing.tier_entitlements (community_id, entitlement_id);
alter table billing.tier_entitlements enable row level security;
alter table billing.tier_entitlements force row level security;
drop policy if exists tenant on billing.tier_entitlements;
create policy tenant on billing.tier_entitlements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.tier_entitlements;
create policy owner_access on billing.tier_entitlements to current_user using (true) with check (true);
grant select on billing.tier_entitlements to billing_api;

-- Tier entitlement links changed: refresh every member holding a source on the
-- tiers touched, once per statement (transition tables).
create or replace function billing.tg_tier_entitlements__ledger() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from (
      select community_id, tier_id from new_rows
      union all
      select community_id, tier_id from old_rows) t
    group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

-- Transition tables allow one event per trigger; an empty table stands in for the
-- missing side.
create or replace function billing.tg_tier_entitlements__ledger_insert() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from new_rows t group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

create or replace function billing.tg_tier_entitlements__ledger_delete() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from old_rows t group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

drop trigger if exists _500_ledger_insert on billing.tier_entitlements;
drop trigger if exists _500_ledger_update on billing.tier_entitlements;
drop trigger if exists _500_ledger_delete on billing.tier_entitlements;
create trigger _500_ledger_insert after insert on billing.tier_entitlements
  referencing new table as new_rows
  for each statement execute function billing.tg_tier_entitlements__ledger_insert();
create trigger _500_ledger_update after update on billing.tier_entitlements
  referencing new table as new_rows old table as old_rows
  for each statement execute function billing.tg_tier_entitlements__ledger();
create trigger _500_ledger_delete after delete on billing.tier_entitlements
  referencing old table as old_rows
  for each statement execute function billing.tg_tier_entitlements__ledger_delete();

-- ---- discount codes ----------------------------------------------------------------------

create table if not exists billing.discount_codes (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id uuid not null default gen_random_uuid(),
  code text not null,
  name text,
  value_type text not null check (value_type in ('percent', 'amount')),
  percent_off numeric check (percent_off > 0 and percent_off <= 100),
  amount_off_cents integer check (amount_off_cents > 0),
  currency text,
  duration text not null default 'once' check (duration in ('once', 'repeating', 'forever')),
  duration_months integer check (duration_months > 0),
  use_limit integer check (use_limit > 0),
  min_spend_cents integer check (min_spend_cents >= 0),
  max_spend_cents integer check (max_spend_cents >= 0),
  starts_at timestamptz,
  expires_at timestamptz,
  is_active boolean not null default true,
  archived_at timestamptz,
  tier_ids text[] not null default '{}',
  members jsonb not null default '[]',
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  -- The rules of src/catalog.ts (checkRules), for every door into the table:
  -- percent_off xor amount_off_cents, by value_type; an amount names its currency.
  constraint discount_codes_percent_value check (value_type <> 'percent' or (percent_off is not null and amount_off_cents is null)),
  constraint discount_codes_amount_value check (value_type <> 'amount' or (amount_off_cents is not null and currency is not null and percent_off is null)),
  -- duration_months exactly when the duration is repeating.
  constraint discount_codes_duration_months check ((duration = 'repeating') = (duration_months is not null)),
  constraint discount_codes_spend_range check (min_spend_cents <= max_spend_cents),
  constraint discount_codes_window check (starts_at < expires_at)
);
create unique index if not exists discount_codes_code on billing.discount_codes (community_id, lower(code));
alter table billing.discount_codes enable row level security;
alter table billing.discount_codes force row level security;
drop policy if exists tenant on billing.discount_codes;
create policy tenant on billing.discount_codes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.discount_codes;
create policy owner_access on billing.discount_codes to current_user using (true) with check (true);
grant select on billing.discount_codes to billing_api;
-- Its JSON (with redemption counts) and the list operation are in 80-checkout.sql,
-- beside billing.discount_redemptions.

-- ---- plans API -----------------------------------------------------------------------------

-- Plans: tiers with their nested billing plans.

create or replace function billing.tier_json(p_tier billing.tiers) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'id', p_tier.id, 'name', p_tier.name, 'description', p_tier.description,
    'kind', p_tier.kind, 'billing_mode', p_tier.billing_mode, 'rank', p_tier.rank,
    'features', to_jsonb(p_tier.features), 'perks', p_tier.perks,
    'plans', coalesce((
      select jsonb_agg(jsonb_build_object('id', p.id, 'name', p.name, 'amount_cents', p.amount_cents,
        'currency', p.currency, 'interval', p.interval, 'trial_days', p.trial_days,
        'access_days', p.access_days) order by p.amount_cents, p.id)
      from billing.plans p
      where p.community_id = p_tier.community_id and p.tier_id = p_tier.id and p.active), '[]'))
$$;

create or replace function billing_api.plans_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('plans:read');
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.tier_json(t) order by t.rank, t.id)
    from billing.tiers t where t.active), '[]'));
end
$$;

create or replace function billing_api.plans_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_tier billing.tiers;
begin
  perform billing.require_scope('plans:read');
  select * into v_tier from billing.tiers t where t.id = p_args->>'tierId';
  if v_tier.id is null then
    perform billing.raise('BL404', 'No tier ' || (p_args->>'tierId') || '.');
  end if;
  return billing.tier_json(v_tier);
end
$$;

-- The catalog as a `billing catalog apply` file (src/domain/catalog/catalog-file.ts):
-- applied to any community it recreates this one's catalog, keys as stored: payment
-- provider and its settings, dunning, platforms, entitlements with their benefits,
-- tiers (inactive ones too) with their entitlements and plans, and the discount codes
-- that are not archived. Secrets are never in it (Stripe keys live encrypted in
-- billing_private.payment_secrets, which this does not read). Fields at their null are
-- left out, as a file would leave them. The dashboard's catalog page shows it
-- (get_catalog_file, a dashboard operation); test/cli/catalog-roundtrip.test.ts applies
-- an export to an empty community and exports that again.
create or replace function billing_api.catalog_file(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_out jsonb;
begin
  perform billing.require_scope('plans:read');
  perform billing.require_scope('discounts:read');
  select jsonb_strip_nulls(jsonb_build_object(
    'payment_provider', case when c.payment_provider is not null
      then c.payment_config || jsonb_build_object('type', c.payment_provider) end,
    'dunning', case when c.dunning <> '{}' then c.dunning end,
    'platforms', (select jsonb_agg(jsonb_build_object('key', pc.key, 'platform', pc.platform, 'name', pc.name,
        'settings', case when pc.settings <> '{}' then pc.settings end) order by pc.key)
      from billing.platform_configs pc where pc.community_id = v_community),
    'entitlements', (select jsonb_agg(jsonb_build_object('key', e.key, 'name', e.name,
        'benefits', (select jsonb_agg(jsonb_build_object('platform', pc.key, 'type', b.type, 'value', b.value)
            order by pc.key, b.type, b.value)
          from billing.entitlement_benefits b
          join billing.platform_configs pc on pc.community_id = b.community_id and pc.id = b.platform_config_id
          where b.community_id = e.community_id and b.entitlement_id = e.id)) order by e.key)
      from billing.entitlements e where e.community_id = v_community),
    'tiers', (select jsonb_agg(jsonb_build_object('key', t.key, 'name', t.name, 'description', t.description,
        'kind', t.kind, 'billing_mode', t.billing_mode, 'rank', t.rank, 'active', t.active,
        'features', case when cardinality(t.features) > 0 then to_jsonb(t.features) end,
        'perks', case when t.perks <> '[]' then t.perks end,
        'entitlements', (select jsonb_agg(e.key order by e.key)
          from billing.tier_entitlements te
          join billing.entitlements e on e.community_id = te.community_id and e.id = te.entitlement_id
          where te.community_id = t.community_id and te.tier_id = t.id),
        'plans', (select jsonb_agg(jsonb_build_object('key', p.key, 'name', p.name, 'amount_cents', p.amount_cents,
            'currency', p.currency, 'interval', p.interval, 'trial_days', p.trial_days, 'access_days', p.access_days,
            'active', p.active, 'stripe_price_id', p.stripe_price_id) order by p.key)
          from billing.plans p where p.community_id = t.community_id and p.tier_id = t.id))
        order by t.rank, t.key)
      from billing.tiers t where t.community_id = v_community),
    'discounts', (select jsonb_agg(jsonb_build_object('code', d.code, 'name', d.name, 'value_type', d.value_type,
        'percent_off', d.percent_off, 'amount_off_cents', d.amount_off_cents, 'currency', d.currency,
        'duration', d.duration, 'duration_months', d.duration_months, 'use_limit', d.use_limit,
        'min_spend_cents', d.min_spend_cents, 'max_spend_cents', d.max_spend_cents,
        'starts_at', billing.iso(d.starts_at), 'expires_at', billing.iso(d.expires_at), 'is_active', d.is_active,
        'tiers', (select jsonb_agg(t.key order by t.key) from billing.tiers t
          where t.community_id = d.community_id and t.id = any (d.tier_ids)),
        'members', case when d.members <> '[]' then d.members end) order by lower(d.code))
      from billing.discount_codes d where d.community_id = v_community and d.archived_at is null)))
  into v_out
  from billing.communities c where c.id = v_community;
  return coalesce(v_out, '{}');
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.tier_json(billing.tiers) to billing_api;
grant execute on function billing_api.plans_list(jsonb) to billing_api;
grant execute on function billing_api.plans_get(jsonb) to billing_api;
grant execute on function billing_api.catalog_file(jsonb) to billing_api;
--! EndIncluded 20-catalog.sql
--! Included 98-dispatch.sql
-- Operations run by name without dynamic SQL. billing.api_call, api_call_deferred and
-- api_call_leased (10-tenancy.sql) run billing_private.op_dispatch(op, args): a CASE
-- over every billing_api function taking (p_args jsonb) and returning jsonb, written by
-- the block below from the catalog when this file is applied. It is the last fixture,
-- so every operation exists then. A static call is planned once per session, where
-- EXECUTE parsed and planned 'select billing_api.x($1)' on every request: about 40 us
-- of the entitlement check's 220 us in the database (bench/RESULTS.md, issue 17).
--
-- An operation this CASE does not name yet (added or changed by a later migration
-- that did not include this file again) still runs, through op_dispatch_dynamic's
-- EXECUTE. test/db/op-dispatch.test.ts fails until this file is included again, so
-- a migration that adds an operation includes `--!include 98-dispatch.sql` too.
-- Invoker rights: the operation runs as the caller (billing_api), as before.

create or replace function billing_private.op_dispatch_dynamic(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_out jsonb;
begin
  execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
  return v_out;
end
$$;

do $do$
declare
  v_cases text;
begin
  select string_agg(format('    when %L then return billing_api.%I(p_args);', p.proname, p.proname), E'\n' order by p.proname)
  into v_cases
  from pg_proc p
  join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'billing_api' and p.prorettype = 'jsonb'::regtype
    and pg_get_function_identity_arguments(p.oid) = 'p_args jsonb';
  execute format($f$
create or replace function billing_private.op_dispatch(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $b$
begin
  case p_op
%s
    else
      return billing_private.op_dispatch_dynamic(p_op, p_args);
  end case;
end
$b$$f$, coalesce(v_cases, '    when null then return null;'));
end
$do$;

grant execute on function billing_private.op_dispatch_dynamic(text, jsonb) to billing_api;
grant execute on function billing_private.op_dispatch(text, jsonb) to billing_api;
--! EndIncluded 98-dispatch.sql
