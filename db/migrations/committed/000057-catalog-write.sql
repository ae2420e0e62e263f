--! Previous: sha1:a63d5e0ed782dc6df402a0716a3d5691ef2c8ef0
--! Hash: sha1:f5e1a1c24a46dbc162d12fdf439feb7709ef1539
--! Message: catalog write

--! split: 1-current.sql
-- Enter migration here

--! split: 2-catalog-write.sql
-- Issue 31 item 1: the catalog from the dashboard and the API (docs/decisions/
-- catalog-write-rules-in-sql.md, catalog-write-scope.md). The scope catalog:write; the
-- catalog's write rules once, in SQL (functions/20-catalog-write.sql: one put per
-- object, called by `billing catalog apply`, the /v1/catalog operations and the
-- dashboard); billing_writer, which owns the operations, writes the catalog tables.

-- ---- grants (tables/20-catalog.sql) ----
grant select, insert, update on billing.tiers to billing_writer;
grant select, insert, update on billing.plans to billing_writer;
grant select, insert, update on billing.entitlements to billing_writer;
grant select, insert, delete on billing.entitlement_benefits to billing_writer;
grant select, insert, delete on billing.tier_entitlements to billing_writer;
grant select, insert, update on billing.discount_codes to billing_writer;

-- ---- the scope (functions/15-operators.sql) ----
create or replace function billing_private.api_key_scopes() returns text[]
  language sql immutable parallel safe
as $$
  select array['subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
    'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
    'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write', 'audit:read', 'members:export', 'members:erase',
    'catalog:write']
$$;

--! Included functions/20-catalog-write.sql
-- functions/20-catalog-write.sql, safely replaced (create or replace; a migration may
-- --!include it): the catalog's write rules, once (issue 31 item 1;
-- docs/decisions/catalog-write-rules-in-sql.md). Also: tables/20-catalog.sql and
-- functions/20-catalog.sql.
--
-- Every door that writes a tier, a plan, an entitlement with its benefits or a discount
-- code goes through one "put" function per object: `billing catalog apply`
-- (src/domain/catalog/catalog-file.ts, as the owner), the API's operations under
-- /v1/catalog (scope catalog:write) and the dashboard's Catalog page (the same
-- operations, with the operator's session). A put takes the whole object as JSON
-- (absent optional fields take their defaults, as in a catalog file), checks it, and
-- creates it or updates it by its key, writing only what differs (an unchanged object
-- writes no row, so no trigger fires). A problem raises BL422 (invalid_request) with
-- the field in the detail (the problem's param) and 'field: what is wrong' as the
-- message; the file prefixes the field with its place in the file.
--
-- The API's operations (billing_api.catalog_*, owned by billing_writer, which holds the
-- catalog tables' writes under the tenant policies) merge a PATCH into the stored
-- object and call the put, so a field an operation does not name keeps its value.
-- Objects that subscribers, buyers or redemptions may reference are archived, never
-- deleted: a tier or a plan becomes inactive (no new checkout; what was sold stays),
-- a discount code is archived (no longer redeemable, left out of the catalog file).

-- ---- field readers: each returns the value or raises the field's problem ---------------

create or replace function billing_private.catalog_problem(p_field text, p_problem text) returns void
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  raise exception using errcode = 'BL422', message = p_field || ': ' || p_problem, detail = p_field;
end
$$;

-- Text: absent or null is null (or 'required'); trimmed; 1 to p_max characters.
create or replace function billing_private.catalog_text(p jsonb, p_field text, p_max integer, p_required boolean,
  p_at text default null) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_at text := coalesce(p_at, p_field);
  v text;
begin
  if p is null or jsonb_typeof(p->p_field) is null or jsonb_typeof(p->p_field) = 'null' then
    if p_required then perform billing_private.catalog_problem(v_at, 'required'); end if;
    return null;
  end if;
  if jsonb_typeof(p->p_field) <> 'string' then
    perform billing_private.catalog_problem(v_at, 'expected a string');
  end if;
  v := btrim(p->>p_field, E' \t\n\r');
  if v = '' then
    perform billing_private.catalog_problem(v_at, 'expected a non-empty string');
  end if;
  if length(v) > p_max then
    perform billing_private.catalog_problem(v_at, format('expected at most %s characters', p_max));
  end if;
  return v;
end
$$;

-- A key: letters, digits, "_", ".", ":" or "-", at most 100 characters (required).
create or replace function billing_private.catalog_key(p jsonb, p_field text, p_at text default null) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if jsonb_typeof(p->p_field) is distinct from 'string' or p->>p_field !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' then
    if jsonb_typeof(p->p_field) is null then perform billing_private.catalog_problem(coalesce(p_at, p_field), 'required'); end if;
    perform billing_private.catalog_problem(coalesce(p_at, p_field),
      'expected a key: letters, digits, "_", ".", ":" or "-", at most 100 characters');
  end if;
  return p->>p_field;
end
$$;

-- An integer from p_min to p_max: absent or null is null.
create or replace function billing_private.catalog_int(p jsonb, p_field text, p_min bigint, p_max bigint) returns integer
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_expected text := case p_min when 0 then 'expected a non-negative integer' when 1 then 'expected a positive integer'
    else 'expected an integer' end;
  v numeric;
begin
  if jsonb_typeof(p->p_field) is null or jsonb_typeof(p->p_field) = 'null' then return null; end if;
  if jsonb_typeof(p->p_field) <> 'number' then perform billing_private.catalog_problem(p_field, v_expected); end if;
  v := (p->p_field)::numeric;
  if v <> trunc(v) or v < p_min or v > p_max then perform billing_private.catalog_problem(p_field, v_expected); end if;
  return v::integer;
end
$$;

create or replace function billing_private.catalog_bool(p jsonb, p_field text) returns boolean
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if jsonb_typeof(p->p_field) is null or jsonb_typeof(p->p_field) = 'null' then return null; end if;
  if jsonb_typeof(p->p_field) <> 'boolean' then perform billing_private.catalog_problem(p_field, 'expected true or false'); end if;
  return (p->p_field)::boolean;
end
$$;

-- One of p_values: absent or null is null.
create or replace function billing_private.catalog_enum(p jsonb, p_field text, p_values text[]) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if jsonb_typeof(p->p_field) is null or jsonb_typeof(p->p_field) = 'null' then return null; end if;
  if jsonb_typeof(p->p_field) <> 'string' or not (p->>p_field = any (p_values)) then
    perform billing_private.catalog_problem(p_field, 'expected one of ' ||
      (select string_agg('"' || v || '"', ', ') from unnest(p_values) v));
  end if;
  return p->>p_field;
end
$$;

-- An array (absent or null: empty).
create or replace function billing_private.catalog_array(p jsonb, p_field text) returns jsonb
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if jsonb_typeof(p->p_field) is null or jsonb_typeof(p->p_field) = 'null' then return '[]'; end if;
  if jsonb_typeof(p->p_field) <> 'array' then perform billing_private.catalog_problem(p_field, 'expected an array'); end if;
  return p->p_field;
end
$$;

-- An object's fields are among p_known.
create or replace function billing_private.catalog_known(p jsonb, p_known text[], p_at text) returns void
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_unknown text;
begin
  if jsonb_typeof(p) is distinct from 'object' then
    perform billing_private.catalog_problem(p_at, 'expected an object');
  end if;
  select k into v_unknown from jsonb_object_keys(p) k where not (k = any (p_known)) order by k limit 1;
  if v_unknown is not null then
    perform billing_private.catalog_problem(concat_ws('.', nullif(p_at, ''), v_unknown), 'unknown field');
  end if;
end
$$;

-- What a put reports: created, updated (with the fields that changed) or unchanged.
create or replace function billing_private.catalog_changed_fields(p_old jsonb, p_new jsonb) returns text[]
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(array_agg(k order by o), '{}') from jsonb_object_keys(p_new) with ordinality as j(k, o)
  where p_old->k is distinct from p_new->k
$$;

-- ---- the objects as the API answers them --------------------------------------------------

create or replace function billing.catalog_plan_json(p billing.plans) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('id', p.id, 'key', p.key, 'tier_id', p.tier_id, 'name', p.name,
    'amount_cents', p.amount_cents, 'currency', p.currency, 'interval', p.interval, 'trial_days', p.trial_days,
    'access_days', p.access_days, 'active', p.active, 'stripe_price_id', p.stripe_price_id,
    'created_at', billing.iso(p.created_at))
$$;

create or replace function billing.catalog_tier_json(t billing.tiers) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('id', t.id, 'key', t.key, 'name', t.name, 'description', t.description,
    'kind', t.kind, 'billing_mode', t.billing_mode, 'rank', t.rank, 'active', t.active,
    'features', to_jsonb(t.features), 'perks', t.perks,
    'entitlements', coalesce((select jsonb_agg(e.key order by e.key) from billing.tier_entitlements te
      join billing.entitlements e on e.community_id = te.community_id and e.id = te.entitlement_id
      where te.community_id = t.community_id and te.tier_id = t.id), '[]'),
    'plans', coalesce((select jsonb_agg(billing.catalog_plan_json(p) order by p.key) from billing.plans p
      where p.community_id = t.community_id and p.tier_id = t.id), '[]'),
    'created_at', billing.iso(t.created_at), 'updated_at', billing.iso(t.updated_at))
$$;

create or replace function billing.catalog_entitlement_json(e billing.entitlements) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('id', e.id, 'key', e.key, 'name', e.name,
    'benefits', coalesce((select jsonb_agg(jsonb_build_object('platform', pc.key, 'type', b.type, 'value', b.value)
        order by pc.key, b.type, b.value)
      from billing.entitlement_benefits b
      join billing.platform_configs pc on pc.community_id = b.community_id and pc.id = b.platform_config_id
      where b.community_id = e.community_id and b.entitlement_id = e.id), '[]'),
    'created_at', billing.iso(e.created_at))
$$;

-- ---- the puts ---------------------------------------------------------------------------

-- A tier: key, name, description, kind, billing_mode (by kind when absent), rank,
-- active, features, perks, entitlements (keys; the tier's links become exactly these).
-- The plans' rule for the tier's billing mode is the constraint trigger's, at commit
-- (a catalog file may change a tier before its plans); the API checks it at once.
create or replace function billing.catalog_tier_put(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text := billing.current_community_id();
  v_key text;
  v_name text;
  v_description text;
  v_kind text;
  v_mode text;
  v_rank integer;
  v_active boolean;
  v_features text[] := '{}';
  v_perks jsonb := '[]';
  v_links text[] := '{}';
  v_item jsonb;
  v_i integer;
  v_id text;
  v_old billing.tiers;
  v_new jsonb;
  v_fields text[] := '{}';
  v_action text := 'unchanged';
begin
  perform billing_private.catalog_known(p, array['key', 'name', 'description', 'kind', 'billing_mode', 'rank', 'active',
    'features', 'perks', 'entitlements'], '');
  v_key := billing_private.catalog_key(p, 'key');
  v_name := billing_private.catalog_text(p, 'name', 200, true);
  v_description := billing_private.catalog_text(p, 'description', 2000, false);
  v_kind := coalesce(billing_private.catalog_enum(p, 'kind', array['subscription', 'one_time']), 'subscription');
  v_mode := coalesce(billing_private.catalog_enum(p, 'billing_mode', array['recurring', 'one_time']),
    case v_kind when 'one_time' then 'one_time' else 'recurring' end);
  if v_kind = 'one_time' and v_mode <> 'one_time' then
    perform billing_private.catalog_problem('billing_mode', 'a one_time tier is billed "one_time"');
  end if;
  v_rank := coalesce(billing_private.catalog_int(p, 'rank', -2147483648, 2147483647), 0);
  v_active := coalesce(billing_private.catalog_bool(p, 'active'), true);
  v_i := 0;
  for v_item in select x from jsonb_array_elements(billing_private.catalog_array(p, 'features')) x loop
    v_features := v_features || billing_private.catalog_text(jsonb_build_object('f', v_item), 'f', 500, true, format('features[%s]', v_i));
    v_i := v_i + 1;
  end loop;
  v_i := 0;
  for v_item in select x from jsonb_array_elements(billing_private.catalog_array(p, 'perks')) x loop
    perform billing_private.catalog_known(v_item, array['title', 'detail'], format('perks[%s]', v_i));
    v_perks := v_perks || jsonb_build_array(jsonb_build_object(
      'title', billing_private.catalog_text(v_item, 'title', 200, true, format('perks[%s].title', v_i)),
      'detail', billing_private.catalog_text(v_item, 'detail', 1000, false, format('perks[%s].detail', v_i))));
    v_i := v_i + 1;
  end loop;
  v_i := 0;
  for v_item in select x from jsonb_array_elements(billing_private.catalog_array(p, 'entitlements')) x loop
    select e.id into v_id from billing.entitlements e where e.community_id = v_c and e.key = v_item #>> '{}';
    if v_id is null or jsonb_typeof(v_item) <> 'string' then
      perform billing_private.catalog_problem(format('entitlements[%s]', v_i),
        format('unknown entitlement "%s" (no entitlement of the community has this key)', left(v_item #>> '{}', 100)));
    end if;
    if not v_id = any (v_links) then v_links := v_links || v_id; end if;
    v_id := null;
    v_i := v_i + 1;
  end loop;

  v_new := jsonb_build_object('name', v_name, 'description', v_description, 'kind', v_kind, 'billing_mode', v_mode,
    'rank', v_rank, 'active', v_active, 'features', to_jsonb(v_features), 'perks', v_perks);
  select * into v_old from billing.tiers t where t.community_id = v_c and t.key = v_key for update;
  if v_old.id is null then
    insert into billing.tiers (community_id, key, name, description, kind, billing_mode, rank, active, features, perks)
    values (v_c, v_key, v_name, v_description, v_kind, v_mode, v_rank, v_active, v_features, v_perks)
    returning id into v_id;
    v_action := 'created';
  else
    v_id := v_old.id;
    v_fields := billing_private.catalog_changed_fields(jsonb_build_object('name', v_old.name, 'description', v_old.description,
      'kind', v_old.kind, 'billing_mode', v_old.billing_mode, 'rank', v_old.rank, 'active', v_old.active,
      'features', to_jsonb(v_old.features), 'perks', v_old.perks), v_new);
    if cardinality(v_fields) > 0 then
      update billing.tiers t set name = v_name, description = v_description, kind = v_kind, billing_mode = v_mode,
        rank = v_rank, active = v_active, features = v_features, perks = v_perks, updated_at = now()
      where t.community_id = v_c and t.id = v_id;
      v_action := 'updated';
    end if;
  end if;
  -- The links become exactly the listed ones; no statement runs when nothing differs
  -- (the ledger's statement triggers fire even for zero rows).
  if exists (select 1 from billing.tier_entitlements te where te.community_id = v_c and te.tier_id = v_id
             and not te.entitlement_id = any (v_links)) then
    delete from billing.tier_entitlements te where te.community_id = v_c and te.tier_id = v_id
      and not te.entitlement_id = any (v_links);
    v_fields := array_append(array_remove(v_fields, 'entitlements'), 'entitlements');
  end if;
  if exists (select 1 from unnest(v_links) l where not exists (select 1 from billing.tier_entitlements te
             where te.community_id = v_c and te.tier_id = v_id and te.entitlement_id = l)) then
    insert into billing.tier_entitlements (community_id, tier_id, entitlement_id)
    select v_c, v_id, l from unnest(v_links) l where not exists (select 1 from billing.tier_entitlements te
      where te.community_id = v_c and te.tier_id = v_id and te.entitlement_id = l);
    v_fields := array_append(array_remove(v_fields, 'entitlements'), 'entitlements');
  end if;
  if v_action = 'unchanged' and cardinality(v_fields) > 0 then v_action := 'updated'; end if;
  return jsonb_build_object('id', v_id, 'key', v_key, 'action', v_action,
    'fields', case when v_action = 'updated' then to_jsonb(v_fields) else '[]' end);
end
$$;

-- How many subscribers a new price of a plan concerns: the subscriptions of the plan,
-- not cancelled, that would pay another price than new buyers (they keep theirs until
-- `billing plans migrate` moves them with notice), and how many of them already have a
-- migration pending. billing.plan_price_subscribers says the same after the change.
create or replace function billing.plan_price_change_preview(p_community_id text, p_plan_id text, p_amount_cents integer)
  returns jsonb language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('subscriptions', count(*)::integer,
    'pending_migration', count(*) filter (where s.price_migration_id is not null)::integer)
  from billing.subscriptions s
  where s.community_id = p_community_id and s.plan_id = p_plan_id and s.status <> 'cancelled'
    and s.price_cents <> p_amount_cents
$$;

-- A plan: key, tier_id, name, amount_cents, currency, interval, trial_days,
-- access_days, active, stripe_price_id (absent: kept). The plan's shape follows its
-- tier's billing mode. A new price is for new buyers; the answer's price_change names
-- how many existing subscribers keep their price (null when the price is unchanged).
create or replace function billing.catalog_plan_put(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text := billing.current_community_id();
  v_key text;
  v_tier billing.tiers;
  v_name text;
  v_amount integer;
  v_currency text;
  v_interval text;
  v_trial integer;
  v_access integer;
  v_active boolean;
  v_stripe text;
  v_old billing.plans;
  v_id text;
  v_fields text[] := '{}';
  v_action text := 'unchanged';
  v_change jsonb;
begin
  perform billing_private.catalog_known(p, array['key', 'tier_id', 'name', 'amount_cents', 'currency', 'interval',
    'trial_days', 'access_days', 'active', 'stripe_price_id'], '');
  v_key := billing_private.catalog_key(p, 'key');
  if jsonb_typeof(p->'tier_id') is distinct from 'string' then
    perform billing_private.catalog_problem('tier_id', 'required');
  end if;
  select * into v_tier from billing.tiers t where t.community_id = v_c and t.id = p->>'tier_id';
  if v_tier.id is null then
    perform billing_private.catalog_problem('tier_id', format('no tier %s in this community', left(p->>'tier_id', 100)));
  end if;
  v_name := billing_private.catalog_text(p, 'name', 200, false);
  if jsonb_typeof(p->'amount_cents') is null then perform billing_private.catalog_problem('amount_cents', 'required'); end if;
  v_amount := billing_private.catalog_int(p, 'amount_cents', 0, 2147483647);
  if v_amount is null then perform billing_private.catalog_problem('amount_cents', 'expected a non-negative integer'); end if;
  if jsonb_typeof(p->'currency') is null then perform billing_private.catalog_problem('currency', 'required'); end if;
  if jsonb_typeof(p->'currency') <> 'string' or p->>'currency' !~ '^[a-z]{3}$' then
    perform billing_private.catalog_problem('currency', 'expected a lowercase three-letter currency code, e.g. "usd"');
  end if;
  v_currency := p->>'currency';
  v_interval := billing_private.catalog_enum(p, 'interval', array['month', 'year']);
  v_trial := coalesce(billing_private.catalog_int(p, 'trial_days', 0, 2147483647), 0);
  v_access := billing_private.catalog_int(p, 'access_days', 1, 2147483647);
  v_active := coalesce(billing_private.catalog_bool(p, 'active'), true);
  v_stripe := billing_private.catalog_text(p, 'stripe_price_id', 200, false);
  if v_tier.billing_mode = 'recurring' then
    if v_interval is null then perform billing_private.catalog_problem('interval', 'expected "month" or "year" for a recurring tier'); end if;
    if v_access is not null then perform billing_private.catalog_problem('access_days', 'only one-time plans have access_days'); end if;
  else
    if v_interval is not null then perform billing_private.catalog_problem('interval', 'expected null for a one_time tier'); end if;
    if v_trial <> 0 then perform billing_private.catalog_problem('trial_days', 'one-time plans have no trial'); end if;
  end if;

  select * into v_old from billing.plans pl where pl.community_id = v_c and pl.key = v_key for update;
  if v_old.id is null then
    insert into billing.plans (community_id, key, tier_id, name, amount_cents, currency, interval, trial_days, access_days, active, stripe_price_id)
    values (v_c, v_key, v_tier.id, v_name, v_amount, v_currency, v_interval, v_trial, v_access, v_active, v_stripe)
    returning id into v_id;
    v_action := 'created';
  else
    v_id := v_old.id;
    v_fields := billing_private.catalog_changed_fields(
      jsonb_build_object('tier_id', v_old.tier_id, 'name', v_old.name, 'amount_cents', v_old.amount_cents,
        'currency', v_old.currency, 'interval', v_old.interval, 'trial_days', v_old.trial_days,
        'access_days', v_old.access_days, 'active', v_old.active)
        || case when p ? 'stripe_price_id' then jsonb_build_object('stripe_price_id', v_old.stripe_price_id) else '{}' end,
      jsonb_build_object('tier_id', v_tier.id, 'name', v_name, 'amount_cents', v_amount, 'currency', v_currency,
        'interval', v_interval, 'trial_days', v_trial, 'access_days', v_access, 'active', v_active)
        || case when p ? 'stripe_price_id' then jsonb_build_object('stripe_price_id', v_stripe) else '{}' end);
    if cardinality(v_fields) > 0 then
      update billing.plans pl set tier_id = v_tier.id, name = v_name, amount_cents = v_amount, currency = v_currency,
        interval = v_interval, trial_days = v_trial, access_days = v_access, active = v_active,
        stripe_price_id = case when p ? 'stripe_price_id' then v_stripe else pl.stripe_price_id end
      where pl.community_id = v_c and pl.id = v_id;
      v_action := 'updated';
      if v_old.amount_cents <> v_amount then
        v_change := jsonb_build_object('from_cents', v_old.amount_cents, 'to_cents', v_amount, 'currency', v_currency)
          || billing.plan_price_subscribers(v_c, v_id, 1000);
      end if;
    end if;
  end if;
  return jsonb_build_object('id', v_id, 'key', v_key, 'action', v_action,
    'fields', to_jsonb(v_fields), 'price_change', v_change);
end
$$;

-- Why a benefit cannot be carried out on its platform, or null (the type is one the
-- platform carries out, billing.benefit_type_problem; the value is what the call needs:
-- a Discord role or channel id, a Telegram chat id or @channelname). Returns
-- 'field: problem'.
create or replace function billing.benefit_problem(p_platform text, p_type text, p_value text) returns text
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$
  select case
    when billing.benefit_type_problem(p_platform, p_type) is not null then
      format('type: a %s connection cannot carry out a benefit of type "%s" (it can: %s)', p_platform, left(p_type, 100),
        case p_platform when 'discord' then '"role", "channel"' when 'telegram' then '"chat"' else 'none' end)
    when p_platform = 'discord' and p_value !~ '^[1-9][0-9]{0,19}$' then
      format('value: expected the Discord %s id (a snowflake: digits, e.g. "1234567890123456789")', p_type)
    when p_platform = 'telegram' and p_value !~ '^(-?[1-9][0-9]{0,15}|@[A-Za-z][A-Za-z0-9_]{4,31})$' then
      'value: expected the Telegram chat id (an integer, e.g. "-1001234567890") or a public @channelname'
  end
$$;

-- An entitlement: key, name, benefits ([{platform: a connection's key, type, value}];
-- they become exactly these).
create or replace function billing.catalog_entitlement_put(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text := billing.current_community_id();
  v_key text;
  v_name text;
  v_item jsonb;
  v_i integer := 0;
  v_at text;
  v_pc billing.platform_configs;
  v_type text;
  v_value text;
  v_problem text;
  v_benefits jsonb := '[]';
  v_old billing.entitlements;
  v_id text;
  v_fields text[] := '{}';
  v_action text := 'unchanged';
begin
  perform billing_private.catalog_known(p, array['key', 'name', 'benefits'], '');
  v_key := billing_private.catalog_key(p, 'key');
  v_name := billing_private.catalog_text(p, 'name', 200, true);
  for v_item in select x from jsonb_array_elements(billing_private.catalog_array(p, 'benefits')) x loop
    v_at := format('benefits[%s]', v_i);
    perform billing_private.catalog_known(v_item, array['platform', 'type', 'value'], v_at);
    perform billing_private.catalog_key(v_item, 'platform', v_at || '.platform');
    v_type := billing_private.catalog_text(v_item, 'type', 100, true, v_at || '.type');
    v_value := billing_private.catalog_text(v_item, 'value', 500, true, v_at || '.value');
    select * into v_pc from billing.platform_configs pc where pc.community_id = v_c and pc.key = v_item->>'platform';
    if v_pc.id is null then
      perform billing_private.catalog_problem(v_at || '.platform',
        format('unknown platform "%s" (no platform connection of the community has this key)', v_item->>'platform'));
    end if;
    v_problem := billing.benefit_problem(v_pc.platform, v_type, v_value);
    if v_problem is not null then
      perform billing_private.catalog_problem(v_at || '.' || split_part(v_problem, ': ', 1), substr(v_problem, strpos(v_problem, ': ') + 2));
    end if;
    v_benefits := v_benefits || jsonb_build_array(jsonb_build_object('platform_config_id', v_pc.id, 'type', v_type, 'value', v_value));
    v_pc := null;
    v_i := v_i + 1;
  end loop;

  select * into v_old from billing.entitlements e where e.community_id = v_c and e.key = v_key for update;
  if v_old.id is null then
    insert into billing.entitlements (community_id, key, name) values (v_c, v_key, v_name) returning id into v_id;
    v_action := 'created';
  else
    v_id := v_old.id;
    if v_old.name is distinct from v_name then
      update billing.entitlements e set name = v_name where e.community_id = v_c and e.id = v_id;
      v_fields := array['name'];
    end if;
  end if;
  if exists (select 1 from billing.entitlement_benefits b where b.community_id = v_c and b.entitlement_id = v_id
             and not exists (select 1 from jsonb_to_recordset(v_benefits) as w(platform_config_id text, type text, value text)
                             where w.platform_config_id = b.platform_config_id and w.type = b.type and w.value = b.value)) then
    delete from billing.entitlement_benefits b where b.community_id = v_c and b.entitlement_id = v_id
      and not exists (select 1 from jsonb_to_recordset(v_benefits) as w(platform_config_id text, type text, value text)
                      where w.platform_config_id = b.platform_config_id and w.type = b.type and w.value = b.value);
    v_fields := array_append(array_remove(v_fields, 'benefits'), 'benefits');
  end if;
  if exists (select 1 from jsonb_to_recordset(v_benefits) as w(platform_config_id text, type text, value text)
             where not exists (select 1 from billing.entitlement_benefits b where b.community_id = v_c and b.entitlement_id = v_id
                               and b.platform_config_id = w.platform_config_id and b.type = w.type and b.value = w.value)) then
    insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value)
    select distinct v_c, v_id, w.platform_config_id, w.type, w.value
    from jsonb_to_recordset(v_benefits) as w(platform_config_id text, type text, value text)
    where not exists (select 1 from billing.entitlement_benefits b where b.community_id = v_c and b.entitlement_id = v_id
                      and b.platform_config_id = w.platform_config_id and b.type = w.type and b.value = w.value);
    v_fields := array_append(array_remove(v_fields, 'benefits'), 'benefits');
  end if;
  if v_action = 'unchanged' and cardinality(v_fields) > 0 then v_action := 'updated'; end if;
  return jsonb_build_object('id', v_id, 'key', v_key, 'action', v_action,
    'fields', case when v_action = 'updated' then to_jsonb(v_fields) else '[]' end);
end
$$;

-- A discount code: code (matched case-insensitively), name, value_type with
-- percent_off or amount_off_cents and currency, duration (duration_months when
-- repeating), use_limit, min_spend_cents, max_spend_cents, starts_at, expires_at,
-- is_active, tiers (keys), members ([{platform, platform_uid, username}]).
create or replace function billing.catalog_discount_put(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text := billing.current_community_id();
  v_code text;
  v_name text;
  v_type text;
  v_percent numeric;
  v_amount integer;
  v_currency text;
  v_duration text;
  v_months integer;
  v_limit integer;
  v_min integer;
  v_max integer;
  v_starts timestamptz;
  v_expires timestamptz;
  v_active boolean;
  v_tiers text[] := '{}';
  v_members jsonb := '[]';
  v_item jsonb;
  v_i integer := 0;
  v_at text;
  v_id text;
  v_field text;
  v_old billing.discount_codes;
  v_fields text[] := '{}';
  v_action text := 'unchanged';
begin
  perform billing_private.catalog_known(p, array['code', 'name', 'value_type', 'percent_off', 'amount_off_cents', 'currency',
    'duration', 'duration_months', 'use_limit', 'min_spend_cents', 'max_spend_cents', 'starts_at', 'expires_at', 'is_active',
    'tiers', 'members'], '');
  if jsonb_typeof(p->'code') is null then perform billing_private.catalog_problem('code', 'required'); end if;
  if jsonb_typeof(p->'code') <> 'string' or p->>'code' !~ '^[A-Za-z0-9_-]{1,64}$' then
    perform billing_private.catalog_problem('code', 'expected 1 to 64 letters, digits, "_" or "-"');
  end if;
  v_code := p->>'code';
  v_name := billing_private.catalog_text(p, 'name', 200, false);
  if jsonb_typeof(p->'value_type') is null then perform billing_private.catalog_problem('value_type', 'required'); end if;
  v_type := billing_private.catalog_enum(p, 'value_type', array['percent', 'amount']);
  if jsonb_typeof(p->'percent_off') not in ('null', 'number')
     or (jsonb_typeof(p->'percent_off') = 'number' and not ((p->'percent_off')::numeric > 0 and (p->'percent_off')::numeric <= 100)) then
    perform billing_private.catalog_problem('percent_off', 'expected a number above 0 and at most 100');
  end if;
  v_percent := case when jsonb_typeof(p->'percent_off') = 'number' then (p->'percent_off')::numeric end;
  v_amount := billing_private.catalog_int(p, 'amount_off_cents', 1, 2147483647);
  if jsonb_typeof(p->'currency') not in ('null', 'string') or (jsonb_typeof(p->'currency') = 'string' and p->>'currency' !~ '^[a-z]{3}$') then
    perform billing_private.catalog_problem('currency', 'expected a lowercase three-letter currency code, e.g. "usd"');
  end if;
  v_currency := case when jsonb_typeof(p->'currency') = 'string' then p->>'currency' end;
  v_duration := coalesce(billing_private.catalog_enum(p, 'duration', array['once', 'repeating', 'forever']), 'once');
  v_months := billing_private.catalog_int(p, 'duration_months', 1, 2147483647);
  v_limit := billing_private.catalog_int(p, 'use_limit', 1, 2147483647);
  v_min := billing_private.catalog_int(p, 'min_spend_cents', 0, 2147483647);
  v_max := billing_private.catalog_int(p, 'max_spend_cents', 0, 2147483647);
  foreach v_field in array array['starts_at', 'expires_at'] loop
    if jsonb_typeof(p->v_field) not in ('null', 'string')
       or (jsonb_typeof(p->v_field) = 'string' and p->>v_field !~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$') then
      perform billing_private.catalog_problem(v_field, 'expected an ISO 8601 timestamp, e.g. "2026-01-01T00:00:00Z"');
    end if;
    begin
      if v_field = 'starts_at' then v_starts := (p->>v_field)::timestamptz; else v_expires := (p->>v_field)::timestamptz; end if;
    exception when others then
      perform billing_private.catalog_problem(v_field, 'expected an ISO 8601 timestamp, e.g. "2026-01-01T00:00:00Z"');
    end;
  end loop;
  v_active := coalesce(billing_private.catalog_bool(p, 'is_active'), true);
  for v_item in select x from jsonb_array_elements(billing_private.catalog_array(p, 'tiers')) x loop
    select t.id into v_id from billing.tiers t where t.community_id = v_c and t.key = v_item #>> '{}';
    if v_id is null or jsonb_typeof(v_item) <> 'string' then
      perform billing_private.catalog_problem(format('tiers[%s]', v_i),
        format('unknown tier "%s" (no tier of the community has this key)', left(v_item #>> '{}', 100)));
    end if;
    if not v_id = any (v_tiers) then v_tiers := v_tiers || v_id; end if;
    v_id := null;
    v_i := v_i + 1;
  end loop;
  v_i := 0;
  for v_item in select x from jsonb_array_elements(billing_private.catalog_array(p, 'members')) x loop
    v_at := format('members[%s]', v_i);
    perform billing_private.catalog_known(v_item, array['platform', 'platform_uid', 'username'], v_at);
    if jsonb_typeof(v_item->'platform') is distinct from 'string' or v_item->>'platform' not in ('discord', 'telegram') then
      perform billing_private.catalog_problem(v_at || '.platform', 'expected one of "discord", "telegram"');
    end if;
    v_members := v_members || jsonb_build_array(jsonb_build_object('platform', v_item->>'platform',
      'platform_uid', billing_private.catalog_text(v_item, 'platform_uid', 200, true, v_at || '.platform_uid'),
      'username', billing_private.catalog_text(v_item, 'username', 200, false, v_at || '.username')));
    v_i := v_i + 1;
  end loop;
  -- The rules across fields.
  if v_type = 'percent' then
    if v_percent is null then perform billing_private.catalog_problem('percent_off', 'required when value_type is "percent"'); end if;
    if v_amount is not null then perform billing_private.catalog_problem('amount_off_cents', 'only for value_type "amount"'); end if;
  else
    if v_amount is null then perform billing_private.catalog_problem('amount_off_cents', 'required when value_type is "amount"'); end if;
    if v_currency is null then perform billing_private.catalog_problem('currency', 'required when value_type is "amount"'); end if;
    if v_percent is not null then perform billing_private.catalog_problem('percent_off', 'only for value_type "percent"'); end if;
  end if;
  if v_duration = 'repeating' and v_months is null then
    perform billing_private.catalog_problem('duration_months', 'required when duration is "repeating"');
  elsif v_duration <> 'repeating' and v_months is not null then
    perform billing_private.catalog_problem('duration_months', 'only for duration "repeating"');
  end if;
  if v_min > v_max then perform billing_private.catalog_problem('max_spend_cents', 'expected at least min_spend_cents'); end if;
  if v_starts >= v_expires then perform billing_private.catalog_problem('expires_at', 'expected a time after starts_at'); end if;

  select * into v_old from billing.discount_codes d where d.community_id = v_c and lower(d.code) = lower(v_code) for update;
  if v_old.id is null then
    insert into billing.discount_codes (community_id, code, name, value_type, percent_off, amount_off_cents, currency, duration,
      duration_months, use_limit, min_spend_cents, max_spend_cents, starts_at, expires_at, is_active, tier_ids, members)
    values (v_c, v_code, v_name, v_type, v_percent, v_amount, v_currency, v_duration, v_months, v_limit, v_min, v_max,
      v_starts, v_expires, v_active, v_tiers, v_members)
    returning id::text into v_id;
    v_action := 'created';
  else
    v_id := v_old.id::text;
    v_fields := billing_private.catalog_changed_fields(jsonb_build_object('code', v_old.code, 'name', v_old.name,
        'value_type', v_old.value_type, 'percent_off', v_old.percent_off, 'amount_off_cents', v_old.amount_off_cents,
        'currency', v_old.currency, 'duration', v_old.duration, 'duration_months', v_old.duration_months,
        'use_limit', v_old.use_limit, 'min_spend_cents', v_old.min_spend_cents, 'max_spend_cents', v_old.max_spend_cents,
        'starts_at', v_old.starts_at, 'expires_at', v_old.expires_at, 'is_active', v_old.is_active,
        'tier_ids', to_jsonb(v_old.tier_ids), 'members', v_old.members),
      jsonb_build_object('code', v_code, 'name', v_name, 'value_type', v_type, 'percent_off', v_percent,
        'amount_off_cents', v_amount, 'currency', v_currency, 'duration', v_duration, 'duration_months', v_months,
        'use_limit', v_limit, 'min_spend_cents', v_min, 'max_spend_cents', v_max, 'starts_at', v_starts,
        'expires_at', v_expires, 'is_active', v_active, 'tier_ids', to_jsonb(v_tiers), 'members', v_members));
    if cardinality(v_fields) > 0 then
      update billing.discount_codes d set code = v_code, name = v_name, value_type = v_type, percent_off = v_percent,
        amount_off_cents = v_amount, currency = v_currency, duration = v_duration, duration_months = v_months,
        use_limit = v_limit, min_spend_cents = v_min, max_spend_cents = v_max, starts_at = v_starts,
        expires_at = v_expires, is_active = v_active, tier_ids = v_tiers, members = v_members
      where d.community_id = v_c and d.id = v_old.id;
      v_action := 'updated';
    end if;
  end if;
  return jsonb_build_object('id', v_id, 'key', v_code, 'action', v_action, 'fields', to_jsonb(v_fields));
end
$$;

-- ---- the API's operations (catalog:write; owned by billing_writer) -------------------------

-- The catalog with ids and keys: the platform connections (their settings hold no
-- secret), every tier (inactive ones too) with its plans, and every entitlement with
-- its benefits. GET /v1/catalog (plans:read).
create or replace function billing_api.catalog_get(p_args jsonb) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  return jsonb_build_object(
    'platforms', coalesce((select jsonb_agg(jsonb_build_object('id', pc.id, 'key', pc.key, 'platform', pc.platform,
      'name', pc.name, 'settings', pc.settings) order by pc.key) from billing.platform_configs pc), '[]'),
    'tiers', coalesce((select jsonb_agg(billing.catalog_tier_json(t) order by t.rank, t.key) from billing.tiers t), '[]'),
    'entitlements', coalesce((select jsonb_agg(billing.catalog_entitlement_json(e) order by e.key) from billing.entitlements e), '[]'));
end
$$;

-- The object a PATCH is merged into: the stored one as a put takes it.
create or replace function billing_private.catalog_tier_input(t billing.tiers) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('key', t.key, 'name', t.name, 'description', t.description, 'kind', t.kind,
    'billing_mode', t.billing_mode, 'rank', t.rank, 'active', t.active, 'features', to_jsonb(t.features), 'perks', t.perks,
    'entitlements', coalesce((select jsonb_agg(e.key order by e.key) from billing.tier_entitlements te
      join billing.entitlements e on e.community_id = te.community_id and e.id = te.entitlement_id
      where te.community_id = t.community_id and te.tier_id = t.id), '[]'))
$$;

-- The tier's plans still fit its billing mode (the constraint trigger's rule, checked now
-- so that the API answers 422 naming the field rather than failing at commit).
create or replace function billing_private.catalog_check_tier_plans(p_tier_id text) returns void
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.check_tier_plans(billing.current_community_id(), p_tier_id);
exception when check_violation then
  perform billing_private.catalog_problem('billing_mode', sqlerrm);
end
$$;

create or replace function billing_api.catalog_tier_create(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_r jsonb;
  v_t billing.tiers;
begin
  if exists (select 1 from billing.tiers t where t.community_id = billing.current_community_id() and t.key = p_args->>'key') then
    perform billing.raise('BL409', format('A tier with the key %s exists already: change it instead.', p_args->>'key'), 'key');
  end if;
  v_r := billing.catalog_tier_put(p_args);
  select * into v_t from billing.tiers t where t.community_id = billing.current_community_id() and t.id = v_r->>'id';
  return billing.catalog_tier_json(v_t);
end
$$;

create or replace function billing_api.catalog_tier_update(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_t billing.tiers;
begin
  select * into v_t from billing.tiers t where t.community_id = billing.current_community_id() and t.id = p_args->>'id' for update;
  if v_t.id is null then perform billing.raise('BL404', 'No tier ' || (p_args->>'id') || '.'); end if;
  perform billing.catalog_tier_put(billing_private.catalog_tier_input(v_t) || (p_args - 'id'));
  perform billing_private.catalog_check_tier_plans(v_t.id);
  select * into v_t from billing.tiers t where t.community_id = v_t.community_id and t.id = v_t.id;
  return billing.catalog_tier_json(v_t);
end
$$;

-- Archive: the tier is no longer offered (inactive: no checkout, not in GET /v1/plans);
-- what was sold on it stays, and it can be made active again.
create or replace function billing_api.catalog_tier_archive(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_t billing.tiers;
begin
  select * into v_t from billing.tiers t where t.community_id = billing.current_community_id() and t.id = p_args->>'id' for update;
  if v_t.id is null then perform billing.raise('BL404', 'No tier ' || (p_args->>'id') || '.'); end if;
  perform billing.catalog_tier_put(billing_private.catalog_tier_input(v_t) || jsonb_build_object('active', false));
  select * into v_t from billing.tiers t where t.community_id = v_t.community_id and t.id = v_t.id;
  return billing.catalog_tier_json(v_t);
end
$$;

create or replace function billing_private.catalog_plan_input(p billing.plans) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('key', p.key, 'tier_id', p.tier_id, 'name', p.name, 'amount_cents', p.amount_cents,
    'currency', p.currency, 'interval', p.interval, 'trial_days', p.trial_days, 'access_days', p.access_days,
    'active', p.active)
$$;

-- A plan as the API answers a write: the plan, and price_change when its price changed.
-- Volatile, so that it reads the row its caller's statement just wrote.
create or replace function billing_private.catalog_plan_answer(p_put jsonb) returns jsonb
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select billing.catalog_plan_json(p) || jsonb_build_object('price_change', p_put->'price_change')
  from billing.plans p where p.community_id = billing.current_community_id() and p.id = p_put->>'id'
$$;

create or replace function billing_api.catalog_plan_create(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if exists (select 1 from billing.plans p where p.community_id = billing.current_community_id() and p.key = p_args->>'key') then
    perform billing.raise('BL409', format('A plan with the key %s exists already: change it instead.', p_args->>'key'), 'key');
  end if;
  return billing_private.catalog_plan_answer(billing.catalog_plan_put(p_args));
end
$$;

create or replace function billing_api.catalog_plan_update(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_p billing.plans;
begin
  select * into v_p from billing.plans p where p.community_id = billing.current_community_id() and p.id = p_args->>'id' for update;
  if v_p.id is null then perform billing.raise('BL404', 'No plan ' || (p_args->>'id') || '.'); end if;
  return billing_private.catalog_plan_answer(billing.catalog_plan_put(billing_private.catalog_plan_input(v_p) || (p_args - 'id')));
end
$$;

create or replace function billing_api.catalog_plan_archive(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_p billing.plans;
begin
  select * into v_p from billing.plans p where p.community_id = billing.current_community_id() and p.id = p_args->>'id' for update;
  if v_p.id is null then perform billing.raise('BL404', 'No plan ' || (p_args->>'id') || '.'); end if;
  return billing_private.catalog_plan_answer(billing.catalog_plan_put(billing_private.catalog_plan_input(v_p) || '{"active": false}'));
end
$$;

-- GET /v1/catalog/plans/{id}/price-preview?amount_cents=: before a price is saved, how
-- many subscribers it concerns (they keep their price until migrated with notice).
create or replace function billing_api.catalog_plan_price_preview(p_args jsonb) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_p billing.plans;
  v_amount integer;
begin
  select * into v_p from billing.plans p where p.community_id = billing.current_community_id() and p.id = p_args->>'id';
  if v_p.id is null then perform billing.raise('BL404', 'No plan ' || (p_args->>'id') || '.'); end if;
  v_amount := billing_private.catalog_int(p_args, 'amount_cents', 0, 2147483647);
  if v_amount is null then perform billing_private.catalog_problem('amount_cents', 'required'); end if;
  return jsonb_build_object('plan_id', v_p.id, 'from_cents', v_p.amount_cents, 'to_cents', v_amount, 'currency', v_p.currency)
    || case when v_amount = v_p.amount_cents then '{"subscriptions": 0, "pending_migration": 0}'::jsonb
       else billing.plan_price_change_preview(v_p.community_id, v_p.id, v_amount) end;
end
$$;

create or replace function billing_api.catalog_entitlement_create(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_r jsonb;
  v_e billing.entitlements;
begin
  if exists (select 1 from billing.entitlements e where e.community_id = billing.current_community_id() and e.key = p_args->>'key') then
    perform billing.raise('BL409', format('An entitlement with the key %s exists already: change it instead.', p_args->>'key'), 'key');
  end if;
  v_r := billing.catalog_entitlement_put(p_args);
  select * into v_e from billing.entitlements e where e.community_id = billing.current_community_id() and e.id = v_r->>'id';
  return billing.catalog_entitlement_json(v_e);
end
$$;

create or replace function billing_api.catalog_entitlement_update(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_e billing.entitlements;
begin
  select * into v_e from billing.entitlements e where e.community_id = billing.current_community_id() and e.id = p_args->>'id' for update;
  if v_e.id is null then perform billing.raise('BL404', 'No entitlement ' || (p_args->>'id') || '.'); end if;
  perform billing.catalog_entitlement_put(jsonb_build_object('key', v_e.key, 'name', v_e.name,
    'benefits', billing.catalog_entitlement_json(v_e)->'benefits') || (p_args - 'id'));
  select * into v_e from billing.entitlements e where e.community_id = v_e.community_id and e.id = v_e.id;
  return billing.catalog_entitlement_json(v_e);
end
$$;

create or replace function billing_private.catalog_discount_input(d billing.discount_codes) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('code', d.code, 'name', d.name, 'value_type', d.value_type, 'percent_off', d.percent_off,
    'amount_off_cents', d.amount_off_cents, 'currency', d.currency, 'duration', d.duration,
    'duration_months', d.duration_months, 'use_limit', d.use_limit, 'min_spend_cents', d.min_spend_cents,
    'max_spend_cents', d.max_spend_cents, 'starts_at', billing.iso(d.starts_at), 'expires_at', billing.iso(d.expires_at),
    'is_active', d.is_active,
    'tiers', coalesce((select jsonb_agg(t.key order by t.key) from billing.tiers t
      where t.community_id = d.community_id and t.id = any (d.tier_ids)), '[]'),
    'members', d.members)
$$;

-- A discount code as the API answers a write: the discount list's object, and its
-- tiers by key and whether it is archived.
create or replace function billing_private.catalog_discount_answer(p_id text) returns jsonb
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select billing.discount_json(d) || jsonb_build_object('tiers', billing_private.catalog_discount_input(d)->'tiers',
    'archived', d.archived_at is not null)
  from billing.discount_codes d where d.community_id = billing.current_community_id() and d.id::text = p_id
$$;

create or replace function billing_api.catalog_discount_create(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if exists (select 1 from billing.discount_codes d where d.community_id = billing.current_community_id()
             and lower(d.code) = lower(p_args->>'code')) then
    perform billing.raise('BL409', format('A discount code %s exists already (codes match case-insensitively).', p_args->>'code'), 'code');
  end if;
  return billing_private.catalog_discount_answer(billing.catalog_discount_put(p_args)->>'id');
end
$$;

-- The stored code, by id (a uuid; anything else is not found).
create or replace function billing_private.catalog_discount_row(p_id text) returns billing.discount_codes
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_d billing.discount_codes;
begin
  if p_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then
    select * into v_d from billing.discount_codes d where d.community_id = billing.current_community_id() and d.id = p_id::uuid;
  end if;
  if v_d.id is null then perform billing.raise('BL404', 'No discount code ' || p_id || '.'); end if;
  return v_d;
end
$$;

create or replace function billing_api.catalog_discount_update(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_d billing.discount_codes := billing_private.catalog_discount_row(p_args->>'id');
begin
  if v_d.archived_at is not null then
    perform billing.raise('BL409', 'Discount code ' || v_d.code || ' is archived: create a new code instead.');
  end if;
  perform billing.catalog_discount_put(billing_private.catalog_discount_input(v_d) || (p_args - 'id'));
  return billing_private.catalog_discount_answer(v_d.id::text);
end
$$;

-- Archive: the code can no longer be redeemed and leaves the catalog file; its
-- redemptions, and the discounts subscribers already have, stay.
create or replace function billing_api.catalog_discount_archive(p_args jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_d billing.discount_codes := billing_private.catalog_discount_row(p_args->>'id');
begin
  if v_d.archived_at is null then
    update billing.discount_codes d set archived_at = billing.now(), is_active = false
    where d.community_id = v_d.community_id and d.id = v_d.id;
  end if;
  return billing_private.catalog_discount_answer(v_d.id::text);
end
$$;

-- ---- execute rights ----------------------------------------------------------------------

-- billing_api reads; billing_writer (the operations' owner) and the owner (catalog
-- apply) write through the puts.
grant execute on function billing.catalog_plan_json(billing.plans) to billing_api;
grant execute on function billing.catalog_tier_json(billing.tiers) to billing_api;
grant execute on function billing.catalog_entitlement_json(billing.entitlements) to billing_api;
grant execute on function billing.plan_price_change_preview(text, text, integer) to billing_api;
grant execute on function billing.benefit_problem(text, text, text) to billing_api;
grant execute on function billing_api.catalog_get(jsonb) to billing_api;
grant execute on function billing_api.catalog_plan_price_preview(jsonb) to billing_api;
grant execute on function billing_private.catalog_problem(text, text) to billing_api;
grant execute on function billing_private.catalog_int(jsonb, text, bigint, bigint) to billing_api;
grant execute on function billing_private.catalog_text(jsonb, text, integer, boolean, text) to billing_writer;
grant execute on function billing_private.catalog_key(jsonb, text, text) to billing_writer;
grant execute on function billing_private.catalog_bool(jsonb, text) to billing_writer;
grant execute on function billing_private.catalog_enum(jsonb, text, text[]) to billing_writer;
grant execute on function billing_private.catalog_array(jsonb, text) to billing_writer;
grant execute on function billing_private.catalog_known(jsonb, text[], text) to billing_writer;
grant execute on function billing_private.catalog_changed_fields(jsonb, jsonb) to billing_writer;
grant execute on function billing.catalog_tier_put(jsonb) to billing_writer;
grant execute on function billing.catalog_plan_put(jsonb) to billing_writer;
grant execute on function billing.catalog_entitlement_put(jsonb) to billing_writer;
grant execute on function billing.catalog_discount_put(jsonb) to billing_writer;
grant execute on function billing_private.catalog_tier_input(billing.tiers) to billing_writer;
grant execute on function billing_private.catalog_plan_input(billing.plans) to billing_writer;
grant execute on function billing_private.catalog_plan_answer(jsonb) to billing_writer;
grant execute on function billing_private.catalog_discount_input(billing.discount_codes) to billing_writer;
grant execute on function billing_private.catalog_discount_answer(text) to billing_writer;
grant execute on function billing_private.catalog_discount_row(text) to billing_writer;
grant execute on function billing_private.catalog_check_tier_plans(text) to billing_writer;
-- What the writes' triggers call with the writer's rights (the ledger refresh of the
-- links and benefits, the benefit type rule) and, at commit, with the API role's (the
-- deferred rule of a tier's plans).
grant execute on function billing.check_tier_plans(text, text) to billing_api;
grant execute on function billing.benefit_type_problem(text, text) to billing_writer;
grant execute on function billing.ledger_refresh_members(text, text[], text, text) to billing_writer;
grant execute on function billing.ledger_members_on_tiers(text, text[]) to billing_writer;
grant execute on function billing.ledger_benefits_changed(text, text[]) to billing_writer;
grant execute on function billing.plan_price_subscribers(text, text, integer) to billing_writer;
grant execute on function billing_api.catalog_tier_create(jsonb) to billing_api;
grant execute on function billing_api.catalog_tier_update(jsonb) to billing_api;
grant execute on function billing_api.catalog_tier_archive(jsonb) to billing_api;
grant execute on function billing_api.catalog_plan_create(jsonb) to billing_api;
grant execute on function billing_api.catalog_plan_update(jsonb) to billing_api;
grant execute on function billing_api.catalog_plan_archive(jsonb) to billing_api;
grant execute on function billing_api.catalog_entitlement_create(jsonb) to billing_api;
grant execute on function billing_api.catalog_entitlement_update(jsonb) to billing_api;
grant execute on function billing_api.catalog_discount_create(jsonb) to billing_api;
grant execute on function billing_api.catalog_discount_update(jsonb) to billing_api;
grant execute on function billing_api.catalog_discount_archive(jsonb) to billing_api;
grant create on schema billing_api to billing_writer;
alter function billing_api.catalog_tier_create(jsonb) owner to billing_writer;
alter function billing_api.catalog_tier_update(jsonb) owner to billing_writer;
alter function billing_api.catalog_tier_archive(jsonb) owner to billing_writer;
alter function billing_api.catalog_plan_create(jsonb) owner to billing_writer;
alter function billing_api.catalog_plan_update(jsonb) owner to billing_writer;
alter function billing_api.catalog_plan_archive(jsonb) owner to billing_writer;
alter function billing_api.catalog_entitlement_create(jsonb) owner to billing_writer;
alter function billing_api.catalog_entitlement_update(jsonb) owner to billing_writer;
alter function billing_api.catalog_discount_create(jsonb) owner to billing_writer;
alter function billing_api.catalog_discount_update(jsonb) owner to billing_writer;
alter function billing_api.catalog_discount_archive(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded functions/20-catalog-write.sql
--! Included 98-dispatch.sql
-- Operations run by name without dynamic SQL. billing.api_call (the request gate,
-- 10-tenancy.sql) runs billing_private.op_dispatch(op, args): a CASE
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
--
-- A list's input carries cursor_list and cursor_filters (src/operations/executor.ts
-- bindCursor): set for the transaction, billing.encode_cursor binds next_cursor to them.

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
  if p_args ? 'cursor_list' then
    perform set_config('app.cursor_list', p_args->>'cursor_list', true),
      set_config('app.cursor_filters', p_args->>'cursor_filters', true);
  end if;
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
