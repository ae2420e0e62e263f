-- db/migrations sha256:291d189d09068027d173a98b56d94baeb96803a9f92aa5e84d160bc6582ec6dd (regenerate with npm run db:schema)
--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: analytics; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA analytics;


--
-- Name: billing; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA billing;


--
-- Name: billing_api; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA billing_api;


--
-- Name: billing_graphql; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA billing_graphql;


--
-- Name: billing_private; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA billing_private;


--
-- Name: pg_trgm; Type: EXTENSION; Schema: -; Owner: -
--

CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;


--
-- Name: EXTENSION pg_trgm; Type: COMMENT; Schema: -; Owner: -
--

COMMENT ON EXTENSION pg_trgm IS 'text similarity measurement and index searching based on trigrams';


--
-- Name: ledger_change; Type: TYPE; Schema: billing; Owner: -
--

CREATE TYPE billing.ledger_change AS (
	k integer,
	c text COLLATE pg_catalog."C",
	m text COLLATE pg_catalog."C",
	now timestamp with time zone,
	snapshot jsonb,
	member jsonb,
	reason text,
	trigger_event_id text,
	entitlement_id text COLLATE pg_catalog."C",
	d_ent text COLLATE pg_catalog."C",
	d_sources jsonb,
	d_benefits jsonb,
	d_next timestamp with time zone,
	stored_id text COLLATE pg_catalog."C",
	s_status text,
	s_sources jsonb,
	s_benefits jsonb,
	s_identities jsonb,
	s_next timestamp with time zone,
	status text,
	identities jsonb,
	new_id text COLLATE pg_catalog."C",
	type text
);


--
-- Name: renewal_terms; Type: TYPE; Schema: billing; Owner: -
--

CREATE TYPE billing.renewal_terms AS (
	plan_id text,
	anchor timestamp with time zone,
	period_end timestamp with time zone,
	currency text,
	lines jsonb,
	credit_cents bigint,
	price_cents integer,
	price_migration_id text
);


--
-- Name: add_utc(timestamp with time zone, interval); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.add_utc(p_ts timestamp with time zone, p_interval interval) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ select ((p_ts at time zone 'UTC') + p_interval) at time zone 'UTC' $$;


--
-- Name: api_call(text, text, jsonb, text, text, jsonb, jsonb, boolean, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.api_call(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_op text, p_args jsonb, p_idem jsonb DEFAULT NULL::jsonb, p_leased boolean DEFAULT false, p_request_id text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_open jsonb := billing.gate_open(p_credential, p_ip, p_limits, p_scope,
    case when p_op is not null then p_idem end, p_leased, p_request_id);
  v_out jsonb;
  v_state text;
  v_msg text;
  v_detail text;
  v_ran boolean := false;
begin
  if not (v_open->>'ok')::boolean then
    return v_open;
  end if;
  if v_open ? 'error' then
    v_out := jsonb_build_object('error', v_open->'error');
  elsif v_open ? 'replay' then
    v_out := jsonb_build_object('replayed', true) || (v_open->'replay');
  elsif p_op is not null then
    v_ran := true;
    begin
      v_out := jsonb_build_object('result', billing_private.op_dispatch(p_op, p_args));  -- 98-dispatch.sql
    exception when others then
      get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
      if v_state not like 'BL%' then
        raise;
      end if;
      v_out := jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
        'detail', nullif(v_detail, '')));
    end;
  end if;
  v_open := v_open - 'error' - 'replay' - 'rl';
  if p_leased then
    return v_open || coalesce(v_out, '{}');
  end if;
  -- Only an answer the operation gave is kept under the Idempotency-Key.
  return v_open || jsonb_build_object('rl', billing.gate_close(p_limits, case when v_ran then p_idem end, v_out))
    || coalesce(v_out, '{}');
end
$$;


--
-- Name: api_version(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.api_version() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ select '2026-08' $$;


--
-- Name: apply_due(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.apply_due(p_community_id text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_batch jsonb;
  v_after text;
  v_n integer := 0;
  v_now timestamptz;
  v_expired integer;
begin
  perform set_config('app.community_id', p_community_id, true);
  v_now := billing.now();
  v_expired := billing.expire_checkouts();
  loop
    v_batch := billing.apply_due_batch(p_community_id, v_after, 1000);
    v_n := v_n + (v_batch->>'period_changes')::integer;
    v_after := v_batch->>'last_id';
    exit when not (v_batch->>'more')::boolean;
  end loop;
  perform billing.ledger_sweep(p_community_id);
  return jsonb_build_object('now', billing.iso(v_now), 'period_changes', v_n, 'expired_checkouts', v_expired);
end
$$;


--
-- Name: apply_due_all(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.apply_due_all() RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
  v_id text;
  v_n integer := 0;
begin
  for v_id in select c.id from billing.communities c order by c.id loop
    perform billing.apply_due(v_id);
    v_n := v_n + 1;
  end loop;
  perform set_config('app.community_id', '', true);
  return v_n;
end
$$;


--
-- Name: apply_due_batch(text, text, integer); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.apply_due_batch(p_community_id text, p_after text, p_limit integer) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_now timestamptz;
  v_ids text[];
  v_renewed text[];
  v_id text;
  v_n integer := 0;
begin
  perform set_config('app.community_id', p_community_id, true);
  v_now := billing.now();
  -- The first p_limit of each kind after p_after, then the first p_limit of both: a
  -- batch reads about p_limit rows however many more are due (100,000 due at one
  -- period end are not read again by each of their 200 batches).
  v_ids := array(
    select d.id from (
      (select s.id from billing.subscriptions s
       where s.community_id = p_community_id and s.id > coalesce(p_after, '') and s.provider = 'sandbox'
         and (s.status in ('active', 'trialing', 'cancelling') and s.current_period_end <= v_now
           or s.status = 'paused' and s.paused_until <= v_now)
       order by s.id
       limit p_limit)
      union
      (select i.subscription_id from billing.invoices i
       where i.community_id = p_community_id and i.provider = 'sandbox' and i.status = 'open'
         and i.next_attempt_at <= v_now and i.subscription_id > coalesce(p_after, '')
       order by 1
       limit p_limit)) d
    order by 1
    limit p_limit);
  -- The batch's rows locked at once, in id order (the order one by one would take).
  -- One index probe per id, in the array's (id) order: not a scan of the community.
  perform count(*) from unnest(v_ids) x(id)
    cross join lateral (select 1 from billing.subscriptions s
      where s.community_id = p_community_id and s.id = x.id for update) l;
  -- Plain renewals in a few statements for the whole batch (billing.renew_batch), the
  -- rest one subscription at a time.
  v_renewed := billing.renew_batch(v_ids, v_now);
  v_n := cardinality(v_renewed);
  for v_id in select x from unnest(v_ids) x where x <> all (v_renewed) order by 1 loop
    v_n := v_n + billing.subscription_advance(v_id, v_now);
  end loop;
  return jsonb_build_object('now', billing.iso(v_now), 'period_changes', v_n, 'last_id', v_ids[cardinality(v_ids)],
    'more', cardinality(v_ids) >= p_limit);
end
$$;


--
-- Name: apply_provider_invoice(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.apply_provider_invoice(p_state jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
  v_sub billing.subscriptions;
  v_inv billing.invoices;
  v_at timestamptz := (p_state->>'provider_updated_at')::timestamptz;
  v_status text := p_state->>'status';
  v_lines jsonb := coalesce(p_state->'lines', '[]');
  v_gap bigint;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_state->>'subscription_ref';
  if v_sub.id is null then
    return null;
  end if;
  select * into v_inv from billing.invoices i
  where i.community_id = v_sub.community_id and i.provider_ref = p_state->>'provider_ref' for update;
  if v_inv.id is null then
    -- What the lines and the tax Stripe added do not explain (Stripe's discounts, other
    -- charges) becomes one line, so the invoice always adds up to Stripe's total.
    v_gap := (p_state->>'total_cents')::bigint - billing.invoice_lines_sum(v_lines, null)
      - billing.invoice_tax_sum(coalesce(p_state->'tax'->'tax_lines', '[]'), false);
    if v_gap < 0 then
      v_lines := v_lines || jsonb_build_object('type', 'discount', 'description', 'Discount', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    elsif v_gap > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'plan', 'description', 'Other charges', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id,
      coalesce(nullif(p_state->>'billing_reason', ''), 'subscription_cycle'), p_state->>'currency', v_lines,
      (p_state->>'period_start')::timestamptz, (p_state->>'period_end')::timestamptz, 'stripe',
      coalesce((p_state->>'created_at')::timestamptz, v_at), null, p_state->>'provider_ref',
      coalesce(p_state->'tax', '{"tax_lines": []}'));
    update billing.invoices i set provider_updated_at = v_at where i.community_id = v_inv.community_id and i.id = v_inv.id
    returning * into v_inv;
  elsif v_inv.status in ('paid', 'void', 'uncollectible')
        or (v_inv.provider_updated_at is not null and v_at < v_inv.provider_updated_at) then
    return v_inv.id;
  end if;
  if v_status = 'paid' then
    perform billing.invoice_mark_paid(v_inv, coalesce((p_state->>'paid_at')::timestamptz, v_at), p_state->>'payment_ref');
  elsif coalesce((p_state->>'failed')::boolean, false) then
    perform billing.invoice_mark_failed(v_inv, v_at, 'The payment failed (Stripe).', (p_state->>'next_attempt_at')::timestamptz);
  elsif v_status in ('void', 'uncollectible') then
    update billing.invoices i set status = v_status, next_attempt_at = null
    where i.community_id = v_inv.community_id and i.id = v_inv.id;
  elsif p_state ? 'next_attempt_at' then
    update billing.invoices i set next_attempt_at = (p_state->>'next_attempt_at')::timestamptz
    where i.community_id = v_inv.community_id and i.id = v_inv.id
      and i.next_attempt_at is distinct from (p_state->>'next_attempt_at')::timestamptz;
  end if;
  update billing.invoices i set provider_updated_at = greatest(i.provider_updated_at, v_at)
  where i.community_id = v_inv.community_id and i.id = v_inv.id;
  return v_inv.id;
end
$$;


--
-- Name: apply_provider_subscription(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.apply_provider_subscription(p_state jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
  v_sub billing.subscriptions;
  v_at timestamptz := (p_state->>'provider_updated_at')::timestamptz;
  v_plan text;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_state->>'provider_ref' for update;
  if v_sub.id is null then
    return null;
  end if;
  if v_sub.provider_updated_at is not null and v_at < v_sub.provider_updated_at then
    return v_sub.id;
  end if;
  if p_state->>'stripe_price_id' is not null then
    select p.id into v_plan from billing.plans p
    where p.community_id = v_sub.community_id and p.stripe_price_id = p_state->>'stripe_price_id' order by p.active desc, p.id limit 1;
  end if;
  update billing.subscriptions s set
    status = coalesce(p_state->>'status', s.status),
    plan_id = coalesce(v_plan, s.plan_id),
    current_period_start = coalesce((p_state->>'period_start')::timestamptz, s.current_period_start),
    current_period_end = coalesce((p_state->>'period_end')::timestamptz, s.current_period_end),
    trial_end = case when p_state ? 'trial_end' then (p_state->>'trial_end')::timestamptz else s.trial_end end,
    cancel_at = case when p_state ? 'cancel_at' then (p_state->>'cancel_at')::timestamptz else s.cancel_at end,
    cancelled_at = case when p_state->>'status' = 'cancelled' then coalesce(s.cancelled_at, (p_state->>'ended_at')::timestamptz, v_at) else s.cancelled_at end,
    paused_until = case when p_state ? 'paused_until' then (p_state->>'paused_until')::timestamptz else s.paused_until end,
    -- Paused from Stripe's side (pause_collection): the period then current stays paid.
    paid_through = case when coalesce(p_state->>'status', s.status) <> 'paused' then null
                        when s.status = 'paused' then s.paid_through
                        when s.status in ('active', 'trialing') then s.current_period_end end,
    -- A scheduled switch is done once Stripe reports the new plan (its schedule moved on).
    scheduled_plan_id = case when v_plan is not null and v_plan = s.scheduled_plan_id then null else s.scheduled_plan_id end,
    scheduled_at = case when v_plan is not null and v_plan = s.scheduled_plan_id then null else s.scheduled_at end,
    provider_customer_ref = coalesce(p_state->>'customer_ref', s.provider_customer_ref),
    provider_updated_at = greatest(v_at, s.provider_updated_at),
    updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id;
  -- Stripe's unpaid (retries over): the subscription's open invoices have no retry
  -- left, so a past_due subscription loses access. Only for a state newer than the
  -- last applied (an old unpaid arriving late changes nothing).
  if coalesce((p_state->>'retries_exhausted')::boolean, false) then
    update billing.invoices i set next_attempt_at = null
    where i.community_id = v_sub.community_id and i.subscription_id = v_sub.id and i.status = 'open'
      and i.next_attempt_at is not null;
  end if;
  return v_sub.id;
end
$$;


--
-- Name: gen_id(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.gen_id(p_prefix text) RETURNS text
    LANGUAGE sql
    AS $$
  select p_prefix || '_'
    || pg_catalog.lpad(pg_catalog.to_hex((extract(epoch from pg_catalog.clock_timestamp()) * 1000)::bigint), 12, '0')
    || pg_catalog.lpad(pg_catalog.to_hex(pg_catalog.nextval('billing_private.id_seq'::regclass)), 6, '0')
    || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 1, 8)
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: audit_log; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.audit_log (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('aud'::text) NOT NULL COLLATE pg_catalog."C",
    occurred_at timestamp with time zone DEFAULT now() NOT NULL,
    actor_type text NOT NULL,
    actor_id text,
    key_id text COLLATE pg_catalog."C",
    request_id text,
    table_name text NOT NULL,
    row_id text,
    operation text NOT NULL,
    changed text[] DEFAULT '{}'::text[] NOT NULL,
    before jsonb,
    after jsonb,
    CONSTRAINT audit_log_actor_type_check CHECK ((actor_type = ANY (ARRAY['operator'::text, 'api_key'::text, 'member'::text, 'cli'::text, 'sql_login'::text, 'service'::text]))),
    CONSTRAINT audit_log_operation_check CHECK ((operation = ANY (ARRAY['insert'::text, 'update'::text, 'delete'::text])))
);

ALTER TABLE ONLY billing.audit_log FORCE ROW LEVEL SECURITY;


--
-- Name: audit_entry_json(billing.audit_log); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.audit_entry_json(a billing.audit_log) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object('id', a.id, 'occurred_at', billing.iso(a.occurred_at),
    'actor_type', a.actor_type, 'actor_id', a.actor_id, 'key_id', a.key_id, 'request_id', a.request_id,
    'table', a.table_name, 'row_id', a.row_id, 'operation', a.operation, 'changed', to_jsonb(a.changed),
    'before', a.before, 'after', a.after)
$$;


--
-- Name: benefit_type_problem(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.benefit_type_problem(p_platform text, p_type text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select case
    when p_platform = 'discord' and p_type in ('role', 'channel') then null
    when p_platform = 'telegram' and p_type = 'chat' then null
    else format('A %s connection cannot carry out a benefit of type "%s" (it can: %s).', p_platform, p_type,
      case p_platform when 'discord' then '"role", "channel"' when 'telegram' then '"chat"' else 'none' end)
  end
$$;


--
-- Name: benefits_with_delivery(text, text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.benefits_with_delivery(p_community_id text, p_member_id text, p_benefits jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  if p_benefits = '[]' then
    return p_benefits;
  end if;
  return (
    select jsonb_agg(b || jsonb_build_object('delivery', case
        when d.member_id is not null and d.want = 'present'
          then jsonb_build_object('status', d.status, 'updated_at', billing.iso(d.updated_at), 'error', d.error)
        -- A connection without a bot token queues nothing: say what is missing.
        when not billing_private.platform_config_can_deliver(p_community_id, b->>'platform_config_id')
          then jsonb_build_object('status', 'action_required', 'updated_at', null, 'error', format(
            'No bot token for this %s connection: set settings.bot_token in the catalog (or %s).', b->>'platform',
            case b->>'platform' when 'discord' then 'DISCORD_BOT_TOKEN' else 'TELEGRAM_BOT_TOKEN' end))
        else jsonb_build_object('status', 'pending', 'updated_at', null, 'error', null) end)
      order by o)
    from jsonb_array_elements(p_benefits) with ordinality as x(b, o)
    left join billing.benefit_deliveries d
      on d.community_id = p_community_id and d.member_id = p_member_id
     and d.platform_config_id = b->>'platform_config_id' and d.type = b->>'type' and d.value = b->>'value');
end
$$;


--
-- Name: plans; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.plans (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('plan'::text) NOT NULL COLLATE pg_catalog."C",
    tier_id text NOT NULL COLLATE pg_catalog."C",
    key text NOT NULL,
    name text,
    amount_cents integer NOT NULL,
    currency text NOT NULL,
    "interval" text,
    trial_days integer DEFAULT 0 NOT NULL,
    access_days integer,
    active boolean DEFAULT true NOT NULL,
    stripe_price_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT plans_access_days_check CHECK ((access_days > 0)),
    CONSTRAINT plans_amount_cents_check CHECK ((amount_cents >= 0)),
    CONSTRAINT plans_currency_check CHECK ((currency ~ '^[a-z]{3}$'::text)),
    CONSTRAINT plans_interval_check CHECK (("interval" = ANY (ARRAY['month'::text, 'year'::text]))),
    CONSTRAINT plans_trial_days_check CHECK ((trial_days >= 0))
);

ALTER TABLE ONLY billing.plans FORCE ROW LEVEL SECURITY;


--
-- Name: tiers; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.tiers (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('tier'::text) NOT NULL COLLATE pg_catalog."C",
    key text NOT NULL,
    name text NOT NULL,
    description text,
    kind text DEFAULT 'subscription'::text NOT NULL,
    billing_mode text DEFAULT 'recurring'::text NOT NULL,
    rank integer DEFAULT 0 NOT NULL,
    active boolean DEFAULT true NOT NULL,
    features text[] DEFAULT '{}'::text[] NOT NULL,
    perks jsonb DEFAULT '[]'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tiers_billing_mode_check CHECK ((billing_mode = ANY (ARRAY['recurring'::text, 'one_time'::text]))),
    CONSTRAINT tiers_kind_check CHECK ((kind = ANY (ARRAY['subscription'::text, 'one_time'::text]))),
    CONSTRAINT tiers_one_time_billed_one_time CHECK (((kind <> 'one_time'::text) OR (billing_mode = 'one_time'::text)))
);

ALTER TABLE ONLY billing.tiers FORCE ROW LEVEL SECURITY;


--
-- Name: check_eligible(text, billing.tiers, billing.plans); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_other text;
begin
  if exists (select 1 from billing.purchases pu join billing.plans p on p.community_id = pu.community_id and p.id = pu.plan_id
             where pu.member_id = p_member_id and p.tier_id = p_tier.id
               and billing.source_grants_access('purchase', pu.community_id, pu.id, pu.status, pu.access_expires_at, billing.now())) then
    raise exception using errcode = 'BLNEL', message = 'The buyer already purchased this tier and its access has not expired.';
  end if;
  select p.tier_id into v_other
  from billing.subscriptions s join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  where s.member_id = p_member_id and s.status <> 'cancelled'
  order by (p.tier_id = p_tier.id) desc
  limit 1;
  if v_other = p_tier.id then
    raise exception using errcode = 'BLNEL', message = 'The buyer is already subscribed to this tier.';
  elsif v_other is not null and p_plan.interval is not null then
    raise exception using errcode = 'BLNEL',
      message = 'The buyer is subscribed to another tier (' || v_other || '); switch the subscription instead.';
  end if;
end
$$;


--
-- Name: check_tier_plans(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.check_tier_plans(p_community_id text, p_tier_id text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
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


--
-- Name: checkout_apply_discount(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_apply_discount(p_checkout_id text, p_code text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_cs billing.checkout_sessions;
  v_plan billing.plans;
  v_disc record;
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || coalesce(p_checkout_id, '') || '.');
  elsif v_cs.status <> 'open' or v_cs.expires_at <= billing.now() then
    perform billing.raise('BL409', 'This checkout is no longer open.');
  end if;
  delete from billing.discount_redemptions r
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id and r.status = 'pending';
  if nullif(btrim(coalesce(p_code, '')), '') is null then
    update billing.checkout_sessions cs set discount_id = null, discount_cents = 0
    where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
  else
    select * into v_plan from billing.plans p where p.community_id = v_cs.community_id and p.id = v_cs.plan_id;
    select * into v_disc from billing.checkout_discount(btrim(p_code), v_cs.member_id, v_cs.tier_id, v_plan);
    update billing.checkout_sessions cs set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cs.community_id, v_disc.discount_id, v_cs.id, v_cs.member_id, 'pending');
  end if;
  return billing.checkout_json(v_cs);
end
$$;


--
-- Name: email_valid(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.email_valid(p_email text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
  select length(p_email) <= 254 and p_email ~ '^[^@\s<>(),;:"\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$'
$_$;


--
-- Name: checkout_sessions; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.checkout_sessions (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('cs'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    tier_id text NOT NULL COLLATE pg_catalog."C",
    plan_id text NOT NULL COLLATE pg_catalog."C",
    discount_id uuid,
    amount_cents integer NOT NULL,
    discount_cents integer DEFAULT 0 NOT NULL,
    currency text NOT NULL,
    client_reference_id text,
    return_url text,
    subject_kind text NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    provider text NOT NULL,
    provider_ref text,
    url text,
    expires_at timestamp with time zone,
    completed_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    access_token text,
    subscription_id text COLLATE pg_catalog."C",
    purchase_id text COLLATE pg_catalog."C",
    access_token_sha256 bytea,
    customer_email text,
    customer_name text,
    customer_address_lines text[],
    customer_country text,
    customer_tax_id text,
    CONSTRAINT checkout_sessions_customer_email_check CHECK (((customer_email IS NULL) OR billing.email_valid(customer_email))),
    CONSTRAINT checkout_sessions_customer_valid CHECK ((((customer_name IS NULL) OR ((length(customer_name) >= 1) AND (length(customer_name) <= 200))) AND ((customer_address_lines IS NULL) OR ((cardinality(customer_address_lines) <= 6) AND (COALESCE(length(array_to_string(customer_address_lines, ''::text)), 0) <= 600))) AND ((customer_country IS NULL) OR (customer_country ~ '^[A-Z]{2}$'::text)) AND ((customer_tax_id IS NULL) OR ((length(customer_tax_id) >= 1) AND (length(customer_tax_id) <= 50))))),
    CONSTRAINT checkout_sessions_provider_check CHECK ((provider = ANY (ARRAY['sandbox'::text, 'stripe'::text]))),
    CONSTRAINT checkout_sessions_status_check CHECK ((status = ANY (ARRAY['open'::text, 'completed'::text, 'expired'::text]))),
    CONSTRAINT checkout_sessions_subject_kind_check CHECK ((subject_kind = ANY (ARRAY['member'::text, 'external'::text, 'platform'::text])))
);

ALTER TABLE ONLY billing.checkout_sessions FORCE ROW LEVEL SECURITY;


--
-- Name: checkout_billing(billing.checkout_sessions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_billing(p_cs billing.checkout_sessions) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  if num_nonnulls(p_cs.customer_name, p_cs.customer_address_lines, p_cs.customer_country, p_cs.customer_tax_id) > 0 then
    return jsonb_build_object('name', p_cs.customer_name,
      'address_lines', to_jsonb(coalesce(p_cs.customer_address_lines, '{}'::text[])),
      'country', p_cs.customer_country, 'tax_id', p_cs.customer_tax_id);
  end if;
  return billing.member_billing(p_cs.community_id, p_cs.member_id);
end
$$;


--
-- Name: checkout_details_problem(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_details_problem(p jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
begin
  if length(btrim(p->>'customer_name')) > 200 then
    return 'customer_name: expected at most 200 characters.';
  elsif p ? 'customer_address_lines' and jsonb_typeof(p->'customer_address_lines') = 'array' and (
      jsonb_array_length(p->'customer_address_lines') > 6
      or (select coalesce(sum(length(l)), 0) from jsonb_array_elements_text(p->'customer_address_lines') l) > 600) then
    return 'customer_address_lines: expected at most 6 lines of at most 600 characters in all.';
  elsif nullif(btrim(p->>'customer_country'), '') is not null and upper(btrim(p->>'customer_country')) !~ '^[A-Z]{2}$' then
    return 'customer_country: expected a two-letter ISO 3166-1 country code, e.g. "DE".';
  elsif length(btrim(p->>'customer_tax_id')) > 50 then
    return 'customer_tax_id: expected at most 50 characters.';
  end if;
  return null;
end
$_$;


--
-- Name: checkout_discount(text, text, text, billing.plans); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_discount(p_code text, p_member_id text, p_tier_id text, p_plan billing.plans, OUT discount_id uuid, OUT discount_cents integer) RETURNS record
    LANGUAGE plpgsql
    AS $$
declare
  v_d billing.discount_codes;
  v_now timestamptz := billing.now();
  v_used bigint;
begin
  -- The community named explicitly: the owner's callers (the sandbox page's discount
  -- field, billing.checkout_apply_discount) see every community's codes.
  select * into v_d from billing.discount_codes d
  where d.community_id = billing.current_community_id() and lower(d.code) = lower(p_code);
  if v_d.id is null then
    raise exception using errcode = 'BLDSC', message = 'Unknown discount code.', detail = 'discount_code';
  end if;
  perform pg_advisory_xact_lock(hashtextextended(v_d.community_id || ' discount ' || v_d.id::text, 6));
  if not v_d.is_active or v_d.archived_at is not null then
    raise exception using errcode = 'BLDSC', message = 'This discount code is not active.';
  elsif v_d.starts_at is not null and v_d.starts_at > v_now then
    raise exception using errcode = 'BLDSC', message = 'This discount code has not started yet.';
  elsif v_d.expires_at is not null and v_d.expires_at <= v_now then
    raise exception using errcode = 'BLDSC', message = 'This discount code has expired.';
  elsif cardinality(v_d.tier_ids) > 0 and not (p_tier_id = any (v_d.tier_ids)) then
    raise exception using errcode = 'BLDSC', message = 'This discount code does not apply to this tier.';
  elsif jsonb_array_length(v_d.members) > 0 and not exists (
      select 1 from billing.member_identities i, jsonb_array_elements(v_d.members) m
      where i.member_id = p_member_id and i.platform = m->>'platform' and i.platform_uid = m->>'platform_uid') then
    raise exception using errcode = 'BLDSC', message = 'This discount code is not available to this buyer.';
  elsif v_d.min_spend_cents is not null and p_plan.amount_cents < v_d.min_spend_cents then
    raise exception using errcode = 'BLDSC', message = 'The price is below this discount code''s minimum spend.';
  elsif v_d.max_spend_cents is not null and p_plan.amount_cents > v_d.max_spend_cents then
    raise exception using errcode = 'BLDSC', message = 'The price is above this discount code''s maximum spend.';
  elsif v_d.value_type = 'amount' and v_d.currency is not null and lower(v_d.currency) <> p_plan.currency then
    raise exception using errcode = 'BLDSC', message = 'This discount code is in another currency.';
  end if;
  if v_d.use_limit is not null then
    select count(*) into v_used
    from billing.discount_redemptions r
    join billing.checkout_sessions cs on cs.community_id = r.community_id and cs.id = r.checkout_id
    where r.discount_id = v_d.id
      and (r.status = 'redeemed' or (r.status = 'pending' and cs.status = 'open' and cs.expires_at > v_now));
    if v_used >= v_d.use_limit then
      raise exception using errcode = 'BLDSC', message = 'This discount code has reached its use limit.';
    end if;
  end if;
  discount_id := v_d.id;
  discount_cents := least(p_plan.amount_cents,
    case v_d.value_type when 'percent' then round(p_plan.amount_cents * v_d.percent_off / 100)::integer
                        else coalesce(v_d.amount_off_cents, 0) end);
end
$$;


--
-- Name: checkout_event_json(billing.checkout_sessions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_event_json(p_cs billing.checkout_sessions) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'id', p_cs.id, 'checkout_id', p_cs.id, 'status', p_cs.status, 'member_id', p_cs.member_id,
    'tier_id', p_cs.tier_id, 'plan_id', p_cs.plan_id, 'amount_cents', p_cs.amount_cents,
    'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'client_reference_id', p_cs.client_reference_id, 'subject_kind', p_cs.subject_kind,
    'expires_at', billing.iso(p_cs.expires_at), 'completed_at', billing.iso(p_cs.completed_at),
    'created_at', billing.iso(p_cs.created_at))
$$;


--
-- Name: checkout_json(billing.checkout_sessions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_json(p_cs billing.checkout_sessions) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object(
    'checkout_id', p_cs.id, 'member_id', p_cs.member_id, 'status', p_cs.status,
    'provider', p_cs.provider, 'url', p_cs.url,
    'expires_at', billing.iso(p_cs.expires_at), 'expired', p_cs.status = 'expired' or (p_cs.status = 'open' and p_cs.expires_at <= billing.now()),
    'tier_id', t.id, 'tier_name', t.name, 'tier_kind', t.kind,
    'plan_id', p.id, 'plan_name', p.name, 'interval', p.interval,
    'trial_days', billing.member_trial_days(p_cs.community_id, p_cs.member_id, p, p_cs.id),
    'access_days', p.access_days, 'stripe_price_id', p.stripe_price_id,
    'amount_cents', p_cs.amount_cents, 'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'discount_code', d.code, 'discount', case when d.id is null then null else jsonb_build_object(
      'id', d.id, 'value_type', d.value_type, 'percent_off', d.percent_off, 'amount_off_cents', d.amount_off_cents,
      'duration', d.duration, 'duration_months', d.duration_months) end,
    'client_reference_id', p_cs.client_reference_id, 'return_url', p_cs.return_url,
    'subscription_id', p_cs.subscription_id, 'purchase_id', p_cs.purchase_id,
    -- the sandbox page asks for an email when neither the link nor the member has one
    'needs_email', p_cs.customer_email is null and not exists (select 1 from billing.members m
      where m.community_id = p_cs.community_id and m.id = p_cs.member_id and m.email is not null),
    'customer_email', coalesce((select m.email from billing.members m
      where m.community_id = p_cs.community_id and m.id = p_cs.member_id), p_cs.customer_email),
    -- the billing details its tax follows (the page's form shows them), and the tax of
    -- a charge of the price less its discount (billing.invoice_tax, as its invoices
    -- will compute it): the page shows it on what is due today and at renewal
    'billing_details', b.details,
    'tax', billing.invoice_tax(p_cs.community_id, b.details, jsonb_build_array(jsonb_build_object('type', 'plan',
      'description', 'preview', 'amount_cents', p_cs.amount_cents - p_cs.discount_cents))),
    -- whether the community charges tax at all (an active rate): the page's Tax row
    'taxes', exists (select 1 from billing.tax_rates r where r.community_id = p_cs.community_id and r.active),
    -- Stripe computes the tax (payment_provider.automatic_tax of the catalog file)
    'stripe_automatic_tax', coalesce((select (c.payment_config->>'automatic_tax')::boolean from billing.communities c
      where c.id = p_cs.community_id and c.payment_provider = 'stripe'), false))
  from billing.plans p
  join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
  left join billing.discount_codes d on d.community_id = p_cs.community_id and d.id = p_cs.discount_id
  cross join lateral (select billing.checkout_billing(p_cs) as details) b
  where p.community_id = p_cs.community_id and p.id = p_cs.plan_id
$$;


--
-- Name: checkout_lifetime(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_lifetime() RETURNS interval
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ select interval '24 hours' $$;


--
-- Name: checkout_member(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_member(p_subject jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
  v_cid text := billing.current_community_id();
  v_member text;
  v_ns text;
  v_uid text;
  v_platform text;
begin
  if p_subject ? 'member_id' then
    select m.id into v_member from billing.members m where m.id = p_subject->>'member_id';
    if v_member is null then
      perform billing.raise('BL404', 'No member ' || (p_subject->>'member_id') || '.');
    end if;
    return v_member;
  elsif p_subject ? 'external' then
    v_ns := p_subject->'external'->>'namespace';
    v_uid := p_subject->'external'->>'external_user_id';
    perform pg_advisory_xact_lock(hashtextextended(v_cid || ' ext ' || v_ns || ' ' || v_uid, 5));
    select x.member_id into v_member from billing.external_subjects x
    where x.namespace = v_ns and x.external_user_id = v_uid;
    if v_member is null then
      insert into billing.members (community_id) values (v_cid) returning id into v_member;
      insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
      values (v_cid, v_member, v_ns, v_uid);
    end if;
    return v_member;
  else
    v_platform := p_subject->>'platform';
    v_uid := p_subject->>'platform_uid';
    perform pg_advisory_xact_lock(hashtextextended(v_cid || ' pid ' || v_platform || ' ' || v_uid, 5));
    select i.member_id into v_member from billing.member_identities i
    where i.platform = v_platform and i.platform_uid = v_uid;
    if v_member is null then
      insert into billing.members (community_id) values (v_cid) returning id into v_member;
      insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
      values (v_cid, v_member, v_platform, v_uid, p_subject->>'username');
    end if;
    return v_member;
  end if;
end
$$;


--
-- Name: checkout_set_details(text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.checkout_set_details(p_checkout_id text, p_details jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_cs billing.checkout_sessions;
  v_problem text := billing.checkout_details_problem(p_details);
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || coalesce(p_checkout_id, '') || '.');
  elsif v_cs.status <> 'open' or v_cs.expires_at <= billing.now() then
    perform billing.raise('BL409', 'This checkout is no longer open.');
  elsif v_problem is not null then
    perform billing.raise('BL422', v_problem, split_part(v_problem, ':', 1));
  end if;
  update billing.checkout_sessions cs set
    customer_name = nullif(btrim(p_details->>'customer_name'), ''),
    customer_address_lines = nullif(array(select btrim(l) from jsonb_array_elements_text(coalesce(p_details->'customer_address_lines', '[]')) l
                                          where btrim(l) <> ''), '{}'),
    customer_country = upper(nullif(btrim(p_details->>'customer_country'), '')),
    customer_tax_id = nullif(btrim(p_details->>'customer_tax_id'), '')
  where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
  return billing.checkout_json(v_cs);
end
$$;


--
-- Name: community_now(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.community_now(p_community_id text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
begin
  return now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = p_community_id), '0'::interval);
end
$$;


--
-- Name: complete_checkout(text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.complete_checkout(p_checkout_id text, p_details jsonb DEFAULT '{}'::jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $_$
declare
  v_cs billing.checkout_sessions;
  v_plan billing.plans;
  v_tier billing.tiers;
  v_now timestamptz := billing.now();
  v_paid boolean := coalesce((p_details->>'paid')::boolean, false);
  v_sub billing.subscriptions;
  v_sub_id text;
  v_pur_id text;
  v_trial_end timestamptz;
  v_lines jsonb;
  v_code text;
  v_inv billing.invoices;
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || p_checkout_id || '.');
  end if;
  if v_cs.status = 'completed' then
    return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
      'subscription_id', v_cs.subscription_id, 'purchase_id', v_cs.purchase_id, 'already_completed', true);
  end if;
  if not v_paid and (v_cs.status = 'expired' or v_cs.expires_at <= v_now) then
    perform billing.raise('BL409', 'Checkout ' || v_cs.id || ' has expired.');
  end if;
  select * into v_plan from billing.plans p where p.community_id = v_cs.community_id and p.id = v_cs.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_cs.community_id and t.id = v_plan.tier_id;
  if not v_paid then
    -- One completion per member at a time: two checkouts of one buyer paid at once
    -- must not both pass the check and both subscribe (found by the concurrent money
    -- property test). The check runs after the lock, so it sees the other's commit.
    perform pg_advisory_xact_lock(hashtextextended(v_cs.community_id || ' member ' || v_cs.member_id, 5));
    perform billing.check_eligible(v_cs.member_id, v_tier, v_plan);
  end if;
  select d.code into v_code from billing.discount_codes d where d.community_id = v_cs.community_id and d.id = v_cs.discount_id;

  -- The buyer's email (the provider's page, else the checkout link's customer_email)
  -- becomes the member's when it has none, before the invoice is paid, so the receipt
  -- (65-mail.sql) has an address. An operator's address is never replaced.
  update billing.members m set email = v_email, updated_at = now()
  from (select coalesce(e.given, v_cs.customer_email) as v_email
        from (select nullif(btrim(p_details->>'customer_email'), '') as given) e) x
  where m.community_id = v_cs.community_id and m.id = v_cs.member_id and m.email is null
    and x.v_email is not null and billing.email_valid(x.v_email);

  -- The buyer's billing details (the provider's page, else those given for the
  -- checkout) become the member's, all four together, before the invoice is taxed: the
  -- last checkout's word is the buyer's current one (docs/decisions/tax.md).
  if num_nonnulls(nullif(p_details->>'customer_name', ''), nullif(p_details->>'customer_country', ''),
                  nullif(p_details->>'customer_tax_id', ''), p_details->'customer_address_lines') > 0 then
    update billing.members m set billing_name = left(nullif(btrim(p_details->>'customer_name'), ''), 200),
      billing_address_lines = nullif(array(select left(btrim(l), 100) from jsonb_array_elements_text(
        case when jsonb_typeof(p_details->'customer_address_lines') = 'array' then p_details->'customer_address_lines' else '[]' end) l
        where btrim(l) <> '' limit 6), '{}'),
      billing_country = case when upper(p_details->>'customer_country') ~ '^[A-Z]{2}$' then upper(p_details->>'customer_country') end,
      billing_tax_id = left(nullif(btrim(p_details->>'customer_tax_id'), ''), 50), updated_at = now()
    where m.community_id = v_cs.community_id and m.id = v_cs.member_id;
  elsif num_nonnulls(v_cs.customer_name, v_cs.customer_address_lines, v_cs.customer_country, v_cs.customer_tax_id) > 0 then
    update billing.members m set billing_name = v_cs.customer_name, billing_address_lines = v_cs.customer_address_lines,
      billing_country = v_cs.customer_country, billing_tax_id = v_cs.customer_tax_id, updated_at = now()
    where m.community_id = v_cs.community_id and m.id = v_cs.member_id
      and (m.billing_name, m.billing_address_lines, m.billing_country, m.billing_tax_id)
        is distinct from (v_cs.customer_name, v_cs.customer_address_lines, v_cs.customer_country, v_cs.customer_tax_id);
  end if;

  if v_plan.interval is not null then
    if p_details->>'provider_ref' is not null then
      select s.id into v_sub_id from billing.subscriptions s
      where s.community_id = v_cs.community_id and s.provider_ref = p_details->>'provider_ref';
    end if;
    if v_sub_id is null then
      v_trial_end := coalesce((p_details->>'trial_end')::timestamptz,
        case when billing.member_trial_days(v_cs.community_id, v_cs.member_id, v_plan) > 0 and p_details->>'status' is null
          then v_now + make_interval(days => v_plan.trial_days) end);
      insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start,
        current_period_end, trial_end, cancel_at, client_reference_id, checkout_id, provider, provider_ref,
        provider_customer_ref, provider_updated_at, billing_anchor, discount_id, created_at, trial_tier_id, price_cents)
      values (v_cs.community_id, v_cs.member_id, v_plan.id,
        coalesce(p_details->>'status', case when v_trial_end is not null then 'trialing' else 'active' end),
        coalesce((p_details->>'period_start')::timestamptz, v_now),
        coalesce((p_details->>'period_end')::timestamptz, v_trial_end, billing.add_utc(v_now, billing.plan_interval(v_plan.interval))),
        v_trial_end, (p_details->>'cancel_at')::timestamptz, v_cs.client_reference_id, v_cs.id, v_cs.provider,
        p_details->>'provider_ref', p_details->>'customer_ref', (p_details->>'provider_updated_at')::timestamptz,
        coalesce(v_trial_end, (p_details->>'period_start')::timestamptz, v_now), v_cs.discount_id, v_now,
        case when v_trial_end is not null then v_plan.tier_id end,
        -- the price its buyer was shown (docs/decisions/price-changes-keep-existing-subscribers.md)
        v_cs.amount_cents)
      returning * into v_sub;
      v_sub_id := v_sub.id;
      if v_cs.provider = 'sandbox' then
        if v_trial_end is not null then
          v_lines := jsonb_build_array(billing.plan_line(v_plan, 0, v_sub.current_period_start, v_trial_end,
            'Trial period for ' || v_tier.name || coalesce(' (' || v_plan.name || ')', '')));
        else
          v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_sub.current_period_start,
            v_sub.current_period_end));
          if v_cs.discount_cents > 0 then
            v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_sub.current_period_start,
              v_sub.current_period_end);
          end if;
        end if;
        v_inv := billing.invoice_open(v_sub.id, null, v_cs.member_id, 'subscription_create', v_cs.currency, v_lines,
          v_sub.current_period_start, v_sub.current_period_end, v_cs.provider, v_now, v_cs.id);
        perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
      end if;
    else
      update billing.subscriptions s set checkout_id = v_cs.id,
        client_reference_id = coalesce(s.client_reference_id, v_cs.client_reference_id),
        provider_customer_ref = coalesce(s.provider_customer_ref, p_details->>'customer_ref'),
        discount_id = coalesce(s.discount_id, v_cs.discount_id)
      where s.community_id = v_cs.community_id and s.id = v_sub_id
        and (s.checkout_id is distinct from v_cs.id or s.client_reference_id is null and v_cs.client_reference_id is not null
          or s.discount_id is null and v_cs.discount_id is not null);
    end if;
  else
    insert into billing.purchases (community_id, member_id, plan_id, status, amount_cents, currency,
      access_expires_at, paid_at, client_reference_id, checkout_id, provider_ref, created_at)
    values (v_cs.community_id, v_cs.member_id, v_plan.id, 'completed', v_cs.amount_cents - v_cs.discount_cents,
      v_cs.currency, case when v_plan.access_days is not null then v_now + make_interval(days => v_plan.access_days) end,
      v_now, v_cs.client_reference_id, v_cs.id, p_details->>'provider_ref', v_now)
    returning id into v_pur_id;
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_now, null));
    if v_cs.discount_cents > 0 then
      v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_now, null);
    end if;
    -- Stripe's purchase is taxed as Stripe charged it (none unless it says so).
    v_inv := billing.invoice_open(null, v_pur_id, v_cs.member_id, 'purchase', v_cs.currency, v_lines, v_now, null,
      v_cs.provider, v_now, v_cs.id, case when v_cs.provider = 'stripe' then p_details->>'provider_ref' end,
      case when v_cs.provider = 'stripe' then coalesce(p_details->'tax', '{"tax_lines": []}') end);
    perform billing.invoice_mark_paid(v_inv, v_now, p_details->>'provider_ref');
  end if;

  if v_cs.provider = 'stripe' and p_details->>'customer_ref' is not null then
    insert into billing.member_provider_customers (community_id, member_id, provider, customer_ref)
    values (v_cs.community_id, v_cs.member_id, v_cs.provider, p_details->>'customer_ref')
    on conflict (community_id, member_id, provider) do nothing;
  end if;

  update billing.checkout_sessions cs set status = 'completed', completed_at = v_now,
    subscription_id = v_sub_id, purchase_id = v_pur_id
  where cs.community_id = v_cs.community_id and cs.id = v_cs.id;
  update billing.discount_redemptions r set status = 'redeemed'
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id;

  return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
    'subscription_id', v_sub_id, 'purchase_id', v_pur_id, 'already_completed', false);
end
$_$;


--
-- Name: credit_notes; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.credit_notes (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('cn'::text) NOT NULL COLLATE pg_catalog."C",
    invoice_id text NOT NULL COLLATE pg_catalog."C",
    refund_id text NOT NULL COLLATE pg_catalog."C",
    number text NOT NULL,
    amount_cents bigint NOT NULL,
    currency text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    tax_cents bigint DEFAULT 0 NOT NULL,
    CONSTRAINT credit_notes_amount_cents_check CHECK ((amount_cents > 0)),
    CONSTRAINT credit_notes_currency_check CHECK ((currency ~ '^[a-z]{3}$'::text)),
    CONSTRAINT credit_notes_tax_at_most_amount CHECK (((tax_cents >= 0) AND (tax_cents <= amount_cents)))
);

ALTER TABLE ONLY billing.credit_notes FORCE ROW LEVEL SECURITY;


--
-- Name: credit_note_json(billing.credit_notes); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.credit_note_json(p_cn billing.credit_notes) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object('id', p_cn.id, 'number', p_cn.number, 'refund_id', p_cn.refund_id,
    'amount_cents', p_cn.amount_cents, 'tax_cents', p_cn.tax_cents, 'created_at', billing.iso(p_cn.created_at))
$$;


--
-- Name: current_community_id(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.current_community_id() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select case
    when pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
         and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')
      then billing_private.operator_community_id()
    else nullif(pg_catalog.current_setting('app.community_id', true), '')
  end
$$;


--
-- Name: current_member_id(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.current_member_id() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ select nullif(pg_catalog.current_setting('app.member_id', true), '') $$;


--
-- Name: current_scopes(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.current_scopes() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ select coalesce(string_to_array(nullif(current_setting('app.scopes', true), ''), ' '), '{}') $$;


--
-- Name: discount_codes; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.discount_codes (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    code text NOT NULL,
    name text,
    value_type text NOT NULL,
    percent_off numeric,
    amount_off_cents integer,
    currency text,
    duration text DEFAULT 'once'::text NOT NULL,
    duration_months integer,
    use_limit integer,
    min_spend_cents integer,
    max_spend_cents integer,
    starts_at timestamp with time zone,
    expires_at timestamp with time zone,
    is_active boolean DEFAULT true NOT NULL,
    archived_at timestamp with time zone,
    tier_ids text[] DEFAULT '{}'::text[] NOT NULL,
    members jsonb DEFAULT '[]'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT discount_codes_amount_off_cents_check CHECK ((amount_off_cents > 0)),
    CONSTRAINT discount_codes_amount_value CHECK (((value_type <> 'amount'::text) OR ((amount_off_cents IS NOT NULL) AND (currency IS NOT NULL) AND (percent_off IS NULL)))),
    CONSTRAINT discount_codes_duration_check CHECK ((duration = ANY (ARRAY['once'::text, 'repeating'::text, 'forever'::text]))),
    CONSTRAINT discount_codes_duration_months CHECK (((duration = 'repeating'::text) = (duration_months IS NOT NULL))),
    CONSTRAINT discount_codes_duration_months_check CHECK ((duration_months > 0)),
    CONSTRAINT discount_codes_max_spend_cents_check CHECK ((max_spend_cents >= 0)),
    CONSTRAINT discount_codes_min_spend_cents_check CHECK ((min_spend_cents >= 0)),
    CONSTRAINT discount_codes_percent_off_check CHECK (((percent_off > (0)::numeric) AND (percent_off <= (100)::numeric))),
    CONSTRAINT discount_codes_percent_value CHECK (((value_type <> 'percent'::text) OR ((percent_off IS NOT NULL) AND (amount_off_cents IS NULL)))),
    CONSTRAINT discount_codes_spend_range CHECK ((min_spend_cents <= max_spend_cents)),
    CONSTRAINT discount_codes_use_limit_check CHECK ((use_limit > 0)),
    CONSTRAINT discount_codes_value_type_check CHECK ((value_type = ANY (ARRAY['percent'::text, 'amount'::text]))),
    CONSTRAINT discount_codes_window CHECK ((starts_at < expires_at))
);

ALTER TABLE ONLY billing.discount_codes FORCE ROW LEVEL SECURITY;


--
-- Name: discount_inactive_reason(billing.discount_codes); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.discount_inactive_reason(p_d billing.discount_codes) RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
declare
  v_now timestamptz := billing.now();
begin
  if not p_d.is_active or p_d.archived_at is not null then
    return 'disabled';
  elsif p_d.expires_at is not null and p_d.expires_at <= v_now then
    return 'expired';
  elsif p_d.use_limit is not null and (
      select count(*) from billing.discount_redemptions r
      left join billing.checkout_sessions cs on cs.community_id = r.community_id and cs.id = r.checkout_id
      where r.community_id = p_d.community_id and r.discount_id = p_d.id
        and (r.status = 'redeemed' or (r.status = 'pending' and cs.status = 'open' and cs.expires_at > v_now))) >= p_d.use_limit then
    return 'exhausted';
  elsif p_d.starts_at is not null and p_d.starts_at > v_now then
    return 'not_started';
  end if;
  return null;
end
$$;


--
-- Name: discount_json(billing.discount_codes); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.discount_json(p_d billing.discount_codes) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'id', p_d.id, 'code', p_d.code, 'name', p_d.name, 'value_type', p_d.value_type,
    'percent_off', p_d.percent_off, 'amount_off_cents', p_d.amount_off_cents, 'currency', p_d.currency,
    'duration', p_d.duration, 'duration_months', p_d.duration_months, 'use_limit', p_d.use_limit,
    'min_spend_cents', p_d.min_spend_cents, 'max_spend_cents', p_d.max_spend_cents,
    'starts_at', billing.iso(p_d.starts_at), 'expires_at', billing.iso(p_d.expires_at),
    'is_active', st.reason is null, 'inactive_reason', st.reason, 'tier_ids', to_jsonb(p_d.tier_ids),
    'members', coalesce((
      select jsonb_agg(jsonb_build_object('platform', m->>'platform', 'platform_uid', m->>'platform_uid',
        'username', m->>'username'))
      from jsonb_array_elements(p_d.members) m), '[]'),
    'redeemed_count', c.redeemed,
    'pending_count', c.pending,
    'created_at', billing.iso(p_d.created_at))
  from (
    select count(*) filter (where r.status = 'redeemed') as redeemed,
      count(*) filter (where r.status = 'pending') as pending
    from billing.discount_redemptions r
    where r.community_id = p_d.community_id and r.discount_id = p_d.id) c
  cross join lateral (select billing.discount_inactive_reason(p_d) as reason) st
$$;


--
-- Name: discount_line(text, bigint, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.discount_line(p_code text, p_amount bigint, p_start timestamp with time zone, p_end timestamp with time zone) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
  select jsonb_build_object('type', 'discount', 'description', 'Discount ' || coalesce(p_code, ''),
    'amount_cents', -p_amount, 'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
$$;


--
-- Name: disputes; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.disputes (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('dp'::text) NOT NULL COLLATE pg_catalog."C",
    invoice_id text NOT NULL COLLATE pg_catalog."C",
    amount_cents bigint NOT NULL,
    status text NOT NULL,
    reason text,
    provider text NOT NULL,
    provider_ref text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    closed_at timestamp with time zone,
    CONSTRAINT disputes_amount_cents_check CHECK ((amount_cents >= 0)),
    CONSTRAINT disputes_provider_check CHECK ((provider = ANY (ARRAY['sandbox'::text, 'stripe'::text]))),
    CONSTRAINT disputes_status_check CHECK ((status = ANY (ARRAY['needs_response'::text, 'under_review'::text, 'won'::text, 'lost'::text])))
);

ALTER TABLE ONLY billing.disputes FORCE ROW LEVEL SECURITY;


--
-- Name: dispute_json(billing.disputes); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.dispute_json(p_dp billing.disputes) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object('id', p_dp.id, 'invoice_id', p_dp.invoice_id, 'amount_cents', p_dp.amount_cents,
    'status', p_dp.status, 'reason', p_dp.reason, 'created_at', billing.iso(p_dp.created_at),
    'opened_at', billing.iso(p_dp.created_at), 'closed_at', billing.iso(p_dp.closed_at))
$$;


--
-- Name: dunning_next_attempt(text, timestamp with time zone, integer); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.dunning_next_attempt(p_community_id text, p_due timestamp with time zone, p_attempt integer) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
  select p_due + make_interval(days => (c.dunning->'retry_days'->>(p_attempt - 1))::integer)
  from billing.communities c where c.id = p_community_id
$$;


--
-- Name: dunning_valid(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.dunning_valid(p jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
  select jsonb_typeof(p) = 'object'
    and p ?& array['retry_days', 'final_action']
    and (select array_agg(k order by k) from jsonb_object_keys(p) k) <@ array['final_action', 'retry_days']
    and p->>'final_action' in ('cancel')
    and jsonb_typeof(p->'retry_days') = 'array'
    and jsonb_array_length(p->'retry_days') between 1 and 8
    and not exists (
      select 1 from jsonb_array_elements(p->'retry_days') with ordinality e(v, i)
      where jsonb_typeof(e.v) <> 'number' or (e.v)::text !~ '^[0-9]+$'
        or (e.v)::integer not between 1 and 28
        or (i > 1 and (e.v)::integer <= (p->'retry_days'->>(i::integer - 2))::integer))
$_$;


--
-- Name: emit_event(text, text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.emit_event(p_community_id text, p_type text, p_data jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
  v_id text;
begin
  insert into billing.events (community_id, type, data) values (p_community_id, p_type, p_data)
  returning id into v_id;
  return v_id;
end
$$;


--
-- Name: encode_cursor(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.encode_cursor(p_id text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select translate(encode(convert_to(jsonb_build_object('id', p_id,
    'list', nullif(current_setting('app.cursor_list', true), ''),
    'filters', nullif(current_setting('app.cursor_filters', true), ''))::text, 'UTF8'), 'base64'), E'+/=\n', '-_')
$$;


--
-- Name: eu_member(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.eu_member(p_country text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select p_country = any (array['AT', 'BE', 'BG', 'CY', 'CZ', 'DE', 'DK', 'EE', 'ES', 'FI', 'FR', 'GR', 'HR', 'HU',
    'IE', 'IT', 'LT', 'LU', 'LV', 'MT', 'NL', 'PL', 'PT', 'RO', 'SE', 'SI', 'SK'])
$$;


--
-- Name: eu_vat_id_valid(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.eu_vat_id_valid(p_country text, p_tax_id text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
  select coalesce(upper(regexp_replace(coalesce(p_tax_id, ''), '[ .-]', '', 'g')) ~ ('^' || case p_country
      when 'AT' then 'ATU[0-9]{8}'
      when 'BE' then 'BE[01][0-9]{9}'
      when 'BG' then 'BG[0-9]{9,10}'
      when 'CY' then 'CY[0-9]{8}[A-Z]'
      when 'CZ' then 'CZ[0-9]{8,10}'
      when 'DE' then 'DE[0-9]{9}'
      when 'DK' then 'DK[0-9]{8}'
      when 'EE' then 'EE[0-9]{9}'
      when 'ES' then 'ES[0-9A-Z][0-9]{7}[0-9A-Z]'
      when 'FI' then 'FI[0-9]{8}'
      when 'FR' then 'FR[0-9A-HJ-NP-Z]{2}[0-9]{9}'
      when 'GR' then 'EL[0-9]{9}'
      when 'HR' then 'HR[0-9]{11}'
      when 'HU' then 'HU[0-9]{8}'
      when 'IE' then 'IE([0-9]{7}[A-W][A-I]?|[0-9][A-Z+*][0-9]{5}[A-W])'
      when 'IT' then 'IT[0-9]{11}'
      when 'LT' then 'LT([0-9]{9}|[0-9]{12})'
      when 'LU' then 'LU[0-9]{8}'
      when 'LV' then 'LV[0-9]{11}'
      when 'MT' then 'MT[0-9]{8}'
      when 'NL' then 'NL[0-9]{9}B[0-9]{2}'
      when 'PL' then 'PL[0-9]{10}'
      when 'PT' then 'PT[0-9]{9}'
      when 'RO' then 'RO[0-9]{2,10}'
      when 'SE' then 'SE[0-9]{10}01'
      when 'SI' then 'SI[0-9]{8}'
      when 'SK' then 'SK[0-9]{10}' end || '$'), false)
$_$;


--
-- Name: events; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.events (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('evt'::text) NOT NULL COLLATE pg_catalog."C",
    type text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    api_version text DEFAULT billing.api_version() NOT NULL,
    data jsonb NOT NULL
);

ALTER TABLE ONLY billing.events FORCE ROW LEVEL SECURITY;


--
-- Name: event_json(billing.events); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.event_json(p_event billing.events) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object('id', p_event.id, 'type', p_event.type,
    'timestamp', billing.iso(p_event.created_at), 'api_version', p_event.api_version,
    'data', p_event.data)
$$;


--
-- Name: expire_checkout(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.expire_checkout(p_checkout_id text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
declare
  v_id text;
begin
  update billing.checkout_sessions cs set status = 'expired'
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id and cs.status = 'open'
  returning cs.id into v_id;
  if v_id is null then
    return false;
  end if;
  update billing.discount_redemptions r set status = 'released'
  where r.community_id = billing.current_community_id() and r.checkout_id = v_id and r.status = 'pending';
  return true;
end
$$;


--
-- Name: expire_checkouts(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.expire_checkouts() RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
  v_n integer;
begin
  with expired as (
    update billing.checkout_sessions cs set status = 'expired'
    where cs.community_id = billing.current_community_id() and cs.status = 'open' and cs.expires_at <= billing.now()
    returning cs.community_id, cs.id)
  , released as (
    update billing.discount_redemptions r set status = 'released'
    from expired e where r.community_id = e.community_id and r.checkout_id = e.id and r.status = 'pending'
    returning 1)
  select count(*) into v_n from expired;
  return v_n;
end
$$;


--
-- Name: gate_close(jsonb, jsonb, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.gate_close(p_limits jsonb, p_idem jsonb DEFAULT NULL::jsonb, p_answer jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_rl jsonb := nullif(current_setting('app.gate_token', true), '')::jsonb;
begin
  if p_idem is not null and p_answer is not null then
    perform billing.idempotency_finish(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash', 0, p_answer);
  end if;
  if v_rl is null then
    v_rl := billing_private.take_token('key:' || current_setting('app.key_id'),
      coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
  end if;
  if not (v_rl->>'allowed')::boolean then
    raise exception using errcode = 'BL429', message = 'rate limited', detail = v_rl::text;
  end if;
  return v_rl;
end
$$;


--
-- Name: gate_open(text, text, jsonb, text, jsonb, boolean, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.gate_open(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_idem jsonb DEFAULT NULL::jsonb, p_leased boolean DEFAULT false, p_request_id text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_key_id text;
  v_community_id text;
  v_scopes text[];
  v_member_id text;
  v_available boolean;
  v_rl jsonb;
  v_open jsonb;
  v_replay jsonb;
  v_state text;
  v_msg text;
begin
  if p_credential is not null and p_leased then
    -- Two statements, not one with "p_leased or (...)": PostgreSQL would fold that
    -- differently per value and plan it again on every call.
    select k.id, k.community_id, k.scopes into v_key_id, v_community_id, v_scopes
    from billing_private.api_keys k
    where k.key_hash = p_credential and k.revoked_at is null;
  elsif p_credential is not null then
    -- A scalar subquery, so the bucket is always one primary-key probe (a join may
    -- be planned as a scan of the bucket table, whose pages fill with dead versions);
    -- key ids are collate "C", the bucket column is not: without the collate clause
    -- the primary key cannot be used.
    select k.id, k.community_id, k.scopes,
      (select least(coalesce((p_limits->>'key_burst')::float8, 60),
          b.tokens + extract(epoch from (clock_timestamp() - b.updated_at))
            * coalesce((p_limits->>'key_per_minute')::float8, 300) / 60.0) >= 1
       from billing_private.rate_buckets b where b.bucket = ('key:' || k.id) collate "default")
      into v_key_id, v_community_id, v_scopes, v_available
    from billing_private.api_keys k
    where k.key_hash = p_credential and k.revoked_at is null;
    if v_key_id is null then
      -- A session (15-operators.sql): its role's scopes; its bucket is keyed by the session id.
      select c->>'key_id', c->>'community_id', array(select jsonb_array_elements_text(c->'scopes')), c->>'member_id',
        (select least(coalesce((p_limits->>'key_burst')::float8, 60),
            b.tokens + extract(epoch from (clock_timestamp() - b.updated_at))
              * coalesce((p_limits->>'key_per_minute')::float8, 300) / 60.0) >= 1
         from billing_private.rate_buckets b where b.bucket = ('key:' || (c->>'key_id')) collate "default")
        into v_key_id, v_community_id, v_scopes, v_member_id, v_available
      from billing_private.session_credential(p_credential) c where c is not null;
    end if;
  end if;
  if v_key_id is null then
    if p_leased then
      return jsonb_build_object('ok', false, 'error', 'unauthorized');
    end if;
    v_rl := billing_private.take_token('ip:' || coalesce(p_ip, '?'),
      coalesce((p_limits->>'ip_per_minute')::float8, 20), coalesce((p_limits->>'ip_burst')::float8, 10));
    return jsonb_build_object('ok', false,
      'error', case when (v_rl->>'allowed')::boolean then 'unauthorized' else 'rate_limited' end, 'rl', v_rl);
  end if;
  if not coalesce(v_available, true) then
    -- Empty or nearly: take the token now, and answer 429 before anything runs.
    v_rl := billing_private.take_token('key:' || v_key_id,
      coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
  end if;
  -- The tenant: RLS reads app.community_id; a member portal session sees its own
  -- member only (app.member_id: 82-member-portal.sql, member_fence policies);
  -- gate_close spends the token taken here, if any (app.gate_token). The audit log
  -- (12-audit.sql) names the request's key or session and its X-Request-Id.
  perform set_config('app.community_id', v_community_id, true), set_config('app.key_id', v_key_id, true),
    set_config('app.member_id', coalesce(v_member_id, ''), true),
    set_config('app.scopes', array_to_string(v_scopes, ' '), true),
    set_config('app.gate_token', coalesce(v_rl::text, ''), true),
    set_config('app.request_id', coalesce(p_request_id, ''), true);
  v_open := jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
    'scopes', to_jsonb(v_scopes), 'member_id', v_member_id);
  if v_rl is not null then
    v_open := v_open || jsonb_build_object('rl', v_rl);
  end if;
  if p_scope is not null and not (p_scope = any (v_scopes)) then
    return v_open || jsonb_build_object('error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  if p_idem is not null then
    begin
      v_replay := billing.idempotency_begin(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash');
    exception when others then
      get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text;
      if v_state not like 'BL%' then
        raise;
      end if;
      return v_open || jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg, 'detail', null));
    end;
    if v_replay is not null then
      return v_open || jsonb_build_object('replay', v_replay->'body');
    end if;
  end if;
  return v_open;
end
$$;


--
-- Name: grants; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.grants (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('grt'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    tier_id text NOT NULL COLLATE pg_catalog."C",
    note text,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT grants_note_check CHECK ((length(note) <= 500))
);

ALTER TABLE ONLY billing.grants FORCE ROW LEVEL SECURITY;


--
-- Name: grant_json(billing.grants); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.grant_json(p_g billing.grants) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object('id', p_g.id, 'member_id', p_g.member_id, 'tier_id', p_g.tier_id, 'note', p_g.note,
    'expires_at', billing.iso(p_g.expires_at), 'revoked_at', billing.iso(p_g.revoked_at),
    'status', case when p_g.revoked_at is not null then 'revoked'
                   when not billing.source_grants_access('grant', p_g.community_id, p_g.id, 'active', p_g.expires_at,
                          billing.community_now(p_g.community_id)) then 'expired'
                   else 'active' end,
    'created_at', billing.iso(p_g.created_at))
$$;


--
-- Name: has_scope(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.has_scope(p_scope text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ select p_scope = any (billing.current_scopes()) $$;


--
-- Name: html_escape(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.html_escape(p_text text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select replace(replace(replace(replace(replace(coalesce(p_text, ''), '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '"', '&quot;'), '''', '&#39;')
$$;


--
-- Name: idempotency_begin(text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.idempotency_begin(p_endpoint text, p_key text, p_hash text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_rec billing.idempotency_keys;
begin
  if not pg_try_advisory_xact_lock(hashtextextended(
       billing.current_community_id() || ' ' || p_endpoint || ' ' || p_key, 7)) then
    raise exception using errcode = 'BLRIF',
      message = 'A request with this Idempotency-Key is still being processed.';
  end if;
  select * into v_rec from billing.idempotency_keys i
  where i.community_id = billing.current_community_id() and i.endpoint = p_endpoint and i.key = p_key
    and i.expires_at > now();
  if v_rec.key is null then
    return null;
  end if;
  if v_rec.request_hash <> p_hash then
    raise exception using errcode = 'BLIKR',
      message = 'This Idempotency-Key was used with a different request body.';
  end if;
  return jsonb_build_object('status', v_rec.response_status, 'body', v_rec.response_body);
end
$$;


--
-- Name: idempotency_finish(text, text, text, integer, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.idempotency_finish(p_endpoint text, p_key text, p_hash text, p_status integer, p_body jsonb) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  insert into billing.idempotency_keys (community_id, endpoint, key, request_hash, response_status,
    response_body, expires_at)
  values (billing.current_community_id(), p_endpoint, p_key, p_hash, p_status, p_body, now() + interval '24 hours')
  on conflict (community_id, endpoint, key) do update set
    request_hash = excluded.request_hash, response_status = excluded.response_status,
    response_body = excluded.response_body, created_at = now(), expires_at = excluded.expires_at
$$;


--
-- Name: invoice_by_payment(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_by_payment(p_payment_ref text) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  select coalesce(
    (select a.invoice_id from billing.payment_attempts a
     where a.community_id = billing.current_community_id() and a.provider_ref = p_payment_ref and a.status = 'succeeded' limit 1),
    (select i.id from billing.invoices i join billing.purchases pu on pu.community_id = i.community_id and pu.id = i.purchase_id
     where i.community_id = billing.current_community_id() and pu.provider_ref = p_payment_ref limit 1))
$$;


--
-- Name: invoice_lines_sum(jsonb, text[]); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_lines_sum(p_lines jsonb, p_types text[]) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
begin
  return (select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
          from jsonb_array_elements(p_lines) l
          where p_types is null or l->>'type' = any (p_types));
end
$$;


--
-- Name: invoice_lines_valid(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_lines_valid(p_lines jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
begin
  if p_lines is null then
    return null;
  end if;
  if jsonb_typeof(p_lines) <> 'array' then
    return false;
  end if;
  return not exists (
    select 1 from jsonb_array_elements(p_lines) l
    where jsonb_typeof(l) <> 'object'
      or l->>'type' is null or l->>'type' not in ('plan', 'proration', 'discount')
      or jsonb_typeof(l->'description') <> 'string' or length(l->>'description') = 0
      or jsonb_typeof(l->'amount_cents') <> 'number' or (l->>'amount_cents') !~ '^-?[0-9]+$'
      or (l->>'type' = 'plan' and (l->>'amount_cents')::bigint < 0)
      or (l->>'type' = 'discount' and (l->>'amount_cents')::bigint > 0));
end
$_$;


--
-- Name: invoice_tax_lines_valid(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_tax_lines_valid(p_lines jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
begin
  if p_lines is null then
    return null;
  end if;
  if jsonb_typeof(p_lines) <> 'array' then
    return false;
  end if;
  return not exists (
    select 1 from jsonb_array_elements(p_lines) l
    where jsonb_typeof(l) <> 'object'
      or jsonb_typeof(l->'name') <> 'string' or length(l->>'name') not between 1 and 40
      or jsonb_typeof(l->'inclusive') <> 'boolean'
      or jsonb_typeof(l->'amount_cents') <> 'number' or (l->>'amount_cents') !~ '^[0-9]+$'
      or (l->'country' is not null and jsonb_typeof(l->'country') <> 'null' and coalesce(l->>'country', '') !~ '^[A-Z]{2}$')
      or (l->'rate_ppm' is not null and jsonb_typeof(l->'rate_ppm') <> 'null'
          and (coalesce(l->>'rate_ppm', '') !~ '^[0-9]+$' or (l->>'rate_ppm')::bigint > 1000000))
      or (l->'taxable_cents' is not null and jsonb_typeof(l->'taxable_cents') <> 'null'
          and coalesce(l->>'taxable_cents', '') !~ '^-?[0-9]+$'));
end
$_$;


--
-- Name: invoice_tax_sum(jsonb, boolean); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_tax_sum(p_lines jsonb, p_inclusive boolean) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
begin
  return (select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
          from jsonb_array_elements(p_lines) l
          where p_inclusive is null or (l->>'inclusive')::boolean = p_inclusive);
end
$$;


--
-- Name: invoices; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.invoices (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('inv'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    subscription_id text COLLATE pg_catalog."C",
    purchase_id text COLLATE pg_catalog."C",
    checkout_id text COLLATE pg_catalog."C",
    status text NOT NULL,
    billing_reason text NOT NULL,
    currency text NOT NULL,
    lines jsonb DEFAULT '[]'::jsonb NOT NULL,
    subtotal_cents bigint NOT NULL,
    discount_cents bigint NOT NULL,
    total_cents bigint NOT NULL,
    amount_paid_cents bigint DEFAULT 0 NOT NULL,
    amount_refunded_cents bigint DEFAULT 0 NOT NULL,
    attempt_count integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone,
    period_start timestamp with time zone,
    period_end timestamp with time zone,
    paid_at timestamp with time zone,
    provider text NOT NULL,
    provider_ref text,
    provider_updated_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    dispute jsonb,
    number text,
    credit_notes jsonb DEFAULT '[]'::jsonb NOT NULL,
    tax_lines jsonb DEFAULT '[]'::jsonb NOT NULL,
    tax_cents bigint DEFAULT 0 NOT NULL,
    tax_country text,
    reverse_charge boolean DEFAULT false NOT NULL,
    buyer_name text,
    buyer_address_lines text[],
    buyer_country text,
    buyer_tax_id text,
    seller_country text,
    seller_tax_id text,
    CONSTRAINT invoices_amount_paid_cents_check CHECK ((amount_paid_cents >= 0)),
    CONSTRAINT invoices_amount_refunded_cents_check CHECK ((amount_refunded_cents >= 0)),
    CONSTRAINT invoices_attempt_count_check CHECK ((attempt_count >= 0)),
    CONSTRAINT invoices_billing_reason_check CHECK ((billing_reason = ANY (ARRAY['subscription_create'::text, 'subscription_cycle'::text, 'subscription_update'::text, 'purchase'::text]))),
    CONSTRAINT invoices_currency_check CHECK ((currency ~ '^[a-z]{3}$'::text)),
    CONSTRAINT invoices_discount_cents_check CHECK ((discount_cents >= 0)),
    CONSTRAINT invoices_discount_is_lines CHECK ((discount_cents = (- billing.invoice_lines_sum(lines, ARRAY['discount'::text])))),
    CONSTRAINT invoices_lines_check CHECK (billing.invoice_lines_valid(lines)),
    CONSTRAINT invoices_one_owner CHECK ((num_nonnulls(subscription_id, purchase_id) = 1)),
    CONSTRAINT invoices_paid_in_full CHECK ((((status = 'paid'::text) = (paid_at IS NOT NULL)) AND ((status = 'paid'::text) OR (amount_paid_cents = 0)) AND ((status <> 'paid'::text) OR (amount_paid_cents = total_cents)))),
    CONSTRAINT invoices_parties_valid CHECK ((((tax_country IS NULL) OR (tax_country ~ '^[A-Z]{2}$'::text)) AND ((buyer_country IS NULL) OR (buyer_country ~ '^[A-Z]{2}$'::text)) AND ((seller_country IS NULL) OR (seller_country ~ '^[A-Z]{2}$'::text)))),
    CONSTRAINT invoices_period CHECK (((period_end IS NULL) OR (period_start <= period_end))),
    CONSTRAINT invoices_provider_check CHECK ((provider = ANY (ARRAY['sandbox'::text, 'stripe'::text]))),
    CONSTRAINT invoices_refund_at_most_paid CHECK ((amount_refunded_cents <= amount_paid_cents)),
    CONSTRAINT invoices_retry_only_open CHECK (((next_attempt_at IS NULL) OR (status = 'open'::text))),
    CONSTRAINT invoices_reverse_charge_untaxed CHECK (((NOT reverse_charge) OR (tax_cents = 0))),
    CONSTRAINT invoices_status_check CHECK ((status = ANY (ARRAY['draft'::text, 'open'::text, 'paid'::text, 'void'::text, 'uncollectible'::text]))),
    CONSTRAINT invoices_subtotal_is_lines CHECK ((subtotal_cents = billing.invoice_lines_sum(lines, ARRAY['plan'::text, 'proration'::text]))),
    CONSTRAINT invoices_tax_is_lines CHECK ((tax_cents = billing.invoice_tax_sum(tax_lines, NULL::boolean))),
    CONSTRAINT invoices_tax_lines_valid CHECK (billing.invoice_tax_lines_valid(tax_lines)),
    CONSTRAINT invoices_total CHECK ((total_cents = ((subtotal_cents - discount_cents) + billing.invoice_tax_sum(tax_lines, false)))),
    CONSTRAINT invoices_total_cents_check CHECK ((total_cents >= 0))
);

ALTER TABLE ONLY billing.invoices FORCE ROW LEVEL SECURITY;


--
-- Name: invoice_end_access(billing.invoices, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_end_access(p_inv billing.invoices, p_cause text) RETURNS void
    LANGUAGE plpgsql
    AS $$
begin
  if p_inv.subscription_id is not null then
    update billing.subscriptions s set status = 'cancelled', cancelled_at = billing.now(),
      cancellation_reason = case p_cause when 'disputed' then 'payment_disputed' else 'refunded' end,
      cancel_at = null, scheduled_plan_id = null, scheduled_at = null, updated_at = now()
    where s.community_id = p_inv.community_id and s.id = p_inv.subscription_id and s.status <> 'cancelled';
  else
    update billing.purchases pu set status = case p_cause when 'disputed' then 'disputed' else 'refunded' end
    where pu.community_id = p_inv.community_id and pu.id = p_inv.purchase_id and pu.status = 'completed';
  end if;
end
$$;


--
-- Name: invoice_json(billing.invoices); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_json(p_inv billing.invoices) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'id', p_inv.id,
    'number', p_inv.number,
    'status', p_inv.status,
    'billing_reason', p_inv.billing_reason,
    'member_id', p_inv.member_id,
    'subscription_id', p_inv.subscription_id,
    'purchase_id', p_inv.purchase_id,
    'currency', p_inv.currency,
    'subtotal_cents', p_inv.subtotal_cents,
    'discount_cents', p_inv.discount_cents,
    'total_cents', p_inv.total_cents,
    'amount_paid_cents', p_inv.amount_paid_cents,
    'amount_refunded_cents', p_inv.amount_refunded_cents,
    'lines', p_inv.lines,
    'period_start', billing.iso(p_inv.period_start),
    'period_end', billing.iso(p_inv.period_end),
    'attempt_count', p_inv.attempt_count,
    'next_attempt_at', billing.iso(p_inv.next_attempt_at),
    'paid_at', billing.iso(p_inv.paid_at),
    'created_at', billing.iso(p_inv.created_at),
    'dispute', p_inv.dispute,
    'credit_notes', p_inv.credit_notes,
    -- tax (issue 30 item 5; docs/decisions/tax.md): the buyer's name and address stay
    -- out (personal data, in events too); the PDF prints them.
    'tax_cents', p_inv.tax_cents,
    'total_excluding_tax_cents', p_inv.total_cents - p_inv.tax_cents,
    'tax_lines', p_inv.tax_lines,
    'tax_country', p_inv.tax_country,
    'reverse_charge', p_inv.reverse_charge,
    'tax_note', case when p_inv.reverse_charge then billing.reverse_charge_note() end,
    'buyer_country', p_inv.buyer_country,
    'buyer_tax_id', p_inv.buyer_tax_id,
    'seller_country', p_inv.seller_country,
    'seller_tax_id', p_inv.seller_tax_id)
$$;


--
-- Name: invoice_mark_failed(billing.invoices, timestamp with time zone, text, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_mark_failed(p_inv billing.invoices, p_at timestamp with time zone, p_message text, p_next_attempt_at timestamp with time zone) RETURNS billing.invoices
    LANGUAGE plpgsql
    AS $$
declare
  v_inv billing.invoices;
begin
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, failure_message, provider, attempted_at)
  values (p_inv.community_id, p_inv.id, 'failed', p_inv.total_cents, p_message, p_inv.provider, p_at);
  update billing.invoices i set attempt_count = i.attempt_count + 1, next_attempt_at = p_next_attempt_at
  where i.community_id = p_inv.community_id and i.id = p_inv.id
  returning * into v_inv;
  return v_inv;
end
$$;


--
-- Name: invoice_mark_paid(billing.invoices, timestamp with time zone, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_mark_paid(p_inv billing.invoices, p_at timestamp with time zone, p_provider_ref text DEFAULT NULL::text) RETURNS billing.invoices
    LANGUAGE plpgsql
    AS $$
declare
  v_inv billing.invoices;
begin
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, provider_ref, attempted_at)
  values (p_inv.community_id, p_inv.id, 'succeeded', p_inv.total_cents, p_inv.provider, p_provider_ref, p_at);
  update billing.invoices i set status = 'paid', amount_paid_cents = i.total_cents, paid_at = p_at,
    attempt_count = i.attempt_count + 1, next_attempt_at = null
  where i.community_id = p_inv.community_id and i.id = p_inv.id
  returning * into v_inv;
  return v_inv;
end
$$;


--
-- Name: invoice_open(text, text, text, text, text, jsonb, timestamp with time zone, timestamp with time zone, text, timestamp with time zone, text, text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_open(p_sub_id text, p_pur_id text, p_member_id text, p_reason text, p_currency text, p_lines jsonb, p_start timestamp with time zone, p_end timestamp with time zone, p_provider text, p_at timestamp with time zone, p_checkout_id text DEFAULT NULL::text, p_provider_ref text DEFAULT NULL::text, p_tax jsonb DEFAULT NULL::jsonb) RETURNS billing.invoices
    LANGUAGE plpgsql
    AS $$
declare
  v_inv billing.invoices;
  v_community text := billing.current_community_id();
  v_subtotal bigint := billing.invoice_lines_sum(p_lines, array['plan', 'proration']);
  v_discount bigint := -billing.invoice_lines_sum(p_lines, array['discount']);
  v_tax jsonb := billing.invoice_tax(v_community, billing.member_billing(v_community, p_member_id), p_lines, p_tax);
begin
  insert into billing.invoices (community_id, member_id, subscription_id, purchase_id, checkout_id, status,
    billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, period_start, period_end,
    provider, provider_ref, created_at, tax_lines, tax_cents, tax_country, reverse_charge,
    buyer_name, buyer_address_lines, buyer_country, buyer_tax_id, seller_country, seller_tax_id)
  values (v_community, p_member_id, p_sub_id, p_pur_id, p_checkout_id, 'open', p_reason,
    p_currency, p_lines, v_subtotal, v_discount, v_subtotal - v_discount + (v_tax->>'tax_exclusive_cents')::bigint,
    p_start, p_end, p_provider, p_provider_ref, p_at, v_tax->'tax_lines', (v_tax->>'tax_cents')::bigint,
    v_tax->>'tax_country', (v_tax->>'reverse_charge')::boolean, v_tax->>'buyer_name',
    nullif(array(select jsonb_array_elements_text(v_tax->'buyer_address_lines')), '{}'), v_tax->>'buyer_country',
    v_tax->>'buyer_tax_id', v_tax->>'seller_country', v_tax->>'seller_tax_id')
  returning * into v_inv;
  return v_inv;
end
$$;


--
-- Name: invoice_record_dispute(text, bigint, text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_record_dispute(p_invoice_id text, p_amount bigint, p_status text, p_reason text, p_provider_ref text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_inv billing.invoices;
  v_dp billing.disputes;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_invoice_id for update;
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || coalesce(p_invoice_id, '') || '.');
  elsif v_inv.status <> 'paid' then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is ' || v_inv.status || ': only a paid invoice can be disputed.');
  end if;
  if p_provider_ref is not null then
    select * into v_dp from billing.disputes d where d.community_id = v_inv.community_id and d.provider_ref = p_provider_ref for update;
  elsif exists (select 1 from billing.disputes d where d.community_id = v_inv.community_id and d.invoice_id = v_inv.id) then
    -- A payment is disputed once (the sandbox's disputes carry no provider id to tell them apart).
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is already disputed.');
  end if;
  if v_dp.id is not null then
    -- Later news of the same dispute: its status (closed when won or lost), shown on the invoice.
    update billing.disputes d set status = coalesce(p_status, d.status),
      closed_at = case when coalesce(p_status, d.status) in ('won', 'lost') then coalesce(d.closed_at, billing.now()) end,
      updated_at = now()
    where d.community_id = v_dp.community_id and d.id = v_dp.id returning * into v_dp;
    if v_dp.invoice_id = v_inv.id then
      update billing.invoices i set dispute = billing.dispute_json(v_dp)
      where i.community_id = v_inv.community_id and i.id = v_inv.id returning * into v_inv;
    end if;
    return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', true);
  end if;
  insert into billing.disputes (community_id, invoice_id, amount_cents, status, reason, provider, provider_ref, created_at, closed_at)
  values (v_inv.community_id, v_inv.id, coalesce(p_amount, v_inv.amount_paid_cents), coalesce(p_status, 'needs_response'),
    p_reason, v_inv.provider, p_provider_ref, billing.now(),
    case when p_status in ('won', 'lost') then billing.now() end)
  returning * into v_dp;
  update billing.invoices i set dispute = billing.dispute_json(v_dp)
  where i.community_id = v_inv.community_id and i.id = v_inv.id returning * into v_inv;
  perform billing.invoice_end_access(v_inv, 'disputed');
  perform billing.emit_event(v_inv.community_id, 'invoice.disputed', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', false);
end
$$;


--
-- Name: invoice_record_refund(text, bigint, boolean, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_record_refund(p_invoice_id text, p_amount bigint, p_revoke boolean, p_provider_ref text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_inv billing.invoices;
  v_re billing.refunds;
  v_cn billing.credit_notes;
  v_series text;
  v_left bigint;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_invoice_id for update;
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || coalesce(p_invoice_id, '') || '.');
  end if;
  if p_provider_ref is not null then
    select * into v_re from billing.refunds r where r.community_id = v_inv.community_id and r.provider_ref = p_provider_ref;
    if v_re.id is not null then
      select * into v_cn from billing.credit_notes cn where cn.community_id = v_re.community_id and cn.refund_id = v_re.id;
      return jsonb_build_object('invoice', billing.invoice_json(v_inv),
        'refund', billing.refund_json(v_re) || jsonb_build_object('credit_note_number', v_cn.number), 'duplicate', true);
    end if;
  end if;
  if v_inv.status <> 'paid' then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is ' || v_inv.status || ': only a paid invoice can be refunded.');
  end if;
  v_left := v_inv.amount_paid_cents - v_inv.amount_refunded_cents;
  if v_left <= 0 then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is already fully refunded.');
  elsif p_amount is not null and (p_amount <= 0 or p_amount > v_left) then
    perform billing.raise('BL422', 'amount_cents must be between 1 and ' || v_left || ', what is left to refund on invoice '
      || v_inv.id || '.', 'amount_cents');
  end if;
  insert into billing.refunds (community_id, invoice_id, amount_cents, revoke_access, provider, provider_ref, created_at)
  values (v_inv.community_id, v_inv.id, coalesce(p_amount, v_left), coalesce(p_revoke, false), v_inv.provider, p_provider_ref, billing.now())
  returning * into v_re;
  v_series := 'CN-' || billing_private.number_series(v_re.community_id, v_re.created_at);
  insert into billing.credit_notes (community_id, invoice_id, refund_id, number, amount_cents, currency, created_at, tax_cents)
  values (v_re.community_id, v_inv.id, v_re.id,
    billing_private.number_text(v_series, billing_private.number_next(v_re.community_id, 'credit_note', v_series)),
    v_re.amount_cents, v_inv.currency, v_re.created_at,
    round(v_inv.tax_cents::numeric * (v_inv.amount_refunded_cents + v_re.amount_cents) / v_inv.amount_paid_cents)
      - round(v_inv.tax_cents::numeric * v_inv.amount_refunded_cents / v_inv.amount_paid_cents))
  returning * into v_cn;
  update billing.invoices i set amount_refunded_cents = i.amount_refunded_cents + v_re.amount_cents,
    credit_notes = i.credit_notes || jsonb_build_array(billing.credit_note_json(v_cn))
  where i.community_id = v_inv.community_id and i.id = v_inv.id returning * into v_inv;
  if coalesce(p_revoke, false) then
    perform billing.invoice_end_access(v_inv, 'refunded');
  end if;
  perform billing.emit_event(v_inv.community_id, 'invoice.refunded', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re) || jsonb_build_object('credit_note_number', v_cn.number)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv),
    'refund', billing.refund_json(v_re) || jsonb_build_object('credit_note_number', v_cn.number), 'duplicate', false);
end
$$;


--
-- Name: invoice_refuse_disputed(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_refuse_disputed(p_invoice_id text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_dp billing.disputes;
begin
  select * into v_dp from billing.disputes d
  where d.community_id = billing.current_community_id() and d.invoice_id = p_invoice_id
  order by d.created_at desc, d.id desc limit 1;
  if v_dp.id is not null then
    perform billing.raise('BL409', 'Invoice ' || p_invoice_id || ' is disputed (' || v_dp.id || ', ' || v_dp.status
      || '): a disputed payment cannot be refunded; the dispute decides where the money goes.');
  end if;
end
$$;


--
-- Name: invoice_tax(text, jsonb, jsonb, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_tax(p_community text, p_buyer jsonb, p_lines jsonb, p_given jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_seller_country text;
  v_seller_tax_id text;
  v_buyer_country text := nullif(p_buyer->>'country', '');
  v_buyer_tax_id text := nullif(p_buyer->>'tax_id', '');
  v_country text;
  v_base bigint := greatest(0, billing.invoice_lines_sum(p_lines, null));
  v_rate billing.tax_rates;
  v_reverse boolean := false;
  v_amount bigint;
  v_lines jsonb := '[]';
begin
  select c.country, c.tax_id into v_seller_country, v_seller_tax_id from billing.communities c where c.id = p_community;
  if p_given is not null then
    v_lines := coalesce(p_given->'tax_lines', '[]');
    v_reverse := coalesce((p_given->>'reverse_charge')::boolean, false);
    v_buyer_country := coalesce(nullif(p_given->>'buyer_country', ''), v_buyer_country);
    v_buyer_tax_id := coalesce(nullif(p_given->>'buyer_tax_id', ''), v_buyer_tax_id);
    v_country := case when jsonb_array_length(v_lines) > 0 or v_reverse
      then coalesce((select min(l->>'country') from jsonb_array_elements(v_lines) l), v_buyer_country) end;
  else
    v_country := coalesce(v_buyer_country, v_seller_country);
    select * into v_rate from billing.tax_rates r
    where r.community_id = p_community and r.country = v_country and r.active;
    if billing.reverse_charge_applies(v_seller_country, v_buyer_country, v_buyer_tax_id) then
      v_reverse := true;
      v_lines := jsonb_build_array(jsonb_build_object('name', coalesce(v_rate.name, 'VAT'), 'country', v_buyer_country,
        'rate_ppm', 0, 'inclusive', false, 'taxable_cents', v_base, 'amount_cents', 0));
    elsif v_rate.id is not null then
      v_amount := case when v_rate.inclusive
        then round(v_base::numeric * v_rate.rate_ppm / (1000000 + v_rate.rate_ppm))
        else round(v_base::numeric * v_rate.rate_ppm / 1000000) end;
      v_lines := jsonb_build_array(jsonb_build_object('name', v_rate.name, 'country', v_rate.country,
        'rate_ppm', v_rate.rate_ppm, 'inclusive', v_rate.inclusive,
        'taxable_cents', case when v_rate.inclusive then v_base - v_amount else v_base end, 'amount_cents', v_amount));
    else
      v_country := null;
    end if;
  end if;
  return jsonb_build_object(
    'tax_lines', v_lines,
    'tax_cents', billing.invoice_tax_sum(v_lines, null),
    'tax_exclusive_cents', billing.invoice_tax_sum(v_lines, false),
    'tax_country', v_country,
    'reverse_charge', v_reverse,
    'buyer_name', nullif(p_buyer->>'name', ''),
    'buyer_address_lines', coalesce(p_buyer->'address_lines', '[]'),
    'buyer_country', v_buyer_country,
    'buyer_tax_id', v_buyer_tax_id,
    'seller_country', v_seller_country,
    'seller_tax_id', v_seller_tax_id);
end
$$;


--
-- Name: invoice_tax_inclusive_ppm(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoice_tax_inclusive_ppm(p_lines jsonb) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
begin
  return least(1000000, (select coalesce(sum((l->>'rate_ppm')::bigint), 0)
    from jsonb_array_elements(p_lines) l
    where (l->>'inclusive')::boolean and jsonb_typeof(l->'rate_ppm') = 'number'))::integer;
end
$$;


--
-- Name: invoices_ledger_refresh(billing.invoices[], text[]); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.invoices_ledger_refresh(p_changed billing.invoices[], p_event_ids text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
  v_inv billing.invoices;
begin
  -- In the arrays' order (invoice id order).
  for k in 1 .. coalesce(cardinality(p_changed), 0) loop
    v_inv := p_changed[k];
    if v_inv.subscription_id is not null
       and exists (select 1 from billing.subscriptions s where s.community_id = v_inv.community_id
                   and s.id = v_inv.subscription_id and s.status = 'past_due') then
      perform billing.ledger_refresh_member(v_inv.community_id, v_inv.member_id,
        case when v_inv.status = 'paid' then 'invoice_paid'
             when v_inv.status = 'open' and v_inv.next_attempt_at is not null then 'payment_retry_scheduled'
             else 'payment_failed' end, p_event_ids[k]);
    end if;
  end loop;
end
$$;


--
-- Name: iso(timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.iso(p_ts timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ select to_char(p_ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;


--
-- Name: jsonb_array_minus(jsonb, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.jsonb_array_minus(a jsonb, b jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
declare
  v_x jsonb;
  v_out jsonb := '[]';
begin
  -- the common cases (benefits unchanged, first grant, revoke) without a query
  if b = '[]' or a = '[]' then
    return a;
  elsif a = b then
    return '[]';
  end if;
  for v_x in select jsonb_array_elements(a) loop
    if not (b @> jsonb_build_array(v_x)) then
      v_out := v_out || jsonb_build_array(v_x);
    end if;
  end loop;
  return v_out;
end
$$;


--
-- Name: jsonb_changed(jsonb, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.jsonb_changed(p_old jsonb, p_new jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
declare
  v_key text;
  v_out jsonb := '{}';
begin
  for v_key in select jsonb_object_keys(p_old) loop
    if (p_old->v_key) is distinct from (p_new->v_key) then
      v_out := v_out || jsonb_build_object(v_key, p_old->v_key);
    end if;
  end loop;
  return v_out;
end
$$;


--
-- Name: ledger_benefits_changed(text, text[]); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_benefits_changed(p_community_id text, p_entitlement_ids text[]) RETURNS integer
    LANGUAGE sql
    AS $$
  select billing.ledger_refresh_members(p_community_id, coalesce((
    select array_agg(distinct x.member_id) from billing.member_entitlements x
    where x.community_id = p_community_id and x.entitlement_id = any (p_entitlement_ids)
      and x.status = 'active'), '{}'), 'benefits_changed', null)
$$;


--
-- Name: ledger_desired(text, text, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_desired(p_community_id text, p_member_id text, p_now timestamp with time zone) RETURNS TABLE(entitlement_id text, sources jsonb, benefits jsonb, next_check_at timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
  with all_src as (
    -- every source of the member, with its end (the rule's p_valid_until)
    select 'subscription' as type, s.community_id, s.id, s.status, p.tier_id, s.plan_id, s.client_reference_id,
      case when s.status = 'paused' then s.paid_through else s.current_period_end end as valid_until
    from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and s.member_id = p_member_id
    union all
    select 'grant', g.community_id, g.id, case when g.revoked_at is null then 'active' else 'revoked' end,
      g.tier_id, null, null, g.expires_at
    from billing.grants g
    where g.community_id = p_community_id and g.member_id = p_member_id
    union all
    select 'purchase', u.community_id, u.id, u.status, p.tier_id, u.plan_id, u.client_reference_id, u.access_expires_at
    from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and u.member_id = p_member_id
  ), src as (
    -- those that grant now; one lapses when it stops granting by itself at its end
    select a.*, not billing.source_grants_access(a.type, a.community_id, a.id, a.status, a.valid_until, a.valid_until) as lapses
    from all_src a
    where billing.source_grants_access(a.type, a.community_id, a.id, a.status, a.valid_until, p_now)
  ), per_ent as (
    select te.entitlement_id,
      jsonb_agg(jsonb_build_object('type', src.type, 'id', src.id, 'status', src.status,
        'tier_id', src.tier_id, 'plan_id', src.plan_id, 'client_reference_id', src.client_reference_id,
        'valid_until', billing.iso(src.valid_until)) order by src.id) as sources,
      min(src.valid_until) filter (where src.lapses) as next_check_at
    from src
    join billing.tier_entitlements te on te.community_id = p_community_id and te.tier_id = src.tier_id
    group by te.entitlement_id
  )
  select pe.entitlement_id, pe.sources,
    coalesce((
      select jsonb_agg(jsonb_build_object('platform', pc.platform, 'platform_config_id', b.platform_config_id,
        'type', b.type, 'value', b.value) order by b.platform_config_id, b.type, b.value)
      from billing.entitlement_benefits b
      join billing.platform_configs pc on pc.community_id = b.community_id and pc.id = b.platform_config_id
      where b.community_id = p_community_id and b.entitlement_id = pe.entitlement_id), '[]'),
    pe.next_check_at
  from per_ent pe
$$;


--
-- Name: ledger_members_on_tiers(text, text[]); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_members_on_tiers(p_community_id text, p_tier_ids text[]) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
  select coalesce(array_agg(distinct member_id), '{}') from (
    select s.member_id from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and p.tier_id = any (p_tier_ids)
      and billing.source_grants_access('subscription', s.community_id, s.id, s.status,
        case when s.status = 'paused' then s.paid_through else s.current_period_end end, '-infinity')
    union all
    select u.member_id from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and p.tier_id = any (p_tier_ids)
      and billing.source_grants_access('purchase', u.community_id, u.id, u.status, u.access_expires_at, '-infinity')
    union all
    select g.member_id from billing.grants g
    where g.community_id = p_community_id and g.tier_id = any (p_tier_ids) and g.revoked_at is null -- (the index grants_tier)
      and billing.source_grants_access('grant', g.community_id, g.id,
        case when g.revoked_at is null then 'active' else 'revoked' end, g.expires_at, '-infinity')
  ) m
$$;


--
-- Name: ledger_refresh_each(text[], text[], text[], text[]); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_refresh_each(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]) RETURNS integer
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
declare
  v_changed integer := 0;
  v_n integer;
  v_present integer[];
  v_part integer[];
  v_changes billing.ledger_change[];
  v_dc text[];
  v_dm text[];
  v_db jsonb[];
  v_change billing.ledger_change;
begin
  -- One refresh of a member at a time: a concurrent one waits for the first to commit,
  -- then reads what it wrote. A row lock on the member (not an advisory lock: one
  -- statement may refresh 100,000 members, more than the shared lock table holds); NO
  -- KEY UPDATE leaves inserts of rows that reference the member unblocked. Taken in
  -- list order: each member's row locked by its key, one index probe per entry (the
  -- lateral runs per entry, in order; joined, the planner hashed every member of the
  -- community for each statement). The entries whose member exists (not being deleted)
  -- are kept.
  select array_agg(k order by k) into v_present
  from generate_subscripts(p_member_ids, 1) k
  cross join lateral (select 1 from billing.members mb
                      where mb.community_id = p_community_ids[k] and mb.id = p_member_ids[k]
                      for no key update) l;
  -- In parts of 1,000 list places, in order: a part's rows to write are held in memory
  -- (v_changes), so a list of 100,000 members (a catalog change) never holds them all.
  -- A member listed again in a later part finds nothing left to change.
  for v_from in 1 .. coalesce(cardinality(v_present), 0) by 1000 loop
    v_part := v_present[v_from : v_from + 999];
    with req as (
      -- each member at its first place in the list; a member being deleted is skipped
      select distinct on (l.c, l.m) l.k, l.c, l.m, p_reasons[l.k] as reason, p_trigger_event_ids[l.k] as trigger_event_id
      from (select k, p_community_ids[k] as c, p_member_ids[k] as m from unnest(v_part) k) l
      order by l.c, l.m, l.k
    ), mem as materialized (
      -- billing.community_now and billing.member_json(text, text), joined rather than
      -- called: a plpgsql call per member starts an executor for each of its queries
      select r.*, now() + coalesce(co.clock_offset, '0'::interval) as now, t.member,
        jsonb_build_object('identities', t.member->'identities',
          'external_subjects', t.member->'external_subjects') as snapshot
      from req r
      left join billing.communities co on co.id = r.c
      cross join lateral (select o.member from billing.member_object(r.c, r.m) o(member) offset 0) t
    ), des as (
      select mem.k, d.entitlement_id, d.sources, d.benefits, d.next_check_at
      from mem cross join lateral billing.ledger_desired(mem.c, mem.m, mem.now) d
    ), sto as (
      select mem.k, x.id, x.entitlement_id, x.status, x.sources, x.benefits, x.identities, x.next_check_at
      from mem join billing.member_entitlements x on x.community_id = mem.c and x.member_id = mem.m
    ), cmp as materialized (
      select mem.k, mem.c, mem.m, mem.now, mem.snapshot, mem.member, mem.reason, mem.trigger_event_id,
        coalesce(des.entitlement_id, sto.entitlement_id) as entitlement_id,
        des.entitlement_id as d_ent, des.sources as d_sources, des.benefits as d_benefits, des.next_check_at as d_next,
        sto.id as stored_id, sto.status as s_status, sto.sources as s_sources, sto.benefits as s_benefits,
        sto.identities as s_identities, sto.next_check_at as s_next,
        case when des.entitlement_id is not null then 'active' else 'inactive' end as status
      from des full join sto on sto.k = des.k and sto.entitlement_id = des.entitlement_id
      join mem on mem.k = coalesce(des.k, sto.k)
    ), act as (
      -- A new row's id is drawn here rather than by the column default, so its event is
      -- built from this row: joining the inserted rows back to act (three keys, through
      -- the returned record) was a nested loop the planner chose on a one-row estimate,
      -- 1.5 s of a 1,000-switch statement.
      select cmp.*, case when cmp.status = 'active' then cmp.snapshot else cmp.s_identities end as identities,
        case when cmp.stored_id is null then billing.gen_id('ment') end as new_id,
        case
          when cmp.stored_id is null then 'member.entitlement.granted'
          when cmp.s_status = cmp.status and cmp.s_sources = coalesce(cmp.d_sources, '[]')
               and cmp.s_benefits = coalesce(cmp.d_benefits, '[]')
               and cmp.s_identities = case when cmp.status = 'active' then cmp.snapshot else cmp.s_identities end then null
          when cmp.s_status = cmp.status then 'member.entitlement.updated'
          when cmp.status = 'active' then 'member.entitlement.granted'
          else 'member.entitlement.revoked' end as type
      from cmp
    )
    -- What to write: the rows that change visibly (type) or only in next_check_at. None
    -- (a refresh that finds the ledger right, the usual single-row case): no statement
    -- writes, so no trigger of the ledger's or the events' tables fires.
    select array_agg(row(a.k, a.c, a.m, a.now, a.snapshot, a.member, a.reason, a.trigger_event_id, a.entitlement_id,
        a.d_ent, a.d_sources, a.d_benefits, a.d_next, a.stored_id, a.s_status, a.s_sources, a.s_benefits,
        a.s_identities, a.s_next, a.status, a.identities, a.new_id, a.type)::billing.ledger_change
      order by a.k, a.entitlement_id) into v_changes
    from act a
    where a.type is not null or a.s_next is distinct from a.d_next;
    continue when v_changes is null;
    with act as (
      select * from unnest(v_changes)
    ), upd as (
      -- The stored rows: those that change visibly (type), and those whose next check only
      -- moves (their other columns are written as they are: one update of the table, not
      -- two, each a plan part to start on every refresh). Returning what a changed row's
      -- event needs, so no join finds the row again.
      update billing.member_entitlements x set
        status = a.status,
        revision = x.revision + case when a.type is null then 0 else 1 end,
        sources = coalesce(a.d_sources, '[]'),
        benefits = coalesce(a.d_benefits, '[]'),
        identities = a.identities,
        granted_at = case when a.type = 'member.entitlement.granted' then a.now else x.granted_at end,
        revoked_at = case when a.type = 'member.entitlement.granted' then null
                          when a.type = 'member.entitlement.revoked' then a.now else x.revoked_at end,
        next_check_at = a.d_next,
        updated_at = case when a.type is null then x.updated_at else now() end
      from act a
      where a.stored_id is not null and x.community_id = a.c and x.id = a.stored_id
      returning a.k, a.type, a.entitlement_id, a.s_benefits, a.member, a.reason, a.trigger_event_id, a.now, x as me
    ), ins as (
      insert into billing.member_entitlements (community_id, id, member_id, entitlement_id, status,
        revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
      select a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now, a.d_next, now()
      from act a
      where a.stored_id is null
      order by a.k, a.entitlement_id
    ), changed as (
      select u.k, u.type, u.entitlement_id, u.s_benefits, u.member, u.reason, u.trigger_event_id, u.now, u.me from upd u
      where u.type is not null
      union all
      -- the row ins writes, as it writes it: its columns in the table's order (a row of
      -- another length fails the cast; test/ledger/refresh-each.test.ts compares the events)
      select a.k, a.type, a.entitlement_id, null, a.member, a.reason, a.trigger_event_id, a.now,
        row(a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now,
          null, now(), a.d_next)::billing.member_entitlements
      from act a
      where a.stored_id is null
    ), ev as (
      -- One event per changed row, in list order, then entitlement order (the calls' order),
      -- dated by the community's clock read above (no _010_community_clock call per row).
      insert into billing.events (community_id, type, created_at, data)
      select (r.me).community_id, r.type, r.now, jsonb_build_object(
        'member', r.member,
        'entitlement', billing.member_entitlement_json(r.me, ent),
        'changes', jsonb_build_object(
          'added_benefits', billing.jsonb_array_minus((r.me).benefits, coalesce(r.s_benefits, '[]')),
          'removed_benefits', billing.jsonb_array_minus(coalesce(r.s_benefits, '[]'), (r.me).benefits)),
        'reason', r.reason,
        'trigger_event_id', r.trigger_event_id)
      from changed r
      join billing.entitlements ent on ent.community_id = (r.me).community_id and ent.id = (r.me).entitlement_id
      order by r.k, r.entitlement_id
      returning 1
    )
    select count(*)::integer into v_n from ev;
    v_changed := v_changed + v_n;
    -- The rows that changed what a platform may hold: their members' deliveries. (Picked
    -- here, row by row in memory: a statement for it cost more than this loop takes for
    -- a part of 1,000 rows.)
    v_dc := null;
    v_dm := null;
    v_db := null;
    foreach v_change in array v_changes loop
      if billing.ledger_row_delivers(v_change.type, v_change.stored_id, v_change.s_status, v_change.status,
           v_change.s_benefits, v_change.d_benefits, v_change.s_identities, v_change.identities) then
        v_dc := v_dc || v_change.c;
        v_dm := v_dm || v_change.m;
        v_db := v_db || (coalesce(v_change.d_benefits, '[]') || coalesce(v_change.s_benefits, '[]'));
      end if;
    end loop;
    if v_dm is not null then
      perform billing_private.ledger_deliveries(v_dc, v_dm, v_db);
    end if;
  end loop;
  return v_changed;
end
$$;


--
-- Name: ledger_refresh_list(text[], text[], text[], text[]); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
begin
  if cardinality(p_member_ids) > 0 then
    perform billing.ledger_refresh_each(p_community_ids, p_member_ids, p_reasons, p_trigger_event_ids);
  end if;
end
$$;


--
-- Name: ledger_refresh_member(text, text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_refresh_member(p_community_id text, p_member_id text, p_reason text, p_trigger_event_id text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
begin
  return billing.ledger_refresh_each(array[p_community_id], array[p_member_id], array[p_reason],
    array[p_trigger_event_id]);
end
$$;


--
-- Name: ledger_refresh_members(text, text[], text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_refresh_members(p_community_id text, p_member_ids text[], p_reason text, p_trigger_event_id text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
  v_members text[];
begin
  select array_agg(distinct m order by m) into v_members from unnest(p_member_ids) m where m is not null;
  if v_members is null then
    return 0;
  end if;
  return billing.ledger_refresh_each(array_fill(p_community_id, array[cardinality(v_members)]), v_members,
    array_fill(p_reason, array[cardinality(v_members)]), array_fill(p_trigger_event_id, array[cardinality(v_members)]));
end
$$;


--
-- Name: ledger_row_delivers(text, text, text, text, jsonb, jsonb, jsonb, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_row_delivers(p_type text, p_stored_id text, p_s_status text, p_status text, p_s_benefits jsonb, p_d_benefits jsonb, p_s_identities jsonb, p_identities jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  select p_type is not null
    and jsonb_array_length(coalesce(p_d_benefits, '[]') || coalesce(p_s_benefits, '[]')) > 0
    and (p_stored_id is null
         or (p_s_status, p_s_benefits, p_s_identities) is distinct from (p_status, coalesce(p_d_benefits, '[]'), p_identities))
$$;


--
-- Name: ledger_sweep(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.ledger_sweep(p_community_id text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
  v_community text;
  v_members text[];
  v_changed integer := 0;
begin
  for v_community in
    select c.id from billing.communities c
    where p_community_id is null or c.id = p_community_id
  loop
    select array_agg(distinct x.member_id order by x.member_id) into v_members
    from billing.member_entitlements x
    where x.community_id = v_community and x.status = 'active'
      and x.next_check_at <= billing.community_now(v_community);
    if v_members is not null then
      v_changed := v_changed + billing.ledger_refresh_each(array_fill(v_community, array[cardinality(v_members)]),
        v_members, array_fill('access_expired'::text, array[cardinality(v_members)]),
        array_fill(null::text, array[cardinality(v_members)]));
    end if;
  end loop;
  return v_changed;
end
$$;


--
-- Name: link_code_apply(text, text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_r jsonb;
begin
  select * into v_lc from billing.link_codes lc where lc.code = upper(p_code) for update;
  if v_lc.id is null then
    return jsonb_build_object('outcome', 'unknown');
  elsif v_lc.redeemed_at is not null or v_lc.invalidated_at is not null then
    return jsonb_build_object('outcome', 'used');
  elsif v_lc.expires_at <= billing.now() then
    return jsonb_build_object('outcome', 'expired');
  elsif v_lc.intended_platform <> p_platform then
    return jsonb_build_object('outcome', 'wrong_platform');
  end if;
  v_r := billing.member_identity_attach(v_lc.member_id, p_platform, p_platform_uid, p_username);
  if v_r->>'outcome' = 'linked' then
    update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  end if;
  return v_r;
end
$$;


--
-- Name: subscriptions; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.subscriptions (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('sub'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    plan_id text NOT NULL COLLATE pg_catalog."C",
    status text NOT NULL,
    current_period_start timestamp with time zone,
    current_period_end timestamp with time zone,
    trial_end timestamp with time zone,
    cancel_at timestamp with time zone,
    cancelled_at timestamp with time zone,
    paused_until timestamp with time zone,
    scheduled_plan_id text COLLATE pg_catalog."C",
    scheduled_at timestamp with time zone,
    client_reference_id text,
    checkout_id text COLLATE pg_catalog."C",
    provider text DEFAULT 'sandbox'::text NOT NULL,
    provider_ref text,
    provider_updated_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    provider_customer_ref text,
    provider_schedule_ref text,
    proration_credit_cents integer,
    proration_charge_cents integer,
    prorated_at timestamp with time zone,
    billing_anchor timestamp with time zone,
    discount_id uuid,
    cancellation_reason text,
    cancel_requested_at timestamp with time zone,
    credit_cents bigint DEFAULT 0 NOT NULL,
    price_cents integer NOT NULL,
    price_migration_id text COLLATE pg_catalog."C",
    paid_through timestamp with time zone,
    trial_tier_id text COLLATE pg_catalog."C",
    tax_inclusive_ppm integer DEFAULT 0 NOT NULL,
    CONSTRAINT subscriptions_cancellation_reason_check CHECK ((cancellation_reason = ANY (ARRAY['cancellation_requested'::text, 'payment_failed'::text, 'refunded'::text, 'payment_disputed'::text]))),
    CONSTRAINT subscriptions_credit_cents_check CHECK ((credit_cents >= 0)),
    CONSTRAINT subscriptions_price_cents_check CHECK ((price_cents >= 0)),
    CONSTRAINT subscriptions_provider_check CHECK ((provider = ANY (ARRAY['sandbox'::text, 'stripe'::text]))),
    CONSTRAINT subscriptions_status_check CHECK ((status = ANY (ARRAY['active'::text, 'trialing'::text, 'past_due'::text, 'cancelling'::text, 'cancelled'::text, 'paused'::text]))),
    CONSTRAINT subscriptions_tax_inclusive_ppm_check CHECK (((tax_inclusive_ppm >= 0) AND (tax_inclusive_ppm <= 1000000)))
);

ALTER TABLE ONLY billing.subscriptions FORCE ROW LEVEL SECURITY;


--
-- Name: COLUMN subscriptions.billing_anchor; Type: COMMENT; Schema: billing; Owner: -
--

COMMENT ON COLUMN billing.subscriptions.billing_anchor IS 'Start of the first paid period; every period end is billing_anchor + n intervals (31 Jan -> 28 Feb -> 31 Mar), as Stripe keeps its billing cycle anchor.';


--
-- Name: COLUMN subscriptions.price_cents; Type: COMMENT; Schema: billing; Owner: -
--

COMMENT ON COLUMN billing.subscriptions.price_cents IS 'What each period of this subscription is charged before discounts (minor units): the plan''s price when it started or moved to that plan; a plan price edit changes it only through a price migration (billing.price_migrations).';


--
-- Name: lock_subscription(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.lock_subscription(p_id text) RETURNS billing.subscriptions
    LANGUAGE plpgsql
    AS $$
declare
  v_sub billing.subscriptions;
begin
  -- FOR UPDATE needs UPDATE rights, which billing_api has on subscriptions.
  select * into v_sub from billing.subscriptions s where s.id = p_id for update;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_id, '') || '.');
  end if;
  return v_sub;
end
$$;


--
-- Name: mail_messages; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.mail_messages (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('msg'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    template text NOT NULL,
    event_id text COLLATE pg_catalog."C",
    ref text,
    to_address text NOT NULL,
    subject text NOT NULL,
    text_body text NOT NULL,
    html_body text NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    claimed_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    unsubscribable boolean DEFAULT false NOT NULL,
    CONSTRAINT mail_messages_cause CHECK (((event_id IS NOT NULL) OR (ref IS NOT NULL))),
    CONSTRAINT mail_messages_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'sending'::text, 'sent'::text, 'failed'::text, 'kept'::text, 'skipped'::text])))
);

ALTER TABLE ONLY billing.mail_messages FORCE ROW LEVEL SECURITY;


--
-- Name: mail_message_json(billing.mail_messages, boolean); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.mail_message_json(p_m billing.mail_messages, p_full boolean) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('id', p_m.id, 'member_id', p_m.member_id, 'template', p_m.template,
    'event_id', p_m.event_id, 'ref', p_m.ref, 'to', p_m.to_address, 'subject', p_m.subject, 'status', p_m.status,
    'unsubscribable', p_m.unsubscribable,
    'attempts', p_m.attempts, 'last_error', p_m.last_error, 'created_at', billing.iso(p_m.created_at),
    'sent_at', billing.iso(p_m.sent_at))
    || case when p_full then jsonb_build_object('text', p_m.text_body, 'html', p_m.html_body) else '{}' end
$$;


--
-- Name: communities; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.communities (
    id text DEFAULT billing.gen_id('com'::text) NOT NULL COLLATE pg_catalog."C",
    name text NOT NULL,
    payment_provider text,
    payment_config jsonb DEFAULT '{}'::jsonb NOT NULL,
    clock_offset interval DEFAULT '00:00:00'::interval NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    dunning jsonb DEFAULT '{"retry_days": [1, 3, 5], "final_action": "cancel"}'::jsonb NOT NULL,
    invoice_series text,
    mail_sender_name text,
    mail_reply_to text,
    mail_templates_off text[] DEFAULT '{}'::text[] NOT NULL,
    legal_name text,
    address_lines text[],
    country text,
    tax_id text,
    mail_templates_required text[] DEFAULT '{}'::text[] NOT NULL,
    audit_retention_days integer DEFAULT 365 NOT NULL,
    CONSTRAINT communities_audit_retention_valid CHECK (((audit_retention_days >= 30) AND (audit_retention_days <= 3650))),
    CONSTRAINT communities_dunning_valid CHECK (billing.dunning_valid(dunning)),
    CONSTRAINT communities_invoice_series_valid CHECK ((invoice_series ~ '^[A-Za-z0-9][A-Za-z0-9/_.-]{0,19}$'::text)),
    CONSTRAINT communities_legal_valid CHECK ((((legal_name IS NULL) OR ((length(legal_name) >= 1) AND (length(legal_name) <= 200))) AND ((address_lines IS NULL) OR ((cardinality(address_lines) <= 6) AND (COALESCE(length(array_to_string(address_lines, ''::text)), 0) <= 600))) AND ((country IS NULL) OR (country ~ '^[A-Z]{2}$'::text)) AND ((tax_id IS NULL) OR ((length(tax_id) >= 1) AND (length(tax_id) <= 50))))),
    CONSTRAINT communities_mail_reply_to_check CHECK (((mail_reply_to IS NULL) OR billing.email_valid(mail_reply_to))),
    CONSTRAINT communities_mail_sender_name_check CHECK ((((length(mail_sender_name) >= 1) AND (length(mail_sender_name) <= 200)) AND (mail_sender_name !~ '[\r\n<>"]'::text))),
    CONSTRAINT communities_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT communities_payment_config_no_secrets CHECK ((NOT (payment_config ?| ARRAY['secret_key'::text, 'webhook_secret'::text]))),
    CONSTRAINT communities_payment_provider_check CHECK ((payment_provider = ANY (ARRAY['sandbox'::text, 'stripe'::text])))
);

ALTER TABLE ONLY billing.communities FORCE ROW LEVEL SECURITY;


--
-- Name: mail_optional(billing.communities, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.mail_optional(p_community billing.communities, p_template text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select coalesce((select not t.transactional from billing.mail_templates() t where t.template = p_template), false)
    and not (p_template = any (p_community.mail_templates_required))
$$;


--
-- Name: mail_render(text, text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.mail_render(p_community_name text, p_template text, p_data jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
declare
  v_inv jsonb := p_data->'invoice';
  v_amount text;
  v_ref text;
  v_subject text;
  v_lines text[] := '{}';
  v_html text[] := '{}';
  v_code jsonb;
  v_name text := p_community_name;
  e_name text := billing.html_escape(p_community_name);
begin
  if p_template in ('receipt', 'payment_failed') then
    v_ref := coalesce(v_inv->>'number', v_inv->>'id');
    if p_template = 'receipt' then
      v_amount := billing.money_text((v_inv->>'amount_paid_cents')::bigint, v_inv->>'currency');
      v_subject := 'Receipt from ' || v_name || ': ' || v_amount;
      v_lines := array['Thank you for your payment to ' || v_name || '.', '',
        'Amount paid: ' || v_amount, 'Invoice: ' || v_ref,
        'Paid on: ' || coalesce(left(v_inv->>'paid_at', 10), '')]
        || coalesce((select array_agg('  ' || (l->>'description') || ': ' || billing.money_text((l->>'amount_cents')::bigint, v_inv->>'currency'))
             from jsonb_array_elements(v_inv->'lines') l), '{}')
        -- its tax (issue 30 item 5): added, or included in the lines above
        || coalesce((select array_agg('  ' || billing.mail_tax_label(t) || ': '
             || billing.money_text((t->>'amount_cents')::bigint, v_inv->>'currency'))
             from jsonb_array_elements(v_inv->'tax_lines') t), '{}')
        || case when v_inv->>'tax_note' is not null then array[v_inv->>'tax_note'] else '{}' end
        || array['', 'Download the invoice (PDF): {{invoice_pdf_url:' || (v_inv->>'id') || '}}',
          'Manage your subscription and payment method: {{portal_url}}'];
      v_html := array['<p>Thank you for your payment to ' || e_name || '.</p>',
        '<table><tr><th align="left">Amount paid</th><td>' || billing.html_escape(v_amount) || '</td></tr>',
        '<tr><th align="left">Invoice</th><td>' || billing.html_escape(v_ref) || '</td></tr>',
        '<tr><th align="left">Paid on</th><td>' || billing.html_escape(left(v_inv->>'paid_at', 10)) || '</td></tr></table>',
        '<ul>' || coalesce((select string_agg('<li>' || billing.html_escape(l->>'description') || ': '
          || billing.html_escape(billing.money_text((l->>'amount_cents')::bigint, v_inv->>'currency')) || '</li>', '')
          from jsonb_array_elements(v_inv->'lines') l), '')
        || coalesce((select string_agg('<li>' || billing.html_escape(billing.mail_tax_label(t)) || ': '
          || billing.html_escape(billing.money_text((t->>'amount_cents')::bigint, v_inv->>'currency')) || '</li>', '')
          from jsonb_array_elements(v_inv->'tax_lines') t), '') || '</ul>'
        || coalesce('<p>' || billing.html_escape(v_inv->>'tax_note') || '</p>', ''),
        '<p><a href="{{invoice_pdf_url:' || billing.html_escape(v_inv->>'id') || '}}">Download the invoice (PDF)</a></p>',
        '<p><a href="{{portal_url}}">Manage your subscription and payment method</a></p>'];
    else
      v_amount := billing.money_text((v_inv->>'total_cents')::bigint - (v_inv->>'amount_paid_cents')::bigint, v_inv->>'currency');
      v_subject := 'Payment failed: ' || v_amount || ' to ' || v_name;
      v_lines := array['We could not collect ' || v_amount || ' for invoice ' || v_ref || ' from your card.',
        case when v_inv->>'next_attempt_at' is not null
          then 'We will try again on ' || replace(left(v_inv->>'next_attempt_at', 16), 'T', ' ') || ' UTC.'
          else 'That was the last attempt: the subscription ends unless the invoice is paid.' end, '',
        'Change your card: {{portal_url}}'];
      v_html := array['<p>We could not collect <strong>' || billing.html_escape(v_amount) || '</strong> for invoice '
        || billing.html_escape(v_ref) || ' from your card.</p>',
        '<p>' || billing.html_escape(case when v_inv->>'next_attempt_at' is not null
          then 'We will try again on ' || replace(left(v_inv->>'next_attempt_at', 16), 'T', ' ') || ' UTC.'
          else 'That was the last attempt: the subscription ends unless the invoice is paid.' end) || '</p>',
        '<p><a href="{{portal_url}}">Change your card</a></p>'];
    end if;
  elsif p_template = 'refund_issued' then
    v_amount := billing.money_text((p_data->'refund'->>'amount_cents')::bigint, v_inv->>'currency');
    v_ref := coalesce(v_inv->>'number', v_inv->>'id');
    v_subject := 'Refund from ' || v_name || ': ' || v_amount;
    v_lines := array['We refunded ' || v_amount || ' of invoice ' || v_ref || '.',
      'Credit note: ' || coalesce(p_data->'refund'->>'credit_note_number', '-'),
      'The money returns to the card you paid with; your bank may take a few days to show it.', '']
      -- the invoice's PDF lists its credit notes
      || case when p_data->'refund'->>'credit_note_number' is not null
        then array['The invoice with its credit note (PDF): {{invoice_pdf_url:' || (v_inv->>'id') || '}}'] else '{}' end
      || array['Your membership: {{portal_url}}'];
    v_html := array['<p>We refunded <strong>' || billing.html_escape(v_amount) || '</strong> of invoice ' || billing.html_escape(v_ref) || '.</p>',
      '<p>Credit note: ' || billing.html_escape(coalesce(p_data->'refund'->>'credit_note_number', '-')) || '</p>',
      '<p>The money returns to the card you paid with; your bank may take a few days to show it.</p>']
      || case when p_data->'refund'->>'credit_note_number' is not null
        then array['<p><a href="{{invoice_pdf_url:' || billing.html_escape(v_inv->>'id') || '}}">The invoice with its credit note (PDF)</a></p>'] else '{}' end
      || array['<p><a href="{{portal_url}}">Your membership</a></p>'];
  elsif p_template = 'subscription_ended' then
    v_subject := 'Your ' || coalesce(p_data->'subscription'->>'tier_name', 'subscription') || ' subscription at ' || v_name || ' has ended';
    v_lines := array['Your subscription to ' || coalesce(p_data->'subscription'->>'tier_name', 'the community')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '') || ' has ended, and with it the access it gave.',
      '', 'You are welcome back at any time. Your membership: {{portal_url}}'];
    v_html := array['<p>Your subscription to <strong>' || billing.html_escape(coalesce(p_data->'subscription'->>'tier_name', 'the community'))
      || '</strong>' || billing.html_escape(coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '')) || ' has ended, and with it the access it gave.</p>',
      '<p>You are welcome back at any time. <a href="{{portal_url}}">Your membership</a></p>'];
  elsif p_template in ('trial_ending', 'renewal_upcoming') then
    v_amount := billing.money_text((p_data->'subscription'->>'amount_cents')::bigint, p_data->'subscription'->>'currency');
    v_ref := coalesce(p_data->'subscription'->>'tier_name', 'your subscription')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '');
    if p_template = 'trial_ending' then
      v_subject := 'Your free trial at ' || v_name || ' ends on ' || left(p_data->'subscription'->>'current_period_end', 10);
      v_lines := array['Your free trial of ' || v_ref || ' ends on ' || replace(left(p_data->'subscription'->>'current_period_end', 16), 'T', ' ') || ' UTC.',
        'Unless you cancel before then, your card will be charged ' || v_amount || ' and the subscription renews until you cancel.'];
    else
      v_subject := 'Your ' || v_ref || ' subscription at ' || v_name || ' renews on ' || left(p_data->'subscription'->>'current_period_end', 10);
      v_lines := array['Your yearly subscription to ' || v_ref || ' renews on ' || replace(left(p_data->'subscription'->>'current_period_end', 16), 'T', ' ') || ' UTC.',
        'Your card will be charged ' || v_amount || ' for the next year unless you cancel before then.'];
    end if;
    v_html := array['<p>' || billing.html_escape(v_lines[1]) || '</p>', '<p>' || billing.html_escape(v_lines[2]) || '</p>',
      '<p><a href="{{portal_url}}">Cancel or change your plan</a></p>'];
    v_lines := v_lines || array['', 'Cancel or change your plan: {{portal_url}}'];
  elsif p_template = 'price_change' then
    v_ref := coalesce(p_data->'subscription'->>'tier_name', 'your subscription')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '');
    v_amount := billing.money_text((p_data->'migration'->>'price_cents')::bigint, p_data->'migration'->>'currency');
    v_subject := 'A price change for your ' || v_ref || ' subscription at ' || v_name;
    v_lines := array['The price of ' || v_ref || ' changes from '
        || billing.money_text((p_data->'subscription'->>'amount_cents')::bigint, p_data->'subscription'->>'currency')
        || ' to ' || v_amount || ' per ' || coalesce(p_data->'subscription'->>'interval', 'period') || '.',
      'It applies from your first renewal on or after ' || left(p_data->'migration'->>'notice_ends_at', 10)
        || '; until then you pay what you pay today. You may cancel before then.'];
    v_html := array['<p>' || billing.html_escape(v_lines[1]) || '</p>', '<p>' || billing.html_escape(v_lines[2]) || '</p>',
      '<p><a href="{{portal_url}}">Cancel or change your plan</a></p>'];
    v_lines := v_lines || array['', 'Cancel or change your plan: {{portal_url}}'];
  elsif p_template = 'access_granted' then
    v_subject := 'Your access to ' || coalesce(p_data->'entitlement'->>'name', 'your membership') || ' at ' || v_name;
    v_lines := array['You now have access to ' || coalesce(p_data->'entitlement'->>'name', 'your membership') || ' at ' || v_name || '.'];
    v_html := array['<p>You now have access to <strong>' || billing.html_escape(coalesce(p_data->'entitlement'->>'name', 'your membership'))
      || '</strong> at ' || e_name || '.</p>'];
    for v_code in select c from jsonb_array_elements(coalesce(p_data->'link_codes', '[]')) c loop
      if v_code->>'platform' = 'discord' then
        v_lines := v_lines || ('To link your Discord account, use the /link command in the server with the code ' || (v_code->>'code') || '.');
      else
        v_lines := v_lines || ('To link your Telegram account, send /start ' || (v_code->>'code') || ' to the community''s bot.');
      end if;
      v_html := v_html || ('<p>Link your ' || case when v_code->>'platform' = 'discord' then 'Discord account: use <code>/link</code> in the server with the code'
        else 'Telegram account: send <code>/start</code> to the community''s bot with the code' end
        || ' <strong>' || billing.html_escape(v_code->>'code') || '</strong>.</p>');
    end loop;
    if jsonb_array_length(coalesce(p_data->'link_codes', '[]')) > 0 then
      v_lines := v_lines || ('The code works once, until ' || replace(left(p_data->'link_codes'->0->>'expires_at', 16), 'T', ' ') || ' UTC.'::text);
    end if;
    v_lines := v_lines || array['', 'Your membership: {{portal_url}}'];
    v_html := v_html || '<p><a href="{{portal_url}}">Your membership</a></p>'::text;
  else
    perform billing.raise('BL422', 'Unknown mail template ' || p_template || '.', 'template');
  end if;
  return jsonb_build_object('subject', v_subject,
    'text', 'Hello,' || E'\n\n' || array_to_string(v_lines, E'\n') || E'\n\n' || '-- ' || E'\n' || v_name || E'\n'
      || case when (p_data->>'unsubscribe')::boolean
        then E'\nYou may stop these emails (receipts and payment notices still come): {{unsubscribe_url}}\n' else '' end,
    'html', '<!doctype html><html><body style="font-family:sans-serif"><p>Hello,</p>' || array_to_string(v_html, '')
      || '<p>&mdash; ' || e_name || '</p>'
      || case when (p_data->>'unsubscribe')::boolean
        then '<p style="font-size:small;color:#555">Receipts and payment notices still come. <a href="{{unsubscribe_url}}">Unsubscribe from these emails</a></p>' else '' end
      || '</body></html>');
end
$$;


--
-- Name: mail_tax_label(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.mail_tax_label(p_line jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
begin
  return (p_line->>'name')
    || coalesce(' ' || trim_scale(round((p_line->>'rate_ppm')::numeric / 10000, 4))::text || '%', '')
    || coalesce(' (' || (p_line->>'country') || ')', '')
    || case when (p_line->>'inclusive')::boolean then ' (included)' else '' end;
end
$$;


--
-- Name: mail_templates(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.mail_templates() RETURNS TABLE(template text, event_type text, transactional boolean, title text)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  values ('receipt', 'invoice.paid', true, 'Receipt (invoice paid)'),
    ('payment_failed', 'invoice.payment_failed', true, 'Payment failed'),
    ('refund_issued', 'invoice.refunded', true, 'Refund issued'),
    ('subscription_ended', 'subscription.cancelled', true, 'Subscription ended'),
    -- reminders (billing_private.mail_reminders)
    ('trial_ending', 'reminder: a trial ends within 3 days', false, 'Trial ending in 3 days'),
    ('renewal_upcoming', 'reminder: a yearly renewal within 7 days', false, 'Yearly renewal in 7 days'),
    ('price_change', 'reminder: a price migration (billing plans migrate) marks the subscription', true, 'Price change notice'),
    ('access_granted', 'member.entitlement.granted', true, 'Access granted (how to link Discord or Telegram)')
$$;


--
-- Name: member_api_json(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_api_json(p_community_id text, p_member_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
begin
  return (select t.member || jsonb_build_object('email', m.email, 'display_name', m.display_name,
      'note', m.note, 'tags', to_jsonb(m.tags), 'erased_at', billing.iso(m.erased_at))
    from billing.members m, billing.member_object(m.community_id, m.id) t(member)
    where m.community_id = p_community_id and m.id = p_member_id);
end
$$;


--
-- Name: member_billing(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_billing(p_community_id text, p_member_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return coalesce((select jsonb_build_object('name', m.billing_name,
      'address_lines', to_jsonb(coalesce(m.billing_address_lines, '{}'::text[])),
      'country', m.billing_country, 'tax_id', m.billing_tax_id)
    from billing.members m where m.community_id = p_community_id and m.id = p_member_id),
    '{"name": null, "address_lines": [], "country": null, "tax_id": null}'::jsonb);
end
$$;


--
-- Name: member_changed(text, text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_changed(p_community_id text, p_member_id text, p_change jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
  v_member jsonb := billing.member_json(p_community_id, p_member_id);
  v_event_id text;
begin
  if v_member is null then
    return; -- the member itself is being deleted
  end if;
  v_event_id := billing.emit_event(p_community_id, 'member.updated',
    jsonb_build_object('member', v_member, 'change', p_change));
  perform billing.ledger_refresh_member(p_community_id, p_member_id, p_change->>'kind', v_event_id);
end
$$;


--
-- Name: member_entitlements; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.member_entitlements (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('ment'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    entitlement_id text NOT NULL COLLATE pg_catalog."C",
    status text NOT NULL,
    revision bigint DEFAULT 1 NOT NULL,
    sources jsonb DEFAULT '[]'::jsonb NOT NULL,
    benefits jsonb DEFAULT '[]'::jsonb NOT NULL,
    identities jsonb DEFAULT '{}'::jsonb NOT NULL,
    granted_at timestamp with time zone,
    revoked_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    next_check_at timestamp with time zone,
    CONSTRAINT member_entitlements_status_check CHECK ((status = ANY (ARRAY['active'::text, 'inactive'::text])))
);

ALTER TABLE ONLY billing.member_entitlements FORCE ROW LEVEL SECURITY;


--
-- Name: COLUMN member_entitlements.identities; Type: COMMENT; Schema: billing; Owner: -
--

COMMENT ON COLUMN billing.member_entitlements.identities IS 'Snapshot {identities, external_subjects} of the member when last active: a change of it is a visible change (revision + 1, member.entitlement.updated).';


--
-- Name: COLUMN member_entitlements.next_check_at; Type: COMMENT; Schema: billing; Owner: -
--

COMMENT ON COLUMN billing.member_entitlements.next_check_at IS 'Earliest valid_until among time-limited sources (cancelling subscriptions, expiring purchases); billing.ledger_sweep re-evaluates the row once billing.now() reaches it.';


--
-- Name: member_entitlement_json(billing.member_entitlements); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_entitlement_json(p_me billing.member_entitlements) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
declare
  v_ent billing.entitlements;
begin
  select * into v_ent from billing.entitlements e where e.community_id = p_me.community_id and e.id = p_me.entitlement_id;
  return billing.member_entitlement_json(p_me, v_ent);
end
$$;


--
-- Name: entitlements; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.entitlements (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('ent'::text) NOT NULL COLLATE pg_catalog."C",
    key text NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing.entitlements FORCE ROW LEVEL SECURITY;


--
-- Name: member_entitlement_json(billing.member_entitlements, billing.entitlements); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_entitlement_json(p_me billing.member_entitlements, p_ent billing.entitlements) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'id', p_me.id,
    'entitlement_id', p_me.entitlement_id,
    'key', p_ent.key,
    'name', p_ent.name,
    'revision', p_me.revision,
    'status', p_me.status,
    'granted_at', billing.iso(p_me.granted_at),
    'revoked_at', billing.iso(p_me.revoked_at),
    'sources', p_me.sources,
    'benefits', p_me.benefits)
$$;


--
-- Name: member_note_valid(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_note_valid(p_note text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select char_length(p_note) between 1 and 2000 and p_note !~ '[\x01-\x08\x0b-\x1f\x7f-\x9f]'
$$;


--
-- Name: member_tags_valid(text[]); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_tags_valid(p_tags text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select coalesce(cardinality(p_tags), 0) <= 20
    and not exists (select 1 from unnest(p_tags) t
                    where t is null or char_length(t) not between 1 and 40 or t <> lower(t) or t ~ '[[:space:][:cntrl:],]')
    and (select count(distinct t) from unnest(p_tags) t) = coalesce(cardinality(p_tags), 0)
$$;


--
-- Name: members; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.members (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('mem'::text) NOT NULL COLLATE pg_catalog."C",
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    email text,
    billing_name text,
    billing_address_lines text[],
    billing_country text,
    billing_tax_id text,
    display_name text,
    search_text text DEFAULT ''::text NOT NULL,
    note text,
    tags text[] DEFAULT '{}'::text[] NOT NULL,
    erased_at timestamp with time zone,
    CONSTRAINT members_billing_valid CHECK ((((billing_name IS NULL) OR ((length(billing_name) >= 1) AND (length(billing_name) <= 200))) AND ((billing_address_lines IS NULL) OR ((cardinality(billing_address_lines) <= 6) AND (COALESCE(length(array_to_string(billing_address_lines, ''::text)), 0) <= 600))) AND ((billing_country IS NULL) OR (billing_country ~ '^[A-Z]{2}$'::text)) AND ((billing_tax_id IS NULL) OR ((length(billing_tax_id) >= 1) AND (length(billing_tax_id) <= 50))))),
    CONSTRAINT members_email_valid CHECK (((email IS NULL) OR billing.email_valid(email))),
    CONSTRAINT members_note_valid CHECK (((note IS NULL) OR billing.member_note_valid(note))),
    CONSTRAINT members_tags_valid CHECK (billing.member_tags_valid(tags))
);

ALTER TABLE ONLY billing.members FORCE ROW LEVEL SECURITY;


--
-- Name: member_export_json(billing.members); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_export_json(p_m billing.members) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return jsonb_build_object(
    'id', p_m.id, 'created_at', billing.iso(p_m.created_at), 'updated_at', billing.iso(p_m.updated_at),
    'erased_at', billing.iso(p_m.erased_at), 'email', p_m.email, 'display_name', p_m.display_name,
    'note', p_m.note, 'tags', to_jsonb(p_m.tags),
    'identities', coalesce((select jsonb_agg(jsonb_build_object('platform', i.platform, 'platform_uid', i.platform_uid,
        'username', i.username, 'created_at', billing.iso(i.created_at)) order by i.platform, i.platform_uid)
      from billing.member_identities i where i.community_id = p_m.community_id and i.member_id = p_m.id), '[]'),
    'external_subjects', coalesce((select jsonb_agg(jsonb_build_object('namespace', x.namespace,
        'external_user_id', x.external_user_id, 'created_at', billing.iso(x.created_at)) order by x.namespace, x.external_user_id)
      from billing.external_subjects x where x.community_id = p_m.community_id and x.member_id = p_m.id), '[]'),
    'billing_details', jsonb_build_object('name', p_m.billing_name,
      'address_lines', to_jsonb(coalesce(p_m.billing_address_lines, '{}'::text[])),
      'country', p_m.billing_country, 'tax_id', p_m.billing_tax_id),
    'provider_customers', coalesce((select jsonb_agg(jsonb_build_object('provider', pc.provider,
        'customer_ref', pc.customer_ref, 'created_at', billing.iso(pc.created_at)) order by pc.provider)
      from billing.member_provider_customers pc where pc.community_id = p_m.community_id and pc.member_id = p_m.id), '[]'));
end
$$;


--
-- Name: member_identity_attach(text, text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_identity_attach(p_member_id text, p_platform text, p_platform_uid text, p_username text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_owner text;
begin
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_platform and i.platform_uid = p_platform_uid;
  if v_owner is not null and v_owner <> p_member_id then
    return jsonb_build_object('outcome', 'identity_taken');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = p_member_id and i.platform = p_platform) then
      return jsonb_build_object('outcome', 'member_has_identity', 'member_id', p_member_id);
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (billing.current_community_id(), p_member_id, p_platform, p_platform_uid, p_username);
  end if;
  return jsonb_build_object('outcome', 'linked', 'member_id', p_member_id, 'new_identity', v_owner is null);
end
$$;


--
-- Name: member_json(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_json(p_community_id text, p_member_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
begin
  return (select t.member from billing.member_object(p_community_id, p_member_id) t(member));
end
$$;


--
-- Name: member_object(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_object(p_community_id text, p_member_id text) RETURNS SETOF jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'id', m.id,
    'created_at', billing.iso(m.created_at),
    'identities', coalesce((
      select jsonb_agg(jsonb_build_object('platform', i.platform, 'platform_uid', i.platform_uid,
        'username', i.username) order by i.platform, i.platform_uid)
      from billing.member_identities i
      where i.community_id = m.community_id and i.member_id = m.id), '[]'),
    'external_subjects', coalesce((
      select jsonb_agg(jsonb_build_object('namespace', x.namespace, 'external_user_id', x.external_user_id)
        order by x.namespace, x.external_user_id)
      from billing.external_subjects x
      where x.community_id = m.community_id and x.member_id = m.id), '[]'))
  from billing.members m
  where m.community_id = p_community_id and m.id = p_member_id
$$;


--
-- Name: member_people(text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_people(p_community_id text, p_member_id text, p_email text) RETURNS TABLE(display_name text, search_text text)
    LANGUAGE sql STABLE
    AS $$
  select coalesce(
      (select i.username from billing.member_identities i
       where i.community_id = p_community_id and i.member_id = p_member_id and btrim(i.username) <> ''
       order by array_position(array['discord', 'telegram'], i.platform), i.platform_uid limit 1),
      nullif(btrim(p_email), ''),
      (select x.external_user_id from billing.external_subjects x
       where x.community_id = p_community_id and x.member_id = p_member_id
       order by x.namespace, x.external_user_id limit 1)),
    lower(concat_ws(E'\n', p_member_id, p_email,
      (select string_agg(concat_ws(E'\n', i.username, i.platform_uid), E'\n' order by i.platform, i.platform_uid)
       from billing.member_identities i where i.community_id = p_community_id and i.member_id = p_member_id),
      (select string_agg(x.external_user_id, E'\n' order by x.namespace, x.external_user_id)
       from billing.external_subjects x where x.community_id = p_community_id and x.member_id = p_member_id)))
$$;


--
-- Name: member_people_refresh(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_people_refresh(p_community_id text, p_member_id text) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
  v_email text;
  v_name text;
  v_text text;
begin
  select m.email into v_email from billing.members m
  where m.community_id = p_community_id and m.id = p_member_id for no key update;
  if not found then
    return; -- the member itself is being deleted
  end if;
  select p.display_name, p.search_text into v_name, v_text from billing.member_people(p_community_id, p_member_id, v_email) p;
  update billing.members m set display_name = v_name, search_text = v_text
  where m.community_id = p_community_id and m.id = p_member_id
    and (m.display_name is distinct from v_name or m.search_text is distinct from v_text);
end
$$;


--
-- Name: member_trial_days(text, text, billing.plans, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.member_trial_days(p_community_id text, p_member_id text, p_plan billing.plans, p_except_checkout_id text DEFAULT NULL::text) RETURNS integer
    LANGUAGE plpgsql STABLE
    AS $$
begin
  if coalesce(p_plan.trial_days, 0) = 0 or p_member_id is null then
    return coalesce(p_plan.trial_days, 0);
  end if;
  if exists (select 1 from billing.subscriptions s
             where s.community_id = p_community_id and s.member_id = p_member_id and s.trial_tier_id = p_plan.tier_id
               and s.checkout_id is distinct from p_except_checkout_id) then
    return 0;
  end if;
  return p_plan.trial_days;
end
$$;


--
-- Name: money_text(bigint, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.money_text(p_minor bigint, p_currency text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select case when d.digits = 0 then p_minor::text
    else (case when p_minor < 0 then '-' else '' end) || (abs(p_minor) / (10 ^ d.digits)::bigint)::text || '.'
      || lpad((abs(p_minor) % (10 ^ d.digits)::bigint)::text, d.digits, '0') end
    || ' ' || upper(p_currency)
  from (select case
    when upper(p_currency) in ('BIF','CLP','DJF','GNF','ISK','JPY','KMF','KRW','PYG','RWF','UGX','UYI','VND','VUV','XAF','XOF','XPF') then 0
    when upper(p_currency) in ('BHD','IQD','JOD','KWD','LYD','OMR','TND') then 3
    else 2 end as digits) d
$$;


--
-- Name: next_period_end(timestamp with time zone, text, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.next_period_end(p_anchor timestamp with time zone, p_interval text, p_end timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_months integer := case p_interval when 'month' then 1 when 'year' then 12 end;
  v_n integer;
begin
  if v_months is null then
    return null;
  end if;
  v_n := greatest(1, ((extract(year from p_end at time zone 'UTC') - extract(year from p_anchor at time zone 'UTC')) * 12
    + extract(month from p_end at time zone 'UTC') - extract(month from p_anchor at time zone 'UTC'))::integer / v_months);
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) > p_end and v_n > 1 loop
    v_n := v_n - 1;
  end loop;
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) <= p_end loop
    v_n := v_n + 1;
  end loop;
  return billing.add_utc(p_anchor, make_interval(months => v_months * v_n));
end
$$;


--
-- Name: now(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.now() RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
declare
  v_offset interval;
begin
  select c.clock_offset into v_offset from billing.communities c where c.id = billing.current_community_id();
  return now() + coalesce(v_offset, '0'::interval);
end
$$;


--
-- Name: page_json(text[], jsonb[], integer); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.page_json(p_ids text[], p_items jsonb[], p_limit integer) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'data', coalesce(to_jsonb(p_items[1:p_limit]), '[]'),
    'next_cursor', case when coalesce(cardinality(p_ids), 0) > p_limit
      then billing.encode_cursor(p_ids[p_limit]) end)
$$;


--
-- Name: plan_interval(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.plan_interval(p_interval text) RETURNS interval
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ select case p_interval when 'month' then interval '1 month' when 'year' then interval '1 year' end $$;


--
-- Name: plan_line(billing.plans, bigint, timestamp with time zone, timestamp with time zone, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.plan_line(p_plan billing.plans, p_amount bigint, p_start timestamp with time zone, p_end timestamp with time zone, p_description text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('type', 'plan',
    'description', coalesce(p_description, coalesce(t.name, 'Plan') || coalesce(' (' || p_plan.name || ')', '')
      || case p_plan.interval when 'month' then ', 1 month' when 'year' then ', 1 year' else '' end),
    'amount_cents', p_amount, 'plan_id', p_plan.id,
    'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
  from (select 1) one
  left join billing.tiers t on t.community_id = p_plan.community_id and t.id = p_plan.tier_id
$$;


--
-- Name: plan_price_migrate(text, text, integer); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.plan_price_migrate(p_community_id text, p_plan_id text, p_notice_days integer) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_plan billing.plans;
  v_mig billing.price_migrations;
  v_ids text[];
  v_cleared integer;
begin
  perform set_config('app.community_id', p_community_id, true);
  if p_notice_days is null or p_notice_days < 0 or p_notice_days > 3650 then
    perform billing.raise('BL422', 'notice_days must be a whole number of days from 0 to 3650.', 'notice_days');
  end if;
  select * into v_plan from billing.plans p where p.community_id = p_community_id and (p.id = p_plan_id or p.key = p_plan_id)
  order by (p.id = p_plan_id) desc limit 1 for update;
  if v_plan.id is null then
    perform billing.raise('BL404', 'No plan ' || coalesce(p_plan_id, '') || ' in community ' || p_community_id || '.');
  end if;
  if v_plan.interval is null then
    perform billing.raise('BL409', 'Plan ' || v_plan.key || ' is one-time: it has no subscribers to migrate.');
  end if;
  insert into billing.price_migrations (community_id, plan_id, price_cents, currency, notice_days, notice_ends_at, created_at)
  values (p_community_id, v_plan.id, v_plan.amount_cents, v_plan.currency, p_notice_days,
    billing.now() + make_interval(days => p_notice_days), billing.now())
  returning * into v_mig;
  with moved as (
    update billing.subscriptions s set price_migration_id = v_mig.id
    where s.community_id = p_community_id and s.plan_id = v_plan.id and s.status <> 'cancelled'
      and s.price_cents <> v_plan.amount_cents
    returning s.id)
  select coalesce(array_agg(m.id order by m.id), '{}') into v_ids from moved m;
  update billing.subscriptions s set price_migration_id = null
  where s.community_id = p_community_id and s.plan_id = v_plan.id and s.price_migration_id is not null
    and s.price_migration_id <> v_mig.id;
  get diagnostics v_cleared = row_count;
  update billing.price_migrations m set subscriptions = cardinality(v_ids)
  where m.community_id = p_community_id and m.id = v_mig.id returning * into v_mig;
  return billing.price_migration_json(v_mig) || jsonb_build_object('plan_key', v_plan.key,
    'subscription_ids', to_jsonb(v_ids), 'cleared_subscriptions', v_cleared);
end
$$;


--
-- Name: plan_price_subscribers(text, text, integer); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.plan_price_subscribers(p_community_id text, p_plan_id text, p_limit integer) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('subscriptions', count(*)::integer,
    'pending_migration', count(*) filter (where s.price_migration_id is not null)::integer,
    'subscription_ids', coalesce(to_jsonb((array_agg(s.id order by s.id))[1:p_limit]), '[]'))
  from billing.subscriptions s
  join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  where s.community_id = p_community_id and s.plan_id = p_plan_id and s.status <> 'cancelled'
    and s.price_cents <> p.amount_cents
$$;


--
-- Name: platform_checkout_connect(text, text, bytea, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.platform_checkout_connect(p_platform_config_id text, p_checkout_id text, p_token_sha256 bytea, p_platform_uid text, p_username text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_member text;
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = 'discord') then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  select cs.member_id into v_member from billing.checkout_sessions cs
  where cs.id = p_checkout_id and cs.access_token_sha256 = p_token_sha256;
  if v_member is null then
    return jsonb_build_object('outcome', 'no_checkout');
  end if;
  return billing.member_identity_attach(v_member, 'discord', p_platform_uid, p_username);
end
$$;


--
-- Name: platform_link_redeem(text, text, text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.platform_link_redeem(p_platform_config_id text, p_platform text, p_platform_uid text, p_code text, p_username text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = p_platform) then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  return billing.link_code_apply(p_code, p_platform, p_platform_uid, p_username);
end
$$;


--
-- Name: platform_member_connect(text, text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.platform_member_connect(p_platform_config_id text, p_member_id text, p_platform_uid text, p_username text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = 'discord') then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  if not exists (select 1 from billing.members m where m.id = p_member_id) then
    return jsonb_build_object('outcome', 'no_member');
  end if;
  return billing.member_identity_attach(p_member_id, 'discord', p_platform_uid, p_username);
end
$$;


--
-- Name: platform_settings_problem(text, jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.platform_settings_problem(p_platform text, p_settings jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v_allowed text[] := case p_platform when 'discord' then array['guild_id', 'public_key', 'client_id', 'kick_on_revoke']
                                      when 'telegram' then array['chat_id'] else array[]::text[] end;
  v_key text;
  v_value jsonb;
begin
  if p_settings is null or jsonb_typeof(p_settings) <> 'object' then
    return 'settings: expected an object';
  end if;
  if p_settings ? 'bot_token' then
    return 'settings.bot_token: a bot token is stored encrypted (billing_private.platform_secrets), never in settings';
  end if;
  if p_settings ? 'client_secret' then
    return 'settings.client_secret: a client secret is stored encrypted (billing_private.platform_secrets), never in settings';
  end if;
  for v_key, v_value in select e.key, e.value from jsonb_each(p_settings) e order by e.key loop
    if not (v_key = any (v_allowed)) then
      return format('settings.%s: unknown setting for %s (expected %s, and bot_token%s)', v_key, p_platform,
        array_to_string(v_allowed, ', '), case p_platform when 'discord' then ', client_secret' else '' end);
    end if;
    if jsonb_typeof(v_value) <> 'string' then
      return format('settings.%s: expected a string', v_key);
    end if;
  end loop;
  if p_platform = 'discord' then
    if not p_settings ? 'guild_id' then
      return 'settings.guild_id: required (the Discord server id)';
    end if;
    if p_settings->>'guild_id' !~ '^[1-9][0-9]{0,19}$' then
      return 'settings.guild_id: expected a Discord snowflake (the server id: digits, e.g. "1234567890123456789")';
    end if;
    if p_settings ? 'public_key' and p_settings->>'public_key' !~ '^[0-9a-fA-F]{64}$' then
      return 'settings.public_key: expected the application''s public key (64 hexadecimal digits)';
    end if;
    if p_settings ? 'client_id' and p_settings->>'client_id' !~ '^[1-9][0-9]{0,19}$' then
      return 'settings.client_id: expected the application''s id (its OAuth2 client id: digits)';
    end if;
    if p_settings ? 'kick_on_revoke' and p_settings->>'kick_on_revoke' not in ('true', 'false') then
      return 'settings.kick_on_revoke: expected "true" or "false" (remove the member from the server when their last benefit on it is revoked)';
    end if;
  elsif p_platform = 'telegram' then
    if not p_settings ? 'chat_id' then
      return 'settings.chat_id: required (the Telegram chat: its id or @channelname)';
    end if;
    if p_settings->>'chat_id' !~ '^(-?[1-9][0-9]{0,15}|@[A-Za-z][A-Za-z0-9_]{4,31})$' then
      return 'settings.chat_id: expected a Telegram chat id (an integer, e.g. "-1001234567890") or a public @channelname';
    end if;
  end if;
  return null;
end
$_$;


--
-- Name: price_migrations; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.price_migrations (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('pmig'::text) NOT NULL COLLATE pg_catalog."C",
    plan_id text NOT NULL COLLATE pg_catalog."C",
    price_cents integer NOT NULL,
    currency text NOT NULL,
    notice_days integer NOT NULL,
    notice_ends_at timestamp with time zone NOT NULL,
    subscriptions integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT price_migrations_notice_days_check CHECK (((notice_days >= 0) AND (notice_days <= 3650))),
    CONSTRAINT price_migrations_price_cents_check CHECK ((price_cents >= 0)),
    CONSTRAINT price_migrations_subscriptions_check CHECK ((subscriptions >= 0))
);

ALTER TABLE ONLY billing.price_migrations FORCE ROW LEVEL SECURITY;


--
-- Name: price_migration_json(billing.price_migrations); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.price_migration_json(p_mig billing.price_migrations) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('id', p_mig.id, 'plan_id', p_mig.plan_id, 'price_cents', p_mig.price_cents,
    'currency', p_mig.currency, 'notice_days', p_mig.notice_days, 'notice_ends_at', billing.iso(p_mig.notice_ends_at),
    'subscriptions', p_mig.subscriptions,
    'pending_subscriptions', (select count(*)::integer from billing.subscriptions s
      where s.community_id = p_mig.community_id and s.price_migration_id = p_mig.id and s.status <> 'cancelled'),
    'created_at', billing.iso(p_mig.created_at))
$$;


--
-- Name: provider_retries_exhausted(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.provider_retries_exhausted(p_subscription_ref text) RETURNS void
    LANGUAGE sql
    AS $$
  update billing.invoices i set next_attempt_at = null
  from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_subscription_ref
    and i.community_id = s.community_id and i.subscription_id = s.id and i.status = 'open'
    and i.next_attempt_at is not null
$$;


--
-- Name: purchases; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.purchases (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('pur'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    plan_id text NOT NULL COLLATE pg_catalog."C",
    status text DEFAULT 'completed'::text NOT NULL,
    amount_cents integer NOT NULL,
    currency text NOT NULL,
    access_expires_at timestamp with time zone,
    paid_at timestamp with time zone DEFAULT now() NOT NULL,
    client_reference_id text,
    checkout_id text COLLATE pg_catalog."C",
    provider_ref text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT purchases_status_check CHECK ((status = ANY (ARRAY['completed'::text, 'refunded'::text, 'disputed'::text])))
);

ALTER TABLE ONLY billing.purchases FORCE ROW LEVEL SECURITY;


--
-- Name: purchase_event_json(billing.purchases); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.purchase_event_json(p_pur billing.purchases) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_plan billing.plans;
  v_tier billing.tiers;
begin
  select * into v_plan from billing.plans p where p.community_id = p_pur.community_id and p.id = p_pur.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_plan.community_id and t.id = v_plan.tier_id;
  return billing.purchase_json(p_pur, v_plan, v_tier)
    || jsonb_build_object('client_reference_id', p_pur.client_reference_id);
end
$$;


--
-- Name: purchase_json(billing.purchases); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.purchase_json(p_pur billing.purchases) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select billing.purchase_json(p_pur, p, t)
  from (select 1) one
  left join billing.plans p on p.community_id = p_pur.community_id and p.id = p_pur.plan_id
  left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
$$;


--
-- Name: purchase_json(billing.purchases, billing.plans, billing.tiers); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.purchase_json(p_pur billing.purchases, p_plan billing.plans, p_tier billing.tiers) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'id', p_pur.id,
    'status', p_pur.status,
    'plan_id', p_pur.plan_id,
    'plan_name', p_plan.name,
    'tier_id', p_plan.tier_id,
    'tier_name', p_tier.name,
    'member_id', p_pur.member_id,
    'amount_cents', p_pur.amount_cents,
    'currency', p_pur.currency,
    'access_expires_at', billing.iso(p_pur.access_expires_at),
    'paid_at', billing.iso(p_pur.paid_at),
    'created_at', billing.iso(p_pur.created_at))
$$;


--
-- Name: raise(text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.raise(p_sqlstate text, p_message text, p_detail text DEFAULT NULL::text) RETURNS void
    LANGUAGE plpgsql
    AS $$
begin
  raise exception using errcode = p_sqlstate, message = p_message, detail = coalesce(p_detail, '');
end
$$;


--
-- Name: random_token(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.random_token() RETURNS text
    LANGUAGE sql PARALLEL SAFE
    AS $$ select replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '') $$;


--
-- Name: record_provider_event(text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.record_provider_event(p_provider text, p_event_id text, p_type text) RETURNS boolean
    LANGUAGE sql
    AS $$
  with ins as (
    insert into billing.provider_events (community_id, provider, event_id, type)
    values (billing.current_community_id(), p_provider, p_event_id, p_type)
    on conflict do nothing returning 1)
  select exists (select 1 from ins)
$$;


--
-- Name: refunds; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.refunds (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('re'::text) NOT NULL COLLATE pg_catalog."C",
    invoice_id text NOT NULL COLLATE pg_catalog."C",
    amount_cents bigint NOT NULL,
    revoke_access boolean DEFAULT false NOT NULL,
    provider text NOT NULL,
    provider_ref text,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT refunds_amount_cents_check CHECK ((amount_cents > 0)),
    CONSTRAINT refunds_provider_check CHECK ((provider = ANY (ARRAY['sandbox'::text, 'stripe'::text])))
);

ALTER TABLE ONLY billing.refunds FORCE ROW LEVEL SECURITY;


--
-- Name: refund_json(billing.refunds); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.refund_json(p_re billing.refunds) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object('id', p_re.id, 'invoice_id', p_re.invoice_id, 'amount_cents', p_re.amount_cents,
    'revoke_access', p_re.revoke_access, 'created_at', billing.iso(p_re.created_at))
$$;


--
-- Name: refund_purchase(text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.refund_purchase(p_provider_ref text) RETURNS text
    LANGUAGE sql
    AS $$
  update billing.purchases pu set status = 'refunded'
  where pu.community_id = billing.current_community_id() and pu.provider_ref = p_provider_ref and pu.status = 'completed'
  returning pu.id
$$;


--
-- Name: renew_batch(text[], timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.renew_batch(p_ids text[], p_now timestamp with time zone) RETURNS text[]
    LANGUAGE plpgsql
    AS $$
declare
  v_community text := billing.current_community_id();
  v_subs text[];
  v_ctids tid[];
  v_n integer;
  v_done integer;
begin
  -- The batch's terms, in a table of the session (emptied at commit).
  if to_regclass('pg_temp.renew_batch_terms') is null then
    create temporary table renew_batch_terms (
      subscription_id text collate "C" primary key, member_id text collate "C", at timestamptz, provider text,
      t billing.renewal_terms, subtotal_cents bigint, discount_cents bigint, invoice_id text collate "C",
      tax jsonb, total_cents bigint
    ) on commit delete rows;
  end if;
  -- Each renewal's tax (billing.invoice_tax, as billing.invoice_open computes it) and
  -- total: added to the table a session made with an earlier version of this function.
  if not exists (select 1 from pg_attribute a where a.attrelid = 'pg_temp.renew_batch_terms'::regclass
                 and a.attname = 'tax' and not a.attisdropped) then
    alter table renew_batch_terms add column tax jsonb, add column total_cents bigint;
  end if;
  delete from renew_batch_terms;
  insert into renew_batch_terms (subscription_id, member_id, at, provider, t, subtotal_cents, discount_cents, tax, total_cents)
  select r.id, r.member_id, r.current_period_end, r.provider, r.t, r.subtotal, r.discount, r.tax,
    r.subtotal - r.discount + (r.tax->>'tax_exclusive_cents')::bigint
  from (
    select r.id, r.member_id, r.current_period_end, r.provider, r.t,
      billing.invoice_lines_sum((r.t).lines, array['plan', 'proration']) as subtotal,
      -billing.invoice_lines_sum((r.t).lines, array['discount']) as discount,
      billing.invoice_tax(v_community, billing.member_billing(v_community, r.member_id), (r.t).lines) as tax
    -- One index probe per id (the lateral subquery runs per element): a scan of the
    -- community's subscriptions per batch made a storm of n renewals cost n^2.
    from unnest(p_ids) x(id)
    cross join lateral (select s.*, billing.renewal_terms(s, s.current_period_end) as t
          from billing.subscriptions s
          where s.community_id = v_community and s.id = x.id and s.provider = 'sandbox'
            and s.status in ('active', 'trialing') and s.current_period_end <= p_now
          offset 0) r
    where (r.t).period_end > p_now
      and (billing.invoice_lines_sum((r.t).lines, null) = 0
           or not coalesce((select c.declines from billing.sandbox_cards c
                            where c.community_id = v_community and c.subscription_id = r.id), false))) r;
  -- Row counts for the planner (a temporary table has no statistics of its own).
  analyze renew_batch_terms;
  -- The invoices (billing.invoice_open), then their payments (billing.invoice_mark_paid).
  -- The invoices written paid, with their one succeeded attempt: what billing.invoice_open
  -- then billing.invoice_mark_paid write, in one insert each (the insert trigger writes
  -- invoice.created and invoice.paid as those two steps would; a second pass over every
  -- invoice to mark it paid was a fifth of a storm's time).
  -- Their numbers (docs/decisions/invoice-numbers.md) taken as one block per series, in
  -- subscription order: numbered a row at a time by _050_number, the counter row got a
  -- new version per invoice in one transaction, and each step walked them all (n^2).
  with blocks as (
    insert into billing_private.number_counters as k (community_id, kind, series, last_number)
    select v_community, 'invoice', billing_private.number_series(v_community, b.at), count(*)
    from renew_batch_terms b
    group by 3
    on conflict (community_id, kind, series) do update set last_number = k.last_number + excluded.last_number
    returning k.series, k.last_number
  ), numbered as (
    select b.*, billing_private.number_text(x.series, x.last_number - count(*) over (partition by x.series)
      + row_number() over (partition by x.series order by b.subscription_id)) as number
    from renew_batch_terms b
    join blocks x on x.series = billing_private.number_series(v_community, b.at)
  ), ins as (
    insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
      subtotal_cents, discount_cents, total_cents, amount_paid_cents, attempt_count, paid_at,
      period_start, period_end, provider, created_at, number, tax_lines, tax_cents, tax_country, reverse_charge,
      buyer_name, buyer_address_lines, buyer_country, buyer_tax_id, seller_country, seller_tax_id)
    select v_community, b.member_id, b.subscription_id, 'paid', 'subscription_cycle', (b.t).currency, (b.t).lines,
      b.subtotal_cents, b.discount_cents, b.total_cents, b.total_cents, 1, b.at,
      b.at, (b.t).period_end, b.provider, b.at, b.number, b.tax->'tax_lines', (b.tax->>'tax_cents')::bigint,
      b.tax->>'tax_country', (b.tax->>'reverse_charge')::boolean, b.tax->>'buyer_name',
      nullif(array(select jsonb_array_elements_text(b.tax->'buyer_address_lines')), '{}'), b.tax->>'buyer_country',
      b.tax->>'buyer_tax_id', b.tax->>'seller_country', b.tax->>'seller_tax_id'
    from numbered b
    order by b.subscription_id
    returning id, subscription_id
  )
  update renew_batch_terms b set invoice_id = ins.id from ins where ins.subscription_id = b.subscription_id;
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, provider_ref, attempted_at)
  select v_community, b.invoice_id, 'succeeded', b.total_cents, b.provider,
    'sandbox_ch_' || substr(md5(b.invoice_id || b.at::text), 1, 16), b.at
  from renew_batch_terms b
  order by b.invoice_id;
  -- The subscriptions found by their keys, one index probe each, and updated by their
  -- ctid alone (a TID scan): joined by the planner they were a scan of every
  -- subscription of the community per batch, on statistics a storm makes stale, so a
  -- storm of n renewals cost n^2. The ctids are read just before the statement, of rows
  -- the caller locked, and the count is checked: a ctid whose row changed since would
  -- find nothing and fail the batch, never touch another row.
  select array_agg(p.ctid), count(*), array_agg(b.subscription_id order by b.subscription_id) into v_ctids, v_n, v_subs
  from renew_batch_terms b
  cross join lateral (select s.ctid from billing.subscriptions s
                      where s.community_id = v_community and s.id = b.subscription_id offset 0) p;
  update billing.subscriptions s set
    status = 'active', plan_id = (b.t).plan_id, scheduled_plan_id = null, scheduled_at = null,
    price_cents = (b.t).price_cents, price_migration_id = (b.t).price_migration_id,
    current_period_start = b.at, current_period_end = (b.t).period_end, billing_anchor = (b.t).anchor,
    credit_cents = s.credit_cents - greatest((b.t).credit_cents, 0),
    trial_end = case when s.status = 'trialing' then coalesce(s.trial_end, b.at) else s.trial_end end,
    updated_at = now()
  from renew_batch_terms b
  where s.ctid = any (v_ctids) and s.id = b.subscription_id;
  get diagnostics v_done = row_count;
  if v_done <> v_n then
    raise exception 'renew_batch: % of % subscriptions renewed', v_done, v_n;
  end if;
  return coalesce(v_subs, '{}');
end
$$;


--
-- Name: renewal_terms(billing.subscriptions, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.renewal_terms(p_sub billing.subscriptions, p_at timestamp with time zone) RETURNS billing.renewal_terms
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_plan billing.plans;
  v_t billing.renewal_terms;
  v_discount bigint;
  v_code text;
  v_price bigint;
begin
  select * into v_plan from billing.plans p
  where p.community_id = p_sub.community_id and p.id = coalesce(p_sub.scheduled_plan_id, p_sub.plan_id);
  v_t.plan_id := v_plan.id;
  v_t.price_cents := p_sub.price_cents;
  v_t.price_migration_id := p_sub.price_migration_id;
  if v_plan.id <> p_sub.plan_id then
    v_t.price_cents := v_plan.amount_cents;
    v_t.price_migration_id := null;
  elsif p_sub.price_migration_id is not null then
    select m.price_cents into v_price from billing.price_migrations m
    where m.community_id = p_sub.community_id and m.id = p_sub.price_migration_id and m.notice_ends_at <= p_at;
    if v_price is not null then
      v_t.price_cents := v_price;
      v_t.price_migration_id := null;
    end if;
  end if;
  v_price := v_t.price_cents;
  v_t.currency := v_plan.currency;
  v_t.anchor := case when p_sub.status = 'trialing' or p_sub.billing_anchor is null
                       or v_plan.id <> p_sub.plan_id and v_plan.interval is distinct from
                         (select p.interval from billing.plans p where p.community_id = p_sub.community_id and p.id = p_sub.plan_id)
                     then p_at else p_sub.billing_anchor end;
  v_t.period_end := billing.next_period_end(v_t.anchor, v_plan.interval, p_at);
  v_discount := billing.subscription_discount_cents(p_sub, v_price, p_at);
  v_t.lines := jsonb_build_array(billing.plan_line(v_plan, v_price, p_at, v_t.period_end));
  if v_discount > 0 then
    select d.code into v_code from billing.discount_codes d where d.community_id = p_sub.community_id and d.id = p_sub.discount_id;
    v_t.lines := v_t.lines || billing.discount_line(v_code, v_discount, p_at, v_t.period_end);
  end if;
  v_t.credit_cents := least(p_sub.credit_cents, v_price - v_discount);
  if v_t.credit_cents > 0 then
    v_t.lines := v_t.lines || jsonb_build_object('type', 'proration', 'description', 'Credit from an earlier plan change',
      'amount_cents', -v_t.credit_cents, 'period_start', billing.iso(p_at), 'period_end', billing.iso(v_t.period_end));
  end if;
  return v_t;
end
$$;


--
-- Name: require_switchable(billing.subscriptions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.require_switchable(p_sub billing.subscriptions) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
begin
  if p_sub.status not in ('active', 'trialing') then
    perform billing.raise('BL409', 'Subscription ' || p_sub.id || ' is ' || p_sub.status
      || ': only active or trialing subscriptions can switch plans.');
  end if;
end
$$;


--
-- Name: resolve_identity(jsonb); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.resolve_identity(p_args jsonb) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_platform text := nullif(p_args->>'platform', '');
  v_uid text := nullif(p_args->>'platform_uid', '');
  v_ns text := nullif(p_args->>'namespace', '');
  v_ext text := nullif(p_args->>'external_user_id', '');
  v_platform_pair boolean := v_platform is not null or v_uid is not null;
  v_subject_pair boolean := v_ns is not null or v_ext is not null;
  v_member text;
begin
  if v_platform_pair and v_subject_pair then
    perform billing.raise('BL400', 'Send exactly one identity pair: platform with platform_uid, '
      || 'or namespace with external_user_id, not both.', case when v_ns is not null then 'namespace' else 'external_user_id' end);
  elsif not v_platform_pair and not v_subject_pair then
    perform billing.raise('BL400', 'Missing query parameter "platform" (with "platform_uid") or "namespace" '
      || '(with "external_user_id"): send exactly one identity pair.', 'platform');
  elsif v_platform_pair and v_platform is null then
    perform billing.raise('BL400', 'Missing query parameter "platform": platform_uid needs its platform.', 'platform');
  elsif v_platform_pair and v_uid is null then
    perform billing.raise('BL400', 'Missing query parameter "platform_uid": platform needs its platform_uid.', 'platform_uid');
  elsif v_subject_pair and v_ns is null then
    perform billing.raise('BL400', 'Missing query parameter "namespace": external_user_id needs its namespace.', 'namespace');
  elsif v_subject_pair and v_ext is null then
    perform billing.raise('BL400', 'Missing query parameter "external_user_id": namespace needs its external_user_id.', 'external_user_id');
  end if;
  if v_platform_pair then
    if v_platform not in ('discord', 'telegram') then
      perform billing.raise('BL422', 'Unknown platform "' || v_platform || '"; known: discord, telegram.', 'platform');
    end if;
    select i.member_id into v_member from billing.member_identities i
    where i.community_id = billing.current_community_id() and i.platform = v_platform and i.platform_uid = v_uid;
  else
    select x.member_id into v_member from billing.external_subjects x
    where x.community_id = billing.current_community_id() and x.namespace = v_ns and x.external_user_id = v_ext;
  end if;
  return v_member;
end
$$;


--
-- Name: reverse_charge_applies(text, text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.reverse_charge_applies(p_seller_country text, p_buyer_country text, p_buyer_tax_id text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select coalesce(billing.eu_member(p_seller_country) and billing.eu_member(p_buyer_country)
    and p_buyer_country <> p_seller_country and billing.eu_vat_id_valid(p_buyer_country, p_buyer_tax_id), false)
$$;


--
-- Name: reverse_charge_note(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.reverse_charge_note() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ select 'Reverse charge: VAT to be accounted for by the recipient, Article 196 Directive 2006/112/EC.'::text $$;


--
-- Name: sandbox_advance(text, numeric); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.sandbox_advance(p_community_id text, p_days numeric) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_provider text;
begin
  if p_days is null or p_days <= 0 then
    perform billing.raise('BL422', 'The number of days must be positive.', 'days');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = p_community_id for update;
  if not found then
    perform billing.raise('BL404', 'No community ' || p_community_id || '.');
  end if;
  if v_provider is distinct from 'sandbox' then
    perform billing.raise('BL409', 'The test clock only runs for sandbox communities.');
  end if;
  update billing.communities c set clock_offset = c.clock_offset + make_interval(secs => p_days * 86400)
  where c.id = p_community_id;
  return billing.apply_due(p_community_id);
end
$$;


--
-- Name: sandbox_charge_succeeds(billing.invoices); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.sandbox_charge_succeeds(p_inv billing.invoices) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
  select p_inv.total_cents = 0 or not coalesce((select c.declines from billing.sandbox_cards c
    where c.community_id = p_inv.community_id and c.subscription_id = p_inv.subscription_id), false)
$$;


--
-- Name: sandbox_collect(billing.invoices, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.sandbox_collect(p_inv billing.invoices, p_at timestamp with time zone) RETURNS billing.invoices
    LANGUAGE plpgsql
    AS $$
begin
  if billing.sandbox_charge_succeeds(p_inv) then
    return billing.invoice_mark_paid(p_inv, p_at, 'sandbox_ch_' || substr(md5(p_inv.id || p_at::text), 1, 16));
  end if;
  return billing.invoice_mark_failed(p_inv, p_at, 'Your card was declined (sandbox).',
    billing.dunning_next_attempt(p_inv.community_id, p_inv.created_at, p_inv.attempt_count + 1));
end
$$;


--
-- Name: sandbox_set_card(text, boolean); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.sandbox_set_card(p_subscription_id text, p_declines boolean) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_sub billing.subscriptions;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || p_subscription_id || '.');
  elsif v_sub.provider <> 'sandbox' then
    perform billing.raise('BL409', 'Subscription ' || p_subscription_id || ' is not a sandbox subscription.');
  end if;
  insert into billing.sandbox_cards (community_id, subscription_id, declines) values (v_sub.community_id, v_sub.id, p_declines)
  on conflict (community_id, subscription_id) do update set declines = excluded.declines, updated_at = now();
  return jsonb_build_object('subscription_id', v_sub.id, 'declines', p_declines);
end
$$;


--
-- Name: source_grants_access(text, text, text, text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.source_grants_access(p_type text, p_community_id text, p_id text, p_status text, p_valid_until timestamp with time zone, p_now timestamp with time zone) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
  select coalesce(case p_type
    when 'subscription' then
      p_status in ('active', 'trialing')
      or (p_status = 'past_due' and billing.subscription_retry_open(p_community_id, p_id))
      or (p_status = 'cancelling' and (p_valid_until is null or p_valid_until > p_now)
          and not billing.subscription_unpaid(p_community_id, p_id))
      or (p_status = 'paused' and p_valid_until > p_now)
    when 'purchase' then p_status = 'completed' and (p_valid_until is null or p_valid_until > p_now)
    when 'grant' then p_status = 'active' and (p_valid_until is null or p_valid_until > p_now)
  end, false)
$$;


--
-- Name: FUNCTION source_grants_access(p_type text, p_community_id text, p_id text, p_status text, p_valid_until timestamp with time zone, p_now timestamp with time zone); Type: COMMENT; Schema: billing; Owner: -
--

COMMENT ON FUNCTION billing.source_grants_access(p_type text, p_community_id text, p_id text, p_status text, p_valid_until timestamp with time zone, p_now timestamp with time zone) IS 'The entitlement rule: does this source (subscription, purchase or grant) grant access at p_now? See 41-access-rule.sql.';


--
-- Name: subscription_advance(text, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_advance(p_sub_id text, p_now timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
  v_sub billing.subscriptions;
  v_inv billing.invoices;
  v_at timestamptz;
  v_terms billing.renewal_terms;
  v_steps integer := 0;
begin
  loop
    select * into v_sub from billing.subscriptions s
    where s.community_id = billing.current_community_id() and s.id = p_sub_id for update;
    exit when v_sub.id is null or v_steps >= 1000;
    -- A retry that is due comes first: past_due, or cancelling (cancelled at period
    -- end while a renewal was still unpaid; retries go on until the period ends).
    v_inv := null;
    if v_sub.status in ('past_due', 'cancelling') then
      select * into v_inv from billing.invoices i
      where i.community_id = v_sub.community_id and i.subscription_id = v_sub.id and i.status = 'open'
        and i.next_attempt_at is not null
      order by i.next_attempt_at limit 1 for update;
    end if;
    if v_inv.id is not null and v_inv.next_attempt_at <= p_now
       and (v_sub.status = 'past_due' or v_inv.next_attempt_at < v_sub.current_period_end) then
      v_at := v_inv.next_attempt_at;
      -- The subscription changes first, so access never flickers: a paid retry makes
      -- it active before its invoice stops being retried; a last failed retry ends it
      -- (the ledger revokes with reason payment_failed) before the invoice is given up.
      if billing.sandbox_charge_succeeds(v_inv) then
        update billing.subscriptions s set status = case when s.status = 'past_due' then 'active' else s.status end,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
        perform billing.sandbox_collect(v_inv, v_at);
      elsif billing.dunning_next_attempt(v_inv.community_id, v_inv.created_at, v_inv.attempt_count + 1) is not null then
        perform billing.sandbox_collect(v_inv, v_at);
      else
        -- The last retry failed: the community's final action (cancel).
        update billing.subscriptions s set status = 'cancelled', cancelled_at = v_at,
          cancellation_reason = 'payment_failed', cancel_at = null, scheduled_plan_id = null, scheduled_at = null,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
        v_inv := billing.sandbox_collect(v_inv, v_at);
        update billing.invoices i set status = 'uncollectible'
        where i.community_id = v_inv.community_id and i.id = v_inv.id;
      end if;
    elsif v_sub.status = 'past_due' then
      exit;
    elsif v_sub.status = 'paused' then
      -- Resumes by itself at paused_until (no invoices while paused).
      exit when v_sub.paused_until is null or v_sub.paused_until > p_now;
      perform billing.subscription_resume_at(v_sub.id, v_sub.paused_until);
    elsif v_sub.status in ('active', 'trialing', 'cancelling') and v_sub.current_period_end <= p_now then
      v_at := v_sub.current_period_end;
      if v_sub.status = 'cancelling' then
        update billing.subscriptions s set status = 'cancelled', cancelled_at = v_at, updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
      else
        v_terms := billing.renewal_terms(v_sub, v_at);
        v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_cycle', v_terms.currency,
          v_terms.lines, v_at, v_terms.period_end, v_sub.provider, v_at);
        v_inv := billing.sandbox_collect(v_inv, v_at);
        update billing.subscriptions s set
          status = case when v_inv.status = 'paid' then 'active' else 'past_due' end,
          plan_id = v_terms.plan_id, scheduled_plan_id = null, scheduled_at = null,
          price_cents = v_terms.price_cents, price_migration_id = v_terms.price_migration_id,
          current_period_start = v_at, current_period_end = v_terms.period_end, billing_anchor = v_terms.anchor,
          credit_cents = s.credit_cents - greatest(v_terms.credit_cents, 0),
          trial_end = case when s.status = 'trialing' then coalesce(s.trial_end, v_at) else s.trial_end end,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
      end if;
    else
      exit;
    end if;
    v_steps := v_steps + 1;
  end loop;
  return v_steps;
end
$$;


--
-- Name: subscription_discount_cents(billing.subscriptions, bigint, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint, p_start timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_d billing.discount_codes;
begin
  if p_sub.discount_id is null or p_amount <= 0 then
    return 0;
  end if;
  select * into v_d from billing.discount_codes d where d.community_id = p_sub.community_id and d.id = p_sub.discount_id;
  if v_d.id is null then
    return 0;
  end if;
  if v_d.duration = 'once' and exists (select 1 from billing.invoices i
      where i.community_id = p_sub.community_id and i.subscription_id = p_sub.id and i.discount_cents > 0) then
    return 0;
  elsif v_d.duration = 'repeating'
      and p_start >= billing.add_utc(p_sub.created_at, make_interval(months => coalesce(v_d.duration_months, 1))) then
    return 0;
  end if;
  return least(p_amount, case v_d.value_type when 'percent' then round(p_amount * v_d.percent_off / 100)::bigint
                              else coalesce(v_d.amount_off_cents, 0) end);
end
$$;


--
-- Name: subscription_event_json(billing.subscriptions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_event_json(p_sub billing.subscriptions) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_plan billing.plans;
  v_tier billing.tiers;
begin
  select * into v_plan from billing.plans p where p.community_id = p_sub.community_id and p.id = p_sub.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_plan.community_id and t.id = v_plan.tier_id;
  return billing.subscription_json(p_sub, v_plan, v_tier)
    || jsonb_build_object('client_reference_id', p_sub.client_reference_id);
end
$$;


--
-- Name: subscription_json(billing.subscriptions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_json(p_sub billing.subscriptions) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select billing.subscription_json(p_sub, p, t)
  from (select 1) one
  left join billing.plans p on p.community_id = p_sub.community_id and p.id = p_sub.plan_id
  left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
$$;


--
-- Name: subscription_json(billing.subscriptions, billing.plans, billing.tiers); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_json(p_sub billing.subscriptions, p_plan billing.plans, p_tier billing.tiers) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object(
    'id', p_sub.id,
    'status', p_sub.status,
    'plan_id', p_sub.plan_id,
    'plan_name', p_plan.name,
    'tier_id', p_plan.tier_id,
    'tier_name', p_tier.name,
    'member_id', p_sub.member_id,
    'amount_cents', p_sub.price_cents,
    'currency', p_plan.currency,
    'interval', p_plan.interval,
    'current_period_end', billing.iso(p_sub.current_period_end),
    'cancel_at', billing.iso(p_sub.cancel_at),
    'paused_until', billing.iso(p_sub.paused_until),
    'scheduled_plan_id', p_sub.scheduled_plan_id,
    'scheduled_at', billing.iso(p_sub.scheduled_at),
    'created_at', billing.iso(p_sub.created_at),
    'updated_at', billing.iso(p_sub.updated_at))
$$;


--
-- Name: subscription_provider(billing.subscriptions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_provider(p_sub billing.subscriptions) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('provider', p_sub.provider, 'provider_ref', p_sub.provider_ref,
    'plan_id', p_sub.plan_id, 'stripe_price_id', (select p.stripe_price_id from billing.plans p
      where p.community_id = p_sub.community_id and p.id = p_sub.plan_id),
    'current_period_end', billing.iso(p_sub.current_period_end))
$$;


--
-- Name: subscription_resume_at(text, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_resume_at(p_sub_id text, p_at timestamp with time zone) RETURNS billing.subscriptions
    LANGUAGE plpgsql
    AS $$
declare
  v_sub billing.subscriptions;
  v_plan billing.plans;
  v_inv billing.invoices;
  v_end timestamptz;
  v_lines jsonb;
  v_discount bigint;
  v_code text;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_sub_id for update;
  if v_sub.status <> 'paused' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not paused: nothing to resume.');
  end if;
  if v_sub.paid_through is not null and p_at < v_sub.paid_through then
    update billing.subscriptions s set
      status = case when s.trial_end is not null and s.trial_end > p_at then 'trialing' else 'active' end,
      paused_until = null, paid_through = null, updated_at = now()
    where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
    return v_sub;
  end if;
  select * into v_plan from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  v_end := billing.next_period_end(p_at, v_plan.interval, p_at);
  if v_sub.provider = 'sandbox' then
    v_discount := billing.subscription_discount_cents(v_sub, v_sub.price_cents, p_at);
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_sub.price_cents, p_at, v_end));
    if v_discount > 0 then
      select d.code into v_code from billing.discount_codes d where d.community_id = v_sub.community_id and d.id = v_sub.discount_id;
      v_lines := v_lines || billing.discount_line(v_code, v_discount, p_at, v_end);
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_cycle', v_plan.currency, v_lines,
      p_at, v_end, 'sandbox', p_at);
    v_inv := billing.sandbox_collect(v_inv, p_at);
  end if;
  update billing.subscriptions s set
    status = case when v_inv.id is null or v_inv.status = 'paid' then 'active' else 'past_due' end,
    paused_until = null, paid_through = null, current_period_start = p_at, current_period_end = v_end, billing_anchor = p_at, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;


--
-- Name: subscription_retry_open(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_retry_open(p_community_id text, p_subscription_id text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is not null);
end
$$;


--
-- Name: subscription_unpaid(text, text); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.subscription_unpaid(p_community_id text, p_subscription_id text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is null);
end
$$;


--
-- Name: switch_options(billing.subscriptions); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.switch_options(p_sub billing.subscriptions) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  with cur as (
    select t.id as tier_id, t.rank, p.currency from billing.plans p
    join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    where p.community_id = p_sub.community_id and p.id = p_sub.plan_id),
  opts as (
    select jsonb_build_object('plan_id', p.id, 'plan_name', p.name, 'tier_id', p.tier_id,
             'amount_cents', p.amount_cents, 'currency', p.currency, 'interval', p.interval,
             'trial_days', billing.member_trial_days(p_sub.community_id, p_sub.member_id, p)) as j,
           case when t.id = cur.tier_id then 'same_tier' when t.rank >= cur.rank then 'upgrades' else 'downgrades' end as grp,
           t.rank, p.amount_cents, p.id
    from billing.plans p
    join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    cross join cur
    where p.community_id = p_sub.community_id and p.active and t.active and t.kind = 'subscription'
      and p.interval is not null and p.id <> p_sub.plan_id and p.currency = cur.currency)
  select jsonb_build_object(
    'same_tier', coalesce((select jsonb_agg(j order by amount_cents, id) from opts where grp = 'same_tier'), '[]'),
    'upgrades', coalesce((select jsonb_agg(j order by rank, amount_cents, id) from opts where grp = 'upgrades'), '[]'),
    'downgrades', coalesce((select jsonb_agg(j order by rank desc, amount_cents, id) from opts where grp = 'downgrades'), '[]'))
$$;


--
-- Name: switch_proration(billing.subscriptions, billing.plans, billing.plans, timestamp with time zone); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.switch_proration(p_sub billing.subscriptions, p_old billing.plans, p_new billing.plans, p_now timestamp with time zone, OUT new_period boolean, OUT period_start timestamp with time zone, OUT period_end timestamp with time zone, OUT charge_cents bigint, OUT credit_cents bigint, OUT applied_cents bigint) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_frac numeric;
begin
  v_frac := case when p_sub.current_period_end is null or p_sub.current_period_end <= p_sub.current_period_start then 0
                 else greatest(0, least(1, extract(epoch from (p_sub.current_period_end - p_now))
                   / extract(epoch from (p_sub.current_period_end - p_sub.current_period_start)))) end;
  new_period := p_sub.status <> 'trialing' and p_new.interval is distinct from p_old.interval;
  period_start := case when new_period then p_now else p_sub.current_period_start end;
  period_end := case when new_period then billing.add_utc(p_now, billing.plan_interval(p_new.interval)) else p_sub.current_period_end end;
  if p_sub.status = 'trialing' then
    charge_cents := 0;
    credit_cents := 0;
  else
    charge_cents := case when new_period then p_new.amount_cents else round(p_new.amount_cents * v_frac)::bigint end;
    -- The credit is for what the subscriber paid (their price), not the plan's price now.
    credit_cents := round(p_sub.price_cents * v_frac)::bigint;
  end if;
  applied_cents := least(credit_cents, charge_cents);
end
$$;


--
-- Name: switch_validate(billing.subscriptions, text, boolean); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.switch_validate(p_sub billing.subscriptions, p_plan_id text, p_immediate boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_grp text;
begin
  perform billing.require_switchable(p_sub);
  select e.g into v_grp from jsonb_each(billing.switch_options(p_sub)) e(g, arr), jsonb_array_elements(arr) o
  where o->>'plan_id' = p_plan_id and (not p_immediate or e.g in ('same_tier', 'upgrades'))
  limit 1;
  if v_grp is null then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_plan_id, '') || ' is not among this subscription''s '
      || case when p_immediate then 'immediate ' else '' end || 'switch options.', 'plan_id');
  end if;
  return v_grp;
end
$$;


--
-- Name: tax_rates; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.tax_rates (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('txr'::text) NOT NULL COLLATE pg_catalog."C",
    country text NOT NULL COLLATE pg_catalog."C",
    name text NOT NULL,
    rate_ppm integer NOT NULL,
    inclusive boolean DEFAULT false NOT NULL,
    active boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tax_rates_country_check CHECK ((country ~ '^[A-Z]{2}$'::text)),
    CONSTRAINT tax_rates_name_check CHECK ((((length(name) >= 1) AND (length(name) <= 40)) AND (name !~ '[[:cntrl:]]'::text))),
    CONSTRAINT tax_rates_rate_ppm_check CHECK (((rate_ppm >= 0) AND (rate_ppm <= 1000000)))
);

ALTER TABLE ONLY billing.tax_rates FORCE ROW LEVEL SECURITY;


--
-- Name: tax_rate_json(billing.tax_rates); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tax_rate_json(p_r billing.tax_rates) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  select jsonb_build_object('id', p_r.id, 'country', p_r.country, 'name', p_r.name, 'rate_ppm', p_r.rate_ppm,
    'inclusive', p_r.inclusive, 'active', p_r.active, 'updated_at', billing.iso(p_r.updated_at))
$$;


--
-- Name: tg_checkout_sessions__outbox(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_checkout_sessions__outbox() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if tg_op = 'INSERT' then
    perform billing.emit_event(new.community_id, 'checkout.created',
      jsonb_build_object('checkout', billing.checkout_event_json(new), 'previous_attributes', null));
    if new.status = 'open' then
      return null;
    end if;
  elsif new.status is not distinct from old.status then
    return null;
  end if;
  if new.status in ('completed', 'expired') then
    perform billing.emit_event(new.community_id, 'checkout.' || new.status,
      jsonb_build_object('checkout', billing.checkout_event_json(new), 'previous_attributes',
        case when tg_op = 'UPDATE' then jsonb_build_object('status', old.status) end));
  end if;
  return null;
end
$$;


--
-- Name: tg_entitlement_benefits__ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_entitlement_benefits__ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from (select community_id, entitlement_id from new_rows
        union all select community_id, entitlement_id from old_rows) t
  group by t.community_id;
  return null;
end
$$;


--
-- Name: tg_entitlement_benefits__ledger_delete(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_entitlement_benefits__ledger_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from old_rows t group by t.community_id;
  return null;
end
$$;


--
-- Name: tg_entitlement_benefits__ledger_insert(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_entitlement_benefits__ledger_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from new_rows t group by t.community_id;
  return null;
end
$$;


--
-- Name: tg_entitlement_benefits__type(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_entitlement_benefits__type() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_problem text;
begin
  select billing.benefit_type_problem(pc.platform, new.type) into v_problem
  from billing.platform_configs pc where pc.community_id = new.community_id and pc.id = new.platform_config_id;
  if v_problem is not null then
    raise exception using errcode = 'check_violation', message = v_problem, detail = 'type';
  end if;
  return null;
end
$$;


--
-- Name: tg_events__community_clock(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_events__community_clock() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  new.created_at := now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = new.community_id), '0'::interval);
  return new;
end
$$;


--
-- Name: tg_external_subjects__outbox_and_ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_external_subjects__outbox_and_ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if tg_op = 'UPDATE' and old.member_id = new.member_id and old.namespace = new.namespace
     and old.external_user_id = new.external_user_id then
    return null;
  end if;
  if tg_op in ('DELETE', 'UPDATE') then
    perform billing.member_changed(old.community_id, old.member_id, jsonb_build_object(
      'kind', 'external_subject_removed', 'namespace', old.namespace,
      'external_user_id', old.external_user_id));
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    perform billing.member_changed(new.community_id, new.member_id, jsonb_build_object(
      'kind', 'external_subject_attached', 'namespace', new.namespace,
      'external_user_id', new.external_user_id));
  end if;
  return null;
end
$$;


--
-- Name: tg_external_subjects__people(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_external_subjects__people() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform billing.member_people_refresh(old.community_id, old.member_id);
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.member_id <> new.member_id) then
    perform billing.member_people_refresh(new.community_id, new.member_id);
  end if;
  return null;
end
$$;


--
-- Name: tg_grants__ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_grants__ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.ledger_refresh_member(new.community_id, new.member_id,
    case when tg_op = 'INSERT' then 'grant_created' when new.revoked_at is not null and old.revoked_at is null
         then 'grant_revoked' else 'grant_updated' end, null);
  return null;
end
$$;


--
-- Name: tg_invoices__immutable(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_invoices__immutable() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if old.status <> 'draft' and (new.lines is distinct from old.lines or new.subtotal_cents <> old.subtotal_cents
      or new.discount_cents <> old.discount_cents or new.total_cents <> old.total_cents
      or new.currency <> old.currency or new.member_id <> old.member_id
      or new.subscription_id is distinct from old.subscription_id or new.purchase_id is distinct from old.purchase_id
      -- its tax and the parties it was computed for (docs/decisions/tax.md)
      or new.tax_lines is distinct from old.tax_lines or new.tax_cents <> old.tax_cents
      or new.tax_country is distinct from old.tax_country or new.reverse_charge <> old.reverse_charge
      or (new.buyer_country, new.buyer_tax_id, new.seller_country, new.seller_tax_id)
         is distinct from (old.buyer_country, old.buyer_tax_id, old.seller_country, old.seller_tax_id)
      -- the buyer's name and address, except their removal from a consumer's invoice
      -- (no tax id, not reverse charged) once the member is erased: the law keeps them on
      -- a business buyer's invoice only (docs/decisions/member-erasure.md)
      or ((new.buyer_name, new.buyer_address_lines) is distinct from (old.buyer_name, old.buyer_address_lines)
          and not (new.buyer_name is null and new.buyer_address_lines is null and old.buyer_tax_id is null
                   and not old.reverse_charge
                   and exists (select 1 from billing.members m where m.community_id = old.community_id
                               and m.id = old.member_id and m.erased_at is not null)))) then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is finalized: its lines and amounts cannot change.';
  end if;
  -- A number, once given, is the invoice's for good (void included: a tax office
  -- expects every number of a series accounted for).
  if old.number is not null and new.number is distinct from old.number then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is numbered ' || old.number || ': its number cannot change.';
  end if;
  if old.status in ('paid', 'void', 'uncollectible') and new.status <> old.status then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is ' || old.status || ' and cannot become ' || new.status || '.';
  end if;
  new.updated_at := now();
  return new;
end
$$;


--
-- Name: tg_invoices__number(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_invoices__number() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_series text := billing_private.number_series(new.community_id, new.created_at);
begin
  new.number := billing_private.number_text(v_series, billing_private.number_next(new.community_id, 'invoice', v_series));
  return new;
end
$$;


--
-- Name: tg_invoices__outbox_and_ledger_insert(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_invoices__outbox_and_ledger_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_changed billing.invoices[];
  v_event_ids text[];
begin
  -- An invoice written paid at once (the renewals of a batch, billing.renew_batch) gets
  -- the events of the two steps it stands for: invoice.created as it was finalized (open,
  -- nothing paid), then invoice.paid with what changed; all created, then all paid, each
  -- in invoice id order, as the two statements wrote them.
  with j as (
    select n.id, n.community_id, n.status, billing.invoice_json(n) as now_json
    from new_rows n
  ), j2 as (
    select j.*, case when j.status = 'paid'
        then j.now_json || jsonb_build_object('status', 'open', 'amount_paid_cents', 0, 'attempt_count', 0,
                                              'paid_at', null, 'next_attempt_at', null)
        else j.now_json end as created_json
    from j
  ), ev as (
    insert into billing.events (community_id, type, data)
    select x.community_id, x.type, x.data from (
      select j2.community_id, j2.id, 1 as step, 'invoice.created' as type,
        jsonb_build_object('invoice', j2.created_json, 'previous_attributes', null) as data
      from j2
      union all
      select j2.community_id, j2.id, 2, 'invoice.paid',
        jsonb_build_object('invoice', j2.now_json,
          'previous_attributes', billing.jsonb_changed(j2.created_json - 'lines', j2.now_json))
      from j2 where j2.status = 'paid') x
    order by x.step, x.id
    returning id, type, data->'invoice'->>'id' as invoice_id
  )
  -- The ledger's trigger event: the last one of each invoice.
  select array_agg(n order by n.id), array_agg(ev.id order by n.id) into v_changed, v_event_ids
  from new_rows n join ev on ev.invoice_id = n.id
    and ev.type = case when n.status = 'paid' then 'invoice.paid' else 'invoice.created' end
  where n.subscription_id is not null;
  if v_changed is not null then
    perform billing.invoices_ledger_refresh(v_changed, v_event_ids);
  end if;
  return null;
end
$$;


--
-- Name: tg_invoices__outbox_and_ledger_update(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_invoices__outbox_and_ledger_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_changed billing.invoices[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, t.type, jsonb_build_object('invoice', billing.invoice_json(n),
      'previous_attributes', billing.jsonb_changed(billing.invoice_json(o) - 'lines', billing.invoice_json(n)))
    from new_rows n
    join old_rows o on o.community_id = n.community_id and o.id = n.id
    cross join lateral (select case
        when n.status = 'paid' and o.status <> 'paid' then 'invoice.paid'
        when n.attempt_count > o.attempt_count and n.status <> 'paid' then 'invoice.payment_failed' end as type) t
    where t.type is not null
    order by n.id
    returning id, data->'invoice'->>'id' as invoice_id
  )
  select array_agg(n order by n.id), array_agg(ev.id order by n.id) into v_changed, v_event_ids
  from new_rows n
  join old_rows o on o.community_id = n.community_id and o.id = n.id
  left join ev on ev.invoice_id = n.id
  where n.subscription_id is not null
    and (n.status <> o.status or n.next_attempt_at is distinct from o.next_attempt_at);
  if v_changed is not null then
    perform billing.invoices_ledger_refresh(v_changed, v_event_ids);
  end if;
  return null;
end
$$;


--
-- Name: tg_invoices__subscription_tax(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_invoices__subscription_tax() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_communities text[];
  v_ids text[];
  v_ppms integer[];
begin
  select array_agg(x.community_id), array_agg(x.subscription_id), array_agg(x.ppm)
    into v_communities, v_ids, v_ppms
  from (select distinct on (n.community_id, n.subscription_id) n.community_id, n.subscription_id,
          case when n.reverse_charge then 0 else billing.invoice_tax_inclusive_ppm(n.tax_lines) end as ppm
        from new_rows n where n.subscription_id is not null
        order by n.community_id, n.subscription_id, n.created_at desc, n.id desc) x
  -- One index probe per subscription (a lateral per row), never a join the planner may
  -- turn into a scan of the community's subscriptions.
  cross join lateral (select s.tax_inclusive_ppm from billing.subscriptions s
                      where s.community_id = x.community_id and s.id = x.subscription_id offset 0) s
  where s.tax_inclusive_ppm <> x.ppm;
  if v_ids is null then
    return null;
  end if;
  update billing.subscriptions s set tax_inclusive_ppm = u.ppm
  from unnest(v_communities, v_ids, v_ppms) as u(community_id, id, ppm)
  where s.community_id = u.community_id and s.id = u.id;
  return null;
end
$$;


--
-- Name: tg_member_identities__outbox_and_ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_member_identities__outbox_and_ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if tg_op = 'UPDATE' and old.member_id = new.member_id and old.platform = new.platform
     and old.platform_uid = new.platform_uid and old.username is not distinct from new.username then
    return null;
  end if;
  if tg_op in ('DELETE', 'UPDATE') then
    perform billing.member_changed(old.community_id, old.member_id, jsonb_build_object(
      'kind', case when tg_op = 'DELETE' or old.member_id <> new.member_id then 'identity_unlinked'
        else 'identity_updated' end,
      'platform', old.platform, 'platform_uid', old.platform_uid));
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.member_id <> new.member_id) then
    perform billing.member_changed(new.community_id, new.member_id, jsonb_build_object(
      'kind', 'identity_linked', 'platform', new.platform, 'platform_uid', new.platform_uid));
  end if;
  return null;
end
$$;


--
-- Name: tg_member_identities__people(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_member_identities__people() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform billing.member_people_refresh(old.community_id, old.member_id);
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.member_id <> new.member_id) then
    perform billing.member_people_refresh(new.community_id, new.member_id);
  end if;
  return null;
end
$$;


--
-- Name: tg_member_rows__not_erased(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_member_rows__not_erased() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if exists (select 1 from billing.members m
             where m.community_id = new.community_id and m.id = new.member_id and m.erased_at is not null) then
    raise exception using errcode = 'BL409', message = 'Member ' || new.member_id || ' was erased: nothing can be added to it.';
  end if;
  return new;
end
$$;


--
-- Name: tg_members__erased(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_members__erased() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  raise exception using errcode = 'BL409', message = 'Member ' || old.id || ' was erased: its personal data cannot be set again.';
end
$$;


--
-- Name: tg_members__outbox(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_members__outbox() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.emit_event(new.community_id, 'member.created', jsonb_build_object(
    'member', billing.member_json(new.community_id, new.id), 'change', null));
  return null;
end
$$;


--
-- Name: tg_members__people(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_members__people() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  select p.display_name, p.search_text into new.display_name, new.search_text
  from billing.member_people(new.community_id, new.id, new.email) p;
  return new;
end
$$;


--
-- Name: tg_plans__ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_plans__ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: tg_plans__tier_plan_rules(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_plans__tier_plan_rules() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.check_tier_plans(new.community_id, new.tier_id);
  return null;
end
$$;


--
-- Name: tg_platform_configs__benefit_types(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_platform_configs__benefit_types() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_problem text;
begin
  select billing.benefit_type_problem(new.platform, b.type) into v_problem
  from billing.entitlement_benefits b
  where b.community_id = new.community_id and b.platform_config_id = new.id
    and billing.benefit_type_problem(new.platform, b.type) is not null
  limit 1;
  if v_problem is not null then
    raise exception using errcode = 'check_violation', message = v_problem, detail = 'platform';
  end if;
  return null;
end
$$;


--
-- Name: tg_platform_configs__ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_platform_configs__ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.ledger_benefits_changed(new.community_id, coalesce((
    select array_agg(distinct b.entitlement_id) from billing.entitlement_benefits b
    where b.community_id = new.community_id and b.platform_config_id = new.id), '{}'));
  return null;
end
$$;


--
-- Name: tg_purchases__outbox_and_ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_purchases__outbox_and_ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_new jsonb;
  v_prev jsonb;
  v_type text;
  v_reason text;
  v_event_id text;
begin
  if tg_op = 'DELETE' then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, 'purchase_deleted', null);
    return null;
  end if;
  v_new := billing.purchase_event_json(new);
  v_prev := billing.jsonb_changed(billing.purchase_event_json(old) - 'tier_name' - 'plan_name', v_new);
  if v_prev = '{}' then
    return null;
  end if;
  v_type := case when new.status = 'refunded' and old.status <> 'refunded'
    then 'purchase.refunded' else 'purchase.updated' end;
  v_reason := case when v_type = 'purchase.refunded' then 'purchase_refunded' else 'purchase_updated' end;
  v_event_id := billing.emit_event(new.community_id, v_type,
    jsonb_build_object('purchase', v_new, 'previous_attributes', v_prev));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  if old.member_id <> new.member_id then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;


--
-- Name: tg_purchases__outbox_and_ledger_insert(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_purchases__outbox_and_ledger_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_communities text[];
  v_members text[];
  v_reasons text[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, 'purchase.created', jsonb_build_object(
      'purchase', billing.purchase_json(n, p, t) || jsonb_build_object('client_reference_id', n.client_reference_id),
      'previous_attributes', null)
    from new_rows n
    left join billing.plans p on p.community_id = n.community_id and p.id = n.plan_id
    left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    order by n.id
    returning id, data->'purchase'->>'id' as purchase_id
  )
  select array_agg(n.community_id order by n.id), array_agg(n.member_id order by n.id),
    array_agg(case when n.status = 'completed' then 'purchase_completed' else 'purchase_updated' end order by n.id),
    array_agg(ev.id order by n.id)
  into v_communities, v_members, v_reasons, v_event_ids
  from new_rows n join ev on ev.purchase_id = n.id;
  if v_event_ids is not null then  -- a statement that inserted nothing fires this too
    perform billing.ledger_refresh_list(v_communities, v_members, v_reasons, v_event_ids);
  end if;
  return null;
end
$$;


--
-- Name: tg_subscriptions__ledger_delete(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_subscriptions__ledger_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.ledger_refresh_member(old.community_id, old.member_id, 'subscription_deleted', null);
  return null;
end
$$;


--
-- Name: tg_subscriptions__outbox_and_ledger_insert(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_subscriptions__outbox_and_ledger_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_communities text[];
  v_members text[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, 'subscription.created', jsonb_build_object(
      'subscription', billing.subscription_json(n, p, t) || jsonb_build_object('client_reference_id', n.client_reference_id),
      'previous_attributes', null)
    from new_rows n
    left join billing.plans p on p.community_id = n.community_id and p.id = n.plan_id
    left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    order by n.id
    returning id, data->'subscription'->>'id' as subscription_id
  )
  select array_agg(n.community_id order by n.id), array_agg(n.member_id order by n.id), array_agg(ev.id order by n.id)
  into v_communities, v_members, v_event_ids
  from new_rows n join ev on ev.subscription_id = n.id;
  if v_event_ids is not null then  -- a statement that inserted nothing fires this too
    perform billing.ledger_refresh_list(v_communities, v_members,
      array_fill('subscription_created'::text, array[cardinality(v_members)]), v_event_ids);
  end if;
  return null;
end
$$;


--
-- Name: tg_subscriptions__outbox_and_ledger_update(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_subscriptions__outbox_and_ledger_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  v_communities text[];
  v_members text[];
  v_old_members text[];
  v_reasons text[];
  v_event_ids text[];
begin
  with ch as (
    select n.community_id, n.id, n.member_id, o.member_id as old_member_id, j.new_json,
      -- the event's date, billing.community_now joined (the events' clock trigger then
      -- skips a call per row)
      now() + coalesce(co.clock_offset, '0'::interval) as at,
      billing.jsonb_changed(j.old_json - 'updated_at' - 'tier_name' - 'plan_name', j.new_json) as prev,
      case when n.status = 'cancelled' and o.status <> 'cancelled'
        then 'subscription.cancelled' else 'subscription.updated' end as type,
      case
        when n.status = 'cancelled' and n.cancellation_reason = 'payment_failed' then 'payment_failed'
        when n.status = 'cancelled' and n.cancellation_reason = 'refunded' then 'refunded'
        when n.status = 'cancelled' and n.cancellation_reason = 'payment_disputed' then 'disputed'
        when n.plan_id <> o.plan_id then 'plan_changed'
        when n.status = o.status then 'subscription_updated'
        when n.status = 'cancelled' then 'subscription_ended'
        when n.status = 'paused' then 'subscription_paused'
        when n.status = 'cancelling' then 'subscription_cancelling'
        when n.status = 'past_due' then 'payment_failed'
        when o.status in ('cancelled', 'paused') then 'subscription_activated'
        else 'subscription_updated' end as reason
    from new_rows n
    join old_rows o on o.community_id = n.community_id and o.id = n.id
    left join billing.communities co on co.id = n.community_id
    left join billing.plans np on np.community_id = n.community_id and np.id = n.plan_id
    left join billing.tiers nt on nt.community_id = np.community_id and nt.id = np.tier_id
    left join billing.plans op on op.community_id = o.community_id and op.id = o.plan_id
    left join billing.tiers ot on ot.community_id = op.community_id and ot.id = op.tier_id
    -- billing.subscription_event_json, with the plans and tiers joined once
    cross join lateral (select
      billing.subscription_json(n, np, nt) || jsonb_build_object('client_reference_id', n.client_reference_id) as new_json,
      billing.subscription_json(o, op, ot) || jsonb_build_object('client_reference_id', o.client_reference_id) as old_json) j
  ), ev as (
    insert into billing.events (community_id, type, created_at, data)
    select ch.community_id, ch.type, ch.at, jsonb_build_object('subscription', ch.new_json, 'previous_attributes', ch.prev)
    from ch
    where ch.prev <> '{}' -- nothing a consumer sees (nor a ledger source) changed
    order by ch.id
    returning id, data->'subscription'->>'id' as subscription_id
  )
  select array_agg(ch.community_id order by ch.id), array_agg(ch.member_id order by ch.id),
    array_agg(ch.old_member_id order by ch.id), array_agg(ch.reason order by ch.id), array_agg(ev.id order by ch.id)
  into v_communities, v_members, v_old_members, v_reasons, v_event_ids
  from ch join ev on ev.subscription_id = ch.id;
  -- The ledgers, row by row in id order (the member it left after the member it has).
  if v_event_ids is not null then
    perform billing.ledger_refresh_list(array_agg(v_communities[i] order by i, x.j), array_agg(x.m order by i, x.j),
      array_agg(v_reasons[i] order by i, x.j), array_agg(v_event_ids[i] order by i, x.j))
    from generate_subscripts(v_event_ids, 1) i
    cross join lateral (values (1, v_members[i]), (2, nullif(v_old_members[i], v_members[i]))) x(j, m)
    where x.m is not null;
  end if;
  return null;
end
$$;


--
-- Name: tg_subscriptions__price(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_subscriptions__price() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if tg_op = 'INSERT' or new.price_cents is not distinct from old.price_cents then
    select p.amount_cents into new.price_cents from billing.plans p
    where p.community_id = new.community_id and p.id = new.plan_id;
  end if;
  if tg_op = 'UPDATE' then
    new.price_migration_id := null;
  end if;
  return new;
end
$$;


--
-- Name: tg_tier_entitlements__ledger(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_tier_entitlements__ledger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: tg_tier_entitlements__ledger_delete(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_tier_entitlements__ledger_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: tg_tier_entitlements__ledger_insert(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_tier_entitlements__ledger_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: tg_tiers__tier_plan_rules(); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tg_tiers__tier_plan_rules() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform billing.check_tier_plans(new.community_id, new.id);
  return null;
end
$$;


--
-- Name: tier_json(billing.tiers); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.tier_json(p_tier billing.tiers) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: webhook_deliveries; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.webhook_deliveries (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('wd'::text) NOT NULL COLLATE pg_catalog."C",
    endpoint_id text NOT NULL COLLATE pg_catalog."C",
    event_id text NOT NULL COLLATE pg_catalog."C",
    event_type text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempt_count integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone,
    last_status_code integer,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_deliveries_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text])))
)
WITH (fillfactor='50');

ALTER TABLE ONLY billing.webhook_deliveries FORCE ROW LEVEL SECURITY;


--
-- Name: webhook_delivery_json(billing.webhook_deliveries); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.webhook_delivery_json(p_delivery billing.webhook_deliveries) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('id', p_delivery.id, 'endpoint_id', p_delivery.endpoint_id,
    'event_id', p_delivery.event_id, 'event_type', p_delivery.event_type, 'status', p_delivery.status,
    'attempt_count', p_delivery.attempt_count, 'next_attempt_at', billing.iso(p_delivery.next_attempt_at),
    'last_status_code', p_delivery.last_status_code, 'last_error', p_delivery.last_error,
    'created_at', billing.iso(p_delivery.created_at), 'updated_at', billing.iso(p_delivery.updated_at),
    'attempts', coalesce((
      select jsonb_agg(jsonb_build_object('id', a.id, 'event_id', p_delivery.event_id,
        'event_type', p_delivery.event_type, 'attempt', a.attempt, 'status_code', a.status_code,
        'duration_ms', a.duration_ms, 'error', a.error, 'response_excerpt', a.response_excerpt,
        'started_at', billing.iso(a.started_at), 'finished_at', billing.iso(a.finished_at),
        'next_attempt_at', billing.iso(a.next_attempt_at)) order by a.attempt, a.id)
      from billing.webhook_attempts a
      where a.community_id = p_delivery.community_id and a.delivery_id = p_delivery.id), '[]'))
$$;


--
-- Name: webhook_endpoints; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.webhook_endpoints (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('we'::text) NOT NULL COLLATE pg_catalog."C",
    url text NOT NULL,
    description text,
    event_types text[] DEFAULT '{}'::text[] NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    disabled_reason text,
    failing_since timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_endpoints_description_length CHECK ((length(description) <= 500)),
    CONSTRAINT webhook_endpoints_disabled_reason CHECK ((disabled_reason = ANY (ARRAY['manual'::text, 'failing'::text]))),
    CONSTRAINT webhook_endpoints_url_length CHECK (((length(url) >= 1) AND (length(url) <= 2048)))
);

ALTER TABLE ONLY billing.webhook_endpoints FORCE ROW LEVEL SECURITY;


--
-- Name: webhook_endpoint_json(billing.webhook_endpoints); Type: FUNCTION; Schema: billing; Owner: -
--

CREATE FUNCTION billing.webhook_endpoint_json(p_endpoint billing.webhook_endpoints) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('id', p_endpoint.id, 'url', p_endpoint.url, 'description', p_endpoint.description,
    'event_types', to_jsonb(p_endpoint.event_types), 'enabled', p_endpoint.enabled,
    'disabled_reason', p_endpoint.disabled_reason,
    'created_at', billing.iso(p_endpoint.created_at), 'updated_at', billing.iso(p_endpoint.updated_at))
$$;


--
-- Name: analytics_overview(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.analytics_overview(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_days integer := coalesce((p_args->>'days')::integer, 30);
begin
  if v_days not in (30, 90) then
    perform billing.raise('BL422', 'days: 30 or 90.', 'days');
  end if;
  return billing_private.analytics_overview(v_days);
end
$$;


--
-- Name: analytics_series(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.analytics_series(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_days integer := coalesce((p_args->>'days')::integer, 30);
begin
  if v_days not in (30, 90) then
    perform billing.raise('BL422', 'days: 30 or 90.', 'days');
  end if;
  return billing_private.analytics_overview(v_days)->'series';
end
$$;


--
-- Name: analytics_summary(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.analytics_summary(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return billing_private.analytics_overview(null)->'summary';
end
$$;


--
-- Name: api_keys_create(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.api_keys_create(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_scopes text[] := array(select distinct jsonb_array_elements_text(coalesce(p_args->'scopes', '[]')));
  v_bad text;
begin
  if cardinality(v_scopes) = 0 then
    perform billing.raise('BL422', 'scopes: choose at least one scope.', 'scopes');
  end if;
  select s into v_bad from unnest(v_scopes) s
  where not (s = any (billing_private.api_key_scopes())) or not (s = any (billing.current_scopes())) limit 1;
  if v_bad is not null then
    perform billing.raise('BL422', 'scopes: "' || v_bad || '" is not a scope this operator can give to a key.', 'scopes');
  end if;
  if length(p_args->>'name') > 200 then
    perform billing.raise('BL422', 'name: at most 200 characters.', 'name');
  end if;
  return billing_private.api_key_insert(nullif(trim(p_args->>'name'), ''), p_args->>'prefix', p_args->>'key_hash', v_scopes);
end
$$;


--
-- Name: api_keys_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.api_keys_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return billing_private.api_keys_page(p_args->>'cursor', coalesce((p_args->>'limit')::integer, 25));
end
$$;


--
-- Name: api_keys_revoke(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.api_keys_revoke(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_out jsonb;
begin
  v_out := billing_private.api_key_revoke(p_args->>'id');
  if v_out is null then
    perform billing.raise('BL404', 'No API key ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;


--
-- Name: audit_log_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.audit_log_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_since timestamptz := (p_args->>'since')::timestamptz;
  v_until timestamptz := (p_args->>'until')::timestamptz;
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(a.id order by a.id desc), array_agg(billing.audit_entry_json(a) order by a.id desc)
    into v_ids, v_items
  from (select * from billing.audit_log a
        where a.community_id = billing.current_community_id()
          and a.id < coalesce(p_args->>'cursor', chr(1114111))
          and (p_args->>'actor_type' is null or a.actor_type = p_args->>'actor_type')
          and (p_args->>'actor_id' is null or a.actor_id = p_args->>'actor_id')
          and (p_args->>'table' is null or a.table_name = p_args->>'table')
          and (p_args->>'row_id' is null or a.row_id = p_args->>'row_id')
          and (p_args->>'operation' is null or a.operation = p_args->>'operation')
          and (v_since is null or a.occurred_at >= v_since)
          and (v_until is null or a.occurred_at < v_until)
        order by a.id desc limit v_limit + 1) a;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: catalog_file(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.catalog_file(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_community text := billing.current_community_id();
  v_out jsonb;
begin
  select jsonb_strip_nulls(jsonb_build_object(
    'payment_provider', case when c.payment_provider is not null
      then c.payment_config || jsonb_build_object('type', c.payment_provider) end,
    'dunning', case when c.dunning <> '{}' then c.dunning end,
    'seller', case when num_nonnulls(c.legal_name, c.address_lines, c.country, c.tax_id) > 0
      then jsonb_build_object('legal_name', c.legal_name, 'address_lines', to_jsonb(c.address_lines),
        'country', c.country, 'tax_id', c.tax_id) end,
    'tax_rates', (select jsonb_agg(jsonb_build_object('country', r.country, 'name', r.name, 'rate_ppm', r.rate_ppm,
        'inclusive', r.inclusive, 'active', r.active) order by r.country)
      from billing.tax_rates r where r.community_id = v_community),
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


--
-- Name: checkout_create(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.checkout_create(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_cid text := billing.current_community_id();
  v_tier billing.tiers;
  v_plan billing.plans;
  v_provider text;
  v_subject jsonb := p_args->'subject';
  v_kind text;
  v_member text;
  v_disc record;
  v_cs billing.checkout_sessions;
  v_token text := billing.random_token();
  v_plans integer;
  v_details text;
begin
  select * into v_tier from billing.tiers t where t.id = p_args->>'tier_id' and t.active;
  if v_tier.id is null then
    perform billing.raise('BL404', 'No active tier ' || (p_args->>'tier_id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  if v_provider is null or not coalesce((p_args->>'provider_ready')::boolean, true) then
    raise exception using errcode = 'BLPCI', message = 'This community has no active payment provider.';
  end if;
  select count(*) into v_plans from billing.plans p where p.tier_id = v_tier.id and p.active;
  if p_args->>'plan_id' is not null then
    select * into v_plan from billing.plans p where p.id = p_args->>'plan_id' and p.tier_id = v_tier.id and p.active;
    if v_plan.id is null then
      perform billing.raise('BL422', 'plan_id is not an active plan of tier ' || v_tier.id || '.', 'plan_id');
    end if;
  elsif v_plans > 1 then
    raise exception using errcode = 'BLPRQ', message = 'This tier has several active plans: send plan_id.', detail = 'plan_id';
  elsif v_plans = 0 then
    perform billing.raise('BL404', 'Tier ' || v_tier.id || ' has no active plan.');
  else
    select * into v_plan from billing.plans p where p.tier_id = v_tier.id and p.active;
  end if;

  v_kind := case when v_subject ? 'member_id' then 'member' when v_subject ? 'external' then 'external' else 'platform' end;
  if v_kind = 'platform' and not exists (select 1 from billing.platform_configs pc where pc.platform = v_subject->>'platform') then
    raise exception using errcode = 'BLPNC', message = 'No ' || (v_subject->>'platform') || ' platform is connected to this community.',
      detail = 'subject.platform';
  end if;
  if p_args->>'return_url' is not null and v_kind <> 'external' then
    perform billing.raise('BL422', 'return_url is only allowed for operator (external) subjects.', 'return_url');
  end if;

  v_member := billing.checkout_member(v_subject);
  perform billing.check_eligible(v_member, v_tier, v_plan);

  if p_args->>'customer_email' is not null and not billing.email_valid(btrim(p_args->>'customer_email')) then
    perform billing.raise('BL422', 'customer_email is not a valid email address.', 'customer_email');
  end if;
  v_details := billing.checkout_details_problem(p_args);
  if v_details is not null then
    perform billing.raise('BL422', v_details, split_part(v_details, ':', 1));
  end if;
  insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency,
    client_reference_id, return_url, subject_kind, provider, expires_at, access_token_sha256, customer_email,
    customer_name, customer_address_lines, customer_country, customer_tax_id)
  values (v_cid, v_member, v_tier.id, v_plan.id, v_plan.amount_cents, v_plan.currency,
    p_args->>'client_reference_id', p_args->>'return_url', v_kind, v_provider,
    billing.now() + billing.checkout_lifetime(), sha256(convert_to(v_token, 'UTF8')),
    nullif(btrim(p_args->>'customer_email'), ''),
    nullif(btrim(p_args->>'customer_name'), ''),
    nullif(array(select btrim(l) from jsonb_array_elements_text(coalesce(p_args->'customer_address_lines', '[]')) l
                 where btrim(l) <> ''), '{}'),
    upper(nullif(btrim(p_args->>'customer_country'), '')),
    nullif(btrim(p_args->>'customer_tax_id'), ''))
  returning * into v_cs;

  if p_args->>'discount_code' is not null then
    select * into v_disc from billing.checkout_discount(p_args->>'discount_code', v_member, v_tier.id, v_plan);
    update billing.checkout_sessions set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cid, v_disc.discount_id, v_cs.id, v_member, 'pending');
  end if;

  -- The clear token leaves the database once, here, for the provider to build the url.
  return billing.checkout_json(v_cs) || jsonb_build_object('access_token', v_token);
end
$$;


--
-- Name: checkout_set_provider(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.checkout_set_provider(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_cs billing.checkout_sessions;
begin
  update billing.checkout_sessions cs set url = p_args->>'url', provider_ref = coalesce(p_args->>'provider_ref', cs.provider_ref),
    expires_at = coalesce((p_args->>'expires_at')::timestamptz, cs.expires_at)
  where cs.id = p_args->>'checkout_id'
  returning * into v_cs;
  return billing.checkout_json(v_cs);
end
$$;


--
-- Name: discounts_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.discounts_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.discount_json(d) order by d.created_at desc, d.id)
    from billing.discount_codes d
    where d.community_id = billing.current_community_id() and d.archived_at is null), '[]'));
end
$$;


--
-- Name: entitlements_check(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.entitlements_check(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_member text;
  v_tier text := nullif(p_args->>'tier_id', '');
  v_list jsonb;
begin
  v_member := billing.resolve_identity(p_args);
  if v_member is null then
    return jsonb_build_object('entitled', false, 'entitlements', '[]'::jsonb);
  end if;
  select coalesce(jsonb_agg(billing.member_entitlement_json(me, e) order by me.id), '[]') into v_list
  from billing.member_entitlements me
  join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
  where me.community_id = billing.current_community_id() and me.member_id = v_member
    and me.status = 'active'
    and (v_tier is null or me.sources @> jsonb_build_array(jsonb_build_object('tier_id', v_tier)));
  return jsonb_build_object('entitled', jsonb_array_length(v_list) > 0, 'entitlements', v_list);
end
$$;


--
-- Name: events_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.events_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_event billing.events;
begin
  select * into v_event from billing.events e
  where e.community_id = billing.current_community_id() and e.id = p_args->>'id';
  if v_event.id is null then
    perform billing.raise('BL404', 'No event ' || (p_args->>'id') || '.');
  end if;
  return billing.event_json(v_event);
end
$$;


--
-- Name: events_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.events_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_community text := billing.current_community_id();
  v_types text[];
  -- Bounds instead of "is null or": the (generic, cached) plan keeps both as index
  -- range conditions. Ids are [a-z0-9_] in the "C" collation: '' and '~' bound them.
  v_after text := coalesce(p_args->>'after_id', '');
  v_cursor text := coalesce(p_args->>'cursor', '~');
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.events[];
begin
  if jsonb_typeof(p_args->'type') = 'array' then
    v_types := array(select distinct jsonb_array_elements_text(p_args->'type'));
  elsif jsonb_typeof(p_args->'type') = 'string' then
    v_types := array(select distinct btrim(t) from unnest(string_to_array(p_args->>'type', ',')) t where btrim(t) <> '');
  end if;
  if v_types is not null and cardinality(v_types) = 0 then
    v_types := null;
  end if;
  if v_types is null then
    v_rows := array(
      select e from billing.events e
      where e.community_id = v_community
        and e.id > v_after and e.id < v_cursor
      order by e.id desc
      limit v_limit + 1);
  else
    -- One keyset scan of events_type (community_id, type, id) per type, each limited,
    -- then merged: the page costs the same however rare or common the types are.
    v_rows := array(
      select e from unnest(v_types) t(type)
      cross join lateral (
        select x from billing.events x
        where x.community_id = v_community and x.type = t.type
          and x.id > v_after and x.id < v_cursor
        order by x.id desc
        limit v_limit + 1) l(e)
      order by (e).id desc
      limit v_limit + 1);
  end if;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.event_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit
                        then billing.encode_cursor((v_rows[v_limit]).id) end);
end
$$;


--
-- Name: external_subjects_attach(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.external_subjects_attach(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_community text := billing.current_community_id();
  v_member_id text := p_args->>'id';
  v_namespace text := p_args->>'namespace';
  v_external text := p_args->>'external_user_id';
  v_owner text;
  v_current text;
begin
  perform 1 from billing.members m where m.community_id = v_community and m.id = v_member_id for update;
  if not found then
    perform billing.raise('BL404', 'No member ' || v_member_id || '.');
  end if;
  select x.member_id into v_owner from billing.external_subjects x
  where x.community_id = v_community and x.namespace = v_namespace and x.external_user_id = v_external;
  if v_owner = v_member_id then
    return billing.member_api_json(v_community, v_member_id);
  elsif v_owner is not null then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' is already mapped to another member.');
  end if;
  select x.external_user_id into v_current from billing.external_subjects x
  where x.community_id = v_community and x.member_id = v_member_id and x.namespace = v_namespace;
  if v_current is not null then
    perform billing.raise('BL409', 'Member ' || v_member_id || ' already has the external subject '
      || v_namespace || '/' || v_current || ' in namespace ' || v_namespace || '.');
  end if;
  begin
    insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
    values (v_community, v_member_id, v_namespace, v_external);
  exception when unique_violation then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' was mapped concurrently.');
  end;
  return billing.member_api_json(v_community, v_member_id);
end
$$;


--
-- Name: grants_create(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.grants_create(p_args jsonb) RETURNS jsonb
    LANGUAGE sql
    AS $$
  select billing_private.grant_create(p_args->>'id', p_args->>'tier_id', (p_args->>'expires_at')::timestamptz, p_args->>'note')
$$;


--
-- Name: grants_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.grants_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  if not exists (select 1 from billing.members m where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  select array_agg(g.id order by g.id desc), array_agg(billing.grant_json(g) order by g.id desc) into v_ids, v_items
  from (select * from billing.grants g
        where g.community_id = billing.current_community_id() and g.member_id = p_args->>'id'
          and g.id < coalesce(p_args->>'cursor', chr(1114111))
        order by g.id desc limit v_limit + 1) g;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: grants_revoke(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.grants_revoke(p_args jsonb) RETURNS jsonb
    LANGUAGE sql
    AS $$ select billing_private.grant_revoke(p_args->>'id', p_args->>'grant_id') $$;


--
-- Name: invoice_refund(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.invoice_refund(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.invoice_refund(p_args->>'id', (p_args->>'amount_cents')::bigint,
    coalesce((p_args->>'revoke_access')::boolean, false), p_args->>'provider_ref');
end
$$;


--
-- Name: invoice_refund_prepare(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.invoice_refund_prepare(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_inv billing.invoices;
begin
  select * into v_inv from billing.invoices i where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  -- Refused before the provider is asked for the refund.
  perform billing.invoice_refuse_disputed(v_inv.id);
  return jsonb_build_object('invoice_id', v_inv.id, 'provider', v_inv.provider, 'status', v_inv.status,
    'currency', v_inv.currency, 'left_cents', v_inv.amount_paid_cents - v_inv.amount_refunded_cents,
    'payment_ref', (select a.provider_ref from billing.payment_attempts a
      where a.community_id = v_inv.community_id and a.invoice_id = v_inv.id and a.status = 'succeeded'));
end
$$;


--
-- Name: invoices_document(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.invoices_document(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_inv billing.invoices;
  v_com billing.communities;
  v_now jsonb;
  v_taxed boolean;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  select * into v_com from billing.communities c where c.id = v_inv.community_id;
  v_taxed := v_inv.buyer_name is not null or v_inv.buyer_address_lines is not null or v_inv.buyer_country is not null
    or v_inv.buyer_tax_id is not null or v_inv.seller_country is not null or v_inv.seller_tax_id is not null;
  v_now := billing.member_billing(v_inv.community_id, v_inv.member_id);
  return jsonb_build_object(
    'invoice', billing.invoice_json(v_inv),
    'seller', jsonb_build_object(
      'name', v_com.name,
      'legal_name', v_com.legal_name,
      'address_lines', to_jsonb(coalesce(v_com.address_lines, '{}'::text[])),
      'country', case when v_taxed then v_inv.seller_country else v_com.country end,
      'tax_id', case when v_taxed then v_inv.seller_tax_id else v_com.tax_id end),
    'buyer', billing.member_json(v_inv.community_id, v_inv.member_id) || case when v_taxed
      then jsonb_build_object('name', v_inv.buyer_name, 'address_lines', to_jsonb(coalesce(v_inv.buyer_address_lines, '{}'::text[])),
        'country', v_inv.buyer_country, 'tax_id', v_inv.buyer_tax_id)
      else v_now end,
    'payment_method', case when v_inv.status = 'paid' then v_inv.provider end,
    'tax_lines', v_inv.tax_lines);
end
$$;


--
-- Name: invoices_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.invoices_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_inv billing.invoices;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  return billing.invoice_json(v_inv);
end
$$;


--
-- Name: invoices_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.invoices_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(i.id order by i.id desc), array_agg(billing.invoice_json(i) order by i.id desc)
    into v_ids, v_items
  from (select * from billing.invoices i
        where i.community_id = billing.current_community_id()
          and i.id < coalesce(p_args->>'cursor', chr(1114111))
          and (p_args->>'member_id' is null or i.member_id = p_args->>'member_id')
          and (p_args->>'subscription_id' is null or i.subscription_id = p_args->>'subscription_id')
          and (p_args->>'status' is null or i.status = p_args->>'status')
        order by i.id desc limit v_limit + 1) i;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: link_code_create(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.link_code_create(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
begin
  if not exists (select 1 from billing.members m where m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  update billing.link_codes lc set invalidated_at = billing.now()
  where lc.member_id = p_args->>'id' and lc.intended_platform = p_args->>'intended_platform'
    and lc.redeemed_at is null and lc.invalidated_at is null;
  insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at)
  values (v_cid, p_args->>'id', upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 10)),
    p_args->>'intended_platform', billing.now() + interval '10 minutes')
  returning * into v_lc;
  return jsonb_build_object('code', v_lc.code, 'member_id', v_lc.member_id,
    'intended_platform', v_lc.intended_platform, 'expires_at', billing.iso(v_lc.expires_at));
end
$$;


--
-- Name: link_code_redeem(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.link_code_redeem(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_r jsonb := billing.link_code_apply(p_args->>'code', p_args->>'platform', p_args->>'platform_uid', p_args->>'username');
begin
  case v_r->>'outcome'
    when 'linked' then
      return billing.member_api_json(billing.current_community_id(), v_r->>'member_id');
    when 'identity_taken' then
      perform billing.raise('BL409', 'This ' || (p_args->>'platform') || ' identity belongs to another member.');
    when 'member_has_identity' then
      perform billing.raise('BL409', 'Member ' || (v_r->>'member_id') || ' already has another ' || (p_args->>'platform') || ' identity.');
    else
      perform billing.raise('BL404', 'No usable link code ' || (p_args->>'code') || ' for ' || (p_args->>'platform') || '.');
  end case;
  return null;
end
$$;


--
-- Name: mail_messages_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.mail_messages_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_out jsonb;
begin
  select billing.mail_message_json(m, true) into v_out from billing.mail_messages m
  where m.community_id = billing.current_community_id() and m.id = p_args->>'id';
  if v_out is null then
    perform billing.raise('BL404', 'No mail message ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;


--
-- Name: mail_messages_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.mail_messages_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(m.id order by m.id desc), array_agg(billing.mail_message_json(m, false) order by m.id desc)
    into v_ids, v_items
  from (select * from billing.mail_messages m
        where m.community_id = billing.current_community_id()
          and m.id < coalesce(p_args->>'cursor', chr(1114111))
        order by m.id desc limit v_limit + 1) m;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: mail_template_set(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.mail_template_set(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_template text := p_args->>'template';
  v_t record;
  v_c billing.communities;
begin
  select * into v_t from billing.mail_templates() t where t.template = v_template;
  if v_t.template is null then
    perform billing.raise('BL404', 'No mail template ' || v_template || '.');
  end if;
  if p_args->'enabled' is null and p_args->'required' is null then
    perform billing.raise('BL422', 'Give enabled, required or both.', 'enabled');
  end if;
  if v_t.transactional and not coalesce((p_args->>'required')::boolean, true) then
    perform billing.raise('BL422', v_template || ' is transactional: members cannot unsubscribe from it.', 'required');
  end if;
  update billing.communities c set
    mail_templates_off = case when p_args->'enabled' is null then c.mail_templates_off
      when (p_args->>'enabled')::boolean then array_remove(c.mail_templates_off, v_template)
      else array_append(array_remove(c.mail_templates_off, v_template), v_template) end,
    mail_templates_required = case when p_args->'required' is null or v_t.transactional then c.mail_templates_required
      when (p_args->>'required')::boolean then array_append(array_remove(c.mail_templates_required, v_template), v_template)
      else array_remove(c.mail_templates_required, v_template) end
  where c.id = billing.current_community_id()
  returning * into v_c;
  return jsonb_build_object('template', v_template, 'enabled', not (v_template = any (v_c.mail_templates_off)),
    'required', not billing.mail_optional(v_c, v_template));
end
$$;


--
-- Name: mail_templates_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.mail_templates_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_c billing.communities;
  v_sample jsonb := jsonb_build_object(
    'invoice', jsonb_build_object('id', 'inv_sample', 'number', to_char(billing.now(), 'YYYY') || '-000042',
      'currency', 'usd', 'total_cents', 1500, 'amount_paid_cents', 1500, 'paid_at', billing.iso(billing.now()),
      'next_attempt_at', billing.iso(billing.now() + interval '3 days'),
      'lines', jsonb_build_array(jsonb_build_object('description', 'Gold (monthly), 1 month', 'amount_cents', 1500))),
    'entitlement', jsonb_build_object('name', 'Gold'),
    'refund', jsonb_build_object('amount_cents', 500, 'credit_note_number', 'CN-' || to_char(billing.now(), 'YYYY') || '-000007'),
    'subscription', jsonb_build_object('tier_name', 'Gold', 'plan_name', 'Gold annual', 'amount_cents', 15000, 'currency', 'usd',
      'interval', 'year', 'current_period_end', billing.iso(billing.now() + interval '3 days')),
    'migration', jsonb_build_object('price_cents', 18000, 'currency', 'usd', 'notice_ends_at', billing.iso(billing.now() + interval '30 days')),
    'link_codes', jsonb_build_array(jsonb_build_object('platform', 'telegram', 'code', 'SAMPLE1234',
      'expires_at', billing.iso(billing.now() + interval '7 days'))));
begin
  select * into v_c from billing.communities c where c.id = billing.current_community_id();
  return jsonb_build_object('sender_name', coalesce(v_c.mail_sender_name, v_c.name), 'reply_to', v_c.mail_reply_to,
    'data', (select jsonb_agg(jsonb_build_object('template', t.template, 'event_type', t.event_type,
      'transactional', t.transactional, 'required', not billing.mail_optional(v_c, t.template),
      'title', t.title, 'enabled', not (t.template = any (v_c.mail_templates_off)),
      'preview', billing.mail_render(v_c.name, t.template,
        case when t.template = 'payment_failed' then jsonb_set(jsonb_set(v_sample, '{invoice,amount_paid_cents}', '0'), '{invoice,paid_at}', 'null')
        else v_sample end || jsonb_build_object('unsubscribe', billing.mail_optional(v_c, t.template)))) order by t.template)
      from billing.mail_templates() t));
end
$$;


--
-- Name: member_deliveries_retry(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.member_deliveries_retry(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  if not billing_private.member_deliveries_enqueue(p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return billing_api.member_entitlements_list(p_args);
end
$$;


--
-- Name: member_entitlement_history(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.member_entitlement_history(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  if not exists (select 1 from billing.members m where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || coalesce(p_args->>'id', '') || '.');
  end if;
  -- The events themselves by primary key, under the tenant policy as every read.
  select array_agg(e.id order by e.id desc), array_agg(billing.event_json(e) order by e.id desc) into v_ids, v_items
  from billing.events e
  where e.community_id = billing.current_community_id()
    and e.id = any (billing_private.member_entitlement_event_ids(p_args->>'id', p_args->>'cursor', v_limit + 1));
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: member_entitlements_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.member_entitlements_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  if not exists (select 1 from billing.members m
                 where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  -- Each benefit with its delivery on the platform (55-platform-delivery.sql).
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.member_entitlement_json(me, e)
      || jsonb_build_object('benefits', billing.benefits_with_delivery(me.community_id, me.member_id, me.benefits))
      order by me.id)
    from billing.member_entitlements me
    join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where me.community_id = billing.current_community_id() and me.member_id = p_args->>'id'
      and me.status = 'active'), '[]'));
end
$$;


--
-- Name: member_erase(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.member_erase(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.member_erase(p_args->>'id', true);
end
$$;


--
-- Name: member_export(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.member_export(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_c text := billing.current_community_id();
  v_id text := p_args->>'id';
  v_m billing.members;
  -- how a JSON text names the member: its id as a string value
  v_named text := '"' || (p_args->>'id') || '"';
begin
  select * into v_m from billing.members m where m.community_id = v_c and m.id = v_id;
  if v_m.id is null then
    perform billing.raise('BL404', 'No member ' || v_id || '.');
  end if;
  return jsonb_build_object(
    'format', 'member-export/1',
    'exported_at', billing.iso(now()),
    'community', (select jsonb_build_object('id', c.id, 'name', c.name) from billing.communities c where c.id = v_c),
    'member', billing.member_export_json(v_m),
    'subscriptions', coalesce((select jsonb_agg(billing.subscription_json(s) order by s.id)
      from billing.subscriptions s where s.community_id = v_c and s.member_id = v_id), '[]'),
    'purchases', coalesce((select jsonb_agg(billing.purchase_json(p) order by p.id)
      from billing.purchases p where p.community_id = v_c and p.member_id = v_id), '[]'),
    'grants', coalesce((select jsonb_agg(billing.grant_json(g) order by g.id)
      from billing.grants g where g.community_id = v_c and g.member_id = v_id), '[]'),
    'invoices', coalesce((select jsonb_agg(billing.invoice_json(i) order by i.id)
      from billing.invoices i where i.community_id = v_c and i.member_id = v_id), '[]'),
    -- the buyer's name and address each invoice was made out to (the PDF prints them)
    'invoice_buyers', coalesce((select jsonb_agg(jsonb_build_object('invoice_id', i.id, 'buyer_name', i.buyer_name,
        'buyer_address_lines', to_jsonb(coalesce(i.buyer_address_lines, '{}'::text[]))) order by i.id)
      from billing.invoices i where i.community_id = v_c and i.member_id = v_id), '[]'),
    'credit_notes', coalesce((select jsonb_agg(billing.credit_note_json(cn) order by cn.id)
      from billing.credit_notes cn join billing.invoices i on i.community_id = cn.community_id and i.id = cn.invoice_id
      where cn.community_id = v_c and i.member_id = v_id), '[]'),
    'payment_attempts', coalesce((select jsonb_agg(jsonb_build_object('id', a.id, 'invoice_id', a.invoice_id, 'status', a.status,
        'amount_cents', a.amount_cents, 'failure_message', a.failure_message, 'provider', a.provider,
        'attempted_at', billing.iso(a.attempted_at)) order by a.id)
      from billing.payment_attempts a join billing.invoices i on i.community_id = a.community_id and i.id = a.invoice_id
      where a.community_id = v_c and i.member_id = v_id), '[]'),
    'entitlements', coalesce((select jsonb_agg(billing.member_entitlement_json(me)
        || jsonb_build_object('identities', me.identities, 'updated_at', billing.iso(me.updated_at)) order by me.id)
      from billing.member_entitlements me where me.community_id = v_c and me.member_id = v_id), '[]'),
    'benefit_deliveries', coalesce((select jsonb_agg(jsonb_build_object('platform_config_id', d.platform_config_id,
        'type', d.type, 'value', d.value, 'want', d.want, 'status', d.status, 'applied_uid', d.applied_uid,
        'error', d.error, 'attempts', d.attempts, 'updated_at', billing.iso(d.updated_at))
        order by d.platform_config_id, d.type, d.value)
      from billing.benefit_deliveries d where d.community_id = v_c and d.member_id = v_id), '[]'),
    'platform_actions', coalesce((select jsonb_agg(jsonb_build_object('id', a.id, 'platform_config_id', a.platform_config_id,
        'action', a.action, 'target', a.target, 'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error,
        'created_at', billing.iso(a.created_at)) order by a.id)
      from billing.platform_actions a where a.community_id = v_c and a.member_id = v_id), '[]'),
    'mail_messages', coalesce((select jsonb_agg(billing.mail_message_json(mm, false) order by mm.id)
      from billing.mail_messages mm where mm.community_id = v_c and mm.member_id = v_id), '[]'),
    'mail_unsubscribes', coalesce((select jsonb_agg(jsonb_build_object('template', u.template,
        'created_at', billing.iso(u.created_at)) order by u.template)
      from billing.mail_unsubscribes u where u.community_id = v_c and u.member_id = v_id), '[]'),
    'link_codes', coalesce((select jsonb_agg(jsonb_build_object('id', lc.id, 'intended_platform', lc.intended_platform,
        'expires_at', billing.iso(lc.expires_at), 'redeemed_at', billing.iso(lc.redeemed_at),
        'invalidated_at', billing.iso(lc.invalidated_at), 'created_at', billing.iso(lc.created_at)) order by lc.id)
      from billing.link_codes lc where lc.community_id = v_c and lc.member_id = v_id), '[]'),
    'checkout_sessions', coalesce((select jsonb_agg(jsonb_build_object('id', cs.id, 'status', cs.status,
        'tier_id', cs.tier_id, 'plan_id', cs.plan_id, 'amount_cents', cs.amount_cents, 'discount_cents', cs.discount_cents,
        'currency', cs.currency, 'subject_kind', cs.subject_kind, 'provider', cs.provider,
        'client_reference_id', cs.client_reference_id, 'return_url', cs.return_url,
        'subscription_id', cs.subscription_id, 'purchase_id', cs.purchase_id,
        'customer_email', cs.customer_email, 'customer_name', cs.customer_name,
        'customer_address_lines', to_jsonb(coalesce(cs.customer_address_lines, '{}'::text[])),
        'customer_country', cs.customer_country, 'customer_tax_id', cs.customer_tax_id,
        'expires_at', billing.iso(cs.expires_at), 'completed_at', billing.iso(cs.completed_at),
        'created_at', billing.iso(cs.created_at)) order by cs.id)
      from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = v_id), '[]'),
    'discount_redemptions', coalesce((select jsonb_agg(jsonb_build_object('discount_id', r.discount_id,
        'checkout_id', r.checkout_id, 'status', r.status, 'created_at', billing.iso(r.created_at)) order by r.created_at, r.checkout_id)
      from billing.discount_redemptions r where r.community_id = v_c and r.member_id = v_id), '[]'),
    'events', coalesce((select jsonb_agg(billing.event_json(e) order by e.id)
      from billing.events e where e.community_id = v_c and strpos(e.data::text, v_named) > 0), '[]'));
end
$$;


--
-- Name: member_portal_benefits(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.member_portal_benefits(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_member text := billing.current_member_id();
begin
  if v_member is null then
    perform billing.raise('BL404', 'Only a member portal session has benefits of its own.');
  end if;
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(jsonb_build_object('key', e.key, 'name', e.name, 'benefits', (
        select coalesce(jsonb_agg(jsonb_build_object('platform', b->>'platform', 'connection', coalesce(pc.name, pc.key),
            'type', b->>'type', 'value', b->>'value', 'delivery', jsonb_build_object(
              'status', b->'delivery'->>'status', 'updated_at', b->'delivery'->'updated_at',
              'error', case when b->'delivery'->>'status' = 'action_required' then b->'delivery'->'error' else 'null' end))
            order by x.o), '[]')
        from jsonb_array_elements(billing.benefits_with_delivery(me.community_id, me.member_id, me.benefits)) with ordinality as x(b, o)
        left join billing.platform_configs pc on pc.community_id = me.community_id and pc.id = x.b->>'platform_config_id'))
      order by me.id)
    from billing.member_entitlements me
    join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where me.community_id = billing.current_community_id() and me.member_id = v_member and me.status = 'active'), '[]'));
end
$$;


--
-- Name: members_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.members_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_out jsonb;
begin
  v_out := billing.member_api_json(billing.current_community_id(), p_args->>'id');
  if v_out is null then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;


--
-- Name: members_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.members_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_community text := billing.current_community_id();
  v_found text[];
  v_ids text[];
  v_items jsonb[];
begin
  if p_args ?| array['q', 'email', 'tag', 'created_after', 'created_before', 'status', 'tier_id', 'plan_id'] then
    v_found := billing_private.members_search(p_args, v_limit + 1);
    select array_agg(m.id order by m.id desc), array_agg(billing.member_api_json(m.community_id, m.id) order by m.id desc)
      into v_ids, v_items
    from billing.members m
    where m.community_id = v_community and m.id = any(v_found);
  else
    select array_agg(m.id order by m.id desc), array_agg(billing.member_api_json(m.community_id, m.id) order by m.id desc)
      into v_ids, v_items
    from (select m.community_id, m.id from billing.members m
          where m.community_id = v_community and m.id < coalesce(p_args->>'cursor', chr(1114111))
          order by m.id desc limit v_limit + 1) m;
  end if;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: members_lookup(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.members_lookup(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_member text;
begin
  v_member := billing.resolve_identity(p_args);
  if v_member is null then
    perform billing.raise('BL404', 'No member has this identity.');
  end if;
  return billing.member_api_json(billing.current_community_id(), v_member);
end
$$;


--
-- Name: members_update(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.members_update(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_community text := billing.current_community_id();
  v_member_id text := p_args->>'id';
  v_email text := nullif(btrim(p_args->>'email'), '');
  v_note text := p_args->>'note';
  v_tags text[];
begin
  if v_email is not null and not billing.email_valid(v_email) then
    perform billing.raise('BL422', 'email is not a valid email address.', 'email');
  end if;
  if v_note is not null and not billing.member_note_valid(v_note) then
    perform billing.raise('BL422', 'note must be 1 to 2000 characters, without control characters (tabs and line breaks excepted).', 'note');
  end if;
  if p_args ? 'tags' then
    v_tags := case when jsonb_typeof(p_args->'tags') = 'array'
      then array(select jsonb_array_elements_text(p_args->'tags')) else '{}' end;
    if not billing.member_tags_valid(v_tags) then
      perform billing.raise('BL422', 'tags must be at most 20 distinct tags of 1 to 40 lowercase characters, '
        || 'without spaces, commas or control characters.', 'tags');
    end if;
  end if;
  if p_args ?| array['email', 'note', 'tags'] then
    update billing.members m set
      email = case when p_args ? 'email' then v_email else m.email end,
      note = case when p_args ? 'note' then v_note else m.note end,
      tags = case when p_args ? 'tags' then v_tags else m.tags end,
      updated_at = now()
    where m.community_id = v_community and m.id = v_member_id
      and ((p_args ? 'email' and m.email is distinct from v_email)
        or (p_args ? 'note' and m.note is distinct from v_note)
        or (p_args ? 'tags' and m.tags is distinct from v_tags));
  end if;
  if not exists (select 1 from billing.members m where m.community_id = v_community and m.id = v_member_id) then
    perform billing.raise('BL404', 'No member ' || v_member_id || '.');
  end if;
  return billing.member_api_json(v_community, v_member_id);
end
$$;


--
-- Name: operator_policy_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operator_policy_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return billing_private.operator_policy_here();
end
$$;


--
-- Name: operator_policy_update(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operator_policy_update(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.operator_policy_set((p_args->>'second_factor_required')::boolean);
end
$$;


--
-- Name: operator_sessions_end(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operator_sessions_end(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.operator_sessions_end_here(p_args->>'session_id', null);
end
$$;


--
-- Name: operator_sessions_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operator_sessions_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return billing_private.operator_sessions_here(p_args->>'user_id');
end
$$;


--
-- Name: operators_invite(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operators_invite(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.operator_invite_here(p_args->>'email', p_args->>'role', p_args->>'token_sha256');
end
$$;


--
-- Name: operators_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operators_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return billing_private.operator_users_page(p_args->>'cursor', coalesce((p_args->>'limit')::integer, 25));
end
$$;


--
-- Name: operators_remove(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operators_remove(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.operator_user_remove(p_args->>'id');
end
$$;


--
-- Name: operators_reset_second_factor(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operators_reset_second_factor(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.operator_second_factor_reset_here(p_args->>'id');
end
$$;


--
-- Name: operators_sign_out(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operators_sign_out(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.operator_sessions_end_here(null, p_args->>'id');
end
$$;


--
-- Name: operators_update(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.operators_update(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  return billing_private.operator_user_update(p_args->>'id', p_args->>'role', (p_args->>'disabled')::boolean);
end
$$;


--
-- Name: plans_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.plans_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_tier billing.tiers;
begin
  select * into v_tier from billing.tiers t where t.id = p_args->>'tierId';
  if v_tier.id is null then
    perform billing.raise('BL404', 'No tier ' || (p_args->>'tierId') || '.');
  end if;
  return billing.tier_json(v_tier);
end
$$;


--
-- Name: plans_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.plans_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.tier_json(t) order by t.rank, t.id)
    from billing.tiers t where t.active), '[]'));
end
$$;


--
-- Name: platform_actions_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.platform_actions_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_pcfg text := nullif(p_args->>'platform_config_id', '');
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(a.id order by a.id desc), array_agg(jsonb_build_object(
      'id', a.id, 'member_id', a.member_id, 'platform_config_id', a.platform_config_id, 'action', a.action,
      'target', a.target, 'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error,
      'created_at', billing.iso(a.created_at)) order by a.id desc)
    into v_ids, v_items
  from (select a.* from billing.platform_actions a
        where a.community_id = billing.current_community_id()
          and (v_pcfg is null or a.platform_config_id = v_pcfg)
          and a.id < coalesce(p_args->>'cursor', chr(1114111))
        order by a.id desc limit v_limit + 1) a;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: platform_config_save(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.platform_config_save(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v_cid text := billing.current_community_id();
  v_id text := nullif(p_args->>'id', '');
  v_name text := nullif(btrim(coalesce(p_args->>'name', '')), '');
  v_settings jsonb := coalesce(p_args->'settings', '{}'::jsonb);
  v_platform text := p_args->>'platform';
  v_problem text;
  v_row billing.platform_configs;
begin
  if length(v_name) > 200 then
    perform billing.raise('BL422', 'name: expected at most 200 characters.', 'name');
  end if;
  if v_id is null then
    if coalesce(p_args->>'key', '') !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' then
      perform billing.raise('BL422', 'key: expected a key: letters, digits, "_", ".", ":" or "-", at most 100 characters.', 'key');
    end if;
    if v_platform is null or v_platform not in ('discord', 'telegram') then
      perform billing.raise('BL422', 'platform: expected "discord" or "telegram".', 'platform');
    end if;
  else
    select * into v_row from billing.platform_configs pc where pc.community_id = v_cid and pc.id = v_id for update;
    if not found then
      perform billing.raise('BL404', 'No platform connection ' || v_id || '.');
    end if;
    v_platform := v_row.platform;
  end if;
  if v_id is not null and not p_args ? 'settings' then
    v_settings := v_row.settings;
  end if;
  v_problem := billing.platform_settings_problem(v_platform, v_settings);
  if v_problem is not null then
    perform billing.raise('BL422', v_problem, split_part(v_problem, ':', 1));
  end if;
  if v_id is null then
    if exists (select 1 from billing.platform_configs pc where pc.community_id = v_cid and pc.key = p_args->>'key') then
      perform billing.raise('BL409', format('A connection with the key %s exists already: edit it instead.', p_args->>'key'), 'key');
    end if;
    insert into billing.platform_configs (community_id, key, platform, name, settings)
    values (v_cid, p_args->>'key', v_platform, v_name, v_settings)
    returning * into v_row;
  else
    update billing.platform_configs pc
    set name = case when p_args ? 'name' then v_name else pc.name end,
        settings = case when p_args ? 'settings' then v_settings else pc.settings end
    where pc.community_id = v_cid and pc.id = v_id
    returning * into v_row;
  end if;
  return jsonb_build_object('id', v_row.id, 'key', v_row.key, 'platform', v_row.platform, 'name', v_row.name, 'settings', v_row.settings);
end
$_$;


--
-- Name: platform_configs_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.platform_configs_list(p_args jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select jsonb_build_object('data', coalesce(jsonb_agg(jsonb_build_object(
      'id', pc.id, 'key', pc.key, 'platform', pc.platform, 'name', pc.name, 'settings', pc.settings,
      'bot_token_set', billing_private.platform_secret_ciphertext(pc.id, 'bot_token') is not null,
      'client_secret_set', billing_private.platform_secret_ciphertext(pc.id, 'client_secret') is not null)
    order by pc.key), '[]'))
  from billing.platform_configs pc
  where pc.community_id = billing.current_community_id()
$$;


--
-- Name: platform_connections_health(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.platform_connections_health(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_cid text := billing.current_community_id();
begin
  return jsonb_build_object('data', coalesce((
    with unrecorded as (
      select b->>'platform_config_id' as pcfg, count(*) as n
      from billing.member_entitlements me
      cross join lateral jsonb_array_elements(me.benefits) b
      where me.community_id = v_cid and me.status = 'active' and me.benefits <> '[]'
        and not exists (select 1 from billing.benefit_deliveries d
                        where d.community_id = me.community_id and d.member_id = me.member_id
                          and d.platform_config_id = b->>'platform_config_id' and d.type = b->>'type' and d.value = b->>'value')
      group by 1
    ), stored as (
      select d.platform_config_id as pcfg,
        count(*) filter (where d.status = 'pending') as pending,
        count(*) filter (where d.status = 'failed') as failed,
        count(*) filter (where d.status = 'action_required') as action_required
      from billing.benefit_deliveries d
      where d.community_id = v_cid
      group by 1
    )
    select jsonb_agg(jsonb_build_object(
      'id', pc.id, 'key', pc.key, 'name', pc.name, 'platform', pc.platform,
      'guild_id', pc.settings->>'guild_id', 'chat_id', pc.settings->>'chat_id',
      'bot_token_set', billing_private.platform_secret_ciphertext(pc.id, 'bot_token') is not null,
      'last_success', (select jsonb_build_object('at', billing.iso(a.created_at), 'action', a.action, 'target', a.target)
                       from billing.platform_actions a
                       where a.community_id = v_cid and a.platform_config_id = pc.id and a.outcome = 'ok'
                       order by a.id desc limit 1),
      'last_error', (select jsonb_build_object('at', billing.iso(a.created_at), 'action', a.action, 'target', a.target,
                       'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error)
                     from billing.platform_actions a
                     where a.community_id = v_cid and a.platform_config_id = pc.id and a.outcome <> 'ok'
                     order by a.id desc limit 1),
      'waiting', jsonb_build_object(
        'pending', coalesce(s.pending, 0) + coalesce(u.n, 0),
        'failed', coalesce(s.failed, 0),
        'action_required', coalesce(s.action_required, 0)))
      order by pc.key)
    from billing.platform_configs pc
    left join stored s on s.pcfg = pc.id
    left join unrecorded u on u.pcfg = pc.id
    where pc.community_id = v_cid), '[]'));
end
$$;


--
-- Name: portal_session_create(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.portal_session_create(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_cid text := billing.current_community_id();
  v_ps billing.portal_sessions;
  v_provider text;
  v_token text := billing.random_token();
begin
  if not exists (select 1 from billing.members m where m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  insert into billing.portal_sessions (community_id, member_id, return_url, url, expires_at, access_token_sha256)
  values (v_cid, p_args->>'id', p_args->>'return_url', '', billing.now() + interval '10 minutes',
    sha256(convert_to(v_token, 'UTF8')))
  returning * into v_ps;
  return jsonb_build_object('id', v_ps.id, 'member_id', v_ps.member_id, 'access_token', v_token,
    'expires_at', billing.iso(v_ps.expires_at), 'return_url', v_ps.return_url, 'provider', v_provider,
    'customer_ref', coalesce(
      (select c.customer_ref from billing.member_provider_customers c
       where c.member_id = v_ps.member_id and c.provider = 'stripe'),
      (select s.provider_customer_ref from billing.subscriptions s
       where s.member_id = v_ps.member_id and s.provider = 'stripe' and s.provider_customer_ref is not null
       order by s.id desc limit 1)));
end
$$;


--
-- Name: portal_session_set_url(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.portal_session_set_url(p_args jsonb) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  update billing.portal_sessions set url = p_args->>'url' where id = p_args->>'id'
$$;


--
-- Name: purchases_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.purchases_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_pur billing.purchases;
begin
  select * into v_pur from billing.purchases p
  where p.community_id = billing.current_community_id() and p.id = p_args->>'id';
  if v_pur.id is null then
    perform billing.raise('BL404', 'No purchase ' || (p_args->>'id') || '.');
  end if;
  return billing.purchase_json(v_pur);
end
$$;


--
-- Name: purchases_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.purchases_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(p.id order by p.id desc), array_agg(billing.purchase_json(p) order by p.id desc)
    into v_ids, v_items
  from (select * from billing.purchases p
        where p.community_id = billing.current_community_id()
          and p.id < coalesce(p_args->>'cursor', chr(1114111))
        order by p.id desc limit v_limit + 1) p;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;


--
-- Name: subscription_cancel(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_cancel(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
  v_prov jsonb;
begin
  v_sub := billing.lock_subscription(p_args->>'id');
  v_prov := billing.subscription_provider(v_sub);
  if p_args->>'at' = 'now' then
    -- An operator's immediate cancel (additive option): it ends now and access with it.
    if v_sub.status = 'cancelled' then
      return jsonb_build_object('subscription', jsonb_build_object('status', 'cancelled'), 'changed', false,
        'provider', v_prov || '{"at": "now"}');
    end if;
    perform billing_private.subscription_cancel_now(v_sub.id);
    return jsonb_build_object('subscription', jsonb_build_object('status', 'cancelled'), 'changed', true,
      'provider', v_prov || '{"at": "now"}');
  end if;
  if v_sub.status = 'cancelling' then
    return jsonb_build_object('subscription', jsonb_build_object('status', 'cancelling'), 'changed', false, 'provider', v_prov);
  elsif v_sub.status = 'cancelled' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is already cancelled.');
  end if;
  update billing.subscriptions s set status = 'cancelling', cancel_at = s.current_period_end,
    scheduled_plan_id = null, scheduled_at = null, cancel_requested_at = billing.now(),
    cancellation_reason = 'cancellation_requested', updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id
  returning * into v_sub;
  return jsonb_build_object('subscription', jsonb_build_object('status', 'cancelling'), 'changed', true,
    'provider', billing.subscription_provider(v_sub));
end
$$;


--
-- Name: subscription_cancel_scheduled_switch(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_cancel_scheduled_switch(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
begin
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.scheduled_plan_id is null then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' has no scheduled switch.');
  end if;
  update billing.subscriptions s set scheduled_plan_id = null, scheduled_at = null, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', billing.subscription_provider(v_sub));
end
$$;


--
-- Name: subscription_card_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_card_get(p_args jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('subscription_id', s.id, 'card',
    case when coalesce(c.declines, false) then 'declines' else 'pays' end)
  from billing.subscriptions s
  left join billing.sandbox_cards c on c.community_id = s.community_id and c.subscription_id = s.id
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id'
$$;


--
-- Name: subscription_card_set(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_card_set(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  if not exists (select 1 from billing.subscriptions s
                 where s.community_id = billing.current_community_id() and s.id = p_args->>'id') then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_args->>'id', '') || '.');
  end if;
  return billing_private.portal_set_card(p_args->>'id', p_args->>'card' = 'declines');
end
$$;


--
-- Name: subscription_pause(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_pause(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
  v_until timestamptz := (p_args->>'resumes_at')::timestamptz;
begin
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status = 'paused' and v_sub.paused_until is not distinct from v_until then
    return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', false,
      'provider', billing.subscription_provider(v_sub));
  elsif v_sub.status not in ('active', 'trialing', 'paused') then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status
      || ': only an active or trialing subscription can be paused.');
  end if;
  if v_until is not null and v_until <= billing.now() then
    perform billing.raise('BL422', 'resumes_at must be in the future.', 'resumes_at');
  end if;
  v_sub := billing_private.subscription_pause(v_sub.id, v_until);
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', billing.subscription_provider(v_sub) || jsonb_build_object('resumes_at', billing.iso(v_until)));
end
$$;


--
-- Name: subscription_reactivate(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_reactivate(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
begin
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status <> 'cancelling' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not cancelling: nothing to reactivate.');
  end if;
  -- A cancelling subscription whose period has ended is cancelled (the spec's "period
  -- end reached"), whether or not the worker has written it yet: made active again, it
  -- would give access for a period nobody paid (a paused one cancelled after its period
  -- ended, then reactivated, did: test/money/money.property.test.ts).
  if v_sub.current_period_end is not null and v_sub.current_period_end <= billing.now() then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' ended at its period end ('
      || billing.iso(v_sub.current_period_end) || '): nothing to reactivate; a new checkout buys the plan again.');
  end if;
  update billing.subscriptions s set
    -- Back to what it was: past_due while a renewal is still being retried.
    status = case when billing.subscription_retry_open(s.community_id, s.id) then 'past_due'
                  when s.trial_end is not null and s.trial_end > billing.now() then 'trialing' else 'active' end,
    cancel_at = null, cancel_requested_at = null, cancellation_reason = null, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id
  returning * into v_sub;
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', billing.subscription_provider(v_sub));
end
$$;


--
-- Name: subscription_resume(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_resume(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
begin
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status <> 'paused' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not paused: nothing to resume.');
  end if;
  v_sub := billing_private.subscription_resume(v_sub.id);
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', billing.subscription_provider(v_sub));
end
$$;


--
-- Name: subscription_switch(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_switch(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
  v_grp text;
  v_old billing.plans;
  v_new billing.plans;
  v_prov jsonb;
begin
  v_sub := billing.lock_subscription(p_args->>'id');
  v_grp := billing.switch_validate(v_sub, p_args->>'plan_id');
  v_prov := billing.subscription_provider(v_sub);
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_args->>'plan_id';
  if v_grp = 'downgrades' then
    update billing.subscriptions s set scheduled_plan_id = v_new.id, scheduled_at = s.current_period_end, updated_at = now()
    where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  else
    v_sub := billing_private.subscription_switch_now(v_sub.id, v_new.id);
  end if;
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', v_prov || jsonb_build_object(
      'kind', case when v_grp = 'downgrades' then 'scheduled' else 'immediate' end,
      'new_plan_id', v_new.id, 'new_stripe_price_id', v_new.stripe_price_id, 'old_stripe_price_id', v_old.stripe_price_id));
end
$$;


--
-- Name: subscription_switch_options(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_switch_options(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_sub billing.subscriptions;
begin
  select * into v_sub from billing.subscriptions s where s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || (p_args->>'id') || '.');
  end if;
  perform billing.require_switchable(v_sub);
  return billing.switch_options(v_sub);
end
$$;


--
-- Name: subscription_switch_preview(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscription_switch_preview(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_group text;
  v_q record;
  v_tax jsonb;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_args->>'id', '') || '.');
  end if;
  v_group := billing.switch_validate(v_sub, p_args->>'plan_id');
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_args->>'plan_id';
  if v_group = 'downgrades' then
    return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'period_end',
      'applies_at', billing.iso(v_sub.current_period_end), 'currency', v_new.currency,
      'charge_cents', 0, 'credit_cents', 0, 'tax_cents', 0, 'tax_lines', '[]'::jsonb, 'due_now_cents', 0,
      'period_end', billing.iso(v_sub.current_period_end));
  end if;
  select * into v_q from billing.switch_proration(v_sub, v_old, v_new, billing.now());
  v_tax := billing.invoice_tax(v_sub.community_id, billing.member_billing(v_sub.community_id, v_sub.member_id),
    jsonb_build_array(jsonb_build_object('type', 'proration', 'description', 'preview', 'amount_cents', v_q.charge_cents - v_q.applied_cents)));
  return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'now',
    'applies_at', billing.iso(billing.now()), 'currency', v_new.currency,
    'charge_cents', v_q.charge_cents, 'credit_cents', v_q.applied_cents,
    'tax_cents', (v_tax->>'tax_cents')::bigint, 'tax_lines', v_tax->'tax_lines',
    'due_now_cents', v_q.charge_cents - v_q.applied_cents + (v_tax->>'tax_exclusive_cents')::bigint, 'period_end', billing.iso(v_q.period_end));
end
$$;


--
-- Name: subscriptions_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscriptions_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_sub billing.subscriptions;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || (p_args->>'id') || '.');
  end if;
  return billing.subscription_json(v_sub);
end
$$;


--
-- Name: subscriptions_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.subscriptions_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $_$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_where text := '';
  v_ids text[];
  v_items jsonb[];
begin
  if p_args->>'cursor' is not null then v_where := v_where || ' and s.id < $1->>''cursor'''; end if;
  if p_args->>'status' is not null then v_where := v_where || ' and s.status = $1->>''status'''; end if;
  if p_args->>'plan_id' is not null then v_where := v_where || ' and s.plan_id = $1->>''plan_id'''; end if;
  if p_args->>'member_id' is not null then v_where := v_where || ' and s.member_id = $1->>''member_id'''; end if;
  if p_args->>'tier_id' is not null then
    v_where := v_where || ' and s.plan_id in (select p.id from billing.plans p'
      || ' where p.community_id = s.community_id and p.tier_id = $1->>''tier_id'')';
  end if;
  execute 'select array_agg(s.id order by s.id desc), array_agg(billing.subscription_json(s, p, t) order by s.id desc)
    from (select * from billing.subscriptions s
          where s.community_id = billing.current_community_id()' || v_where || '
          order by s.id desc limit $2) s
    left join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id'
    into v_ids, v_items using p_args, v_limit + 1;
  return billing.page_json(v_ids, v_items, v_limit);
end
$_$;


--
-- Name: tax_settings_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.tax_settings_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_com billing.communities;
begin
  select * into v_com from billing.communities c where c.id = billing.current_community_id();
  return jsonb_build_object(
    'seller', jsonb_build_object('name', v_com.name, 'legal_name', v_com.legal_name,
      'address_lines', to_jsonb(coalesce(v_com.address_lines, '{}'::text[])), 'country', v_com.country, 'tax_id', v_com.tax_id,
      'eu_vat_id_valid', case when billing.eu_member(v_com.country) then billing.eu_vat_id_valid(v_com.country, v_com.tax_id) end),
    'rates', coalesce((select jsonb_agg(billing.tax_rate_json(r) order by r.country) from billing.tax_rates r
      where r.community_id = v_com.id), '[]'),
    'stripe_automatic_tax', v_com.payment_provider = 'stripe' and coalesce((v_com.payment_config->>'automatic_tax')::boolean, false));
end
$$;


--
-- Name: webhook_deliveries_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_deliveries_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.webhook_deliveries[];
begin
  if not exists (select 1 from billing.webhook_endpoints w where w.id = p_args->>'id') then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  select coalesce(array_agg(d order by d.id desc), '{}') into v_rows
  from (select * from billing.webhook_deliveries d
        where d.community_id = billing.current_community_id() and d.endpoint_id = p_args->>'id'
          and (p_args->>'cursor' is null or d.id < p_args->>'cursor')
        order by d.id desc limit v_limit + 1) d;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.webhook_delivery_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit then billing.encode_cursor(v_rows[v_limit].id) end);
end
$$;


--
-- Name: webhook_deliveries_redeliver(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_deliveries_redeliver(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_endpoint billing.webhook_endpoints;
  v_delivery billing.webhook_deliveries;
  v_manual boolean;
begin
  select * into v_endpoint from billing.webhook_endpoints w where w.id = p_args->>'id';
  select * into v_delivery from billing.webhook_deliveries d
  where d.community_id = billing.current_community_id() and d.id = p_args->>'deliveryId'
    and d.endpoint_id = v_endpoint.id
  for update;
  if v_endpoint.id is null or v_delivery.id is null then
    perform billing.raise('BL404', 'No delivery ' || (p_args->>'deliveryId') || ' for webhook endpoint '
      || (p_args->>'id') || '.');
  end if;
  if not v_endpoint.enabled then
    perform billing.raise('BL409', 'Webhook endpoint ' || v_endpoint.id || ' is disabled; enable it first.');
  end if;
  v_manual := v_delivery.status <> 'pending';
  update billing.webhook_deliveries d set status = 'pending', next_attempt_at = now(), updated_at = now()
  where d.community_id = v_delivery.community_id and d.id = v_delivery.id
  returning * into v_delivery;
  perform billing_private.webhook_delivery_enqueue(v_delivery.id, v_manual);
  return billing.webhook_delivery_json(v_delivery);
end
$$;


--
-- Name: webhook_endpoints_create(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_endpoints_create(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_endpoint billing.webhook_endpoints;
  v_enabled boolean := coalesce((p_args->>'enabled')::boolean, true);
begin
  insert into billing.webhook_endpoints (community_id, id, url, description, event_types, enabled, disabled_reason)
  values (billing.current_community_id(), p_args->>'id', p_args->>'url', p_args->>'description',
    coalesce(array(select jsonb_array_elements_text(p_args->'event_types')), '{}'),
    v_enabled, case when v_enabled then null else 'manual' end)
  returning * into v_endpoint;
  perform billing_private.webhook_secret_store(v_endpoint.id, p_args->>'secret_ciphertext', false);
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;


--
-- Name: webhook_endpoints_delete(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_endpoints_delete(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  delete from billing.webhook_endpoints w where w.id = p_args->>'id';
  if not found then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return null;
end
$$;


--
-- Name: webhook_endpoints_get(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_endpoints_get(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  select * into v_endpoint from billing.webhook_endpoints w where w.id = p_args->>'id';
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;


--
-- Name: webhook_endpoints_list(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_endpoints_list(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.webhook_endpoints[];
begin
  select coalesce(array_agg(w order by w.id desc), '{}') into v_rows
  from (select * from billing.webhook_endpoints w
        where p_args->>'cursor' is null or w.id < p_args->>'cursor'
        order by w.id desc limit v_limit + 1) w;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.webhook_endpoint_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit then billing.encode_cursor(v_rows[v_limit].id) end);
end
$$;


--
-- Name: webhook_endpoints_rotate_secret(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_endpoints_rotate_secret(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  update billing.webhook_endpoints w set updated_at = now() where w.id = p_args->>'id'
  returning * into v_endpoint;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  perform billing_private.webhook_secret_store(v_endpoint.id, p_args->>'secret_ciphertext', true);
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;


--
-- Name: webhook_endpoints_update(jsonb); Type: FUNCTION; Schema: billing_api; Owner: -
--

CREATE FUNCTION billing_api.webhook_endpoints_update(p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  update billing.webhook_endpoints w set
    url = case when p_args ? 'url' then p_args->>'url' else w.url end,
    description = case when p_args ? 'description' then p_args->>'description' else w.description end,
    event_types = case when p_args ? 'event_types'
      then coalesce(array(select jsonb_array_elements_text(p_args->'event_types')), '{}') else w.event_types end,
    enabled = case when p_args ? 'enabled' then (p_args->>'enabled')::boolean else w.enabled end,
    disabled_reason = case
      when not (p_args ? 'enabled') then w.disabled_reason
      when (p_args->>'enabled')::boolean then null
      when w.enabled then 'manual'
      else w.disabled_reason end,
    failing_since = case when (p_args->>'enabled')::boolean and not w.enabled then null else w.failing_since end,
    updated_at = now()
  where w.id = p_args->>'id'
  returning * into v_endpoint;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;


--
-- Name: add_job(text, json[], timestamp with time zone, integer, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.add_job(p_identifier text, p_payloads json[], p_run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_max_attempts integer DEFAULT NULL::integer, p_flag_key text DEFAULT NULL::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if coalesce(cardinality(p_payloads), 0) = 0 then
    return;
  end if;
  perform graphile_worker.add_jobs(array(
    select row(p_identifier, p.payload, null, p_run_at, p_max_attempts, null, null,
      case when p_flag_key is not null and p.payload->>p_flag_key is not null
        then array[p.payload->>p_flag_key] end)::graphile_worker.job_spec
    from unnest(p_payloads) as p(payload)));
end
$$;


--
-- Name: analytics_compact(integer, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.analytics_compact(p_min_rows integer DEFAULT 32, p_community text DEFAULT NULL::text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_community text;
  v_folded integer;
  v_total integer := 0;
begin
  for v_community in
    select d.community_id from billing_private.analytics_deltas d
    where p_community is null or d.community_id = p_community
    group by d.community_id having count(*) > p_min_rows
  loop
    with gone as (
      delete from billing_private.analytics_deltas d where d.community_id = v_community returning d.*
    ), folded as (
      insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due,
        subscribers, new_cents, expansion_cents, contraction_cents, churn_cents, reactivation_cents)
      select g.community_id, g.day, g.currency, sum(g.mrr_cents), sum(g.billing), sum(g.signups), sum(g.cancels),
        sum(g.past_due), sum(g.subscribers), sum(g.new_cents), sum(g.expansion_cents), sum(g.contraction_cents),
        sum(g.churn_cents), sum(g.reactivation_cents)
      from gone g
      group by g.community_id, g.day, g.currency
      having sum(g.mrr_cents) <> 0 or sum(g.billing) <> 0 or sum(g.signups) <> 0 or sum(g.cancels) <> 0
        or sum(g.past_due) <> 0 or sum(g.subscribers) <> 0 or sum(g.new_cents) <> 0 or sum(g.expansion_cents) <> 0
        or sum(g.contraction_cents) <> 0 or sum(g.churn_cents) <> 0 or sum(g.reactivation_cents) <> 0
    )
    select count(*) into v_folded from gone;
    v_total := v_total + v_folded;
  end loop;
  return v_total;
end
$$;


--
-- Name: analytics_overview(integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.analytics_overview(p_days integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
declare
  v_community text := billing.current_community_id();
  -- Days are UTC days: the session's time zone is UTC in here, so a timestamptz's ::date
  -- is its UTC day.
  v_today date := billing.now()::date;
  v_recent date := billing.now()::date - 29;  -- the summary's window: today and the 29 days before
  v_first date := billing.now()::date - coalesce(p_days, 0) + 1;  -- the series' first day
  v_first_month date := (date_trunc('month', billing.now()::date) - interval '11 months')::date;  -- the series' months: this one and 11 before
  v_out jsonb;
  v_fallback text;
begin
  with d as materialized (
    -- the community's deltas summed per day and currency (the worker folds them to this)
    select x.day, x.currency, sum(x.mrr_cents) as mrr, sum(x.billing) as n, sum(x.signups) as signups,
      sum(x.cancels) as cancels, sum(x.past_due) as past_due, sum(x.subscribers) as subscribers,
      sum(x.new_cents) as new, sum(x.expansion_cents) as expansion, sum(x.contraction_cents) as contraction,
      sum(x.churn_cents) as churn, sum(x.reactivation_cents) as reactivation
    from billing_private.analytics_deltas x
    where x.community_id = v_community
    group by x.day, x.currency),
  cur as (  -- analytics.mrr: every delta of a currency (what stopped billing was added and taken back)
    select d.currency, round(sum(d.mrr))::bigint as mrr_cents, sum(d.n)::bigint as n
    from d where d.currency <> '' group by d.currency having sum(d.n) > 0),
  main as (
    select cur.* from cur order by cur.n desc, cur.mrr_cents desc, cur.currency limit 1),
  fig as (  -- analytics.subscribers, analytics.recent_activity, the past_due count; and the
            -- MRR (main currency) at the end of the day before the series' first day
    select coalesce(sum(d.subscribers), 0) as active_subscribers,
      coalesce(sum(d.signups) filter (where d.day between v_recent and v_today), 0) as recent_signups,
      coalesce(sum(d.cancels) filter (where d.day between v_recent and v_today), 0) as recent_cancels,
      coalesce(sum(d.past_due), 0) as past_due,
      coalesce(sum(d.mrr) filter (where d.day < v_first and d.currency = (select main.currency from main)), 0) as base_cents,
      coalesce(sum(d.n) filter (where d.day < v_first and d.currency = (select main.currency from main)), 0) as base_n
    from d),
  recent_mv as (  -- the main currency's MRR movements in the summary's window
    select jsonb_build_object(
      'new_cents', round(coalesce(sum(d.new), 0))::bigint,
      'expansion_cents', round(coalesce(sum(d.expansion), 0))::bigint,
      'contraction_cents', round(coalesce(sum(d.contraction), 0))::bigint,
      'churn_cents', round(coalesce(sum(d.churn), 0))::bigint,
      'reactivation_cents', round(coalesce(sum(d.reactivation), 0))::bigint,
      'net_cents', round(coalesce(sum(d.mrr), 0))::bigint) as j
    from d where d.day between v_recent and v_today and d.currency = (select main.currency from main)),
  months as (  -- analytics.mrr_movements_monthly, main currency, every month of the last 12
    select x::date as month from generate_series(v_first_month, date_trunc('month', v_today), interval '1 month') x
    where p_days is not null),
  per_month as (
    select m.month,
      coalesce((select sum(d.mrr) from d where d.currency = (select main.currency from main) and d.day < m.month), 0) as opening,
      coalesce(sum(d.new), 0) as new, coalesce(sum(d.expansion), 0) as expansion, coalesce(sum(d.contraction), 0) as contraction,
      coalesce(sum(d.churn), 0) as churn, coalesce(sum(d.reactivation), 0) as reactivation, coalesce(sum(d.mrr), 0) as net
    from months m
    left join d on d.currency = (select main.currency from main) and date_trunc('month', d.day)::date = m.month
    group by m.month),
  days as (
    select x::date as day from generate_series(v_first, v_today, interval '1 day') x
    where p_days is not null),
  per_day as (  -- the main currency's changes within the series, per day
    select d.day, d.mrr as delta, d.n
    from d where p_days is not null and d.day >= v_first and d.currency = (select main.currency from main)),
  past as (  -- a past day's MRR: what billed before the series, plus the running sum of its changes
    select x.day, (select f.base_cents from fig f) + coalesce(sum(pd.delta), 0) as cents,
      (select f.base_n from fig f) + coalesce(sum(pd.n), 0) as n
    from days x left join per_day pd on pd.day <= x.day
    where x.day < v_today group by x.day),
  act as (  -- analytics.daily_activity
    select d.day, d.signups, d.cancels from d where p_days is not null and d.currency = '' and d.day >= v_first),
  mvd as (  -- analytics.mrr_movements_daily, main currency
    select d.day, d.new, d.expansion, d.contraction, d.churn, d.reactivation from d
    where p_days is not null and d.day >= v_first and d.currency = (select main.currency from main))
  select jsonb_build_object(
    'summary', jsonb_build_object(
      'mrr_cents', coalesce((select main.mrr_cents from main), 0),
      'currency', (select main.currency from main),
      'active_subscribers', fig.active_subscribers,
      'recent_signups', fig.recent_signups,
      'recent_cancels', fig.recent_cancels,
      'window_start', billing.iso(v_recent::timestamp at time zone 'UTC'),
      'mrr_by_currency', coalesce((select jsonb_agg(jsonb_build_object('currency', cur.currency, 'mrr_cents', cur.mrr_cents)
        order by cur.currency) from cur), '[]'),
      'mrr_movements', (select recent_mv.j from recent_mv)),
    'series', case when p_days is not null then jsonb_build_object(
      'currency', (select main.currency from main),
      'past_due', fig.past_due,
      'days', coalesce((select jsonb_agg(jsonb_build_object('day', x.day::text,
          'mrr_cents', case when x.day = v_today then coalesce((select main.mrr_cents from main where main.n > 0), 0)
                            else coalesce((select round(p.cents)::bigint from past p where p.day = x.day and p.n > 0), 0) end,
          'signups', coalesce(a.signups, 0)::bigint,
          'cancels', coalesce(a.cancels, 0)::bigint,
          'new_cents', round(coalesce(v.new, 0))::bigint,
          'expansion_cents', round(coalesce(v.expansion, 0))::bigint,
          'contraction_cents', round(coalesce(v.contraction, 0))::bigint,
          'churn_cents', round(coalesce(v.churn, 0))::bigint,
          'reactivation_cents', round(coalesce(v.reactivation, 0))::bigint) order by x.day)
        from days x left join act a on a.day = x.day left join mvd v on v.day = x.day), '[]'),
      'months', coalesce((select jsonb_agg(jsonb_build_object('month', pm.month::text,
          'opening_mrr_cents', round(pm.opening)::bigint,
          'new_cents', round(pm.new)::bigint, 'expansion_cents', round(pm.expansion)::bigint,
          'contraction_cents', round(pm.contraction)::bigint, 'churn_cents', round(pm.churn)::bigint,
          'reactivation_cents', round(pm.reactivation)::bigint, 'net_cents', round(pm.net)::bigint,
          'closing_mrr_cents', round(pm.opening + pm.net)::bigint) order by pm.month)
        from per_month pm), '[]')) end)
  into v_out
  from fig;
  -- Nothing billing: the summary names the currency of the community's active plans.
  if v_out->'summary'->>'currency' is null then
    select p.currency into v_fallback from billing.plans p
    where p.community_id = v_community and p.active
    group by p.currency order by count(*) desc, p.currency limit 1;
    v_out := jsonb_set(v_out, '{summary,currency}', coalesce(to_jsonb(v_fallback), 'null'));
  end if;
  return v_out;
end
$$;


--
-- Name: analytics_rebuild(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.analytics_rebuild(p_community text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  delete from billing_private.analytics_facts f where f.community_id = p_community;
  delete from billing_private.analytics_deltas d where d.community_id = p_community;
  insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, new_cents, expansion_cents,
    contraction_cents, churn_cents, reactivation_cents)
  select m.community_id, m.day, m.currency, sum(m.to_cents - m.from_cents), sum(m.to_billing::int - m.from_billing::int),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'new'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'expansion'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'contraction'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'churn'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'reactivation'), 0)
  from billing.mrr_movements m where m.community_id = p_community
  group by m.community_id, m.day, m.currency;
  perform billing_private.analytics_refresh(array_agg(x.community_id), array_agg(x.id))
  from (select s.community_id, s.id from billing.subscriptions s where s.community_id = p_community
        union
        select m.community_id, m.subscription_id from billing.mrr_movements m where m.community_id = p_community) x;
  perform billing_private.analytics_compact(0, p_community);
end
$$;


--
-- Name: analytics_refresh(text[], text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.analytics_refresh(p_communities text[], p_ids text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
declare
  v_communities text[];
  v_ids text[];
begin
  -- The facts and the activity figures; the subscriptions whose movements are not known
  -- to be in step come out (v_ids).
  with keys as (
    select distinct k.c, k.id from unnest(p_communities, p_ids) k(c, id)
  ), od as materialized (
    select f.* from keys k
    join billing_private.analytics_facts f on f.community_id = k.c and f.subscription_id = k.id
  ), nw as materialized (
    -- the facts as the views define them, one primary-key probe per subscription
    select k.c, k.id, x.member_id, x.plan_id, x.currency, x.monthly_cents, x.billing_now, x.billing_from, x.billing_until,
      (x.created_at at time zone 'UTC')::date as created_day, (x.cancel_counted_at at time zone 'UTC')::date as cancel_day,
      x.status = 'past_due' as past_due,
      x.status in ('active', 'trialing', 'past_due', 'cancelling') as subscriber,
      -- in step: its movements add up to what it bills now (the facts say what they added
      -- up to after the last refresh, in its currency at its monthly cents)
      o.recorded_billing is not null
        and (o.currency, o.monthly_cents, o.recorded_billing) = (x.currency, x.monthly_cents, x.billing_now) as in_step,
      -- what its movements add up to after this refresh, when that is what it bills now:
      -- in step; or brought to now below (it has movements); or its first ones recorded
      -- below from its dates (a start and no end, or a start and an end)
      case when o.recorded_billing is not null
                and (o.currency, o.monthly_cents, o.recorded_billing) = (x.currency, x.monthly_cents, x.billing_now)
             or exists (select 1 from billing.mrr_movements r where r.community_id = k.c and r.subscription_id = k.id)
             or x.billing_from < 'infinity' and x.billing_until is null and x.billing_now
             or x.billing_from < 'infinity' and x.billing_until > x.billing_from and not x.billing_now
           then x.billing_now end as recorded_billing
    from keys k
    cross join lateral (select * from analytics.subscription_mrr m
                        where m.community_id = k.c and m.subscription_id = k.id offset 0) x
    left join od o on o.community_id = k.c and o.subscription_id = k.id
  ), chg as materialized (
    select coalesce(n.c, o.community_id) as c, coalesce(n.id, o.subscription_id) as id,
      o.subscription_id is not null as had, n.id is not null as has,
      o.member_id as o_member, o.created_day as o_created, o.cancel_day as o_cancel, o.past_due as o_past_due,
      o.subscriber as o_subscriber,
      n.member_id as n_member, n.currency as n_currency, n.monthly_cents as n_cents, n.created_day as n_created,
      n.cancel_day as n_cancel, n.past_due as n_past_due, n.subscriber as n_subscriber, n.recorded_billing as n_recorded
    from nw n
    full join od o on o.community_id = n.c and o.subscription_id = n.id
    where (o.member_id, o.currency, o.monthly_cents, o.created_day, o.cancel_day, o.past_due, o.subscriber, o.recorded_billing)
      is distinct from (n.member_id, n.currency, n.monthly_cents, n.created_day, n.cancel_day, n.past_due, n.subscriber,
        n.recorded_billing)
  ), gone as (
    delete from billing_private.analytics_facts f using chg
    where not chg.has and f.community_id = chg.c and f.subscription_id = chg.id
  ), kept as (
    insert into billing_private.analytics_facts (community_id, subscription_id, member_id, currency, monthly_cents,
      created_day, cancel_day, past_due, subscriber, recorded_billing)
    select chg.c, chg.id, chg.n_member, chg.n_currency, chg.n_cents, chg.n_created, chg.n_cancel, chg.n_past_due,
      chg.n_subscriber, chg.n_recorded
    from chg where chg.has
    on conflict (community_id, subscription_id) do update set member_id = excluded.member_id,
      currency = excluded.currency, monthly_cents = excluded.monthly_cents, created_day = excluded.created_day,
      cancel_day = excluded.cancel_day, past_due = excluded.past_due, subscriber = excluded.subscriber,
      recorded_billing = excluded.recorded_billing
  ), mem as (
    -- members whose count of access-giving subscriptions changes, and by how much
    select x.c, x.m, sum(x.d) as d
    from (select chg.c, chg.o_member as m, -1 as d from chg where chg.had and chg.o_subscriber
          union all
          select chg.c, chg.n_member, 1 from chg where chg.has and chg.n_subscriber) x
    group by x.c, x.m having sum(x.d) <> 0
  ), members as (
    select mem.c, (b.n + mem.d > 0)::int - (b.n > 0)::int as subscribers
    from mem
    cross join lateral (select count(*) as n from billing_private.analytics_facts f
                        where f.community_id = mem.c and f.member_id = mem.m and f.subscriber) b
  ), d as (
    -- the old facts' figures taken back, the new ones' added: one row per figure that has a day
    select chg.c, v.day, ''::text as currency, 0::numeric as mrr, 0 as billing, v.signups, v.cancels, v.past_due,
      0 as subscribers, 0::numeric as new, 0::numeric as expansion, 0::numeric as contraction, 0::numeric as churn,
      0::numeric as reactivation
    from chg
    cross join lateral (values
      (chg.had, chg.o_created, -1, 0, 0),
      (chg.had, chg.o_cancel,  0, -1, 0),
      (chg.had and chg.o_past_due, (now() at time zone 'UTC')::date, 0, 0, -1),
      (chg.has, chg.n_created, 1, 0, 0),
      (chg.has, chg.n_cancel,  0, 1, 0),
      (chg.has and chg.n_past_due, (now() at time zone 'UTC')::date, 0, 0, 1)
    ) v(applies, day, signups, cancels, past_due)
    where v.applies and v.day is not null
    union all
    select members.c, (now() at time zone 'UTC')::date, '', 0, 0, 0, 0, 0, members.subscribers, 0, 0, 0, 0, 0
    from members where members.subscribers <> 0
  ), added as (
    insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due,
      subscribers, new_cents, expansion_cents, contraction_cents, churn_cents, reactivation_cents)
    select d.c, d.day, d.currency, sum(d.mrr), sum(d.billing), sum(d.signups), sum(d.cancels), sum(d.past_due), sum(d.subscribers),
      sum(d.new), sum(d.expansion), sum(d.contraction), sum(d.churn), sum(d.reactivation)
    from d
    group by d.c, d.day, d.currency
    having sum(d.mrr) <> 0 or sum(d.billing) <> 0 or sum(d.signups) <> 0 or sum(d.cancels) <> 0
      or sum(d.past_due) <> 0 or sum(d.subscribers) <> 0 or sum(d.new) <> 0 or sum(d.expansion) <> 0
      or sum(d.contraction) <> 0 or sum(d.churn) <> 0 or sum(d.reactivation) <> 0
  )
  select array_agg(k.c), array_agg(k.id) into v_communities, v_ids
  from keys k
  left join nw n on n.c = k.c and n.id = k.id
  where n.in_step is not true;
  if v_ids is null then
    return;
  end if;

  -- The MRR movements of those subscriptions: what their recorded movements add up to
  -- against what they bill now, or their first ones (the same snapshot's facts are not
  -- read: only the movements and the subscriptions, which the first statement left).
  with keys as (
    select distinct k.c, k.id from unnest(v_communities, v_ids) k(c, id)
  ), clock as materialized (
    -- each community's clock, read once: the movements' date (none for a community being
    -- deleted: its subscriptions go with it, and so do its movements)
    select x.c, billing.community_now(x.c) as at from (select distinct keys.c from keys) x
    where exists (select 1 from billing.communities c where c.id = x.c)
  ), nw as materialized (
    select k.c, k.id, x.member_id, x.plan_id, x.currency, x.monthly_cents, x.billing_now, x.billing_from, x.billing_until,
      (x.created_at at time zone 'UTC')::date as created_day, (x.cancel_counted_at at time zone 'UTC')::date as cancel_day,
      x.status = 'past_due' as past_due,
      x.status in ('active', 'trialing', 'past_due', 'cancelling') as subscriber,
      -- whether it has recorded movements (rec below has rows for it): an index probe
      -- here, not a search of rec per row, which the kept generic plan, expecting ten
      -- keys, did as a nested loop (quadratic in the statement's rows)
      exists (select 1 from billing.mrr_movements r
              where r.community_id = k.c and r.subscription_id = k.id) as has_rec
    from keys k
    cross join lateral (select * from analytics.subscription_mrr m
                        where m.community_id = k.c and m.subscription_id = k.id offset 0) x
  ), rec as materialized (
    -- what each subscription's recorded movements add up to, per currency
    select k.c, k.id, r.currency, r.cents, r.billing, r.member_id, r.plan_id
    from keys k
    cross join lateral (select m.currency, sum(m.to_cents - m.from_cents) as cents,
        sum(m.to_billing::int - m.from_billing::int) > 0 as billing,
        max(m.member_id) as member_id, max(m.plan_id) as plan_id
      from billing.mrr_movements m where m.community_id = k.c and m.subscription_id = k.id
      group by m.currency) r
  ), states as (
    -- recorded (from) against now (to), per subscription and currency, where they differ
    select s.c, s.id, s.currency, sum(s.from_cents) as from_cents, bool_or(s.from_billing) as from_billing,
      sum(s.to_cents) as to_cents, bool_or(s.to_billing) as to_billing
    from (
      select rec.c, rec.id, rec.currency, rec.cents as from_cents, rec.billing as from_billing,
        0::numeric as to_cents, false as to_billing
      from rec
      union all
      select nw.c, nw.id, nw.currency, 0, false, case when nw.billing_now then nw.monthly_cents else 0 end, nw.billing_now
      from nw where nw.has_rec
    ) s
    group by s.c, s.id, s.currency
    having (bool_or(s.from_billing), sum(s.from_cents)) is distinct from (bool_or(s.to_billing), sum(s.to_cents))
  ), moves as (
    select st.c, st.id, coalesce(n.member_id, (select max(r.member_id) from rec r where r.c = st.c and r.id = st.id)) as member_id,
      coalesce(n.plan_id, (select max(r.plan_id) from rec r where r.c = st.c and r.id = st.id)) as plan_id,
      cl.at, st.currency, st.from_cents, st.to_cents, st.from_billing, st.to_billing
    from states st
    join clock cl on cl.c = st.c
    left join nw n on n.c = st.c and n.id = st.id
    union all
    -- no movement recorded yet: its first ones from its own dates
    select n.c, n.id, n.member_id, n.plan_id, v.at, n.currency, v.from_cents, v.to_cents, v.from_billing, v.to_billing
    from nw n
    join clock cl on cl.c = n.c
    cross join lateral (values
      (least(n.billing_from, cl.at), 0::numeric, n.monthly_cents, false, true,
       n.billing_from < 'infinity' and (n.billing_until is null or n.billing_until > n.billing_from)),
      (least(n.billing_until, cl.at), n.monthly_cents, 0::numeric, true, false,
       n.billing_from < 'infinity' and n.billing_until > n.billing_from)
    ) v(at, from_cents, to_cents, from_billing, to_billing, applies)
    where v.applies and not n.has_rec
  ), mv as materialized (
    select mo.*, (mo.at at time zone 'UTC')::date as day,
      case when not mo.from_billing then
             case when exists (select 1 from billing.mrr_movements x
                               where x.community_id = mo.c and x.member_id = mo.member_id and x.occurred_at <= mo.at)
                  then 'reactivation' else 'new' end
           when not mo.to_billing then 'churn'
           when mo.to_cents > mo.from_cents then 'expansion'
           else 'contraction' end as kind
    from moves mo
  ), recorded as (
    insert into billing.mrr_movements (community_id, subscription_id, member_id, plan_id, occurred_at, day, currency, kind,
      from_cents, to_cents, from_billing, to_billing)
    select mv.c, mv.id, mv.member_id, mv.plan_id, mv.at, mv.day, mv.currency, mv.kind, mv.from_cents, mv.to_cents,
      mv.from_billing, mv.to_billing
    from mv
  ), d as (
    -- the movements recorded: one row per day and currency
    select mv.c, mv.day, mv.currency, mv.to_cents - mv.from_cents as mrr, mv.to_billing::int - mv.from_billing::int as billing,
      0 as signups, 0 as cancels, 0 as past_due, 0 as subscribers,
      case when mv.kind = 'new' then mv.to_cents - mv.from_cents else 0 end as new,
      case when mv.kind = 'expansion' then mv.to_cents - mv.from_cents else 0 end as expansion,
      case when mv.kind = 'contraction' then mv.to_cents - mv.from_cents else 0 end as contraction,
      case when mv.kind = 'churn' then mv.to_cents - mv.from_cents else 0 end as churn,
      case when mv.kind = 'reactivation' then mv.to_cents - mv.from_cents else 0 end as reactivation
    from mv
  )
  insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due,
    subscribers, new_cents, expansion_cents, contraction_cents, churn_cents, reactivation_cents)
  select d.c, d.day, d.currency, sum(d.mrr), sum(d.billing), sum(d.signups), sum(d.cancels), sum(d.past_due), sum(d.subscribers),
    sum(d.new), sum(d.expansion), sum(d.contraction), sum(d.churn), sum(d.reactivation)
  from d
  group by d.c, d.day, d.currency
  having sum(d.mrr) <> 0 or sum(d.billing) <> 0 or sum(d.signups) <> 0 or sum(d.cancels) <> 0
    or sum(d.past_due) <> 0 or sum(d.subscribers) <> 0 or sum(d.new) <> 0 or sum(d.expansion) <> 0
    or sum(d.contraction) <> 0 or sum(d.churn) <> 0 or sum(d.reactivation) <> 0;
end
$$;


--
-- Name: analytics_refresh_locking(text[], text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.analytics_refresh_locking(p_communities text[], p_ids text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  perform 1 from billing.subscriptions s
  where (s.community_id, s.id) in (select k.c, k.id from unnest(p_communities, p_ids) k(c, id))
  order by s.community_id, s.id
  for share of s;
  perform billing_private.analytics_refresh(p_communities, p_ids);
end
$$;


--
-- Name: api_key_insert(text, text, text, text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.api_key_insert(p_name text, p_prefix text, p_key_hash text, p_scopes text[]) RETURNS jsonb
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  insert into billing_private.api_keys as k (community_id, name, prefix, key_hash, scopes)
  values (billing.current_community_id(), p_name, p_prefix, p_key_hash, p_scopes)
  returning billing_private.api_key_json(k)
$$;


--
-- Name: api_keys; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.api_keys (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('key'::text) NOT NULL COLLATE pg_catalog."C",
    name text,
    prefix text NOT NULL,
    key_hash text NOT NULL,
    scopes text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone
);

ALTER TABLE ONLY billing_private.api_keys FORCE ROW LEVEL SECURITY;


--
-- Name: api_key_json(billing_private.api_keys); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.api_key_json(k billing_private.api_keys) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  -- Last use: when the key last took a rate token (its live bucket), else what the
  -- purge of its idle bucket kept (api_keys.last_used_at). No write per request; the
  -- buckets are unlogged, so a crash may forget up to an hour of it.
  select jsonb_build_object('id', k.id, 'name', k.name, 'prefix', k.prefix, 'scopes', to_jsonb(k.scopes),
    'created_at', billing.iso(k.created_at), 'revoked_at', billing.iso(k.revoked_at),
    'last_used_at', billing.iso(greatest(k.last_used_at, (select b.updated_at from billing_private.rate_buckets b
                                  where b.bucket = ('key:' || k.id) collate "default"))))
$$;


--
-- Name: api_key_revoke(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.api_key_revoke(p_id text) RETURNS jsonb
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  update billing_private.api_keys k set revoked_at = coalesce(k.revoked_at, now())
  where k.community_id = billing.current_community_id() and k.id = p_id
  returning billing_private.api_key_json(k)
$$;


--
-- Name: api_key_scopes(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.api_key_scopes() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select array['subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
    'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
    'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write', 'audit:read', 'members:export', 'members:erase']
$$;


--
-- Name: api_keys_page(text, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.api_keys_page(p_cursor text, p_limit integer) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select billing.page_json(array_agg(k.id order by k.id desc),
    array_agg(billing_private.api_key_json(k) order by k.id desc), p_limit)
  from (select * from billing_private.api_keys k
        where k.community_id = billing.current_community_id() and k.id < coalesce(p_cursor, chr(1114111))
        order by k.id desc limit p_limit + 1) k
$$;


--
-- Name: audit_actor(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.audit_actor() RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_key text := nullif(current_setting('app.key_id', true), '');
  v_request text := nullif(current_setting('app.request_id', true), '');
  v_cli text := nullif(current_setting('app.actor', true), '');
begin
  if pg_has_role(session_user, 'billing_operator', 'MEMBER')
     and not pg_has_role(session_user, 'billing_owner_probe', 'MEMBER') then
    return jsonb_build_object('type', 'sql_login', 'id', session_user::text, 'key_id', null, 'request_id', null);
  elsif v_key like 'key\_%' then
    return jsonb_build_object('type', 'api_key', 'id', v_key, 'key_id', v_key, 'request_id', v_request);
  elsif v_key like 'ops\_%' then
    return jsonb_build_object('type', 'operator', 'id', (select s.user_id from billing_private.operator_sessions s
        where s.community_id = current_setting('app.community_id', true) and s.id = v_key),
      'key_id', v_key, 'request_id', v_request);
  elsif v_key is not null then
    return jsonb_build_object('type', 'member', 'id', nullif(current_setting('app.member_id', true), ''),
      'key_id', v_key, 'request_id', v_request);
  elsif v_cli is not null then
    return jsonb_build_object('type', 'cli', 'id', v_cli, 'key_id', null, 'request_id', v_request);
  end if;
  return jsonb_build_object('type', 'service', 'id', session_user::text, 'key_id', null, 'request_id', v_request);
end
$$;


--
-- Name: audit_purge(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.audit_purge() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  r record;
  v_n integer;
  v_total integer := 0;
begin
  perform set_config('app.audit_purge', 'on', true);
  for r in
    with recursive cs(c) as (
      select min(a.community_id) from billing.audit_log a
      union all
      select (select min(a.community_id) from billing.audit_log a where a.community_id > cs.c) from cs where cs.c is not null)
    select cs.c, coalesce(com.audit_retention_days, 365) as days
    from cs left join billing.communities com on com.id = cs.c where cs.c is not null
  loop
    delete from billing.audit_log a
    where a.community_id = r.c and a.occurred_at < now() - make_interval(days => r.days);
    get diagnostics v_n = row_count;
    v_total := v_total + v_n;
  end loop;
  perform set_config('app.audit_purge', '', true);
  return v_total;
end
$$;


--
-- Name: audit_wanted(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.audit_wanted() RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
begin
  return current_setting('app.key_id', true) <> '' or current_setting('app.actor', true) <> ''
    or (pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_has_role(session_user, 'billing_owner_probe', 'MEMBER'));
end
$$;


--
-- Name: charge_key_tokens(text, integer, jsonb); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.charge_key_tokens(p_key_id text, p_n integer, p_limits jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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


--
-- Name: current_operator_user_id(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.current_operator_user_id() RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select s.user_id from billing_private.operator_sessions s
  where s.community_id = billing.current_community_id() and s.id = nullif(current_setting('app.key_id', true), '')
$$;


--
-- Name: enqueue_connection_deliveries(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.enqueue_connection_deliveries(p_community_id text, p_platform_config_id text, p_platform text DEFAULT NULL::text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_c text[];
  v_m text[];
begin
  select array_agg(x.community_id), array_agg(x.member_id) into v_c, v_m
  from (select distinct me.community_id, me.member_id
        from billing.member_entitlements me
        cross join lateral jsonb_array_elements(me.benefits) b
        join billing.platform_configs pc on pc.community_id = me.community_id and pc.id = b->>'platform_config_id'
        where me.status = 'active'
          and (p_platform_config_id is null or (me.community_id = p_community_id and pc.id = p_platform_config_id))
          and (p_platform is null or (pc.platform = p_platform and not exists (select 1 from billing_private.platform_secrets s
               where s.community_id = pc.community_id and s.platform_config_id = pc.id and s.name = 'bot_token')))) x;
  perform billing_private.enqueue_deliveries(v_c, v_m);
  return coalesce(cardinality(v_m), 0);
end
$$;


--
-- Name: enqueue_deliveries(text[], text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.enqueue_deliveries(p_communities text[], p_members text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_specs graphile_worker.job_spec[];
  v_added text[];
begin
  if coalesce(cardinality(p_members), 0) = 0 then
    return;
  end if;
  v_specs := array(
    select row('platform_deliveries__apply', json_build_object('community_id', x.c, 'member_id', x.m), null, null,
      null, 'deliver:' || x.c || ':' || x.m, null, null)::graphile_worker.job_spec
    from (select distinct c, m from unnest(p_communities, p_members) as u(c, m)) x);
  for i in 1..5 loop
    select coalesce(array_agg(j.key), '{}') into v_added from graphile_worker.add_jobs(v_specs) j;
    v_specs := array(select s from unnest(v_specs) s where not (s.job_key = any (v_added)));
    exit when cardinality(v_specs) = 0;
  end loop;
end
$$;


--
-- Name: grant_create(text, text, timestamp with time zone, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.grant_create(p_member_id text, p_tier_id text, p_expires_at timestamp with time zone, p_note text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_g billing.grants;
begin
  perform 1 from billing.members m where m.community_id = billing.current_community_id() and m.id = p_member_id for update;
  if not found then
    perform billing.raise('BL404', 'No member ' || coalesce(p_member_id, '') || '.');
  end if;
  if not exists (select 1 from billing.tiers t where t.community_id = billing.current_community_id() and t.id = p_tier_id) then
    perform billing.raise('BL422', 'tier_id ' || coalesce(p_tier_id, '') || ' is not a tier of this community.', 'tier_id');
  end if;
  if p_expires_at is not null and p_expires_at <= billing.now() then
    perform billing.raise('BL422', 'expires_at must be in the future.', 'expires_at');
  end if;
  insert into billing.grants (community_id, member_id, tier_id, note, expires_at, created_at)
  values (billing.current_community_id(), p_member_id, p_tier_id, p_note, p_expires_at, billing.now())
  returning * into v_g;
  return billing.grant_json(v_g);
end
$$;


--
-- Name: grant_revoke(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.grant_revoke(p_member_id text, p_grant_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_g billing.grants;
begin
  update billing.grants g set revoked_at = coalesce(g.revoked_at, billing.now())
  where g.community_id = billing.current_community_id() and g.member_id = p_member_id and g.id = p_grant_id
  returning * into v_g;
  if v_g.id is null then
    perform billing.raise('BL404', 'No grant ' || coalesce(p_grant_id, '') || ' for member ' || coalesce(p_member_id, '') || '.');
  end if;
  return billing.grant_json(v_g);
end
$$;


--
-- Name: invoice_refund(text, bigint, boolean, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.invoice_refund(p_invoice_id text, p_amount bigint, p_revoke boolean, p_provider_ref text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  -- The invoice locked first: a dispute being recorded (which locks it too) is either
  -- seen here or waits for this refund.
  perform 1 from billing.invoices i where i.community_id = billing.current_community_id() and i.id = p_invoice_id for update;
  perform billing.invoice_refuse_disputed(p_invoice_id);
  return billing.invoice_record_refund(p_invoice_id, p_amount, p_revoke, p_provider_ref);
end
$$;


--
-- Name: json_mentions(jsonb, text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.json_mentions(p_value jsonb, p_secrets text[]) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
begin
  return exists (select 1 from jsonb_path_query(p_value, 'strict $.**') v
    where jsonb_typeof(v) = 'string' and lower(v #>> '{}') = any (p_secrets));
end
$_$;


--
-- Name: json_redact(jsonb, text[], text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.json_redact(p_value jsonb, p_secrets text[], p_member_id text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
declare
  v_out jsonb;
begin
  case jsonb_typeof(p_value)
  when 'object' then
    select coalesce(jsonb_object_agg(j.k, case
        when j.k in ('identities', 'external_subjects') and jsonb_typeof(j.v) = 'array' then
          coalesce((select jsonb_agg(billing_private.json_redact(x.e, p_secrets, p_member_id) order by x.o)
                    from jsonb_array_elements(j.v) with ordinality x(e, o)
                    where not billing_private.json_mentions(x.e, p_secrets)
                      and not (p_value->>'id' is not distinct from p_member_id)), '[]')
        when p_value->>'id' is not distinct from p_member_id and j.k in ('email', 'display_name') then 'null'::jsonb
        -- free text operators wrote about them (the member's note, a grant's)
        when j.k = 'note' and jsonb_typeof(j.v) = 'string' then 'null'::jsonb
        when p_value->>'id' is not distinct from p_member_id and j.k = 'tags' then '[]'::jsonb
        else billing_private.json_redact(j.v, p_secrets, p_member_id) end), '{}')
    into v_out from jsonb_each(p_value) j(k, v);
    return v_out;
  when 'array' then
    select coalesce(jsonb_agg(billing_private.json_redact(x.e, p_secrets, p_member_id) order by x.o), '[]')
    into v_out from jsonb_array_elements(p_value) with ordinality x(e, o);
    return v_out;
  when 'string' then
    return case when lower(p_value #>> '{}') = any (p_secrets) then 'null'::jsonb else p_value end;
  else
    return p_value;
  end case;
end
$$;


--
-- Name: lease_key_tokens(text, integer, jsonb, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.lease_key_tokens(p_key_hash text, p_n integer, p_limits jsonb, p_return integer DEFAULT 0) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_key_id text;
begin
  select k.id into v_key_id from billing_private.api_keys k
  where k.key_hash = p_key_hash and k.revoked_at is null;
  if v_key_id is null then
    return jsonb_build_object('key', false);
  end if;
  return billing_private.take_tokens('key:' || v_key_id,
    coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60),
    greatest(1, least(p_n, 100)), greatest(0, least(p_return, 100))) || jsonb_build_object('key', true);
end
$$;


--
-- Name: ledger_deliveries(text[], text[], jsonb[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.ledger_deliveries(p_communities text[], p_members text[], p_benefits jsonb[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_c text[];
  v_m text[];
  v_able text[];
begin
  select array_agg(pc.id) into v_able from billing.platform_configs pc
  where pc.community_id = any (p_communities)
    and (exists (select 1 from billing_private.platform_secrets s
                 where s.community_id = pc.community_id and s.platform_config_id = pc.id and s.name = 'bot_token')
         or exists (select 1 from billing_private.platform_defaults d where d.platform = pc.platform and d.has_bot_token));
  if v_able is null then
    return;
  end if;
  select array_agg(x.c), array_agg(x.m) into v_c, v_m
  from unnest(p_communities, p_members, p_benefits) x(c, m, b)
  where exists (select 1 from jsonb_array_elements(x.b) e where e->>'platform_config_id' = any (v_able));
  perform billing_private.enqueue_deliveries(v_c, v_m);
end
$$;


--
-- Name: mail_claim(text, text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.mail_claim(p_community_id text, p_ids text[]) RETURNS TABLE(id text, member_id text, template text, to_address text, subject text, text_body text, html_body text, attempts integer, sender_name text, reply_to text, community_name text, unsubscribable boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  update billing.mail_messages mm set status = 'skipped', claimed_at = null
  where mm.community_id = p_community_id and mm.id = any (p_ids)
    and mm.id in (select x.id from billing.mail_messages x
      join billing.communities co on co.id = x.community_id
      where x.community_id = p_community_id and x.id = any (p_ids) and x.unsubscribable
        and (x.status = 'queued' or (x.status = 'sending' and x.claimed_at < now() - interval '10 minutes'))
        and billing.mail_optional(co, x.template)
        and exists (select 1 from billing.mail_unsubscribes u
          where u.community_id = x.community_id and u.member_id = x.member_id and u.template = x.template)
      for update of x skip locked);
  return query
  with claimed as (
    update billing.mail_messages mm set status = 'sending', attempts = mm.attempts + 1, claimed_at = now()
    where mm.community_id = p_community_id and mm.id = any (p_ids)
      and mm.id in (select x.id from billing.mail_messages x
        where x.community_id = p_community_id and x.id = any (p_ids)
          and (x.status = 'queued' or (x.status = 'sending' and x.claimed_at < now() - interval '10 minutes'))
        for update skip locked)
    returning mm.*
  )
  select c2.id, c2.member_id, c2.template, c2.to_address, c2.subject, c2.text_body, c2.html_body, c2.attempts,
    coalesce(co.mail_sender_name, co.name), co.mail_reply_to, co.name, c2.unsubscribable
  from claimed c2 join billing.communities co on co.id = c2.community_id
  order by c2.id;
end
$$;


--
-- Name: mail_invoice_document(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.mail_invoice_document(p_community_id text, p_member_id text, p_invoice_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if not exists (select 1 from billing.invoices i
      join billing.members m on m.community_id = i.community_id and m.id = i.member_id and m.erased_at is null
      where i.community_id = p_community_id and i.id = p_invoice_id and i.member_id = p_member_id) then
    return null;
  end if;
  perform set_config('app.community_id', p_community_id, true);
  return billing_api.invoices_document(jsonb_build_object('id', p_invoice_id));
end
$$;


--
-- Name: mail_link_codes(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.mail_link_codes(p_community_id text, p_member_id text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
declare
  v_platform text;
  v_out jsonb := '[]';
  v_lc billing.link_codes;
  v_now timestamptz := billing.community_now(p_community_id);
begin
  for v_platform in select distinct pc.platform from billing.platform_configs pc
    where pc.community_id = p_community_id
      and not exists (select 1 from billing.member_identities i where i.community_id = p_community_id
        and i.member_id = p_member_id and i.platform = pc.platform)
    order by 1 loop
    select * into v_lc from billing.link_codes lc
    where lc.community_id = p_community_id and lc.member_id = p_member_id and lc.intended_platform = v_platform
      and lc.redeemed_at is null and lc.invalidated_at is null and lc.expires_at > v_now + interval '1 day'
    order by lc.expires_at desc limit 1;
    if v_lc.id is null then
      insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at)
      values (p_community_id, p_member_id, upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 10)),
        v_platform, v_now + interval '7 days')
      returning * into v_lc;
    end if;
    v_out := v_out || jsonb_build_object('platform', v_platform, 'code', v_lc.code, 'expires_at', billing.iso(v_lc.expires_at));
    v_lc := null;
  end loop;
  return v_out;
end
$$;


--
-- Name: mail_preference(text, text, text, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.mail_preference(p_community_id text, p_member_id text, p_template text, p_subscribe boolean DEFAULT NULL::boolean) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_c billing.communities;
  v_title text;
begin
  select c.* into v_c from billing.communities c
  where c.id = p_community_id and exists (select 1 from billing.members m where m.community_id = c.id and m.id = p_member_id
    and m.erased_at is null);
  select t.title into v_title from billing.mail_templates() t where t.template = p_template;
  if v_c.id is null or v_title is null then
    return null;
  end if;
  if p_subscribe is not null and billing.mail_optional(v_c, p_template) then
    if p_subscribe then
      delete from billing.mail_unsubscribes u
      where u.community_id = p_community_id and u.member_id = p_member_id and u.template = p_template;
    else
      insert into billing.mail_unsubscribes (community_id, member_id, template) values (p_community_id, p_member_id, p_template)
      on conflict do nothing;
    end if;
  end if;
  return jsonb_build_object('community_name', v_c.name, 'title', v_title, 'optional', billing.mail_optional(v_c, p_template),
    'unsubscribed', exists (select 1 from billing.mail_unsubscribes u
      where u.community_id = p_community_id and u.member_id = p_member_id and u.template = p_template));
end
$$;


--
-- Name: mail_record(text, text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.mail_record(p_community_id text, p_id text, p_status text, p_error text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if p_status not in ('sent', 'kept', 'failed', 'queued') then
    raise exception 'mail_record: bad status %', p_status;
  end if;
  update billing.mail_messages mm set status = p_status, last_error = left(p_error, 500), claimed_at = null,
    sent_at = case when p_status = 'sent' then now() else mm.sent_at end
  where mm.community_id = p_community_id and mm.id = p_id;
end
$$;


--
-- Name: mail_reminders(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.mail_reminders(p_community_id text DEFAULT NULL::text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_payloads json[];
  v_made integer;
  v_lo timestamptz;
  v_hi timestamptz;
begin
  select now() + min(c.clock_offset), now() + max(c.clock_offset) + interval '7 days' into v_lo, v_hi
  from billing.communities c where p_community_id is null or c.id = p_community_id;
  with due as (
    select s.community_id, s.member_id, k.template,
      k.template || ':' || s.id || ':' || billing.iso(s.current_period_end) as ref,
      jsonb_build_object('subscription', billing.subscription_json(s)) as data
    from billing.subscriptions s
    join billing.communities c on c.id = s.community_id
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    cross join lateral (select case
      when s.status = 'trialing' and s.trial_end is not null and s.cancel_at is null
        and s.current_period_end <= now() + c.clock_offset + interval '3 days' then 'trial_ending'
      when s.status = 'active' and p.interval = 'year' and s.cancel_at is null then 'renewal_upcoming' end as template) k
    where s.status in ('active', 'trialing', 'past_due', 'cancelling')
      and s.current_period_end > v_lo and s.current_period_end <= v_hi
      and (p_community_id is null or s.community_id = p_community_id)
      and s.current_period_end > now() + c.clock_offset
      and s.current_period_end <= now() + c.clock_offset + interval '7 days'
      and k.template is not null
      and not (k.template = any (c.mail_templates_off))
      and not exists (select 1 from billing.mail_messages mm where mm.community_id = s.community_id
        and mm.ref = k.template || ':' || s.id || ':' || billing.iso(s.current_period_end) and mm.template = k.template)
  ), price_due as (
    -- a price migration's notice, once per subscription and migration
    select s.community_id, s.member_id, 'price_change' as template, 'price_change:' || s.id || ':' || s.price_migration_id as ref,
      jsonb_build_object('subscription', billing.subscription_json(s), 'migration', jsonb_build_object(
        'price_cents', pm.price_cents, 'currency', pm.currency, 'notice_ends_at', billing.iso(pm.notice_ends_at))) as data
    from billing.subscriptions s
    join billing.price_migrations pm on pm.community_id = s.community_id and pm.id = s.price_migration_id
    join billing.communities c on c.id = s.community_id
    where s.price_migration_id is not null and s.status <> 'cancelled'
      and (p_community_id is null or s.community_id = p_community_id)
      and not ('price_change' = any (c.mail_templates_off))
      and not exists (select 1 from billing.mail_messages mm where mm.community_id = s.community_id
        and mm.ref = 'price_change:' || s.id || ':' || s.price_migration_id and mm.template = 'price_change')
  ), made as (
    insert into billing.mail_messages (community_id, member_id, template, ref, to_address, subject, text_body, html_body, unsubscribable)
    select d.community_id, d.member_id, d.template, d.ref, m.email, r.msg->>'subject', r.msg->>'text', r.msg->>'html',
      billing.mail_optional(c, d.template)
    from (select * from due union all select * from price_due) d
    join billing.members m on m.community_id = d.community_id and m.id = d.member_id and m.email is not null
    join billing.communities c on c.id = d.community_id
    cross join lateral (select billing.mail_render(c.name, d.template,
      d.data || jsonb_build_object('unsubscribe', billing.mail_optional(c, d.template))) as msg) r
    order by d.community_id, d.ref
    on conflict (community_id, ref, template) do nothing
    returning community_id, id
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids)), coalesce(sum(cardinality(ids)), 0)
  into v_payloads, v_made
  from (select community_id, array_agg(id order by id) as ids from made group by community_id) g;
  perform billing_private.add_job('mail_messages__send', v_payloads);
  return v_made;
end
$$;


--
-- Name: member_deliveries_enqueue(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.member_deliveries_enqueue(p_member_id text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_cid text := billing.current_community_id();
begin
  if v_cid is null or not exists (select 1 from billing.members m where m.community_id = v_cid and m.id = p_member_id) then
    return false;
  end if;
  perform billing_private.enqueue_deliveries(array[v_cid], array[p_member_id]);
  return true;
end
$$;


--
-- Name: member_entitlement_event_ids(text, text, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.member_entitlement_event_ids(p_member text, p_cursor text, p_limit integer) RETURNS text[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select coalesce(array_agg(e.id order by e.id desc), '{}')
  from (select e.id from billing.events e
        where e.community_id = billing.current_community_id()
          and e.type in ('member.entitlement.granted', 'member.entitlement.updated', 'member.entitlement.revoked')
          and (e.data->'member'->>'id') = p_member
          and e.id < coalesce(p_cursor, chr(1114111))
        order by e.id desc limit p_limit) e
$$;


--
-- Name: member_erase(text, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.member_erase(p_member_id text, p_provider_calls boolean) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_c text := billing.current_community_id();
  v_m billing.members;
  v_now timestamptz;
  v_secrets text[];
  v_named text := '"' || p_member_id || '"';
  v_sub billing.subscriptions;
  v_provider jsonb := '[]';
  v_subs integer := 0;
  v_grants integer := 0;
  v_purchases integer := 0;
  v_checkouts integer := 0;
  v_invoices integer := 0;
  v_events text[];
  v_redacted integer := 0;
  v_codes jsonb;
  v_id text;
begin
  if v_c is null then
    perform billing.raise('BL400', 'No community: erase a member as one community.');
  end if;
  select * into v_m from billing.members m where m.community_id = v_c and m.id = p_member_id for update;
  if v_m.id is null then
    perform billing.raise('BL404', 'No member ' || p_member_id || '.');
  end if;
  -- The discount codes whose member list names one of the member's identities: the
  -- operator's catalog (and its file), which an erasure does not edit.
  select coalesce(jsonb_agg(d.id::text order by d.id), '[]') into v_codes from billing.discount_codes d
  where d.community_id = v_c and exists (select 1 from jsonb_array_elements(d.members) dm
    join billing.member_identities i on i.community_id = v_c and i.member_id = p_member_id
      and i.platform = dm->>'platform' and i.platform_uid = dm->>'platform_uid');
  if v_m.erased_at is not null then
    return jsonb_build_object('erasure', jsonb_build_object('member_id', v_m.id, 'erased_at', billing.iso(v_m.erased_at),
      'changed', false, 'subscriptions_cancelled', 0, 'grants_revoked', 0, 'purchases_ended', 0, 'checkouts_expired', 0,
      'invoices_kept', (select count(*) from billing.invoices i where i.community_id = v_c and i.member_id = p_member_id),
      'events_redacted', 0, 'discount_codes_naming_member', v_codes), 'provider', '[]'::jsonb);
  end if;
  if not p_provider_calls and exists (select 1 from billing.subscriptions s where s.community_id = v_c
      and s.member_id = p_member_id and s.status <> 'cancelled' and s.provider <> 'sandbox') then
    perform billing.raise('BL409', 'Member ' || p_member_id || ' has a live subscription at its payment provider: '
      || 'erase them through the API or the dashboard, which cancel it there too.');
  end if;
  v_now := billing.now();

  -- What to look for in copies (events, idempotent answers): every personal value the
  -- member's rows hold, lowercase.
  select coalesce(array_agg(distinct lower(v)) filter (where v is not null and btrim(v) <> ''), '{}') into v_secrets
  from (
    select v_m.email union all select v_m.billing_name union all select v_m.billing_tax_id union all select v_m.note
    union all select unnest(v_m.billing_address_lines)
    union all select i.platform_uid from billing.member_identities i where i.community_id = v_c and i.member_id = p_member_id
    union all select i.username from billing.member_identities i where i.community_id = v_c and i.member_id = p_member_id
    union all select x.external_user_id from billing.external_subjects x where x.community_id = v_c and x.member_id = p_member_id
    union all select cs.customer_email from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select cs.customer_name from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select cs.customer_tax_id from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select unnest(cs.customer_address_lines) from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select mm.to_address from billing.mail_messages mm where mm.community_id = v_c and mm.member_id = p_member_id
  ) x(v);

  -- The member's own columns emptied, in the statement that marks it erased (from then
  -- on _090_erased refuses them any personal data, and the people triggers of the
  -- identities deleted below find nothing to name it by).
  update billing.members m set erased_at = v_now, email = null, billing_name = null, billing_address_lines = null,
    billing_country = null, billing_tax_id = null, note = null, tags = '{}', updated_at = now()
  where m.community_id = v_c and m.id = p_member_id;

  -- Access ends now: subscriptions cancelled (no refund: what was paid for stays paid),
  -- grants revoked, purchases' access ended, open checkouts expired. Each change goes
  -- through its table's triggers: events, the ledger's revocations, the platforms' job.
  for v_sub in select * from billing.subscriptions s
      where s.community_id = v_c and s.member_id = p_member_id and s.status <> 'cancelled' order by s.id for update loop
    if v_sub.provider <> 'sandbox' then
      v_provider := v_provider || jsonb_build_array(billing.subscription_provider(v_sub) || '{"at": "now"}');
    end if;
    perform billing_private.subscription_cancel_now(v_sub.id);
    v_subs := v_subs + 1;
  end loop;
  update billing.grants g set revoked_at = v_now
  where g.community_id = v_c and g.member_id = p_member_id and g.revoked_at is null
    and billing.source_grants_access('grant', g.community_id, g.id, 'active', g.expires_at, v_now);
  get diagnostics v_grants = row_count;
  update billing.purchases p set access_expires_at = v_now
  where p.community_id = v_c and p.member_id = p_member_id
    and billing.source_grants_access('purchase', p.community_id, p.id, p.status, p.access_expires_at, v_now);
  get diagnostics v_purchases = row_count;
  for v_id in select cs.id from billing.checkout_sessions cs
      where cs.community_id = v_c and cs.member_id = p_member_id and cs.status = 'open' order by cs.id loop
    if billing.expire_checkout(v_id) then
      v_checkouts := v_checkouts + 1;
    end if;
  end loop;

  -- Who they are: identities and external subjects go (member.updated, and the ledger
  -- drops them from its snapshots).
  delete from billing.member_identities i where i.community_id = v_c and i.member_id = p_member_id;
  delete from billing.external_subjects x where x.community_id = v_c and x.member_id = p_member_id;
  -- The ledger rows' snapshots ({identities, external_subjects}) of who they were: the
  -- refresh updates an active row's, never an inactive one's, so the erasure rewrites
  -- them itself, as it rewrites the events (the one write of the ledger outside
  -- billing.ledger_refresh_each: no status, source or benefit changes).
  update billing.member_entitlements me set identities = billing_private.json_redact(me.identities, v_secrets, p_member_id)
  where me.community_id = v_c and me.member_id = p_member_id
    and me.identities is distinct from billing_private.json_redact(me.identities, v_secrets, p_member_id);
  update billing.grants g set note = null
  where g.community_id = v_c and g.member_id = p_member_id and g.note is not null;
  update billing.checkout_sessions cs set customer_email = null, customer_name = null, customer_address_lines = null,
    customer_country = null, customer_tax_id = null
  where cs.community_id = v_c and cs.member_id = p_member_id
    and num_nonnulls(cs.customer_email, cs.customer_name, cs.customer_address_lines, cs.customer_country, cs.customer_tax_id) > 0;

  -- What reaches them: mail keeps its record (template, subject, status, times) without
  -- address or body, and is never sent; their choices, codes and sessions go, so no
  -- signed link of theirs opens anything (the links' doors also check erased_at).
  update billing.mail_messages mm set to_address = '', text_body = '', html_body = '', last_error = null,
    status = case when mm.status in ('queued', 'sending') then 'skipped' else mm.status end, claimed_at = null
  where mm.community_id = v_c and mm.member_id = p_member_id;
  delete from billing.mail_unsubscribes u where u.community_id = v_c and u.member_id = p_member_id;
  delete from billing.link_codes lc where lc.community_id = v_c and lc.member_id = p_member_id;
  delete from billing_private.member_portal_sessions ps where ps.community_id = v_c and ps.member_id = p_member_id;
  delete from billing.portal_sessions ps where ps.community_id = v_c and ps.member_id = p_member_id;

  -- Invoices stay, with what the law requires of them: a business buyer's (a tax id, or
  -- reverse charged) keep name, address, country and tax id; a consumer's keep the
  -- country their tax followed, not their name and address.
  update billing.invoices i set buyer_name = null, buyer_address_lines = null
  where i.community_id = v_c and i.member_id = p_member_id and i.buyer_tax_id is null and not i.reverse_charge
    and (i.buyer_name is not null or i.buyer_address_lines is not null);
  get diagnostics v_invoices = row_count;

  perform billing.emit_event(v_c, 'member.erased', jsonb_build_object(
    'member', billing.member_json(v_c, p_member_id), 'erased_at', billing.iso(v_now)));

  -- Copies: the events naming the member (those this erasure wrote too, before any
  -- webhook reads them), their webhook attempts' excerpts of the receiver's answer, and
  -- the answers kept for Idempotency-Key replays.
  with named as (
    select e.id, billing_private.json_redact(e.data, v_secrets, p_member_id) as data from billing.events e
    where e.community_id = v_c and strpos(e.data::text, v_named) > 0
  ), changed as (
    update billing.events e set data = n.data from named n
    where e.community_id = v_c and e.id = n.id and e.data is distinct from n.data
    returning e.id
  )
  select count(*) into v_redacted from changed;
  update billing.idempotency_keys k set response_body = billing_private.json_redact(k.response_body, v_secrets, p_member_id)
  where k.community_id = v_c and strpos(k.response_body::text, v_named) > 0
    and k.response_body is distinct from billing_private.json_redact(k.response_body, v_secrets, p_member_id);
  select coalesce(array_agg(e.id), '{}') into v_events from billing.events e
  where e.community_id = v_c and strpos(e.data::text, v_named) > 0;
  update billing.webhook_attempts a set response_excerpt = null
  from billing.webhook_deliveries d
  where d.community_id = v_c and d.event_id = any (v_events) and a.community_id = v_c and a.delivery_id = d.id
    and a.response_excerpt is not null;

  return jsonb_build_object('erasure', jsonb_build_object('member_id', p_member_id, 'erased_at', billing.iso(v_now),
    'changed', true, 'subscriptions_cancelled', v_subs, 'grants_revoked', v_grants, 'purchases_ended', v_purchases,
    'checkouts_expired', v_checkouts,
    'invoices_kept', (select count(*) from billing.invoices i where i.community_id = v_c and i.member_id = p_member_id),
    'events_redacted', v_redacted, 'discount_codes_naming_member', v_codes), 'provider', v_provider);
end
$$;


--
-- Name: member_portal_info(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.member_portal_info(p_token_sha256 text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select jsonb_build_object('community_id', m.community_id, 'community_name', c.name, 'member_id', m.member_id,
    'provider', c.payment_provider, 'return_url', ps.return_url, 'expires_at', billing.iso(m.expires_at),
    'portal_session_id', m.portal_session_id)
  from billing_private.member_portal_sessions m
  join billing.communities c on c.id = m.community_id
  join billing.portal_sessions ps on ps.community_id = m.community_id and ps.id = m.portal_session_id
  where m.token_sha256 = p_token_sha256 and m.expires_at > now()
$$;


--
-- Name: member_portal_open(text, bytea, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.member_portal_open(p_portal_id text, p_access_sha256 bytea, p_token_sha256 text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_ps billing.portal_sessions;
begin
  select * into v_ps from billing.portal_sessions ps where ps.id = p_portal_id and ps.access_token_sha256 = p_access_sha256
  for update;
  if v_ps.id is null then
    return null;
  elsif exists (select 1 from billing_private.member_portal_sessions m
                where m.community_id = v_ps.community_id and m.portal_session_id = v_ps.id) then
    return jsonb_build_object('status', 'used');
  elsif v_ps.expires_at <= billing.community_now(v_ps.community_id) then
    return jsonb_build_object('status', 'expired');
  end if;
  insert into billing_private.member_portal_sessions (community_id, token_sha256, portal_session_id, member_id, expires_at)
  values (v_ps.community_id, p_token_sha256, v_ps.id, v_ps.member_id, now() + interval '1 hour');
  return jsonb_build_object('status', 'open', 'community_id', v_ps.community_id, 'member_id', v_ps.member_id);
end
$$;


--
-- Name: member_portal_scopes(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.member_portal_scopes() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ select array['subscriptions:read', 'subscriptions:write', 'purchases:read', 'invoices:read', 'plans:read'] $$;


--
-- Name: members_search(jsonb, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.members_search(p_args jsonb, p_limit integer) RETURNS text[]
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v_community text := billing.current_community_id();
  v_member text := billing.current_member_id();
  v_cursor text := coalesce(p_args->>'cursor', chr(1114111));
  v_pattern text;
  v_where text := 'true';
  v_ids text[];
  v_edge text;
  v_seen integer;
  v_more text[];
begin
  if v_community is null then
    return '{}';
  end if;
  if p_args->>'q' is not null then
    v_pattern := '%' || replace(replace(replace(lower(p_args->>'q'), '\', '\\'), '%', '\%'), '_', '\_') || '%';
    v_where := v_where || ' and m.search_text like $4';
  end if;
  if p_args->>'email' is not null then v_where := v_where || ' and lower(m.email) = lower($5->>''email'')'; end if;
  if p_args->>'tag' is not null then v_where := v_where || ' and m.tags @> array[$5->>''tag'']'; end if;
  if p_args->>'created_after' is not null then
    v_where := v_where || ' and m.created_at >= ($5->>''created_after'')::timestamptz';
  end if;
  if p_args->>'created_before' is not null then
    v_where := v_where || ' and m.created_at < ($5->>''created_before'')::timestamptz';
  end if;
  if coalesce(p_args->>'status', p_args->>'tier_id', p_args->>'plan_id') is not null then
    v_where := v_where || ' and exists (select 1 from billing.subscriptions s'
      || ' where s.community_id = m.community_id and s.member_id = m.id'
      || case when p_args->>'status' is not null then ' and s.status = $5->>''status''' else '' end
      || case when p_args->>'plan_id' is not null then ' and s.plan_id = $5->>''plan_id''' else '' end
      || case when p_args->>'tier_id' is not null then ' and s.plan_id in (select p.id from billing.plans p'
           || ' where p.community_id = s.community_id and p.tier_id = $5->>''tier_id'')' else '' end
      || ')';
  end if;
  -- 1. The newest 2,000 members after the cursor, in id order, until the page is full.
  execute 'select array(select m.id
      from (select * from billing.members m
            where m.community_id = $1 and m.id < $2 and ($3::text is null or m.id = $3)
            order by m.id desc limit 2000) m
      where ' || v_where || ' order by m.id desc limit $6)'
    into v_ids using v_community, v_cursor, v_member, v_pattern, p_args, p_limit;
  if cardinality(v_ids) >= p_limit then
    return v_ids;
  end if;
  select min(w.id), count(*) into v_edge, v_seen
  from (select m.id from billing.members m
        where m.community_id = v_community and m.id < v_cursor and (v_member is null or m.id = v_member)
        order by m.id desc limit 2000) w;
  if v_seen < 2000 then
    return v_ids; -- no older member
  end if;
  -- 2. Every match older than those, by index; the newest of them.
  execute 'with hits as materialized (
      select m.id from billing.members m
      where m.community_id = $1 and m.id < $2 and ($3::text is null or m.id = $3) and ' || v_where || ')
    select coalesce(array_agg(h.id order by h.id desc), ''{}'') from (select id from hits order by id desc limit $6) h'
    into v_more using v_community, v_edge, v_member, v_pattern, p_args, p_limit - cardinality(v_ids);
  return v_ids || v_more;
end
$_$;


--
-- Name: number_backfill(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.number_backfill() RETURNS void
    LANGUAGE plpgsql
    AS $$
begin
  with todo as (
    select i.community_id, i.id,
      row_number() over (partition by i.community_id, billing_private.number_series(i.community_id, i.created_at)
                         order by i.created_at, i.id) as k,
      billing_private.number_series(i.community_id, i.created_at) as series
    from billing.invoices i
    where i.number is null and i.status <> 'draft'
  ), numbered as (
    select t.community_id, t.id, t.series, coalesce(c.last_number, 0) + t.k as n
    from todo t
    left join billing_private.number_counters c on c.community_id = t.community_id and c.kind = 'invoice' and c.series = t.series
  ), counters as (
    insert into billing_private.number_counters as c (community_id, kind, series, last_number)
    select n.community_id, 'invoice', n.series, max(n.n) from numbered n group by n.community_id, n.series
    on conflict (community_id, kind, series) do update set last_number = excluded.last_number
  )
  update billing.invoices i set number = billing_private.number_text(n.series, n.n)
  from numbered n where i.community_id = n.community_id and i.id = n.id;

  with todo as (
    select r.community_id, r.id, r.invoice_id, r.amount_cents, r.created_at,
      row_number() over (partition by r.community_id, 'CN-' || billing_private.number_series(r.community_id, r.created_at)
                         order by r.created_at, r.id) as k,
      'CN-' || billing_private.number_series(r.community_id, r.created_at) as series
    from billing.refunds r
    where not exists (select 1 from billing.credit_notes cn where cn.community_id = r.community_id and cn.refund_id = r.id)
  ), numbered as (
    select t.*, coalesce(c.last_number, 0) + t.k as n
    from todo t
    left join billing_private.number_counters c on c.community_id = t.community_id and c.kind = 'credit_note' and c.series = t.series
  ), counters as (
    insert into billing_private.number_counters as c (community_id, kind, series, last_number)
    select n.community_id, 'credit_note', n.series, max(n.n) from numbered n group by n.community_id, n.series
    on conflict (community_id, kind, series) do update set last_number = excluded.last_number
  )
  insert into billing.credit_notes (community_id, invoice_id, refund_id, number, amount_cents, currency, created_at)
  select n.community_id, n.invoice_id, n.id, billing_private.number_text(n.series, n.n), n.amount_cents, i.currency, n.created_at
  from numbered n join billing.invoices i on i.community_id = n.community_id and i.id = n.invoice_id
  order by n.community_id, n.created_at, n.id;

  update billing.invoices i set credit_notes = x.notes
  from (select cn.community_id, cn.invoice_id, jsonb_agg(billing.credit_note_json(cn) order by cn.created_at, cn.id) as notes
        from billing.credit_notes cn group by cn.community_id, cn.invoice_id) x
  where i.community_id = x.community_id and i.id = x.invoice_id and i.credit_notes is distinct from x.notes;
end
$$;


--
-- Name: number_next(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.number_next(p_community text, p_kind text, p_series text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
declare
  v_n bigint;
begin
  insert into billing_private.number_counters as k (community_id, kind, series, last_number)
  values (p_community, p_kind, p_series, 1)
  on conflict (community_id, kind, series) do update set last_number = k.last_number + 1
  returning k.last_number into v_n;
  return v_n;
end
$$;


--
-- Name: number_series(text, timestamp with time zone); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.number_series(p_community text, p_at timestamp with time zone) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
declare
  v_series text;
begin
  select c.invoice_series into v_series from billing.communities c where c.id = p_community;
  return coalesce(v_series, to_char(p_at at time zone 'UTC', 'YYYY'));
end
$$;


--
-- Name: number_text(text, bigint); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.number_text(p_series text, p_n bigint) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  select p_series || '-' || lpad(p_n::text, greatest(6, length(p_n::text)), '0')
$$;


--
-- Name: op_dispatch(text, jsonb); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.op_dispatch(p_op text, p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
begin
  if p_args ? 'cursor_list' then
    perform set_config('app.cursor_list', p_args->>'cursor_list', true),
      set_config('app.cursor_filters', p_args->>'cursor_filters', true);
  end if;
  case p_op
    when 'analytics_overview' then return billing_api.analytics_overview(p_args);
    when 'analytics_series' then return billing_api.analytics_series(p_args);
    when 'analytics_summary' then return billing_api.analytics_summary(p_args);
    when 'api_keys_create' then return billing_api.api_keys_create(p_args);
    when 'api_keys_list' then return billing_api.api_keys_list(p_args);
    when 'api_keys_revoke' then return billing_api.api_keys_revoke(p_args);
    when 'audit_log_list' then return billing_api.audit_log_list(p_args);
    when 'catalog_file' then return billing_api.catalog_file(p_args);
    when 'checkout_create' then return billing_api.checkout_create(p_args);
    when 'checkout_set_provider' then return billing_api.checkout_set_provider(p_args);
    when 'discounts_list' then return billing_api.discounts_list(p_args);
    when 'entitlements_check' then return billing_api.entitlements_check(p_args);
    when 'events_get' then return billing_api.events_get(p_args);
    when 'events_list' then return billing_api.events_list(p_args);
    when 'external_subjects_attach' then return billing_api.external_subjects_attach(p_args);
    when 'grants_create' then return billing_api.grants_create(p_args);
    when 'grants_list' then return billing_api.grants_list(p_args);
    when 'grants_revoke' then return billing_api.grants_revoke(p_args);
    when 'invoice_refund' then return billing_api.invoice_refund(p_args);
    when 'invoice_refund_prepare' then return billing_api.invoice_refund_prepare(p_args);
    when 'invoices_document' then return billing_api.invoices_document(p_args);
    when 'invoices_get' then return billing_api.invoices_get(p_args);
    when 'invoices_list' then return billing_api.invoices_list(p_args);
    when 'link_code_create' then return billing_api.link_code_create(p_args);
    when 'link_code_redeem' then return billing_api.link_code_redeem(p_args);
    when 'mail_messages_get' then return billing_api.mail_messages_get(p_args);
    when 'mail_messages_list' then return billing_api.mail_messages_list(p_args);
    when 'mail_template_set' then return billing_api.mail_template_set(p_args);
    when 'mail_templates_list' then return billing_api.mail_templates_list(p_args);
    when 'member_deliveries_retry' then return billing_api.member_deliveries_retry(p_args);
    when 'member_entitlement_history' then return billing_api.member_entitlement_history(p_args);
    when 'member_entitlements_list' then return billing_api.member_entitlements_list(p_args);
    when 'member_erase' then return billing_api.member_erase(p_args);
    when 'member_export' then return billing_api.member_export(p_args);
    when 'member_portal_benefits' then return billing_api.member_portal_benefits(p_args);
    when 'members_get' then return billing_api.members_get(p_args);
    when 'members_list' then return billing_api.members_list(p_args);
    when 'members_lookup' then return billing_api.members_lookup(p_args);
    when 'members_update' then return billing_api.members_update(p_args);
    when 'operator_policy_get' then return billing_api.operator_policy_get(p_args);
    when 'operator_policy_update' then return billing_api.operator_policy_update(p_args);
    when 'operator_sessions_end' then return billing_api.operator_sessions_end(p_args);
    when 'operator_sessions_list' then return billing_api.operator_sessions_list(p_args);
    when 'operators_invite' then return billing_api.operators_invite(p_args);
    when 'operators_list' then return billing_api.operators_list(p_args);
    when 'operators_remove' then return billing_api.operators_remove(p_args);
    when 'operators_reset_second_factor' then return billing_api.operators_reset_second_factor(p_args);
    when 'operators_sign_out' then return billing_api.operators_sign_out(p_args);
    when 'operators_update' then return billing_api.operators_update(p_args);
    when 'plans_get' then return billing_api.plans_get(p_args);
    when 'plans_list' then return billing_api.plans_list(p_args);
    when 'platform_actions_list' then return billing_api.platform_actions_list(p_args);
    when 'platform_config_save' then return billing_api.platform_config_save(p_args);
    when 'platform_configs_list' then return billing_api.platform_configs_list(p_args);
    when 'platform_connections_health' then return billing_api.platform_connections_health(p_args);
    when 'portal_session_create' then return billing_api.portal_session_create(p_args);
    when 'purchases_get' then return billing_api.purchases_get(p_args);
    when 'purchases_list' then return billing_api.purchases_list(p_args);
    when 'subscription_cancel' then return billing_api.subscription_cancel(p_args);
    when 'subscription_cancel_scheduled_switch' then return billing_api.subscription_cancel_scheduled_switch(p_args);
    when 'subscription_card_get' then return billing_api.subscription_card_get(p_args);
    when 'subscription_card_set' then return billing_api.subscription_card_set(p_args);
    when 'subscription_pause' then return billing_api.subscription_pause(p_args);
    when 'subscription_reactivate' then return billing_api.subscription_reactivate(p_args);
    when 'subscription_resume' then return billing_api.subscription_resume(p_args);
    when 'subscription_switch' then return billing_api.subscription_switch(p_args);
    when 'subscription_switch_options' then return billing_api.subscription_switch_options(p_args);
    when 'subscription_switch_preview' then return billing_api.subscription_switch_preview(p_args);
    when 'subscriptions_get' then return billing_api.subscriptions_get(p_args);
    when 'subscriptions_list' then return billing_api.subscriptions_list(p_args);
    when 'tax_settings_get' then return billing_api.tax_settings_get(p_args);
    when 'webhook_deliveries_list' then return billing_api.webhook_deliveries_list(p_args);
    when 'webhook_deliveries_redeliver' then return billing_api.webhook_deliveries_redeliver(p_args);
    when 'webhook_endpoints_create' then return billing_api.webhook_endpoints_create(p_args);
    when 'webhook_endpoints_delete' then return billing_api.webhook_endpoints_delete(p_args);
    when 'webhook_endpoints_get' then return billing_api.webhook_endpoints_get(p_args);
    when 'webhook_endpoints_list' then return billing_api.webhook_endpoints_list(p_args);
    when 'webhook_endpoints_rotate_secret' then return billing_api.webhook_endpoints_rotate_secret(p_args);
    when 'webhook_endpoints_update' then return billing_api.webhook_endpoints_update(p_args);
    else
      return billing_private.op_dispatch_dynamic(p_op, p_args);
  end case;
end
$$;


--
-- Name: op_dispatch_dynamic(text, jsonb); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.op_dispatch_dynamic(p_op text, p_args jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $_$
declare
  v_out jsonb;
begin
  execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
  return v_out;
end
$_$;


--
-- Name: operator_address_shown(text, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_address_shown(p_ip text, p_full boolean) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v text := regexp_replace(p_ip, '^::ffff:(\d+\.\d+\.\d+\.\d+)$', '\1');
begin
  if p_ip is null then
    return null;
  elsif p_full then
    return v;
  elsif v ~ '^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$' then
    return regexp_replace(v, '\.\d+$', '.x');
  end if;
  return network(set_masklen(v::inet, 48))::text;
exception when others then
  return 'hidden';
end
$_$;


--
-- Name: operator_change_password(text, text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_change_password(p_token_sha256 text, p_current_derived text, p_password_hash text, p_ip text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v_session billing_private.operator_sessions;
  v_user billing_private.operator_users;
  v_bucket text;
  v_ended integer;
begin
  select s.* into v_session from billing_private.operator_sessions s
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now();
  select u.* into v_user from billing_private.operator_users u
  where u.community_id = v_session.community_id and u.id = v_session.user_id and u.disabled_at is null
  for update;
  if v_user.id is null or p_password_hash is null or p_password_hash not like 'scrypt$%' then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  end if;
  if v_user.password_hash is not null then
    v_bucket := 'signin-fail:' || v_user.email || ' ' || coalesce(p_ip, '?');
    if not (billing_private.take_token(v_bucket, 0.2, 5)->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'reason', 'rate_limited');
    elsif p_current_derived is null
       or substring(v_user.password_hash from '[^$]*$') <> encode(sha256(decode(p_current_derived, 'base64')), 'base64') then
      return jsonb_build_object('ok', false, 'reason', 'wrong_password');
    end if;
    perform billing_private.take_tokens(v_bucket, 0.2, 5, 0, 1);
  end if;
  -- The audit log (12-audit.sql) names the operator: this runs outside the request gate.
  perform set_config('app.community_id', v_user.community_id, true), set_config('app.key_id', v_session.id, true);
  update billing_private.operator_users u set password_hash = p_password_hash
  where u.community_id = v_user.community_id and u.id = v_user.id;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_user.community_id and s.user_id = v_user.id and s.id <> v_session.id and s.revoked_at is null;
  get diagnostics v_ended = row_count;
  return jsonb_build_object('ok', true, 'ended', v_ended);
end
$_$;


--
-- Name: operator_code_begin(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_code_begin(p_token_sha256 text, p_ip text, p_purpose text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_s billing_private.operator_sessions;
  v_f billing_private.operator_second_factors;
  v_r jsonb;
  v_pair text;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and u.disabled_at is null;
  if v_s.id is null or v_s.code_pending <> (p_purpose = 'sign_in') then
    return jsonb_build_object('allowed', false, 'reason', 'signed_out');
  end if;
  select f.* into v_f from billing_private.operator_second_factors f
  where f.community_id = v_s.community_id and f.user_id = v_s.user_id and (f.confirmed_at is null) = (p_purpose = 'confirm');
  if v_f.user_id is null then
    return jsonb_build_object('allowed', false, 'reason', 'no_factor');
  end if;
  v_r := billing_private.take_token('signin-ip:' || coalesce(p_ip, '?'), 10, 10);
  if (v_r->>'allowed')::boolean then
    v_pair := 'code-fail:' || v_s.user_id || ' ' || coalesce(p_ip, '?');
    v_r := billing_private.take_token(v_pair, 0.2, 5);
  end if;
  if (v_r->>'allowed')::boolean then
    v_r := billing_private.take_token('code-fail:' || v_s.user_id, 0.2, 10);
    if not (v_r->>'allowed')::boolean and exists (select 1 from billing_private.operator_known_addresses k
        where k.user_id = v_s.user_id and k.ip = p_ip and k.last_seen_at > now() - interval '90 days') then
      v_r := jsonb_build_object('allowed', true);
    elsif not (v_r->>'allowed')::boolean then
      perform billing_private.take_tokens(v_pair, 0.2, 5, 0, 1);
    end if;
  end if;
  if not (v_r->>'allowed')::boolean then
    return jsonb_build_object('allowed', false, 'reason', 'rate_limited', 'retry_after', (v_r->>'retry_after')::bigint);
  end if;
  return (select jsonb_build_object('allowed', true, 'community_id', v_s.community_id, 'user_id', v_s.user_id,
    'ciphertext', v_f.secret_ciphertext, 'email', u.email, 'community_name', c.name)
  from billing_private.operator_users u join billing.communities c on c.id = u.community_id
  where u.community_id = v_s.community_id and u.id = v_s.user_id);
end
$$;


--
-- Name: operator_code_succeeded(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_code_succeeded(p_user_id text, p_ip text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  delete from billing_private.rate_buckets b where b.bucket = 'code-fail:' || p_user_id || ' ' || coalesce(p_ip, '?');
  perform billing_private.take_tokens('code-fail:' || p_user_id, 0.2, 10, 0, 1);
end
$$;


--
-- Name: operator_community_id(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_community_id() RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ select o.community_id::text from billing_private.operator_roles o where o.role_name = session_user $$;


--
-- Name: operator_end_own_sessions(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_end_own_sessions(p_token_sha256 text, p_session_id text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_me billing_private.operator_sessions;
  v_ended integer;
begin
  select s.* into v_me from billing_private.operator_sessions s
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending;
  if v_me.id is null then
    return 0;
  end if;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_me.community_id and s.user_id = v_me.user_id and s.revoked_at is null
    and (p_session_id is null or s.id = p_session_id);
  get diagnostics v_ended = row_count;
  return v_ended;
end
$$;


--
-- Name: operator_fence(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_fence() RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_owner text := (select n.nspowner::regrole::text from pg_namespace n where n.nspname = 'billing');
  v_super boolean := (select r.rolsuper from pg_roles r where r.rolname = current_user);
  v_db_owner boolean := v_super or pg_has_role((select d.datdba from pg_database d where d.datname = current_database()), 'USAGE');
  v_keep text;
  r record;
begin
  v_keep := 'billing_api, billing_writer, billing_worker, billing_app, ' || v_owner;
  if v_db_owner then
    execute format('revoke temporary on database %I from public', current_database());
    execute format('grant temporary on database %I to %s', current_database(), v_keep);
  end if;
  if v_super then
    for r in select c.oid::regclass::text as rel from pg_class c
             where c.relnamespace = 'pg_catalog'::regnamespace and c.relkind = 'v'
               and (c.relname like 'pg\_stat\_%' or c.relname like 'pg\_statio\_%')
               and c.relname not in ('pg_stat_activity', 'pg_stat_ssl', 'pg_stat_gssapi') loop
      execute format('revoke select on %s from public', r.rel);
      execute format('grant select on %s to %s, pg_read_all_stats', r.rel, v_keep);
    end loop;
    for r in select p.oid::regprocedure::text as fn, p.proname::text as name from pg_proc p
             where p.pronamespace = 'pg_catalog'::regnamespace
               and ((p.proname like 'pg\_stat\_get\_%' and p.proname <> 'pg_stat_get_activity')
                 or p.proname in ('pg_stat_have_stats', 'pg_relation_size', 'pg_total_relation_size', 'pg_table_size',
                                  'pg_indexes_size', 'pg_database_size', 'pg_tablespace_size',
                                  'lo_create', 'lo_creat', 'lo_from_bytea', 'lo_import')) loop
      execute format('revoke execute on function %s from public', r.fn);
      if r.name not like 'lo\_%' then
        execute format('grant execute on function %s to %s, pg_read_all_stats', r.fn, v_keep);
      end if;
    end loop;
    revoke select on pg_catalog.pg_class from public;
    execute format('grant select (%s) on pg_catalog.pg_class to public',
      (select string_agg(quote_ident(a.attname), ', ' order by a.attnum) from pg_attribute a
       where a.attrelid = 'pg_catalog.pg_class'::regclass and a.attnum > 0 and not a.attisdropped
         and a.attname not in ('reltuples', 'relpages', 'relallvisible')));
    execute format('grant select on pg_catalog.pg_class to %s, pg_read_all_stats', v_keep);
  end if;
  return jsonb_build_object('gaps', to_jsonb(billing_private.operator_fence_gaps()));
end
$$;


--
-- Name: operator_fence_gaps(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_fence_gaps() RETURNS text[]
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select array(select g from (values
    ('pg_stat_user_tables', has_table_privilege('billing_operator', 'pg_catalog.pg_stat_user_tables', 'select')),
    ('pg_statio_user_tables', has_table_privilege('billing_operator', 'pg_catalog.pg_statio_user_tables', 'select')),
    ('pg_stat_database', has_table_privilege('billing_operator', 'pg_catalog.pg_stat_database', 'select')),
    ('pg_class.reltuples', has_column_privilege('billing_operator', 'pg_catalog.pg_class', 'reltuples', 'select')),
    ('pg_class.relpages', has_column_privilege('billing_operator', 'pg_catalog.pg_class', 'relpages', 'select')),
    ('pg_stat_get_live_tuples', has_function_privilege('billing_operator', 'pg_catalog.pg_stat_get_live_tuples(oid)', 'execute')),
    ('pg_relation_size', has_function_privilege('billing_operator', 'pg_catalog.pg_relation_size(regclass)', 'execute')),
    ('pg_total_relation_size', has_function_privilege('billing_operator', 'pg_catalog.pg_total_relation_size(regclass)', 'execute')),
    ('lo_create', has_function_privilege('billing_operator', 'pg_catalog.lo_create(oid)', 'execute')),
    ('temporary', has_database_privilege('billing_operator', current_database(), 'temporary'))) v(g, open)
  where open)
$$;


--
-- Name: operator_grant_reads(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_grant_reads() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  r record;
  v_hidden text[];
  v_cols text;
begin
  for r in select c.oid, c.oid::regclass::text as rel, c.relname::text as name from pg_class c
           where c.relnamespace = 'billing'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f') loop
    v_hidden := array(select jsonb_array_elements_text(billing_private.operator_hidden_columns() -> r.name));
    if cardinality(v_hidden) = 0 then
      execute format('grant select on %s to billing_operator', r.rel);
      continue;
    end if;
    select string_agg(quote_ident(a.attname), ', ' order by a.attnum) into v_cols from pg_attribute a
    where a.attrelid = r.oid and a.attnum > 0 and not a.attisdropped and not (a.attname::text = any (v_hidden));
    execute format('revoke select on %s from billing_operator', r.rel);
    execute format('revoke select (%s) on %s from billing_operator',
      (select string_agg(quote_ident(a.attname), ', ') from pg_attribute a
       where a.attrelid = r.oid and a.attnum > 0 and not a.attisdropped), r.rel);
    execute format('grant select (%s) on %s to billing_operator', v_cols, r.rel);
  end loop;
end
$$;


--
-- Name: operator_hidden_columns(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_hidden_columns() RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
  select '{"idempotency_keys": ["response_body"],
           "link_codes": ["code"],
           "checkout_sessions": ["url", "access_token", "access_token_sha256", "provider_ref"],
           "portal_sessions": ["url", "access_token", "access_token_sha256"],
           "mail_messages": ["text_body", "html_body"]}'::jsonb
$$;


--
-- Name: operator_invite(text, text, text, text, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_invite(p_community_id text, p_email text, p_role text, p_token_sha256 text, p_ttl interval) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v_user billing_private.operator_users;
  v_expires timestamptz := now() + p_ttl;
begin
  if not exists (select 1 from billing.communities c where c.id = p_community_id) then
    perform billing.raise('BL404', 'No community ' || p_community_id || '.');
  elsif coalesce(length(trim(p_email)), 0) not between 3 and 254 or trim(p_email) !~ '^[^@\s]+@[^@\s]+$' then
    perform billing.raise('BL422', 'email: expected an email address.', 'email');
  elsif p_role is null or p_role not in ('owner', 'admin', 'viewer') then
    perform billing.raise('BL422', 'role: expected owner, admin or viewer.', 'role');
  end if;
  insert into billing_private.operator_users as u (community_id, email, role)
  values (p_community_id, lower(trim(p_email)), p_role)
  on conflict (community_id, email) do update set role = excluded.role, disabled_at = null
  returning * into v_user;
  insert into billing_private.operator_links (community_id, token_sha256, user_id, expires_at)
  values (p_community_id, p_token_sha256, v_user.id, v_expires);
  return jsonb_build_object('user_id', v_user.id, 'community_id', v_user.community_id, 'email', v_user.email,
    'role', v_user.role, 'expires_at', billing.iso(v_expires));
end
$_$;


--
-- Name: operator_invite_here(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_invite_here(p_email text, p_role text, p_token_sha256 text) RETURNS jsonb
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select billing_private.operator_invite(billing.current_community_id(), p_email, p_role, p_token_sha256, '24 hours')
$$;


--
-- Name: operator_link_redeem(text, text, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_link_redeem(p_link_sha256 text, p_token_sha256 text, p_ttl interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_user_id text;
begin
  update billing_private.operator_links l set used_at = now()
  where l.token_sha256 = p_link_sha256 and l.used_at is null and l.expires_at > now()
  returning l.user_id into v_user_id;
  if v_user_id is null then
    return null;
  end if;
  return billing_private.operator_session_open(v_user_id, p_token_sha256, p_ttl);
end
$$;


--
-- Name: operator_mailed_link(text, text, text, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_mailed_link(p_user_id text, p_derived text, p_link_sha256 text, p_ttl interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v_user billing_private.operator_users;
begin
  select u.* into v_user from billing_private.operator_users u
  where u.id = p_user_id and u.disabled_at is null;
  if v_user.password_hash is null or p_derived is null
     or substring(v_user.password_hash from '[^$]*$') <> encode(sha256(decode(p_derived, 'base64')), 'base64') then
    return null;
  end if;
  if not (billing_private.take_token('signin-mail:' || v_user.id, 0.1, 1)->>'allowed')::boolean then
    return null;
  end if;
  insert into billing_private.operator_links (community_id, token_sha256, user_id, expires_at)
  values (v_user.community_id, p_link_sha256, v_user.id, now() + p_ttl);
  return jsonb_build_object('email', v_user.email,
    'community_name', (select c.name from billing.communities c where c.id = v_user.community_id));
end
$_$;


--
-- Name: operator_own_sessions(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_own_sessions(p_token_sha256 text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select coalesce(jsonb_agg(billing_private.operator_session_json(o, null, true, me.id)
      order by coalesce(o.last_seen_at, o.created_at) desc, o.id), '[]')
  from billing_private.operator_sessions me
  join billing_private.operator_sessions o on o.community_id = me.community_id and o.user_id = me.user_id
    and o.revoked_at is null and o.expires_at > now()
  where me.token_sha256 = p_token_sha256 and me.revoked_at is null and me.expires_at > now() and not me.code_pending
$$;


--
-- Name: operator_password_candidates(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_password_candidates(p_email text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
  select coalesce(jsonb_agg(jsonb_build_object('user_id', u.id,
      'params', regexp_replace(u.password_hash, '\$[^$]*$', '')) order by u.id), '[]')
  from billing_private.operator_users u
  where u.email = lower(trim(p_email)) and u.disabled_at is null and u.password_hash is not null
$_$;


--
-- Name: operator_password_sign_in(text, text, text, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_password_sign_in(p_user_id text, p_derived text, p_token_sha256 text, p_ttl interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
declare
  v_stored text;
begin
  select u.password_hash into v_stored from billing_private.operator_users u
  where u.id = p_user_id and u.disabled_at is null;
  if v_stored is null or p_derived is null
     or substring(v_stored from '[^$]*$') <> encode(sha256(decode(p_derived, 'base64')), 'base64') then
    return null;
  end if;
  return billing_private.operator_session_open(p_user_id, p_token_sha256, p_ttl);
end
$_$;


--
-- Name: operator_policy_here(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_policy_here() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select jsonb_build_object('second_factor_required', coalesce(p.second_factor_required, false),
    'updated_at', billing.iso(p.updated_at),
    'operators_without_second_factor', (select count(*) from billing_private.operator_users u
      where u.community_id = billing.current_community_id() and u.disabled_at is null
        and not exists (select 1 from billing_private.operator_second_factors f
                        where f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null)))
  from (select 1) one
  left join billing_private.operator_policies p on p.community_id = billing.current_community_id()
$$;


--
-- Name: operator_policy_set(boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_policy_set(p_second_factor_required boolean) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_me text := billing_private.current_operator_user_id();
begin
  if p_second_factor_required is null then
    perform billing.raise('BL422', 'second_factor_required: expected true or false.', 'second_factor_required');
  elsif p_second_factor_required and not exists (select 1 from billing_private.operator_second_factors f
      where f.community_id = billing.current_community_id() and f.user_id = v_me and f.confirmed_at is not null) then
    perform billing.raise('BL409', 'Turn on your own second factor first (Account page), then require one of every operator.');
  end if;
  insert into billing_private.operator_policies as p (community_id, second_factor_required, updated_at, updated_by)
  values (billing.current_community_id(), p_second_factor_required, now(), v_me)
  on conflict (community_id) do update set second_factor_required = excluded.second_factor_required,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by;
  return billing_private.operator_policy_here();
end
$$;


--
-- Name: operator_recovery_replace(text, text, text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_recovery_replace(p_community_id text, p_user_id text, p_hashes text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if coalesce(cardinality(p_hashes), 0) not between 1 and 20 then
    perform billing.raise('BL422', 'recovery codes: expected 1 to 20.');
  end if;
  delete from billing_private.operator_recovery_codes r where r.community_id = p_community_id and r.user_id = p_user_id;
  insert into billing_private.operator_recovery_codes (community_id, user_id, code_sha256)
  select p_community_id, p_user_id, h from unnest(p_hashes) h on conflict do nothing;
end
$$;


--
-- Name: operator_recovery_spend(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_recovery_spend(p_community_id text, p_user_id text, p_code_sha256 text) RETURNS boolean
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  with spent as (
    update billing_private.operator_recovery_codes r set used_at = now()
    where r.community_id = p_community_id and r.user_id = p_user_id and r.code_sha256 = p_code_sha256 and r.used_at is null
    returning 1)
  select exists (select 1 from spent)
$$;


--
-- Name: operator_role_scopes(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_role_scopes(p_role text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  select case p_role
    when 'viewer' then array(select s from unnest(billing_private.api_key_scopes()) s where s like '%:read')
      || array['keys:read']
    when 'admin' then billing_private.api_key_scopes() || array['keys:read', 'keys:write']
    when 'owner' then billing_private.api_key_scopes() || array['keys:read', 'keys:write', 'operators:read', 'operators:write']
  end
$$;


--
-- Name: operator_second_factor_confirm(text, text, bigint, text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_second_factor_confirm(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_hashes text[]) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_s billing_private.operator_sessions;
  v_ended integer;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null;
  if v_s.id is null then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif not billing_private.operator_step_accept(v_s.community_id, v_s.user_id, p_step, false) then
    return jsonb_build_object('ok', false, 'reason', 'replayed');
  end if;
  update billing_private.operator_second_factors f set confirmed_at = now()
  where f.community_id = v_s.community_id and f.user_id = v_s.user_id;
  perform billing_private.operator_recovery_replace(v_s.community_id, v_s.user_id, p_recovery_hashes);
  perform billing_private.operator_code_succeeded(v_s.user_id, p_ip);
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_s.community_id and s.user_id = v_s.user_id and s.id <> v_s.id and s.revoked_at is null;
  get diagnostics v_ended = row_count;
  return jsonb_build_object('ok', true, 'ended', v_ended);
end
$$;


--
-- Name: operator_second_factor_manage(text, text, bigint, text, text, text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_second_factor_manage(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_action text, p_recovery_hashes text[]) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null;
  if v_s.id is null or p_action not in ('off', 'recovery_codes') then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif p_action = 'off' and exists (select 1 from billing_private.operator_policies p
      where p.community_id = v_s.community_id and p.second_factor_required) then
    return jsonb_build_object('ok', false, 'reason', 'required');
  elsif p_step is not null then
    if not billing_private.operator_step_accept(v_s.community_id, v_s.user_id, p_step, true) then
      return jsonb_build_object('ok', false, 'reason', 'replayed');
    end if;
  elsif p_recovery_sha256 is null
     or not billing_private.operator_recovery_spend(v_s.community_id, v_s.user_id, p_recovery_sha256) then
    return jsonb_build_object('ok', false, 'reason', 'wrong');
  end if;
  perform billing_private.operator_code_succeeded(v_s.user_id, p_ip);
  if p_action = 'off' then
    delete from billing_private.operator_second_factors f where f.community_id = v_s.community_id and f.user_id = v_s.user_id;
    delete from billing_private.operator_recovery_codes r where r.community_id = v_s.community_id and r.user_id = v_s.user_id;
  else
    perform billing_private.operator_recovery_replace(v_s.community_id, v_s.user_id, p_recovery_hashes);
  end if;
  return jsonb_build_object('ok', true);
end
$$;


--
-- Name: operator_second_factor_pending(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_second_factor_pending(p_token_sha256 text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select jsonb_build_object('community_id', s.community_id, 'user_id', s.user_id, 'ciphertext', f.secret_ciphertext,
    'email', u.email, 'community_name', c.name)
  from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  join billing.communities c on c.id = s.community_id
  join billing_private.operator_second_factors f on f.community_id = s.community_id and f.user_id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null and f.confirmed_at is null
$$;


--
-- Name: operator_second_factor_reset_here(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_second_factor_reset_here(p_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_user billing_private.operator_users;
begin
  select u.* into v_user from billing_private.operator_users u
  where u.community_id = billing.current_community_id() and u.id = p_id;
  if v_user.id is null then
    perform billing.raise('BL404', 'No operator ' || coalesce(p_id, '') || '.');
  end if;
  delete from billing_private.operator_second_factors f where f.community_id = v_user.community_id and f.user_id = v_user.id;
  delete from billing_private.operator_recovery_codes r where r.community_id = v_user.community_id and r.user_id = v_user.id;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_user.community_id and s.user_id = v_user.id and s.revoked_at is null;
  return billing_private.operator_user_json(v_user);
end
$$;


--
-- Name: operator_second_factor_start(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_second_factor_start(p_token_sha256 text, p_ciphertext text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null;
  if v_s.id is null then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif exists (select 1 from billing_private.operator_second_factors f
                where f.community_id = v_s.community_id and f.user_id = v_s.user_id and f.confirmed_at is not null) then
    return jsonb_build_object('ok', false, 'reason', 'already_on');
  end if;
  insert into billing_private.operator_second_factors as f (community_id, user_id, secret_ciphertext)
  values (v_s.community_id, v_s.user_id, p_ciphertext)
  on conflict (community_id, user_id) do update set secret_ciphertext = excluded.secret_ciphertext, created_at = now(), last_step = null
  where f.confirmed_at is null;
  return jsonb_build_object('ok', true, 'community_id', v_s.community_id, 'user_id', v_s.user_id);
end
$$;


--
-- Name: operator_session_close(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_session_close(p_token_sha256 text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  update billing_private.operator_sessions set revoked_at = coalesce(revoked_at, now())
  where token_sha256 = p_token_sha256
$$;


--
-- Name: operator_session_info(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_session_info(p_token_sha256 text, p_ip text DEFAULT NULL::text, p_user_agent text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now()
    and u.disabled_at is null;
  if v_s.id is null then
    return null;
  end if;
  if p_ip is not null and (v_s.last_seen_at is null or v_s.last_seen_at < now() - interval '1 minute'
                           or v_s.ip is distinct from p_ip) then
    update billing_private.operator_sessions s set last_seen_at = now(), ip = p_ip,
      user_agent = coalesce(left(p_user_agent, 256), s.user_agent)
    where s.community_id = v_s.community_id and s.id = v_s.id;
  end if;
  return (select jsonb_build_object('session_id', v_s.id, 'community_id', v_s.community_id, 'community_name', c.name,
    'user_id', u.id, 'email', u.email, 'role', u.role, 'has_password', u.password_hash is not null,
    'scopes', to_jsonb(billing_private.operator_role_scopes(u.role)), 'expires_at', billing.iso(v_s.expires_at),
    'second_factor', exists (select 1 from billing_private.operator_second_factors f
                             where f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null),
    'needs', billing_private.operator_session_needs(v_s.community_id, v_s.user_id, v_s.code_pending))
  from billing_private.operator_users u
  join billing.communities c on c.id = u.community_id
  where u.community_id = v_s.community_id and u.id = v_s.user_id);
end
$$;


--
-- Name: operator_sessions; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_sessions (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('ops'::text) NOT NULL COLLATE pg_catalog."C",
    token_sha256 text NOT NULL,
    user_id text NOT NULL COLLATE pg_catalog."C",
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    last_seen_at timestamp with time zone,
    ip text,
    user_agent text,
    code_pending boolean DEFAULT false NOT NULL
);

ALTER TABLE ONLY billing_private.operator_sessions FORCE ROW LEVEL SECURITY;


--
-- Name: operator_session_json(billing_private.operator_sessions, text, boolean, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_session_json(s billing_private.operator_sessions, p_email text, p_full boolean, p_current_id text) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select jsonb_build_object('id', s.id, 'user_id', s.user_id, 'email', p_email,
    'current', coalesce(s.id = p_current_id, false), 'code_pending', s.code_pending,
    'created_at', billing.iso(s.created_at), 'last_seen_at', billing.iso(coalesce(s.last_seen_at, s.created_at)),
    'expires_at', billing.iso(s.expires_at), 'address', billing_private.operator_address_shown(s.ip, p_full),
    'browser', billing_private.user_agent_summary(s.user_agent))
$$;


--
-- Name: operator_session_needs(text, text, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_session_needs(p_community_id text, p_user_id text, p_code_pending boolean) RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select case
    when p_code_pending then 'code'
    when exists (select 1 from billing_private.operator_policies p
                 where p.community_id = p_community_id and p.second_factor_required)
     and not exists (select 1 from billing_private.operator_second_factors f
                     where f.community_id = p_community_id and f.user_id = p_user_id and f.confirmed_at is not null)
      then 'enrolment'
  end
$$;


--
-- Name: operator_session_open(text, text, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_session_open(p_user_id text, p_token_sha256 text, p_ttl interval) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_session billing_private.operator_sessions;
begin
  -- A user with a second factor gets a session that owes its code (10 minutes to give
  -- it: billing_private.operator_sign_in_code), which is no credential until then.
  insert into billing_private.operator_sessions (community_id, token_sha256, user_id, expires_at, code_pending)
  select u.community_id, p_token_sha256, u.id,
    now() + case when f.user_id is null then p_ttl else least(p_ttl, interval '10 minutes') end, f.user_id is not null
  from billing_private.operator_users u
  left join billing_private.operator_second_factors f
    on f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null
  where u.id = p_user_id and u.disabled_at is null
  returning * into v_session;
  if v_session.id is null then
    return null;
  end if;
  return jsonb_build_object('session_id', v_session.id, 'community_id', v_session.community_id,
    'expires_at', billing.iso(v_session.expires_at), 'code_pending', v_session.code_pending);
end
$$;


--
-- Name: operator_session_password_params(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_session_password_params(p_token_sha256 text) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
  select regexp_replace(u.password_hash, '\$[^$]*$', '')
  from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and u.disabled_at is null
$_$;


--
-- Name: operator_sessions_end_here(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_sessions_end_here(p_session_id text, p_user_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_ended integer;
begin
  if p_user_id is not null and not exists (select 1 from billing_private.operator_users u
      where u.community_id = billing.current_community_id() and u.id = p_user_id) then
    perform billing.raise('BL404', 'No operator ' || p_user_id || '.');
  elsif p_session_id is null and p_user_id is null then
    perform billing.raise('BL422', 'session_id: name a session or an operator.', 'session_id');
  end if;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = billing.current_community_id() and s.revoked_at is null and s.expires_at > now()
    and (p_session_id is null or s.id = p_session_id) and (p_user_id is null or s.user_id = p_user_id);
  get diagnostics v_ended = row_count;
  if p_session_id is not null and v_ended = 0 then
    perform billing.raise('BL404', 'No live session ' || p_session_id || '.');
  end if;
  return jsonb_build_object('ended', v_ended);
end
$$;


--
-- Name: operator_sessions_here(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_sessions_here(p_user_id text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  with me as (
    select s.id, s.user_id from billing_private.operator_sessions s
    where s.community_id = billing.current_community_id() and s.id = nullif(current_setting('app.key_id', true), ''))
  select jsonb_build_object('data', coalesce(jsonb_agg(billing_private.operator_session_json(x.s, x.email,
      coalesce(x.user_id = (select me.user_id from me), false), (select me.id from me))
      order by x.seen desc, x.id), '[]'))
  from (select s, u.email, s.user_id, s.id, coalesce(s.last_seen_at, s.created_at) as seen
        from billing_private.operator_sessions s
        join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
        where s.community_id = billing.current_community_id() and s.revoked_at is null and s.expires_at > now()
          and (p_user_id is null or s.user_id = p_user_id)
        order by coalesce(s.last_seen_at, s.created_at) desc limit 500) x
$$;


--
-- Name: operator_sign_in_code(text, text, bigint, text, text, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_sign_in_code(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_new_token_sha256 text, p_ttl interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and s.code_pending
    and u.disabled_at is null
  for update of s;
  if v_s.id is null or p_new_token_sha256 is null then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif p_step is not null then
    if not billing_private.operator_step_accept(v_s.community_id, v_s.user_id, p_step, true) then
      return jsonb_build_object('ok', false, 'reason', 'replayed');
    end if;
  elsif p_recovery_sha256 is null
     or not billing_private.operator_recovery_spend(v_s.community_id, v_s.user_id, p_recovery_sha256) then
    return jsonb_build_object('ok', false, 'reason', 'wrong');
  end if;
  update billing_private.operator_sessions s set code_pending = false, token_sha256 = p_new_token_sha256,
    expires_at = now() + p_ttl, ip = coalesce(p_ip, s.ip), last_seen_at = now()
  where s.community_id = v_s.community_id and s.id = v_s.id;
  perform billing_private.operator_code_succeeded(v_s.user_id, p_ip);
  if p_ip is not null then
    insert into billing_private.operator_known_addresses as k (user_id, ip) values (v_s.user_id, p_ip)
    on conflict (user_id, ip) do update set last_seen_at = now();
  end if;
  return jsonb_build_object('ok', true, 'session_id', v_s.id, 'community_id', v_s.community_id,
    'expires_at', billing.iso(now() + p_ttl),
    'recovery_left', (select count(*) from billing_private.operator_recovery_codes r
                      where r.community_id = v_s.community_id and r.user_id = v_s.user_id and r.used_at is null));
end
$$;


--
-- Name: operator_sign_in_succeeded(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_sign_in_succeeded(p_session_id text, p_ip text, p_email text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_user billing_private.operator_users;
  v_pending boolean;
begin
  select u.* into v_user from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.id = p_session_id and s.revoked_at is null and s.created_at > now() - interval '1 minute';
  select s.code_pending into v_pending from billing_private.operator_sessions s
  where s.community_id = v_user.community_id and s.id = p_session_id;
  if v_user.id is null or p_ip is null then
    return;
  end if;
  update billing_private.operator_sessions s set ip = p_ip
  where s.community_id = v_user.community_id and s.id = p_session_id;
  -- An address becomes known once the whole sign-in succeeded: with a second factor,
  -- when its code was right (operator_sign_in_code).
  if not v_pending then
    insert into billing_private.operator_known_addresses as k (user_id, ip) values (v_user.id, p_ip)
    on conflict (user_id, ip) do update set last_seen_at = now();
  end if;
  delete from billing_private.operator_known_addresses k
  where k.user_id = v_user.id and k.last_seen_at < now() - interval '90 days';
  if p_email is not null and lower(trim(p_email)) = v_user.email then
    -- The address proved itself: its earlier typos are forgiven. The account's budget,
    -- shared with whoever else is guessing, only gets this attempt's token back.
    delete from billing_private.rate_buckets b where b.bucket = 'signin-fail:' || v_user.email || ' ' || p_ip;
    perform billing_private.take_tokens('signin-fail:' || v_user.email, 2, 30, 0, 1);
  end if;
end
$$;


--
-- Name: operator_sign_in_throttle(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_sign_in_throttle(p_ip text, p_email text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_ip jsonb := billing_private.take_token('signin-ip:' || coalesce(p_ip, '?'), 10, 10);
  v_email text := lower(trim(p_email));
  v_pair jsonb;
  v_account jsonb;
begin
  if not (v_ip->>'allowed')::boolean then
    return jsonb_build_object('allowed', false, 'reason', 'rate_limited', 'retry_after', (v_ip->>'retry_after')::bigint);
  elsif v_email is null then
    return jsonb_build_object('allowed', true, 'retry_after', 0);
  end if;
  v_pair := billing_private.take_token('signin-fail:' || v_email || ' ' || coalesce(p_ip, '?'), 0.2, 5);
  if not (v_pair->>'allowed')::boolean then
    return jsonb_build_object('allowed', false, 'reason', 'rate_limited', 'retry_after', (v_pair->>'retry_after')::bigint);
  end if;
  v_account := billing_private.take_token('signin-fail:' || v_email, 2, 30);
  if not (v_account->>'allowed')::boolean and not exists (
      select 1 from billing_private.operator_known_addresses k
      join billing_private.operator_users u on u.id = k.user_id
      where u.email = v_email and k.ip = p_ip and k.last_seen_at > now() - interval '90 days') then
    perform billing_private.take_tokens('signin-fail:' || v_email || ' ' || coalesce(p_ip, '?'), 0.2, 5, 0, 1);
    return jsonb_build_object('allowed', false, 'reason', 'link_required', 'retry_after', (v_account->>'retry_after')::bigint);
  end if;
  return jsonb_build_object('allowed', true, 'retry_after', 0);
end
$$;


--
-- Name: operator_step_accept(text, text, bigint, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_step_accept(p_community_id text, p_user_id text, p_step bigint, p_confirmed boolean) RETURNS boolean
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  with accepted as (
    update billing_private.operator_second_factors f set last_step = p_step
    where f.community_id = p_community_id and f.user_id = p_user_id and (f.confirmed_at is not null) = p_confirmed
      and p_step is not null and (f.last_step is null or f.last_step < p_step)
    returning 1)
  select exists (select 1 from accepted)
$$;


--
-- Name: operator_users; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_users (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('opu'::text) NOT NULL COLLATE pg_catalog."C",
    email text NOT NULL,
    role text NOT NULL,
    password_hash text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled_at timestamp with time zone,
    CONSTRAINT operator_users_email_check CHECK (((email = lower(email)) AND (email ~ '^[^@\s]+@[^@\s]+$'::text) AND (length(email) <= 254))),
    CONSTRAINT operator_users_password_hash_check CHECK ((password_hash ~~ 'scrypt$%'::text)),
    CONSTRAINT operator_users_role_check CHECK ((role = ANY (ARRAY['owner'::text, 'admin'::text, 'viewer'::text])))
);

ALTER TABLE ONLY billing_private.operator_users FORCE ROW LEVEL SECURITY;


--
-- Name: operator_user_json(billing_private.operator_users); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_user_json(u billing_private.operator_users) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  select jsonb_build_object('id', u.id, 'email', u.email, 'role', u.role, 'has_password', u.password_hash is not null,
    'second_factor', exists (select 1 from billing_private.operator_second_factors f
                             where f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null),
    'created_at', billing.iso(u.created_at), 'disabled_at', billing.iso(u.disabled_at))
$$;


--
-- Name: operator_user_remove(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_user_remove(p_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_user billing_private.operator_users;
begin
  perform pg_advisory_xact_lock(hashtext(billing.current_community_id() || ' operators'));
  delete from billing_private.operator_users u
  where u.community_id = billing.current_community_id() and u.id = p_id
  returning * into v_user;
  if v_user.id is null then
    perform billing.raise('BL404', 'No operator ' || coalesce(p_id, '') || '.');
  end if;
  if not exists (select 1 from billing_private.operator_users u
                 where u.community_id = v_user.community_id and u.role = 'owner' and u.disabled_at is null) then
    perform billing.raise('BL409', 'A community keeps at least one enabled owner: make someone else owner before removing this one.');
  end if;
  return jsonb_build_object('id', v_user.id, 'email', v_user.email, 'role', v_user.role, 'removed', true);
end
$$;


--
-- Name: operator_user_update(text, text, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_user_update(p_id text, p_role text, p_disabled boolean) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_user billing_private.operator_users;
begin
  if p_role is not null and p_role not in ('owner', 'admin', 'viewer') then
    perform billing.raise('BL422', 'role: expected owner, admin or viewer.', 'role');
  end if;
  perform pg_advisory_xact_lock(hashtext(billing.current_community_id() || ' operators'));
  update billing_private.operator_users u set role = coalesce(p_role, u.role),
    disabled_at = case when p_disabled is null then u.disabled_at when p_disabled then coalesce(u.disabled_at, now()) end
  where u.community_id = billing.current_community_id() and u.id = p_id
  returning * into v_user;
  if v_user.id is null then
    perform billing.raise('BL404', 'No operator ' || coalesce(p_id, '') || '.');
  end if;
  if not exists (select 1 from billing_private.operator_users u
                 where u.community_id = v_user.community_id and u.role = 'owner' and u.disabled_at is null) then
    perform billing.raise('BL409', 'A community keeps at least one enabled owner: make someone else owner first.');
  end if;
  if v_user.disabled_at is not null then
    update billing_private.operator_sessions s set revoked_at = coalesce(s.revoked_at, now())
    where s.community_id = v_user.community_id and s.user_id = v_user.id;
  end if;
  return billing_private.operator_user_json(v_user);
end
$$;


--
-- Name: operator_users_page(text, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.operator_users_page(p_cursor text, p_limit integer) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select billing.page_json(array_agg(u.id order by u.id desc),
    array_agg(billing_private.operator_user_json(u) order by u.id desc), p_limit)
  from (select * from billing_private.operator_users u
        where u.community_id = billing.current_community_id() and u.id < coalesce(p_cursor, chr(1114111))
        order by u.id desc limit p_limit + 1) u
$$;


--
-- Name: payment_secret_ciphertext(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.payment_secret_ciphertext(p_provider text, p_name text) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select s.ciphertext from billing_private.payment_secrets s
  where s.community_id = billing.current_community_id() and s.provider = p_provider and s.name = p_name
$$;


--
-- Name: platform_config_can_deliver(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_config_can_deliver(p_community_id text, p_platform_config_id text) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  return exists (select 1 from billing_private.platform_secrets s
                 where s.community_id = p_community_id and s.platform_config_id = p_platform_config_id and s.name = 'bot_token')
    or exists (select 1 from billing.platform_configs pc join billing_private.platform_defaults d on d.platform = pc.platform
               where pc.community_id = p_community_id and pc.id = p_platform_config_id and d.has_bot_token);
end
$$;


--
-- Name: platform_config_inbound(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_config_inbound(p_platform_config_id text, p_platform text) RETURNS TABLE(community_id text, public_key text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select pc.community_id, pc.settings->>'public_key' from billing.platform_configs pc
  where pc.id = p_platform_config_id and pc.platform = p_platform
$$;


--
-- Name: platform_defaults_set(boolean, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_defaults_set(p_discord boolean, p_telegram boolean) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_platform text;
  v_has boolean;
  v_was boolean;
  v_queued integer := 0;
begin
  for v_platform, v_has in select * from (values ('discord', p_discord), ('telegram', p_telegram)) v(p, h) loop
    select d.has_bot_token into v_was from billing_private.platform_defaults d where d.platform = v_platform for update;
    if v_was is distinct from v_has then
      insert into billing_private.platform_defaults (platform, has_bot_token) values (v_platform, v_has)
      on conflict (platform) do update set has_bot_token = excluded.has_bot_token, updated_at = now();
      if v_has then
        v_queued := v_queued + billing_private.enqueue_connection_deliveries(null, null, v_platform);
      end if;
    end if;
  end loop;
  return v_queued;
end
$$;


--
-- Name: platform_delivery_plan(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_delivery_plan(p_community_id text, p_member_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  return coalesce((
    with desired as (
      select b->>'platform_config_id' as pcfg, b->>'type' as type, b->>'value' as value,
        string_agg(distinct e.name, ', ') as names
      from billing.member_entitlements me
      cross join lateral jsonb_array_elements(me.benefits) b
      join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
      where me.community_id = p_community_id and me.member_id = p_member_id and me.status = 'active'
      group by 1, 2, 3
    ), stored as (
      select d.* from billing.benefit_deliveries d
      where d.community_id = p_community_id and d.member_id = p_member_id
    ), items as (
      select coalesce(d.pcfg, s.platform_config_id) as pcfg, coalesce(d.type, s.type) as type,
        coalesce(d.value, s.value) as value, d.names,
        case when d.pcfg is null then 'absent' else 'present' end as want,
        s.status, s.applied_uid, s.state, s.attempts
      from desired d
      full join stored s on s.platform_config_id = d.pcfg and s.type = d.type and s.value = d.value
    )
    select jsonb_agg(jsonb_build_object(
      'platform_config_id', i.pcfg, 'platform', pc.platform, 'settings', pc.settings,
      'type', i.type, 'value', i.value, 'want', i.want, 'entitlements', i.names,
      'status', i.status, 'applied_uid', i.applied_uid, 'state', coalesce(i.state, '{}'),
      'attempts', coalesce(i.attempts, 0), 'uid', mi.platform_uid, 'token', ps.ciphertext,
      'community_name', c.name)
      order by i.pcfg, i.want, i.type, i.value)
    from items i
    join billing.platform_configs pc on pc.community_id = p_community_id and pc.id = i.pcfg
    join billing.communities c on c.id = p_community_id
    left join billing.member_identities mi
      on mi.community_id = p_community_id and mi.member_id = p_member_id and mi.platform = pc.platform
    left join billing_private.platform_secrets ps
      on ps.community_id = p_community_id and ps.platform_config_id = i.pcfg and ps.name = 'bot_token'
  ), '[]');
end
$$;


--
-- Name: platform_delivery_record(text, text, jsonb, jsonb); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_delivery_record(p_community_id text, p_member_id text, p_results jsonb, p_actions jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  insert into billing.benefit_deliveries as d (community_id, member_id, platform_config_id, type, value, want,
    status, applied_uid, error, state, attempts, updated_at)
  select p_community_id, p_member_id, r->>'platform_config_id', r->>'type', r->>'value', r->>'want',
    r->>'status', r->>'applied_uid', r->>'error', coalesce(r->'state', '{}'),
    case when r->>'status' = 'delivered' then 0 else 1 end, now()
  from jsonb_array_elements(p_results) r
  where exists (select 1 from billing.platform_configs pc
                where pc.community_id = p_community_id and pc.id = r->>'platform_config_id')
  on conflict (community_id, member_id, platform_config_id, type, value) do update set
    want = excluded.want, status = excluded.status, applied_uid = excluded.applied_uid, error = excluded.error,
    state = excluded.state, updated_at = now(),
    attempts = case when excluded.status = 'delivered' then 0 else d.attempts + 1 end;
  delete from billing.benefit_deliveries d
  where d.community_id = p_community_id and d.member_id = p_member_id
    and d.want = 'absent' and d.status = 'delivered' and d.applied_uid is null;
  insert into billing.platform_actions (community_id, member_id, platform_config_id, action, target, outcome,
    status_code, error)
  select p_community_id, p_member_id, a->>'platform_config_id', a->>'action', a->>'target', a->>'outcome',
    (a->>'status_code')::integer, a->>'error'
  from jsonb_array_elements(p_actions) a
  where exists (select 1 from billing.platform_configs pc
                where pc.community_id = p_community_id and pc.id = a->>'platform_config_id');
end
$$;


--
-- Name: platform_reconcile_connection(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_reconcile_connection(p_community_id text, p_platform_config_id text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select jsonb_build_object('community_id', pc.community_id, 'platform_config_id', pc.id, 'platform', pc.platform,
    'settings', pc.settings, 'token', ps.ciphertext,
    'benefits', coalesce((select jsonb_agg(distinct jsonb_build_object('type', b.type, 'value', b.value))
                          from billing.entitlement_benefits b
                          where b.community_id = pc.community_id and b.platform_config_id = pc.id), '[]'))
  from billing.platform_configs pc
  left join billing_private.platform_secrets ps
    on ps.community_id = pc.community_id and ps.platform_config_id = pc.id and ps.name = 'bot_token'
  where pc.community_id = p_community_id and pc.id = p_platform_config_id
$$;


--
-- Name: platform_reconcile_enqueue(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_reconcile_enqueue(p_community_id text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_jobs graphile_worker.job_spec[];
begin
  v_jobs := array(
    select row('platform_connections__reconcile',
      json_build_object('community_id', t.community_id, 'platform_config_id', t.platform_config_id),
      null, null, 3, 'reconcile:' || t.community_id || ':' || t.platform_config_id, null, null)::graphile_worker.job_spec
    from billing_private.platform_reconcile_targets(p_community_id) t);
  if cardinality(v_jobs) > 0 then
    perform graphile_worker.add_jobs(v_jobs);
  end if;
  return cardinality(v_jobs);
end
$$;


--
-- Name: platform_reconcile_former(text, text, text, text, text, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_reconcile_former(p_community_id text, p_platform_config_id text, p_type text, p_value text, p_after text, p_limit integer) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select coalesce(jsonb_agg(jsonb_build_object('member_id', x.member_id, 'uid', x.platform_uid) order by x.member_id), '[]')
  from (
    select mi.member_id, mi.platform_uid
    from billing.member_identities mi
    join billing.platform_configs pc on pc.community_id = mi.community_id and pc.id = p_platform_config_id and pc.platform = mi.platform
    where mi.community_id = p_community_id and mi.member_id > coalesce(p_after, '')
      and exists (select 1 from billing.member_entitlements me
                  join billing.entitlement_benefits b on b.community_id = me.community_id and b.entitlement_id = me.entitlement_id
                  where me.community_id = p_community_id and me.member_id = mi.member_id and me.status = 'inactive'
                    and b.platform_config_id = p_platform_config_id and b.type = p_type and b.value = p_value)
      and not exists (select 1 from billing.member_entitlements me
                      cross join lateral jsonb_array_elements(me.benefits) bb
                      where me.community_id = p_community_id and me.member_id = mi.member_id and me.status = 'active'
                        and bb->>'platform_config_id' = p_platform_config_id and bb->>'type' = p_type and bb->>'value' = p_value)
    order by mi.member_id
    limit p_limit
  ) x
$$;


--
-- Name: platform_reconcile_log(text, jsonb); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_reconcile_log(p_community_id text, p_actions jsonb) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  insert into billing.platform_actions (community_id, member_id, platform_config_id, action, target, outcome, status_code, error)
  select p_community_id, null, a->>'platform_config_id', a->>'action', a->>'target', a->>'outcome',
    (a->>'status_code')::integer, a->>'error'
  from jsonb_array_elements(p_actions) a
  where exists (select 1 from billing.platform_configs pc
                where pc.community_id = p_community_id and pc.id = a->>'platform_config_id')
$$;


--
-- Name: platform_reconcile_observed(text, text, text, text[], boolean, jsonb); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_reconcile_observed(p_community_id text, p_platform_config_id text, p_type text, p_values text[], p_complete boolean, p_observed jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_platform text;
  v_members text[];
  v_result jsonb;
begin
  select pc.platform into v_platform from billing.platform_configs pc
  where pc.community_id = p_community_id and pc.id = p_platform_config_id;
  if v_platform is null then
    return jsonb_build_object('missing', 0, 'held_without_entitlement', 0, 'members_queued', 0, 'unlinked', '[]'::jsonb);
  end if;
  with obs as (
    select o->>'uid' as uid, array(select jsonb_array_elements_text(o->'held')) as held
    from jsonb_array_elements(p_observed) o
  ), linked as (
    select mi.platform_uid as uid, mi.member_id
    from billing.member_identities mi
    where mi.community_id = p_community_id and mi.platform = v_platform
      and (p_complete or mi.platform_uid in (select uid from obs))
  ), wanted as (
    select distinct l.uid, l.member_id, b->>'value' as value
    from linked l
    join billing.member_entitlements me on me.community_id = p_community_id and me.member_id = l.member_id and me.status = 'active'
    cross join lateral jsonb_array_elements(me.benefits) b
    where b->>'platform_config_id' = p_platform_config_id and b->>'type' = p_type and b->>'value' = any (p_values)
  ), held as (
    select obs.uid, h.value from obs cross join lateral unnest(obs.held) h(value) where h.value = any (p_values)
  ), drift as (
    select 'missing' as kind, w.member_id, w.uid, w.value from wanted w
    where not exists (select 1 from held h where h.uid = w.uid and h.value = w.value)
    union all
    select case when l.member_id is null then 'unlinked' else 'extra' end, l.member_id, h.uid, h.value
    from held h
    left join linked l on l.uid = h.uid
    where not exists (select 1 from wanted w where w.uid = h.uid and w.value = h.value)
  ), pending as (
    -- (the two writes run whether or not the query below reads them)
    update billing.benefit_deliveries d set status = 'pending', updated_at = now()
    from drift r
    where r.kind = 'missing' and d.community_id = p_community_id and d.member_id = r.member_id
      and d.platform_config_id = p_platform_config_id and d.type = p_type and d.value = r.value and d.status = 'delivered'
    returning d.member_id
  ), held_rows as (
    insert into billing.benefit_deliveries as d (community_id, member_id, platform_config_id, type, value, want, status, applied_uid)
    select p_community_id, r.member_id, p_platform_config_id, p_type, r.value, 'absent', 'pending', r.uid
    from drift r where r.kind = 'extra'
    on conflict (community_id, member_id, platform_config_id, type, value) do update set
      applied_uid = excluded.applied_uid, status = 'pending', updated_at = now()
    returning d.member_id
  )
  select jsonb_build_object(
      'missing', count(*) filter (where kind = 'missing'),
      'held_without_entitlement', count(*) filter (where kind = 'extra'),
      'members_queued', count(distinct member_id) filter (where kind in ('missing', 'extra')),
      'unlinked', coalesce(jsonb_agg(jsonb_build_object('uid', uid, 'value', value) order by uid, value)
                             filter (where kind = 'unlinked'), '[]')),
    array_agg(distinct member_id) filter (where kind in ('missing', 'extra'))
  into v_result, v_members
  from drift;
  perform billing_private.enqueue_deliveries(array_fill(p_community_id, array[coalesce(cardinality(v_members), 0)]), v_members);
  return v_result;
end
$$;


--
-- Name: platform_reconcile_targets(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_reconcile_targets(p_community_id text) RETURNS TABLE(community_id text, platform_config_id text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select pc.community_id, pc.id from billing.platform_configs pc
  where (p_community_id is null or pc.community_id = p_community_id)
    and exists (select 1 from billing.entitlement_benefits b
                where b.community_id = pc.community_id and b.platform_config_id = pc.id)
  order by 1, 2
$$;


--
-- Name: platform_secret_ciphertext(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_secret_ciphertext(p_platform_config_id text, p_name text) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select s.ciphertext from billing_private.platform_secrets s
  where s.community_id = billing.current_community_id() and s.platform_config_id = p_platform_config_id and s.name = p_name
$$;


--
-- Name: platform_secret_set(text, text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.platform_secret_set(p_platform_config_id text, p_name text, p_ciphertext text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_cid text := billing.current_community_id();
  v_platform text;
begin
  select pc.platform into v_platform from billing.platform_configs pc
  where pc.community_id = v_cid and pc.id = p_platform_config_id;
  if v_platform is null then
    perform billing.raise('BL404', 'No platform connection ' || coalesce(p_platform_config_id, 'null') || '.');
  end if;
  if p_name is null or p_name not in ('bot_token', 'client_secret') then
    perform billing.raise('BL422', 'Expected bot_token or client_secret.', 'name');
  end if;
  if p_name = 'client_secret' and v_platform <> 'discord' then
    perform billing.raise('BL422', 'client_secret: only a Discord connection has an OAuth2 client secret.', 'client_secret');
  end if;
  if p_ciphertext is null then
    delete from billing_private.platform_secrets s
    where s.community_id = v_cid and s.platform_config_id = p_platform_config_id and s.name = p_name;
    return found;
  end if;
  insert into billing_private.platform_secrets (community_id, platform_config_id, name, ciphertext)
  values (v_cid, p_platform_config_id, p_name, p_ciphertext)
  on conflict (community_id, platform_config_id, name) do update set ciphertext = excluded.ciphertext, updated_at = now();
  return true;
end
$$;


--
-- Name: portal_set_card(text, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.portal_set_card(p_subscription_id text, p_declines boolean) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  return billing.sandbox_set_card(p_subscription_id, p_declines);
end
$$;


--
-- Name: purge_expired(interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.purge_expired(p_delivery_retention interval DEFAULT '30 days'::interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_idempotency integer;
  v_link_codes integer;
  v_portal integer;
  v_attempts integer;
  v_deliveries integer;
  v_buckets integer;
  v_links integer;
  v_sessions integer;
  v_member_sessions integer;
  v_audit integer;
begin
  delete from billing.idempotency_keys where expires_at <= now();
  get diagnostics v_idempotency = row_count;
  delete from billing.link_codes l
  where l.expires_at <= billing.community_now(l.community_id) - interval '1 day';
  get diagnostics v_link_codes = row_count;
  delete from billing.portal_sessions p
  where p.expires_at <= billing.community_now(p.community_id) - interval '1 day';
  get diagnostics v_portal = row_count;
  delete from billing.webhook_attempts a
  where a.started_at < now() - p_delivery_retention;
  get diagnostics v_attempts = row_count;
  delete from billing.webhook_deliveries d
  where d.status <> 'pending' and d.updated_at < now() - p_delivery_retention;
  get diagnostics v_deliveries = row_count;
  -- A key's last use outlives its idle bucket (shown in the dashboard).
  update billing_private.api_keys k set last_used_at = greatest(k.last_used_at, b.updated_at)
  from billing_private.rate_buckets b
  where b.bucket = ('key:' || k.id) collate "default" and b.updated_at < now() - interval '1 hour';
  delete from billing_private.rate_buckets b where b.updated_at < now() - interval '1 hour';
  get diagnostics v_buckets = row_count;
  -- Dashboard sign-in links, operator sessions and member portal sessions (15, 82) a
  -- day after they were spent, revoked or expired.
  delete from billing_private.operator_links l
  where coalesce(least(l.used_at, l.expires_at), l.expires_at) < now() - interval '1 day';
  get diagnostics v_links = row_count;
  delete from billing_private.operator_sessions s
  where coalesce(least(s.revoked_at, s.expires_at), s.expires_at) < now() - interval '1 day';
  get diagnostics v_sessions = row_count;
  delete from billing_private.member_portal_sessions m where m.expires_at < now() - interval '1 day';
  get diagnostics v_member_sessions = row_count;
  v_audit := billing_private.audit_purge();
  return jsonb_build_object('idempotency_keys', v_idempotency, 'link_codes', v_link_codes,
    'portal_sessions', v_portal, 'webhook_attempts', v_attempts, 'webhook_deliveries', v_deliveries,
    'rate_buckets', v_buckets, 'operator_links', v_links, 'operator_sessions', v_sessions,
    'member_portal_sessions', v_member_sessions, 'audit_log', v_audit);
end
$$;


--
-- Name: session_credential(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.session_credential(p_token_sha256 text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_out jsonb;
begin
  select jsonb_build_object('key_id', s.id, 'community_id', s.community_id,
    'scopes', to_jsonb(billing_private.operator_role_scopes(u.role)), 'member_id', null)
  into v_out
  from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now()
    and u.disabled_at is null
    and billing_private.operator_session_needs(s.community_id, s.user_id, s.code_pending) is null;
  if v_out is null then
    select jsonb_build_object('key_id', m.id, 'community_id', m.community_id,
      'scopes', to_jsonb(billing_private.member_portal_scopes()), 'member_id', m.member_id)
    into v_out
    from billing_private.member_portal_sessions m
    where m.token_sha256 = p_token_sha256 and m.expires_at > now();
  end if;
  return v_out;
end
$$;


--
-- Name: subscription_cancel_now(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.subscription_cancel_now(p_subscription_id text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  update billing.subscriptions s set status = 'cancelled', cancelled_at = billing.now(),
    cancel_requested_at = coalesce(s.cancel_requested_at, billing.now()), cancellation_reason = 'cancellation_requested',
    cancel_at = null, scheduled_plan_id = null, scheduled_at = null, paused_until = null, updated_at = now()
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id and s.status <> 'cancelled';
end
$$;


--
-- Name: subscription_pause(text, timestamp with time zone); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.subscription_pause(p_subscription_id text, p_until timestamp with time zone) RETURNS billing.subscriptions
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
begin
  update billing.subscriptions s set status = 'paused', paused_until = p_until, scheduled_plan_id = null,
    scheduled_at = null, updated_at = now(),
    -- The period already paid (or given as a trial) is kept; a second pause changes only paused_until.
    paid_through = case when s.status = 'paused' then s.paid_through else s.current_period_end end
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id
    and s.status in ('active', 'trialing', 'paused')
  returning * into v_sub;
  return v_sub;
end
$$;


--
-- Name: subscription_resume(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.subscription_resume(p_subscription_id text) RETURNS billing.subscriptions
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  return billing.subscription_resume_at(p_subscription_id, billing.now());
end
$$;


--
-- Name: subscription_switch_now(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.subscription_switch_now(p_subscription_id text, p_plan_id text) RETURNS billing.subscriptions
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_now timestamptz := billing.now();
  v_new_period boolean;
  v_start timestamptz;
  v_end timestamptz;
  v_charge bigint;
  v_credit bigint;
  v_applied bigint;
  v_lines jsonb;
  v_inv billing.invoices;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id for update;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_subscription_id, '') || '.');
  end if;
  perform billing.switch_validate(v_sub, p_plan_id, p_immediate => true);
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_plan_id;
  select q.new_period, q.period_start, q.period_end, q.charge_cents, q.credit_cents, q.applied_cents
    into v_new_period, v_start, v_end, v_charge, v_credit, v_applied
  from billing.switch_proration(v_sub, v_old, v_new, v_now) q;
  if v_sub.provider = 'sandbox' and v_charge > 0 then
    v_lines := jsonb_build_array(jsonb_build_object('type', 'proration',
      'description', 'Remaining time on ' || coalesce(v_new.name, v_new.id), 'amount_cents', v_charge,
      'plan_id', v_new.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_end)));
    if v_applied > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'proration',
        'description', 'Unused time on ' || coalesce(v_old.name, v_old.id), 'amount_cents', -v_applied,
        'plan_id', v_old.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_sub.current_period_end));
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_update', v_new.currency, v_lines,
      v_now, v_end, 'sandbox', v_now);
    if not billing.sandbox_charge_succeeds(v_inv) then
      raise exception using errcode = 'BLPAY',
        message = 'The payment of ' || v_inv.total_cents || ' ' || v_inv.currency
          || ' for this plan change was declined; the subscription is unchanged.';
    end if;
    perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
  end if;
  update billing.subscriptions s set plan_id = v_new.id, scheduled_plan_id = null, scheduled_at = null,
    current_period_start = v_start, current_period_end = v_end,
    billing_anchor = case when v_new_period then v_start else s.billing_anchor end,
    credit_cents = s.credit_cents + case when s.provider = 'sandbox' then v_credit - v_applied else 0 end,
    proration_credit_cents = v_credit, proration_charge_cents = v_charge, prorated_at = v_now, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;


--
-- Name: take_token(text, double precision, double precision); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.take_token(p_bucket text, p_per_minute double precision, p_burst double precision) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  return billing_private.take_tokens(p_bucket, p_per_minute, p_burst, 1, 0) - 'granted';
end
$$;


--
-- Name: take_tokens(text, double precision, double precision, integer, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.take_tokens(p_bucket text, p_per_minute double precision, p_burst double precision, p_n integer, p_return integer DEFAULT 0) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_now timestamptz := clock_timestamp();
  v_rate double precision := p_per_minute / 60.0;
  v_tokens double precision;
  v_granted integer;
begin
  insert into billing_private.rate_buckets as b (bucket, tokens, allowed, granted, updated_at)
  values (p_bucket, p_burst - least(p_n, floor(p_burst)), p_burst >= 1, least(p_n, floor(p_burst)), v_now)
  -- v_now was read before waiting for the row lock, so it may precede the stored
  -- updated_at of a concurrent request that got the lock first: never refill
  -- negatively, never move updated_at back. Tokens put back never exceed the burst.
  on conflict (bucket) do update set
    granted = least(p_n, floor(least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate))),
    allowed = least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= 1,
    tokens = least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate)
      - least(p_n, floor(least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate))),
    updated_at = greatest(b.updated_at, v_now)
  returning tokens, granted into v_tokens, v_granted;
  return jsonb_build_object(
    'allowed', v_granted > 0,
    'granted', v_granted,
    'limit', p_per_minute::bigint,
    'remaining', floor(greatest(v_tokens, 0))::bigint,
    'reset', ceil(greatest(p_burst - v_tokens, 0) / v_rate)::bigint,
    'retry_after', greatest(ceil((1 - v_tokens) / v_rate), 1)::bigint);
end
$$;


--
-- Name: tg_audit(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_audit() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_k1 text := split_part(tg_argv[0], ',', 1);
  v_k2 text := nullif(split_part(tg_argv[0], ',', 2), '');
  v_k3 text := nullif(split_part(tg_argv[0], ',', 3), '');
  v_k4 text := nullif(split_part(tg_argv[0], ',', 4), '');
  v_hidden text[] := coalesce(string_to_array(nullif(tg_argv[1], ''), ','), '{}');
  v_quiet text[] := array['updated_at'] || coalesce(string_to_array(nullif(tg_argv[2], ''), ','), '{}');
  v_com text := case when tg_table_name = 'communities' then 'id' else 'community_id' end;
  v_actor jsonb;
begin
  if tg_op = 'DELETE' then
    if not exists (select from old_rows) then
      return null;
    end if;
  elsif not exists (select from new_rows) then
    return null;
  end if;
  v_actor := billing_private.audit_actor();
  if tg_op = 'INSERT' then
    insert into billing.audit_log (community_id, actor_type, actor_id, key_id, request_id, table_name, row_id,
      operation, before, after)
    select r.j->>v_com, v_actor->>'type', v_actor->>'id', v_actor->>'key_id', v_actor->>'request_id', tg_table_name,
      concat_ws('/', r.j->>v_k1, r.j->>v_k2, r.j->>v_k3, r.j->>v_k4), 'insert', null, r.j - v_hidden
    from (select to_jsonb(n) as j from new_rows n) r;
  elsif tg_op = 'DELETE' then
    insert into billing.audit_log (community_id, actor_type, actor_id, key_id, request_id, table_name, row_id,
      operation, before, after)
    select r.j->>v_com, v_actor->>'type', v_actor->>'id', v_actor->>'key_id', v_actor->>'request_id', tg_table_name,
      concat_ws('/', r.j->>v_k1, r.j->>v_k2, r.j->>v_k3, r.j->>v_k4), 'delete', r.j - v_hidden, null
    from (select to_jsonb(o) as j from old_rows o) r;
  else
    -- Materialized: each row's JSON is made once (inlined, to_jsonb ran again for every
    -- column compared), and its changed columns listed once.
    with o as materialized (select to_jsonb(x) as j, row_number() over () as i from old_rows x),
         n as materialized (select to_jsonb(x) as j, row_number() over () as i from new_rows x),
         p as materialized (select o.j as oj, n.j as nj, array(select e.key from jsonb_each(n.j) e
                                     where e.value is distinct from o.j->e.key order by e.key) as changed
                            from o join n on n.i = o.i)
    insert into billing.audit_log (community_id, actor_type, actor_id, key_id, request_id, table_name, row_id,
      operation, changed, before, after)
    select p.nj->>v_com, v_actor->>'type', v_actor->>'id', v_actor->>'key_id', v_actor->>'request_id', tg_table_name,
      concat_ws('/', p.nj->>v_k1, p.nj->>v_k2, p.nj->>v_k3, p.nj->>v_k4), 'update', p.changed, p.oj - v_hidden, p.nj - v_hidden
    from p
    where not (p.changed <@ v_quiet);
  end if;
  return null;
end
$$;


--
-- Name: tg_audit_log__append_only(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_audit_log__append_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if tg_op = 'DELETE' and current_setting('app.audit_purge', true) = 'on' then
    return null;
  end if;
  raise exception using errcode = 'insufficient_privilege',
    message = format('billing.audit_log is append-only: %s is refused (only the retention purge deletes, rows older than the community''s audit_retention_days).', lower(tg_op));
end
$$;


--
-- Name: tg_audit_log__retention_only(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_audit_log__retention_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if exists (select 1 from old_rows o
             where o.occurred_at >= now() - make_interval(days => coalesce((select c.audit_retention_days
               from billing.communities c where c.id = o.community_id), 365))) then
    raise exception using errcode = 'insufficient_privilege',
      message = 'billing.audit_log is append-only: a row within its community''s audit_retention_days cannot be deleted.';
  end if;
  return null;
end
$$;


--
-- Name: tg_discount_codes__analytics(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_discount_codes__analytics() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  perform billing_private.analytics_refresh_locking(array_agg(s.community_id), array_agg(s.id))
  from billing.subscriptions s where s.community_id = new.community_id and s.discount_id = new.id;
  return null;
end
$$;


--
-- Name: tg_events__enqueue_deliveries(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_events__enqueue_deliveries() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_payloads json[];
begin
  -- No endpoint of the statement's communities is enabled (a community that serves only
  -- its platforms): one probe, not the insert's plan started for no row.
  if not exists (select 1 from billing.webhook_endpoints w
                 where w.community_id in (select e.community_id from new_events e) and w.enabled) then
    return null;
  end if;
  with d as (
    insert into billing.webhook_deliveries (community_id, endpoint_id, event_id, event_type, next_attempt_at)
    select e.community_id, w.id, e.id, e.type, now()
    from new_events e
    join billing.webhook_endpoints w
      on w.community_id = e.community_id and w.enabled
     and (w.event_types = '{}' or e.type = any (w.event_types))
    order by e.community_id, e.id, w.id
    returning community_id, endpoint_id, id
  ), chunks as (
    select community_id, endpoint_id, id,
      (row_number() over (partition by community_id, endpoint_id order by id) - 1) / 50 as chunk
    from d
  )
  select array_agg(json_build_object('community_id', community_id, 'endpoint_id', endpoint_id, 'ids', ids, 'after', 0))
  into v_payloads
  from (select community_id, endpoint_id, array_agg(id order by id) as ids from chunks
        group by community_id, endpoint_id, chunk) c;
  perform billing_private.add_job('webhook_deliveries__send', v_payloads, p_flag_key => 'endpoint_id');
  return null;
end
$$;


--
-- Name: tg_events__mail(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_events__mail() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_payloads json[];
begin
  if not exists (select 1 from new_events e where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded',
      'subscription.cancelled', 'member.entitlement.granted')) then
    return null;
  end if;
  with invoice_due as (
    select e.community_id, e.id as event_id, t.template,
      coalesce(e.data->'invoice'->>'member_id', e.data->'subscription'->>'member_id') as member_id, e.data
    from new_events e
    join billing.mail_templates() t on t.event_type = e.type
    where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded', 'subscription.cancelled')
      and (e.type <> 'invoice.paid' or (e.data->'invoice'->>'amount_paid_cents')::bigint > 0)
  ), access_due as (
    -- One access email per member and statement (a tier of several entitlements grants
    -- them together), made from its first event and naming them all.
    select e.community_id, min(e.id) as event_id, 'access_granted' as template, e.data->'member'->>'id' as member_id,
      jsonb_build_object('entitlement', jsonb_build_object('name',
        string_agg(e.data->'entitlement'->>'name', ', ' order by e.data->'entitlement'->>'name'))) as data
    from new_events e
    where e.type = 'member.entitlement.granted'
    group by e.community_id, e.data->'member'->>'id'
  ), due as materialized (
    -- materialized: only these rows (members with an email, templates on) reach the
    -- lateral below, which makes link codes
    select d.*, m.email, c.name as community_name, billing.mail_optional(c, d.template) as optional
    from (select * from invoice_due union all select * from access_due) d
    join billing.members m on m.community_id = d.community_id and m.id = d.member_id and m.email is not null
    join billing.communities c on c.id = d.community_id and not (d.template = any (c.mail_templates_off))
  ), made as (
    insert into billing.mail_messages (community_id, member_id, template, event_id, to_address, subject, text_body, html_body, unsubscribable)
    select d.community_id, d.member_id, d.template, d.event_id, d.email, r.msg->>'subject', r.msg->>'text', r.msg->>'html', d.optional
    from due d
    cross join lateral (select billing.mail_render(d.community_name, d.template, case when d.template = 'access_granted'
      then d.data || jsonb_build_object('link_codes', billing_private.mail_link_codes(d.community_id, d.member_id))
      else d.data end || jsonb_build_object('unsubscribe', d.optional)) as msg) r
    order by d.community_id, d.event_id, d.template
    on conflict (community_id, event_id, template) do nothing
    returning community_id, id
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids))
  into v_payloads
  from (select community_id, array_agg(id order by id) as ids from made group by community_id) g;
  perform billing_private.add_job('mail_messages__send', v_payloads);
  return null;
end
$$;


--
-- Name: tg_invoices__analytics(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_invoices__analytics() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  perform billing_private.analytics_refresh_locking(array_agg(n.community_id), array_agg(n.subscription_id))
  from new_rows n where n.subscription_id is not null and n.discount_cents > 0;
  return null;
end
$$;


--
-- Name: tg_plans__analytics(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_plans__analytics() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  perform billing_private.analytics_refresh_locking(array_agg(s.community_id), array_agg(s.id))
  from billing.subscriptions s where s.community_id = new.community_id and s.plan_id = new.id;
  return null;
end
$$;


--
-- Name: tg_platform_secrets__deliveries(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_platform_secrets__deliveries() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  perform billing_private.enqueue_connection_deliveries(new.community_id, new.platform_config_id);
  return null;
end
$$;


--
-- Name: tg_subscriptions__analytics(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_subscriptions__analytics() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  if tg_op = 'DELETE' then
    perform billing_private.analytics_refresh(array_agg(o.community_id), array_agg(o.id)) from old_rows o;
  else
    perform billing_private.analytics_refresh(array_agg(n.community_id), array_agg(n.id)) from new_rows n;
  end if;
  return null;
end
$$;


--
-- Name: tg_subscriptions__analytics_update(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_subscriptions__analytics_update() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_communities text[];
  v_ids text[];
begin
  select array_agg(n.community_id), array_agg(n.id) into v_communities, v_ids
  from new_rows n
  join old_rows o on o.community_id = n.community_id and o.id = n.id
  where (n.status, n.plan_id, n.member_id, n.discount_id, n.created_at, n.trial_end, n.cancelled_at, n.cancel_requested_at, n.price_cents,
         n.tax_inclusive_ppm)
        is distinct from (o.status, o.plan_id, o.member_id, o.discount_id, o.created_at, o.trial_end, o.cancelled_at, o.cancel_requested_at, o.price_cents,
         o.tax_inclusive_ppm)
     or n.status in ('paused', 'cancelled', 'cancelling') and n.updated_at is distinct from o.updated_at
     or n.discount_id is not null and n.current_period_end is distinct from o.current_period_end;
  if v_ids is not null then
    perform billing_private.analytics_refresh(v_communities, v_ids);
  end if;
  return null;
end
$$;


--
-- Name: tg_webhook_endpoints__check_event_types(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_webhook_endpoints__check_event_types() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_i integer;
begin
  for v_i in 1 .. coalesce(cardinality(new.event_types), 0) loop
    if not exists (select 1 from billing_private.event_types t where t.type = new.event_types[v_i]) then
      raise exception using errcode = 'BL422',
        message = 'Unknown event type "' || coalesce(new.event_types[v_i], 'null')
          || '"; GET /v1/webhooks/event-types lists them.',
        detail = 'event_types.' || (v_i - 1);
    end if;
  end loop;
  return new;
end
$$;


--
-- Name: tg_webhook_endpoints__limit(); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.tg_webhook_endpoints__limit() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
  perform pg_advisory_xact_lock(hashtextextended('webhook_endpoints ' || new.community_id, 70));
  if (select count(*) from billing.webhook_endpoints w where w.community_id = new.community_id) >= 5 then
    raise exception using errcode = 'BLEPL',
      message = 'This community already has 5 webhook endpoints; delete one first.';
  end if;
  return new;
end
$$;


--
-- Name: user_agent_summary(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.user_agent_summary(p_ua text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select case when coalesce(p_ua, '') = '' then null else
    coalesce(
      case when p_ua ~ 'Edg/\d' then 'Edge ' || substring(p_ua from 'Edg/(\d+)')
           when p_ua ~ 'OPR/\d' then 'Opera ' || substring(p_ua from 'OPR/(\d+)')
           when p_ua ~ 'Firefox/\d' then 'Firefox ' || substring(p_ua from 'Firefox/(\d+)')
           when p_ua ~ 'Chrome/\d' then 'Chrome ' || substring(p_ua from 'Chrome/(\d+)')
           when p_ua ~ 'Version/\d+.*Safari/' then 'Safari ' || substring(p_ua from 'Version/(\d+)')
           when p_ua ~* '^curl/' then 'curl'
      end, 'Another browser')
    || coalesce(' on ' || case when p_ua ~ 'Windows' then 'Windows' when p_ua ~ 'Android' then 'Android'
         when p_ua ~ 'iPhone|iPad' then 'iOS' when p_ua ~ 'CrOS' then 'ChromeOS'
         when p_ua ~ 'Mac OS X|Macintosh' then 'macOS' when p_ua ~ 'Linux' then 'Linux' end, '')
  end
$$;


--
-- Name: webhook_deliveries_load(text, text[], integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.webhook_deliveries_load(p_community_id text, p_ids text[], p_after integer) RETURNS TABLE(id text, endpoint_id text, url text, event_id text, body text, ciphertexts text[])
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
#variable_conflict use_column
declare
  v_disabled text[];
begin
  -- Every lookup is one primary-key probe per id of the job (lateral ... limit 1). Plans
  -- are made per call (plan_cache_mode above): a generic plan cached by a long-lived
  -- worker connection while the table was nearly empty may pick the endpoint index for
  -- these probes, which then reads every delivery of the community on each call.
  select array_agg(d.id) into v_disabled
  from unnest(p_ids) as x(id)
  cross join lateral (
    select d.id from billing.webhook_deliveries d
    join billing.webhook_endpoints w on w.community_id = d.community_id and w.id = d.endpoint_id
    where d.community_id = p_community_id and d.id = x.id and d.status = 'pending'
      and d.attempt_count = p_after and not w.enabled
    limit 1) d;
  if v_disabled is not null then
    update billing.webhook_deliveries d set status = 'failed', next_attempt_at = null,
      last_error = 'endpoint disabled', updated_at = now()
    where d.community_id = p_community_id and d.id = any (v_disabled);
  end if;
  return query
    select d.id::text, d.endpoint_id::text, d.url, d.event_id::text, d.body, d.ciphertexts
    from unnest(p_ids) as x(id)
    cross join lateral (
      select d.id, d.endpoint_id, w.url, d.event_id, billing.event_json(e)::text as body,
        array_remove(array[s.secret_ciphertext,
          case when s.previous_expires_at > now() then s.previous_ciphertext end], null) as ciphertexts
      from billing.webhook_deliveries d
      join billing.webhook_endpoints w on w.community_id = d.community_id and w.id = d.endpoint_id
      join billing.events e on e.community_id = d.community_id and e.id = d.event_id
      left join billing_private.webhook_secrets s on s.community_id = d.community_id and s.endpoint_id = d.endpoint_id
      where d.community_id = p_community_id and d.id = x.id and d.status = 'pending'
        and d.attempt_count = p_after and w.enabled
      limit 1) d;
end
$$;


--
-- Name: webhook_delivery_enqueue(text, boolean); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.webhook_delivery_enqueue(p_delivery_id text, p_manual boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_delivery billing.webhook_deliveries;
begin
  select * into v_delivery from billing.webhook_deliveries d
  where d.community_id = billing.current_community_id() and d.id = p_delivery_id and d.status = 'pending';
  if v_delivery.id is null then
    perform billing.raise('BL404', 'No pending delivery ' || p_delivery_id || '.');
  end if;
  perform billing_private.add_job('webhook_deliveries__send', array[json_build_object(
    'community_id', v_delivery.community_id, 'endpoint_id', v_delivery.endpoint_id, 'ids', array[v_delivery.id],
    'after', v_delivery.attempt_count, 'manual', p_manual)], p_flag_key => 'endpoint_id');
end
$$;


--
-- Name: webhook_record_attempts(text, integer, boolean, jsonb, timestamp with time zone, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.webhook_record_attempts(p_community_id text, p_after integer, p_manual boolean, p_results jsonb, p_retry_at timestamp with time zone, p_disable_after interval) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
declare
  v_retries json[];
  v_endpoint_ids text[];
  v_disabled billing.webhook_endpoints;
  v_retry_at timestamptz := case when p_manual then null else p_retry_at end;
begin
  -- r.tid: each delivery's row, found by a primary-key probe (see webhook_deliveries_load);
  -- the update reaches it by ctid alone (a community_id condition there invites a scan
  -- of the community's deliveries).
  with r as (
    select r.*, t.tid from jsonb_to_recordset(p_results) as r (id text, ok boolean, status_code integer,
      error text, excerpt text, started_at timestamptz, finished_at timestamptz, duration_ms integer)
    cross join lateral (select d.ctid as tid from billing.webhook_deliveries d
                        where d.community_id = p_community_id and d.id = r.id limit 1) t
  ), upd as (
    update billing.webhook_deliveries d set
      attempt_count = d.attempt_count + 1,
      status = case when r.ok then 'succeeded' when v_retry_at is null then 'failed' else 'pending' end,
      next_attempt_at = case when r.ok then null else v_retry_at end,
      last_status_code = r.status_code, last_error = r.error, updated_at = now()
    from r
    where d.ctid = r.tid and d.id = r.id and d.attempt_count = p_after
    returning d.id, d.endpoint_id, d.attempt_count, d.status
  ), ins as (
    insert into billing.webhook_attempts (community_id, delivery_id, endpoint_id, attempt, status_code,
      duration_ms, error, response_excerpt, started_at, finished_at, next_attempt_at)
    select p_community_id, upd.id, upd.endpoint_id, upd.attempt_count, r.status_code, r.duration_ms, r.error,
      r.excerpt, r.started_at, r.finished_at, case when upd.status = 'pending' then v_retry_at end
    from upd join r on r.id = upd.id
  ), streak as (
    -- Success path: no write unless a streak was running (no hot-row contention).
    update billing.webhook_endpoints w set
      failing_since = case when s.any_ok then null else coalesce(w.failing_since, s.first_failure) end
    from (select upd.endpoint_id, bool_or(r.ok) as any_ok, min(r.started_at) as first_failure
          from upd join r on r.id = upd.id group by upd.endpoint_id) s
    where w.community_id = p_community_id and w.id = s.endpoint_id
      and (w.failing_since is not null or not s.any_ok)
    returning w.id
  )
  select (select array_agg(json_build_object('community_id', p_community_id, 'endpoint_id', p.endpoint_id,
            'ids', p.ids, 'after', p_after + 1))
          from (select u.endpoint_id, array_agg(u.id order by u.id) as ids from upd u
                where u.status = 'pending' group by u.endpoint_id) p),
    (select array_agg(streak.id) from streak)
  into v_retries, v_endpoint_ids;

  -- One retry job per endpoint, flagged like the first (60-events.sql).
  perform billing_private.add_job('webhook_deliveries__send', v_retries, v_retry_at, p_flag_key => 'endpoint_id');

  if v_endpoint_ids is null then
    return;
  end if;
  for v_disabled in
    update billing.webhook_endpoints w set enabled = false, disabled_reason = 'failing', updated_at = now()
    where w.community_id = p_community_id and w.id = any (v_endpoint_ids) and w.enabled
      and w.failing_since <= now() - p_disable_after
    returning w.*
  loop
    perform billing.emit_event(p_community_id, 'webhook_endpoint.disabled', jsonb_build_object(
      'endpoint', billing.webhook_endpoint_json(v_disabled), 'reason', 'failing',
      'failing_since', billing.iso(v_disabled.failing_since)));
  end loop;
end
$$;


--
-- Name: webhook_secret_store(text, text, boolean, interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.webhook_secret_store(p_endpoint_id text, p_ciphertext text, p_rotate boolean, p_grace interval DEFAULT '24:00:00'::interval) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_community_id text := billing.current_community_id();
begin
  if v_community_id is null or not exists (select 1 from billing.webhook_endpoints w
      where w.community_id = v_community_id and w.id = p_endpoint_id) then
    perform billing.raise('BL404', 'No webhook endpoint ' || p_endpoint_id || '.');
  end if;
  if p_rotate then
    update billing_private.webhook_secrets s set
      previous_ciphertext = s.secret_ciphertext, previous_expires_at = now() + p_grace,
      secret_ciphertext = p_ciphertext
    where s.community_id = v_community_id and s.endpoint_id = p_endpoint_id;
    if not found then
      insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext)
      values (v_community_id, p_endpoint_id, p_ciphertext);
    end if;
  else
    insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext)
    values (v_community_id, p_endpoint_id, p_ciphertext)
    on conflict (community_id, endpoint_id) do update set secret_ciphertext = excluded.secret_ciphertext,
      previous_ciphertext = null, previous_expires_at = null;
  end if;
end
$$;


--
-- Name: webhook_signing_ciphertexts(text, text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.webhook_signing_ciphertexts(p_community_id text, p_endpoint_id text) RETURNS text[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  select array_remove(array[s.secret_ciphertext,
    case when s.previous_expires_at > now() then s.previous_ciphertext end], null)
  from billing_private.webhook_secrets s
  where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id
$$;


--
-- Name: webhook_test_target(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.webhook_test_target(p_endpoint_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_community_id text := billing.current_community_id();
  v_endpoint billing.webhook_endpoints;
  v_rl jsonb;
begin
  select * into v_endpoint from billing.webhook_endpoints w
  where w.community_id = v_community_id and w.id = p_endpoint_id;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || p_endpoint_id || '.');
  end if;
  v_rl := billing_private.take_token('webhook_test:' || v_endpoint.id, 10, 10);
  return jsonb_build_object('allowed', (v_rl->>'allowed')::boolean, 'retry_after', v_rl->'retry_after',
    'url', v_endpoint.url, 'community_id', v_community_id,
    'ciphertexts', to_jsonb(billing_private.webhook_signing_ciphertexts(v_community_id, v_endpoint.id)));
end
$$;


--
-- Name: worker_apply_due(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.worker_apply_due(p_community_id text) RETURNS jsonb
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ select billing.apply_due(p_community_id) $$;


--
-- Name: worker_apply_due_batch(text, text, integer); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.worker_apply_due_batch(p_community_id text, p_after text, p_limit integer) RETURNS jsonb
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ select billing.apply_due_batch(p_community_id, p_after, p_limit) $$;


--
-- Name: worker_apply_due_finish(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.worker_apply_due_finish(p_community_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_expired integer;
begin
  perform set_config('app.community_id', p_community_id, true);
  v_expired := billing.expire_checkouts();
  perform billing.ledger_sweep(p_community_id);
  return jsonb_build_object('expired_checkouts', v_expired);
end
$$;


--
-- Name: worker_community_ids(text); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.worker_community_ids(p_only text) RETURNS SETOF text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ select c.id::text from billing.communities c where p_only is null or c.id = p_only order by c.id $$;


--
-- Name: worker_heartbeat(text[], interval); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.worker_heartbeat(p_worker_ids text[], p_stale interval) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
  v_dead text[];
begin
  insert into billing_private.worker_heartbeats (worker_id, seen_at)
  select w, now() from unnest(p_worker_ids) w
  on conflict (worker_id) do update set seen_at = excluded.seen_at;
  with dead as (
    delete from billing_private.worker_heartbeats h where h.seen_at < now() - p_stale returning h.worker_id
  )
  select array_agg(worker_id) into v_dead from dead;
  if v_dead is not null then
    perform graphile_worker.force_unlock_workers(v_dead);
  end if;
  return coalesce(v_dead, '{}');
end
$$;


--
-- Name: worker_heartbeat_stop(text[]); Type: FUNCTION; Schema: billing_private; Owner: -
--

CREATE FUNCTION billing_private.worker_heartbeat_stop(p_worker_ids text[]) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  delete from billing_private.worker_heartbeats where worker_id = any (p_worker_ids)
$$;


--
-- Name: subscription_mrr; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.subscription_mrr WITH (security_invoker='true') AS
 SELECT s.community_id,
    s.id AS subscription_id,
    s.member_id,
    s.status,
    p.id AS plan_id,
    p.tier_id,
    p.currency,
    (
        CASE
            WHEN (p."interval" = 'year'::text) THEN (((s.price_cents - d.cents))::numeric / 12.0)
            ELSE ((s.price_cents - d.cents))::numeric
        END *
        CASE
            WHEN (s.tax_inclusive_ppm = 0) THEN (1)::numeric
            ELSE (1000000.0 / ((1000000 + s.tax_inclusive_ppm))::numeric)
        END) AS monthly_cents,
    (s.status = ANY (ARRAY['active'::text, 'past_due'::text, 'cancelling'::text])) AS billing_now,
        CASE
            WHEN (s.status = 'trialing'::text) THEN 'infinity'::timestamp with time zone
            ELSE GREATEST(s.created_at, COALESCE(s.trial_end, s.created_at))
        END AS billing_from,
        CASE
            WHEN (s.status = 'cancelled'::text) THEN COALESCE(s.cancelled_at, s.updated_at)
            WHEN (s.status = 'paused'::text) THEN s.updated_at
            ELSE NULL::timestamp with time zone
        END AS billing_until,
    s.created_at,
        CASE
            WHEN (s.status = ANY (ARRAY['cancelling'::text, 'cancelled'::text])) THEN COALESCE(s.cancel_requested_at, s.cancelled_at, s.updated_at)
            ELSE NULL::timestamp with time zone
        END AS cancel_counted_at
   FROM ((billing.subscriptions s
     JOIN billing.plans p ON (((p.community_id = s.community_id) AND (p.id = s.plan_id))))
     CROSS JOIN LATERAL ( SELECT
                CASE
                    WHEN (s.discount_id IS NULL) THEN (0)::bigint
                    ELSE billing.subscription_discount_cents(s.*, (s.price_cents)::bigint, s.current_period_end)
                END AS cents) d);


--
-- Name: churn; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.churn WITH (security_invoker='true') AS
 SELECT c.id AS community_id,
    w.window_start,
    w.window_end,
    count(m.subscription_id) AS billing_at_start,
    count(m.subscription_id) FILTER (WHERE (m.billing_until <= w.window_end)) AS churned,
    round(((count(m.subscription_id) FILTER (WHERE (m.billing_until <= w.window_end)))::numeric / (NULLIF(count(m.subscription_id), 0))::numeric), 4) AS churn_rate
   FROM ((billing.communities c
     CROSS JOIN LATERAL ( SELECT (billing.community_now(c.id) - '30 days'::interval) AS window_start,
            billing.community_now(c.id) AS window_end) w)
     LEFT JOIN analytics.subscription_mrr m ON (((m.community_id = c.id) AND (m.billing_from <= w.window_start) AND ((m.billing_until IS NULL) OR (m.billing_until > w.window_start)))))
  GROUP BY c.id, w.window_start, w.window_end;


--
-- Name: daily_activity; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.daily_activity WITH (security_invoker='true') AS
 SELECT a.community_id,
    a.day,
    sum(a.signups) AS signups,
    sum(a.cancels) AS cancels,
    sum(a.ended) AS ended
   FROM ( SELECT s.community_id,
            ((s.created_at AT TIME ZONE 'UTC'::text))::date AS day,
            1 AS signups,
            0 AS cancels,
            0 AS ended
           FROM billing.subscriptions s
        UNION ALL
         SELECT s.community_id,
            ((COALESCE(s.cancel_requested_at, s.cancelled_at, s.updated_at) AT TIME ZONE 'UTC'::text))::date AS timezone,
            0,
            1,
            0
           FROM billing.subscriptions s
          WHERE (s.status = ANY (ARRAY['cancelling'::text, 'cancelled'::text]))
        UNION ALL
         SELECT s.community_id,
            ((s.cancelled_at AT TIME ZONE 'UTC'::text))::date AS timezone,
            0,
            0,
            1
           FROM billing.subscriptions s
          WHERE (s.cancelled_at IS NOT NULL)) a
  GROUP BY a.community_id, a.day;


--
-- Name: days; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.days WITH (security_invoker='true') AS
 SELECT c.id AS community_id,
    (d.d)::date AS day,
    LEAST(((d.d + '1 day'::interval))::timestamp with time zone, billing.community_now(c.id)) AS as_of,
    ((d.d)::date = ((billing.community_now(c.id) AT TIME ZONE 'UTC'::text))::date) AS today
   FROM (billing.communities c
     CROSS JOIN LATERAL generate_series((date_trunc('day'::text, (billing.community_now(c.id) AT TIME ZONE 'UTC'::text)) - '89 days'::interval), date_trunc('day'::text, (billing.community_now(c.id) AT TIME ZONE 'UTC'::text)), '1 day'::interval) d(d));


--
-- Name: entitlement_activity_daily; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.entitlement_activity_daily WITH (security_invoker='true') AS
 SELECT e.community_id,
    ((e.created_at AT TIME ZONE 'UTC'::text))::date AS day,
    count(*) FILTER (WHERE (e.type = 'member.entitlement.granted'::text)) AS grants,
    count(*) FILTER (WHERE (e.type = 'member.entitlement.revoked'::text)) AS revokes
   FROM billing.events e
  WHERE (e.type = ANY (ARRAY['member.entitlement.granted'::text, 'member.entitlement.revoked'::text]))
  GROUP BY e.community_id, (((e.created_at AT TIME ZONE 'UTC'::text))::date);


--
-- Name: mrr; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.mrr WITH (security_invoker='true') AS
 SELECT m.community_id,
    m.currency,
    (round(sum(m.monthly_cents)))::bigint AS mrr_cents,
    count(*) AS billing_subscriptions
   FROM analytics.subscription_mrr m
  WHERE m.billing_now
  GROUP BY m.community_id, m.currency;


--
-- Name: mrr_by_tier; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.mrr_by_tier WITH (security_invoker='true') AS
 SELECT m.community_id,
    m.tier_id,
    t.name AS tier_name,
    m.currency,
    (round(sum(m.monthly_cents)))::bigint AS mrr_cents,
    count(*) AS billing_subscriptions
   FROM (analytics.subscription_mrr m
     JOIN billing.tiers t ON (((t.community_id = m.community_id) AND (t.id = m.tier_id))))
  WHERE m.billing_now
  GROUP BY m.community_id, m.tier_id, t.name, m.currency;


--
-- Name: mrr_movements; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.mrr_movements (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('mrm'::text) NOT NULL COLLATE pg_catalog."C",
    subscription_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    plan_id text COLLATE pg_catalog."C",
    occurred_at timestamp with time zone NOT NULL,
    day date NOT NULL,
    currency text NOT NULL,
    kind text NOT NULL,
    from_cents numeric NOT NULL,
    to_cents numeric NOT NULL,
    from_billing boolean NOT NULL,
    to_billing boolean NOT NULL,
    CONSTRAINT mrr_movements_kind_check CHECK ((kind = ANY (ARRAY['new'::text, 'expansion'::text, 'contraction'::text, 'churn'::text, 'reactivation'::text])))
);

ALTER TABLE ONLY billing.mrr_movements FORCE ROW LEVEL SECURITY;


--
-- Name: mrr_daily; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.mrr_daily WITH (security_invoker='true') AS
 WITH dd AS MATERIALIZED (
         SELECT days.community_id,
            days.day,
            days.today
           FROM analytics.days
        ), per_day AS MATERIALIZED (
         SELECT m.community_id,
            m.currency,
            m.day AS bucket,
            sum((m.to_cents - m.from_cents)) AS delta,
            sum(((m.to_billing)::integer - (m.from_billing)::integer)) AS n
           FROM billing.mrr_movements m
          GROUP BY m.community_id, m.currency, m.day
        )
 SELECT dy.community_id,
    dy.day,
    pd.currency,
    (round(sum(pd.delta)))::bigint AS mrr_cents,
    (sum(pd.n))::bigint AS billing_subscriptions
   FROM (dd dy
     JOIN per_day pd ON (((pd.community_id = dy.community_id) AND ((pd.bucket <= dy.day) OR dy.today))))
  GROUP BY dy.community_id, dy.day, pd.currency
 HAVING (sum(pd.n) > (0)::numeric);


--
-- Name: mrr_movements_daily; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.mrr_movements_daily WITH (security_invoker='true') AS
 SELECT m.community_id,
    m.day,
    m.currency,
    (round(COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'new'::text)), (0)::numeric)))::bigint AS new_cents,
    (round(COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'expansion'::text)), (0)::numeric)))::bigint AS expansion_cents,
    (round(COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'contraction'::text)), (0)::numeric)))::bigint AS contraction_cents,
    (round(COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'churn'::text)), (0)::numeric)))::bigint AS churn_cents,
    (round(COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'reactivation'::text)), (0)::numeric)))::bigint AS reactivation_cents,
    (round(sum((m.to_cents - m.from_cents))))::bigint AS net_cents,
    count(*) FILTER (WHERE (m.kind = 'new'::text)) AS new_count,
    count(*) FILTER (WHERE (m.kind = 'expansion'::text)) AS expansion_count,
    count(*) FILTER (WHERE (m.kind = 'contraction'::text)) AS contraction_count,
    count(*) FILTER (WHERE (m.kind = 'churn'::text)) AS churn_count,
    count(*) FILTER (WHERE (m.kind = 'reactivation'::text)) AS reactivation_count
   FROM billing.mrr_movements m
  GROUP BY m.community_id, m.day, m.currency;


--
-- Name: mrr_movements_monthly; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.mrr_movements_monthly WITH (security_invoker='true') AS
 SELECT x.community_id,
    x.month,
    x.currency,
    (round((sum(x.net) OVER w - x.net)))::bigint AS opening_mrr_cents,
    (round(x.new))::bigint AS new_cents,
    (round(x.expansion))::bigint AS expansion_cents,
    (round(x.contraction))::bigint AS contraction_cents,
    (round(x.churn))::bigint AS churn_cents,
    (round(x.reactivation))::bigint AS reactivation_cents,
    (round(x.net))::bigint AS net_cents,
    (round(sum(x.net) OVER w))::bigint AS closing_mrr_cents,
    x.new_count,
    x.expansion_count,
    x.contraction_count,
    x.churn_count,
    x.reactivation_count
   FROM ( SELECT m.community_id,
            (date_trunc('month'::text, (m.day)::timestamp with time zone))::date AS month,
            m.currency,
            COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'new'::text)), (0)::numeric) AS new,
            COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'expansion'::text)), (0)::numeric) AS expansion,
            COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'contraction'::text)), (0)::numeric) AS contraction,
            COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'churn'::text)), (0)::numeric) AS churn,
            COALESCE(sum((m.to_cents - m.from_cents)) FILTER (WHERE (m.kind = 'reactivation'::text)), (0)::numeric) AS reactivation,
            sum((m.to_cents - m.from_cents)) AS net,
            count(*) FILTER (WHERE (m.kind = 'new'::text)) AS new_count,
            count(*) FILTER (WHERE (m.kind = 'expansion'::text)) AS expansion_count,
            count(*) FILTER (WHERE (m.kind = 'contraction'::text)) AS contraction_count,
            count(*) FILTER (WHERE (m.kind = 'churn'::text)) AS churn_count,
            count(*) FILTER (WHERE (m.kind = 'reactivation'::text)) AS reactivation_count
           FROM billing.mrr_movements m
          GROUP BY m.community_id, ((date_trunc('month'::text, (m.day)::timestamp with time zone))::date), m.currency) x
  WINDOW w AS (PARTITION BY x.community_id, x.currency ORDER BY x.month);


--
-- Name: paid_invoices_daily; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.paid_invoices_daily WITH (security_invoker='true') AS
 SELECT i.community_id,
    ((i.paid_at AT TIME ZONE 'UTC'::text))::date AS day,
    i.currency,
    count(*) AS invoices,
    (sum(i.amount_paid_cents))::bigint AS paid_cents,
    (sum(i.amount_refunded_cents))::bigint AS refunded_cents,
    (sum(i.tax_cents))::bigint AS tax_cents
   FROM billing.invoices i
  WHERE (i.status = 'paid'::text)
  GROUP BY i.community_id, (((i.paid_at AT TIME ZONE 'UTC'::text))::date), i.currency;


--
-- Name: recent_activity; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.recent_activity WITH (security_invoker='true') AS
 SELECT c.id AS community_id,
    w.window_start,
    n.now AS window_end,
    ( SELECT count(*) AS count
           FROM billing.subscriptions s
          WHERE ((s.community_id = c.id) AND (s.created_at >= w.window_start) AND (s.created_at < (w.window_start + '720:00:00'::interval)))) AS recent_signups,
    ( SELECT count(*) AS count
           FROM billing.subscriptions s
          WHERE ((s.community_id = c.id) AND (s.status = ANY (ARRAY['cancelling'::text, 'cancelled'::text])) AND (COALESCE(s.cancel_requested_at, s.cancelled_at, s.updated_at) >= w.window_start) AND (COALESCE(s.cancel_requested_at, s.cancelled_at, s.updated_at) < (w.window_start + '720:00:00'::interval)))) AS recent_cancels
   FROM ((billing.communities c
     CROSS JOIN LATERAL ( SELECT billing.now() AS now
         OFFSET 0) n)
     CROSS JOIN LATERAL ( SELECT ((date_trunc('day'::text, (n.now AT TIME ZONE 'UTC'::text)) - '29 days'::interval) AT TIME ZONE 'UTC'::text) AS window_start) w);


--
-- Name: revenue_daily; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.revenue_daily WITH (security_invoker='true') AS
 SELECT r.community_id,
    r.day,
    r.currency,
    (sum(r.subscription_cents))::bigint AS subscription_cents,
    (sum(r.purchase_cents))::bigint AS purchase_cents,
    (sum((r.subscription_cents + r.purchase_cents)))::bigint AS total_cents
   FROM ( SELECT i.community_id,
            ((i.paid_at AT TIME ZONE 'UTC'::text))::date AS day,
            i.currency,
            (i.amount_paid_cents - i.tax_cents) AS subscription_cents,
            (0)::bigint AS purchase_cents
           FROM billing.invoices i
          WHERE ((i.status = 'paid'::text) AND (i.subscription_id IS NOT NULL))
        UNION ALL
         SELECT p.community_id,
            ((p.paid_at AT TIME ZONE 'UTC'::text))::date AS timezone,
            p.currency,
            0,
            (p.amount_cents - COALESCE(( SELECT (i.tax_cents - ((i.total_cents - i.subtotal_cents) + i.discount_cents))
                   FROM billing.invoices i
                  WHERE ((i.community_id = p.community_id) AND (i.purchase_id = p.id) AND (i.status = 'paid'::text))
                 LIMIT 1), (0)::bigint))
           FROM billing.purchases p) r
  GROUP BY r.community_id, r.day, r.currency;


--
-- Name: subscribers; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.subscribers WITH (security_invoker='true') AS
 SELECT s.community_id,
    count(DISTINCT s.member_id) AS active_subscribers
   FROM billing.subscriptions s
  WHERE (s.status = ANY (ARRAY['active'::text, 'trialing'::text, 'past_due'::text, 'cancelling'::text]))
  GROUP BY s.community_id;


--
-- Name: trial_conversion; Type: VIEW; Schema: analytics; Owner: -
--

CREATE VIEW analytics.trial_conversion WITH (security_invoker='true') AS
 SELECT s.community_id,
    count(*) AS trials,
    count(*) FILTER (WHERE (s.trial_end <= billing.community_now(s.community_id))) AS trials_ended,
    count(*) FILTER (WHERE ((s.trial_end <= billing.community_now(s.community_id)) AND ((s.status = ANY (ARRAY['active'::text, 'past_due'::text, 'cancelling'::text])) OR (EXISTS ( SELECT 1
           FROM billing.invoices i
          WHERE ((i.community_id = s.community_id) AND (i.subscription_id = s.id) AND (i.status = 'paid'::text) AND (i.total_cents > 0) AND (i.paid_at >= s.trial_end))))))) AS converted,
    round(((count(*) FILTER (WHERE ((s.trial_end <= billing.community_now(s.community_id)) AND ((s.status = ANY (ARRAY['active'::text, 'past_due'::text, 'cancelling'::text])) OR (EXISTS ( SELECT 1
           FROM billing.invoices i
          WHERE ((i.community_id = s.community_id) AND (i.subscription_id = s.id) AND (i.status = 'paid'::text) AND (i.total_cents > 0) AND (i.paid_at >= s.trial_end))))))))::numeric / (NULLIF(count(*) FILTER (WHERE (s.trial_end <= billing.community_now(s.community_id))), 0))::numeric), 4) AS conversion_rate
   FROM billing.subscriptions s
  WHERE (s.trial_end IS NOT NULL)
  GROUP BY s.community_id;


--
-- Name: benefit_deliveries; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.benefit_deliveries (
    community_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    platform_config_id text NOT NULL COLLATE pg_catalog."C",
    type text NOT NULL,
    value text NOT NULL,
    want text NOT NULL,
    status text NOT NULL,
    applied_uid text,
    error text,
    state jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT benefit_deliveries_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text, 'action_required'::text]))),
    CONSTRAINT benefit_deliveries_want_check CHECK ((want = ANY (ARRAY['present'::text, 'absent'::text])))
);

ALTER TABLE ONLY billing.benefit_deliveries FORCE ROW LEVEL SECURITY;


--
-- Name: discount_redemptions; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.discount_redemptions (
    community_id text NOT NULL COLLATE pg_catalog."C",
    discount_id uuid NOT NULL,
    checkout_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    status text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT discount_redemptions_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'redeemed'::text, 'released'::text])))
);

ALTER TABLE ONLY billing.discount_redemptions FORCE ROW LEVEL SECURITY;


--
-- Name: entitlement_benefits; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.entitlement_benefits (
    community_id text NOT NULL COLLATE pg_catalog."C",
    entitlement_id text NOT NULL COLLATE pg_catalog."C",
    platform_config_id text NOT NULL COLLATE pg_catalog."C",
    type text NOT NULL,
    value text NOT NULL
);

ALTER TABLE ONLY billing.entitlement_benefits FORCE ROW LEVEL SECURITY;


--
-- Name: external_subjects; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.external_subjects (
    community_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    namespace text NOT NULL,
    external_user_id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT external_subjects_external_user_id_check CHECK (((length(external_user_id) >= 1) AND (length(external_user_id) <= 200))),
    CONSTRAINT external_subjects_namespace_check CHECK (((length(namespace) >= 1) AND (length(namespace) <= 200)))
);

ALTER TABLE ONLY billing.external_subjects FORCE ROW LEVEL SECURITY;


--
-- Name: idempotency_keys; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.idempotency_keys (
    community_id text NOT NULL COLLATE pg_catalog."C",
    endpoint text NOT NULL,
    key text NOT NULL,
    request_hash text NOT NULL,
    response_status integer NOT NULL,
    response_body jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

ALTER TABLE ONLY billing.idempotency_keys FORCE ROW LEVEL SECURITY;


--
-- Name: link_codes; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.link_codes (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('lc'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    code text NOT NULL,
    intended_platform text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    redeemed_at timestamp with time zone,
    invalidated_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT link_codes_intended_platform_check CHECK ((intended_platform = ANY (ARRAY['discord'::text, 'telegram'::text])))
);

ALTER TABLE ONLY billing.link_codes FORCE ROW LEVEL SECURITY;


--
-- Name: mail_unsubscribes; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.mail_unsubscribes (
    community_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    template text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing.mail_unsubscribes FORCE ROW LEVEL SECURITY;


--
-- Name: member_identities; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.member_identities (
    community_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    platform text NOT NULL,
    platform_uid text NOT NULL,
    username text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT member_identities_platform_check CHECK ((platform = ANY (ARRAY['discord'::text, 'telegram'::text])))
);

ALTER TABLE ONLY billing.member_identities FORCE ROW LEVEL SECURITY;


--
-- Name: member_provider_customers; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.member_provider_customers (
    community_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    provider text NOT NULL,
    customer_ref text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT member_provider_customers_customer_ref_check CHECK (((length(customer_ref) >= 1) AND (length(customer_ref) <= 255))),
    CONSTRAINT member_provider_customers_provider_check CHECK ((provider = 'stripe'::text))
);

ALTER TABLE ONLY billing.member_provider_customers FORCE ROW LEVEL SECURITY;


--
-- Name: payment_attempts; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.payment_attempts (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('pay'::text) NOT NULL COLLATE pg_catalog."C",
    invoice_id text NOT NULL COLLATE pg_catalog."C",
    status text NOT NULL,
    amount_cents bigint NOT NULL,
    failure_message text,
    provider text NOT NULL,
    provider_ref text,
    attempted_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT payment_attempts_amount_cents_check CHECK ((amount_cents >= 0)),
    CONSTRAINT payment_attempts_failure_explained CHECK (((status = 'failed'::text) = (failure_message IS NOT NULL))),
    CONSTRAINT payment_attempts_provider_check CHECK ((provider = ANY (ARRAY['sandbox'::text, 'stripe'::text]))),
    CONSTRAINT payment_attempts_status_check CHECK ((status = ANY (ARRAY['succeeded'::text, 'failed'::text])))
);

ALTER TABLE ONLY billing.payment_attempts FORCE ROW LEVEL SECURITY;


--
-- Name: platform_actions; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.platform_actions (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('pact'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text COLLATE pg_catalog."C",
    platform_config_id text NOT NULL COLLATE pg_catalog."C",
    action text NOT NULL,
    target text NOT NULL,
    outcome text NOT NULL,
    status_code integer,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT platform_actions_outcome_check CHECK ((outcome = ANY (ARRAY['ok'::text, 'retry'::text, 'action_required'::text])))
);

ALTER TABLE ONLY billing.platform_actions FORCE ROW LEVEL SECURITY;


--
-- Name: platform_configs; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.platform_configs (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('pcfg'::text) NOT NULL COLLATE pg_catalog."C",
    key text NOT NULL,
    platform text NOT NULL,
    name text,
    settings jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT platform_configs_platform_check CHECK ((platform = ANY (ARRAY['discord'::text, 'telegram'::text])))
);

ALTER TABLE ONLY billing.platform_configs FORCE ROW LEVEL SECURITY;


--
-- Name: portal_sessions; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.portal_sessions (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('ps'::text) NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    return_url text,
    url text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    access_token text,
    access_token_sha256 bytea
);

ALTER TABLE ONLY billing.portal_sessions FORCE ROW LEVEL SECURITY;


--
-- Name: provider_events; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.provider_events (
    community_id text NOT NULL COLLATE pg_catalog."C",
    provider text NOT NULL,
    event_id text NOT NULL,
    type text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing.provider_events FORCE ROW LEVEL SECURITY;


--
-- Name: sandbox_cards; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.sandbox_cards (
    community_id text NOT NULL COLLATE pg_catalog."C",
    subscription_id text NOT NULL COLLATE pg_catalog."C",
    declines boolean NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing.sandbox_cards FORCE ROW LEVEL SECURITY;


--
-- Name: tier_entitlements; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.tier_entitlements (
    community_id text NOT NULL COLLATE pg_catalog."C",
    tier_id text NOT NULL COLLATE pg_catalog."C",
    entitlement_id text NOT NULL COLLATE pg_catalog."C"
);

ALTER TABLE ONLY billing.tier_entitlements FORCE ROW LEVEL SECURITY;


--
-- Name: webhook_attempts; Type: TABLE; Schema: billing; Owner: -
--

CREATE TABLE billing.webhook_attempts (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('wa'::text) NOT NULL COLLATE pg_catalog."C",
    delivery_id text NOT NULL COLLATE pg_catalog."C",
    endpoint_id text NOT NULL COLLATE pg_catalog."C",
    attempt integer NOT NULL,
    status_code integer,
    duration_ms integer,
    error text,
    response_excerpt text,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    next_attempt_at timestamp with time zone
);

ALTER TABLE ONLY billing.webhook_attempts FORCE ROW LEVEL SECURITY;


--
-- Name: benefit_deliveries; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.benefit_deliveries WITH (security_invoker='true', security_barrier='false') AS
 SELECT d.member_id,
    d.platform_config_id,
    d.type,
    d.value,
    d.want,
    d.status,
    d.error,
    d.updated_at
   FROM billing.benefit_deliveries d
  WHERE ( SELECT billing.has_scope('members:read'::text) AS has_scope);


--
-- Name: VIEW benefit_deliveries; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.benefit_deliveries IS '@primaryKey member_id,platform_config_id,type,value
@foreignKey (member_id) references billing_graphql.members (id)
@scope members:read
@behavior -insert -update -delete
Benefit deliveries: what each platform (Discord, Telegram) was last made to hold for a member, with the status and the error an operator can act on. Needs members:read.';


--
-- Name: COLUMN benefit_deliveries.member_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.benefit_deliveries.member_id IS '@notNull';


--
-- Name: COLUMN benefit_deliveries.platform_config_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.benefit_deliveries.platform_config_id IS '@notNull';


--
-- Name: COLUMN benefit_deliveries.type; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.benefit_deliveries.type IS '@notNull';


--
-- Name: COLUMN benefit_deliveries.value; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.benefit_deliveries.value IS '@notNull';


--
-- Name: COLUMN benefit_deliveries.want; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.benefit_deliveries.want IS '@notNull
@enumValues present absent';


--
-- Name: COLUMN benefit_deliveries.status; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.benefit_deliveries.status IS '@notNull
@enumValues pending delivered failed action_required';


--
-- Name: COLUMN benefit_deliveries.updated_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.benefit_deliveries.updated_at IS '@notNull';


--
-- Name: churn; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.churn WITH (security_invoker='true', security_barrier='false') AS
 SELECT billing.iso(c.window_start) AS window_start,
    billing.iso(c.window_end) AS window_end,
    c.billing_at_start,
    c.churned,
    c.churn_rate
   FROM analytics.churn c
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW churn; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.churn IS '@primaryKey window_start
@scope analytics:read
@behavior -insert -update -delete
Churn over the last 30 days. Needs analytics:read.';


--
-- Name: daily_activity; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.daily_activity WITH (security_invoker='true', security_barrier='false') AS
 SELECT a.day,
    a.signups,
    a.cancels,
    a.ended
   FROM analytics.daily_activity a
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW daily_activity; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.daily_activity IS '@primaryKey day
@scope analytics:read
@behavior -insert -update -delete
Signups, cancels and ended subscriptions per day. Needs analytics:read.';


--
-- Name: discounts; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.discounts WITH (security_invoker='true', security_barrier='false') AS
 SELECT d.id,
    d.code,
    d.name,
    d.value_type,
    d.percent_off,
    d.amount_off_cents,
    d.currency,
    d.duration,
    d.duration_months,
    d.use_limit,
    d.min_spend_cents,
    d.max_spend_cents,
    d.starts_at,
    d.expires_at,
    (st.reason IS NULL) AS is_active,
    d.tier_ids,
    d.created_at,
    st.reason AS inactive_reason
   FROM (billing.discount_codes d
     CROSS JOIN LATERAL ( SELECT billing.discount_inactive_reason(d.*) AS reason) st)
  WHERE ((d.archived_at IS NULL) AND ( SELECT billing.has_scope('discounts:read'::text) AS has_scope));


--
-- Name: VIEW discounts; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.discounts IS '@primaryKey id
@scope discounts:read
@behavior -insert -update -delete
Unarchived discount codes. Needs discounts:read.';


--
-- Name: COLUMN discounts.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.id IS '@notNull';


--
-- Name: COLUMN discounts.code; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.code IS '@notNull';


--
-- Name: COLUMN discounts.value_type; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.value_type IS '@notNull';


--
-- Name: COLUMN discounts.duration; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.duration IS '@notNull';


--
-- Name: COLUMN discounts.is_active; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.is_active IS '@notNull
Whether a checkout can use the code now: false when turned off, expired, at its use limit or not started yet.';


--
-- Name: COLUMN discounts.tier_ids; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.tier_ids IS '@notNull';


--
-- Name: COLUMN discounts.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.created_at IS '@notNull';


--
-- Name: COLUMN discounts.inactive_reason; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.discounts.inactive_reason IS '@enumValues disabled expired exhausted not_started
Why the code is not active now, the first that applies; null when active.';


--
-- Name: entitlement_activity_daily; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.entitlement_activity_daily WITH (security_invoker='true', security_barrier='false') AS
 SELECT a.day,
    a.grants,
    a.revokes
   FROM analytics.entitlement_activity_daily a
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW entitlement_activity_daily; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.entitlement_activity_daily IS '@primaryKey day
@scope analytics:read
@behavior -insert -update -delete
Entitlement grants and revokes per day. Needs analytics:read.';


--
-- Name: entitlements; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.entitlements WITH (security_invoker='true', security_barrier='false') AS
 SELECT e.id,
    e.key,
    e.name,
    e.created_at
   FROM billing.entitlements e
  WHERE ( SELECT billing.has_scope('plans:read'::text) AS has_scope);


--
-- Name: VIEW entitlements; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.entitlements IS '@primaryKey id
@scope plans:read
@behavior -insert -update -delete
Entitlements of the catalog (logical permissions). Needs plans:read.';


--
-- Name: COLUMN entitlements.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.entitlements.id IS '@notNull';


--
-- Name: COLUMN entitlements.key; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.entitlements.key IS '@notNull';


--
-- Name: COLUMN entitlements.name; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.entitlements.name IS '@notNull';


--
-- Name: COLUMN entitlements.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.entitlements.created_at IS '@notNull';


--
-- Name: events; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.events WITH (security_invoker='true', security_barrier='false') AS
 SELECT e.id,
    e.type,
    e.created_at,
    e.api_version,
    e.data
   FROM billing.events e
  WHERE ( SELECT billing.has_scope('events:read'::text) AS has_scope);


--
-- Name: VIEW events; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.events IS '@primaryKey id
@scope events:read
@behavior -insert -update -delete
The event outbox (the envelopes of GET /v1/events). Needs events:read.';


--
-- Name: COLUMN events.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.events.id IS '@notNull';


--
-- Name: COLUMN events.type; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.events.type IS '@notNull';


--
-- Name: COLUMN events.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.events.created_at IS '@notNull';


--
-- Name: COLUMN events.api_version; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.events.api_version IS '@notNull';


--
-- Name: COLUMN events.data; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.events.data IS '@notNull';


--
-- Name: external_subjects; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.external_subjects WITH (security_invoker='true', security_barrier='false') AS
 SELECT x.namespace,
    x.external_user_id,
    x.member_id,
    x.created_at
   FROM billing.external_subjects x
  WHERE ( SELECT billing.has_scope('members:read'::text) AS has_scope);


--
-- Name: VIEW external_subjects; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.external_subjects IS '@primaryKey namespace,external_user_id
@foreignKey (member_id) references billing_graphql.members (id)
@scope members:read
@behavior -insert -update -delete
Operator-owned identities mapped to members. Needs members:read.';


--
-- Name: COLUMN external_subjects.namespace; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.external_subjects.namespace IS '@notNull';


--
-- Name: COLUMN external_subjects.external_user_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.external_subjects.external_user_id IS '@notNull';


--
-- Name: COLUMN external_subjects.member_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.external_subjects.member_id IS '@notNull';


--
-- Name: COLUMN external_subjects.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.external_subjects.created_at IS '@notNull';


--
-- Name: invoices; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.invoices WITH (security_invoker='true', security_barrier='false') AS
 SELECT i.id,
    i.member_id,
    i.subscription_id,
    i.purchase_id,
    i.status,
    i.billing_reason,
    i.currency,
    i.lines,
    i.subtotal_cents,
    i.discount_cents,
    i.total_cents,
    i.amount_paid_cents,
    i.amount_refunded_cents,
    i.attempt_count,
    i.next_attempt_at,
    i.period_start,
    i.period_end,
    i.paid_at,
    i.created_at,
    i.updated_at,
    i.number,
    i.tax_cents,
    i.tax_lines,
    i.tax_country,
    i.reverse_charge,
    i.buyer_country,
    i.buyer_tax_id,
    i.seller_country,
    i.seller_tax_id
   FROM billing.invoices i
  WHERE ( SELECT billing.has_scope('invoices:read'::text) AS has_scope);


--
-- Name: VIEW invoices; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.invoices IS '@primaryKey id
@foreignKey (member_id) references billing_graphql.members (id)
@foreignKey (subscription_id) references billing_graphql.subscriptions (id)
@foreignKey (purchase_id) references billing_graphql.purchases (id)
@scope invoices:read
@behavior -insert -update -delete
Invoices. Needs invoices:read.';


--
-- Name: COLUMN invoices.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.id IS '@notNull';


--
-- Name: COLUMN invoices.member_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.member_id IS '@notNull';


--
-- Name: COLUMN invoices.status; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.status IS '@notNull
@enumValues draft open paid void uncollectible';


--
-- Name: COLUMN invoices.billing_reason; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.billing_reason IS '@notNull';


--
-- Name: COLUMN invoices.currency; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.currency IS '@notNull';


--
-- Name: COLUMN invoices.lines; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.lines IS '@notNull';


--
-- Name: COLUMN invoices.subtotal_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.subtotal_cents IS '@notNull';


--
-- Name: COLUMN invoices.discount_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.discount_cents IS '@notNull';


--
-- Name: COLUMN invoices.total_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.total_cents IS '@notNull';


--
-- Name: COLUMN invoices.amount_paid_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.amount_paid_cents IS '@notNull';


--
-- Name: COLUMN invoices.amount_refunded_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.amount_refunded_cents IS '@notNull';


--
-- Name: COLUMN invoices.attempt_count; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.attempt_count IS '@notNull';


--
-- Name: COLUMN invoices.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.created_at IS '@notNull';


--
-- Name: COLUMN invoices.updated_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.updated_at IS '@notNull';


--
-- Name: COLUMN invoices.number; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.number IS 'The invoice number (2026-000042), gapless per community and series; null until finalized.';


--
-- Name: COLUMN invoices.tax_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.tax_cents IS '@notNull
The tax it charged (minor units): the sum of its tax lines; an inclusive tax is part of the lines, an exclusive one is added to the total.';


--
-- Name: COLUMN invoices.tax_lines; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.tax_lines IS '@notNull
Its tax lines: [{name, country, rate_ppm, inclusive, taxable_cents, amount_cents}].';


--
-- Name: COLUMN invoices.tax_country; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.tax_country IS 'The country whose tax rate applied (ISO 3166-1 alpha-2); null when none did.';


--
-- Name: COLUMN invoices.reverse_charge; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.reverse_charge IS '@notNull
An EU business buyer in another member state: no VAT, the buyer accounts for it.';


--
-- Name: COLUMN invoices.buyer_country; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.buyer_country IS 'The buyer''s country as the invoice was taxed.';


--
-- Name: COLUMN invoices.buyer_tax_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.buyer_tax_id IS 'The buyer''s tax id (a VAT id) as given at checkout.';


--
-- Name: COLUMN invoices.seller_country; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.seller_country IS 'The community''s country when the invoice was taxed.';


--
-- Name: COLUMN invoices.seller_tax_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.invoices.seller_tax_id IS 'The community''s tax id when the invoice was taxed.';


--
-- Name: member_entitlements; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.member_entitlements WITH (security_invoker='true', security_barrier='false') AS
 SELECT me.id,
    me.member_id,
    me.entitlement_id,
    me.status,
    me.revision,
    me.sources,
    me.benefits,
    me.granted_at,
    me.revoked_at,
    me.updated_at
   FROM billing.member_entitlements me
  WHERE ( SELECT billing.has_scope('members:read'::text) AS has_scope);


--
-- Name: VIEW member_entitlements; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.member_entitlements IS '@primaryKey id
@foreignKey (member_id) references billing_graphql.members (id)
@foreignKey (entitlement_id) references billing_graphql.entitlements (id)
@scope members:read
@behavior -insert -update -delete
The entitlement ledger: one row per member and entitlement. Needs members:read.';


--
-- Name: COLUMN member_entitlements.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.id IS '@notNull';


--
-- Name: COLUMN member_entitlements.member_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.member_id IS '@notNull';


--
-- Name: COLUMN member_entitlements.entitlement_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.entitlement_id IS '@notNull';


--
-- Name: COLUMN member_entitlements.status; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.status IS '@notNull
@enumValues active inactive';


--
-- Name: COLUMN member_entitlements.revision; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.revision IS '@notNull';


--
-- Name: COLUMN member_entitlements.sources; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.sources IS '@notNull';


--
-- Name: COLUMN member_entitlements.benefits; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.benefits IS '@notNull';


--
-- Name: COLUMN member_entitlements.updated_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_entitlements.updated_at IS '@notNull';


--
-- Name: member_identities; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.member_identities WITH (security_invoker='true', security_barrier='false') AS
 SELECT i.platform,
    i.platform_uid,
    i.member_id,
    i.username,
    i.created_at
   FROM billing.member_identities i
  WHERE ( SELECT billing.has_scope('members:read'::text) AS has_scope);


--
-- Name: VIEW member_identities; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.member_identities IS '@primaryKey platform,platform_uid
@foreignKey (member_id) references billing_graphql.members (id)
@scope members:read
@behavior -insert -update -delete
Platform identities linked to members. Needs members:read.';


--
-- Name: COLUMN member_identities.platform; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_identities.platform IS '@notNull';


--
-- Name: COLUMN member_identities.platform_uid; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_identities.platform_uid IS '@notNull';


--
-- Name: COLUMN member_identities.member_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_identities.member_id IS '@notNull';


--
-- Name: COLUMN member_identities.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.member_identities.created_at IS '@notNull';


--
-- Name: members; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.members WITH (security_invoker='true', security_barrier='false') AS
 SELECT m.id,
    m.created_at,
    m.updated_at,
    m.email,
    m.display_name,
    m.note,
    m.tags
   FROM billing.members m
  WHERE ( SELECT billing.has_scope('members:read'::text) AS has_scope);


--
-- Name: VIEW members; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.members IS '@primaryKey id
@scope members:read
@behavior -insert -update -delete
Members. Needs members:read.';


--
-- Name: COLUMN members.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.members.id IS '@notNull';


--
-- Name: COLUMN members.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.members.created_at IS '@notNull';


--
-- Name: COLUMN members.updated_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.members.updated_at IS '@notNull';


--
-- Name: COLUMN members.email; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.members.email IS 'The member''s email (personal data), null when unknown.';


--
-- Name: COLUMN members.display_name; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.members.display_name IS 'How operators see the member: the Discord username, else the Telegram one, else the email, else an external subject''s id; null when none (personal data).';


--
-- Name: COLUMN members.note; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.members.note IS 'The operators'' note about the member (personal data), null when none.';


--
-- Name: COLUMN members.tags; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.members.tags IS '@notNull
The operators'' tags on the member (lowercase, sorted).';


--
-- Name: mrr; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.mrr WITH (security_invoker='true', security_barrier='false') AS
 SELECT m.currency,
    m.mrr_cents,
    m.billing_subscriptions
   FROM analytics.mrr m
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW mrr; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.mrr IS '@primaryKey currency
@scope analytics:read
@behavior -insert -update -delete
Monthly recurring revenue now, per currency. Needs analytics:read.';


--
-- Name: mrr_by_tier; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.mrr_by_tier WITH (security_invoker='true', security_barrier='false') AS
 SELECT m.tier_id,
    m.tier_name,
    m.currency,
    m.mrr_cents,
    m.billing_subscriptions
   FROM analytics.mrr_by_tier m
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW mrr_by_tier; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.mrr_by_tier IS '@primaryKey tier_id,currency
@foreignKey (tier_id) references billing_graphql.tiers (id)
@scope analytics:read
@behavior -insert -update -delete
MRR now per tier and currency. Needs analytics:read.';


--
-- Name: mrr_daily; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.mrr_daily WITH (security_invoker='true', security_barrier='false') AS
 SELECT m.day,
    m.currency,
    m.mrr_cents,
    m.billing_subscriptions
   FROM analytics.mrr_daily m
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW mrr_daily; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.mrr_daily IS '@primaryKey day,currency
@scope analytics:read
@behavior -insert -update -delete
MRR by day (last 90 days) and currency, as it was at each day''s end (the recorded MRR movements). Needs analytics:read.';


--
-- Name: mrr_movements_daily; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.mrr_movements_daily WITH (security_invoker='true', security_barrier='false') AS
 SELECT m.day,
    m.currency,
    m.new_cents,
    m.expansion_cents,
    m.contraction_cents,
    m.churn_cents,
    m.reactivation_cents,
    m.net_cents,
    m.new_count,
    m.expansion_count,
    m.contraction_count,
    m.churn_count,
    m.reactivation_count
   FROM analytics.mrr_movements_daily m
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW mrr_movements_daily; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.mrr_movements_daily IS '@primaryKey day,currency
@scope analytics:read
@behavior -insert -update -delete
MRR movements (new, expansion, contraction, churn, reactivation) per day and currency, as recorded when they happened. Needs analytics:read.';


--
-- Name: mrr_movements_monthly; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.mrr_movements_monthly WITH (security_invoker='true', security_barrier='false') AS
 SELECT m.month,
    m.currency,
    m.opening_mrr_cents,
    m.new_cents,
    m.expansion_cents,
    m.contraction_cents,
    m.churn_cents,
    m.reactivation_cents,
    m.net_cents,
    m.closing_mrr_cents,
    m.new_count,
    m.expansion_count,
    m.contraction_count,
    m.churn_count,
    m.reactivation_count
   FROM analytics.mrr_movements_monthly m
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW mrr_movements_monthly; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.mrr_movements_monthly IS '@primaryKey month,currency
@scope analytics:read
@behavior -insert -update -delete
MRR movements per calendar month and currency, with the MRR at the month''s start and end. Needs analytics:read.';


--
-- Name: paid_invoices_daily; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.paid_invoices_daily WITH (security_invoker='true', security_barrier='false') AS
 SELECT p.day,
    p.currency,
    p.invoices,
    p.paid_cents,
    p.refunded_cents,
    p.tax_cents
   FROM analytics.paid_invoices_daily p
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW paid_invoices_daily; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.paid_invoices_daily IS '@primaryKey day,currency
@scope analytics:read
@behavior -insert -update -delete
Paid invoices by day and currency. Needs analytics:read.';


--
-- Name: payment_attempts; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.payment_attempts WITH (security_invoker='true', security_barrier='false') AS
 SELECT a.id,
    a.invoice_id,
    a.status,
    a.amount_cents,
    a.failure_message,
    a.attempted_at,
    a.created_at
   FROM billing.payment_attempts a
  WHERE ( SELECT billing.has_scope('invoices:read'::text) AS has_scope);


--
-- Name: VIEW payment_attempts; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.payment_attempts IS '@primaryKey id
@foreignKey (invoice_id) references billing_graphql.invoices (id)
@scope invoices:read
@behavior -insert -update -delete
Attempts to collect invoices. Needs invoices:read.';


--
-- Name: COLUMN payment_attempts.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.payment_attempts.id IS '@notNull';


--
-- Name: COLUMN payment_attempts.invoice_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.payment_attempts.invoice_id IS '@notNull';


--
-- Name: COLUMN payment_attempts.status; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.payment_attempts.status IS '@notNull
@enumValues succeeded failed';


--
-- Name: COLUMN payment_attempts.amount_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.payment_attempts.amount_cents IS '@notNull';


--
-- Name: COLUMN payment_attempts.attempted_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.payment_attempts.attempted_at IS '@notNull';


--
-- Name: COLUMN payment_attempts.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.payment_attempts.created_at IS '@notNull';


--
-- Name: plans; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.plans WITH (security_invoker='true', security_barrier='false') AS
 SELECT p.id,
    p.tier_id,
    p.key,
    p.name,
    p.amount_cents,
    p.currency,
    p."interval",
    p.trial_days,
    p.access_days,
    p.active,
    p.created_at
   FROM billing.plans p
  WHERE ( SELECT billing.has_scope('plans:read'::text) AS has_scope);


--
-- Name: VIEW plans; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.plans IS '@primaryKey id
@foreignKey (tier_id) references billing_graphql.tiers (id)
@scope plans:read
@behavior -insert -update -delete
Billing plans (priced options of a tier). Needs plans:read.';


--
-- Name: COLUMN plans.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.id IS '@notNull';


--
-- Name: COLUMN plans.tier_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.tier_id IS '@notNull';


--
-- Name: COLUMN plans.key; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.key IS '@notNull';


--
-- Name: COLUMN plans.amount_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.amount_cents IS '@notNull';


--
-- Name: COLUMN plans.currency; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.currency IS '@notNull';


--
-- Name: COLUMN plans.trial_days; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.trial_days IS '@notNull';


--
-- Name: COLUMN plans.active; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.active IS '@notNull';


--
-- Name: COLUMN plans.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.plans.created_at IS '@notNull';


--
-- Name: purchases; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.purchases WITH (security_invoker='true', security_barrier='false') AS
 SELECT p.id,
    p.member_id,
    p.plan_id,
    p.status,
    p.amount_cents,
    p.currency,
    p.access_expires_at,
    p.paid_at,
    p.client_reference_id,
    p.created_at
   FROM billing.purchases p
  WHERE ( SELECT billing.has_scope('purchases:read'::text) AS has_scope);


--
-- Name: VIEW purchases; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.purchases IS '@primaryKey id
@foreignKey (member_id) references billing_graphql.members (id)
@foreignKey (plan_id) references billing_graphql.plans (id)
@scope purchases:read
@behavior -insert -update -delete
One-time purchases. Needs purchases:read.';


--
-- Name: COLUMN purchases.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.id IS '@notNull';


--
-- Name: COLUMN purchases.member_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.member_id IS '@notNull';


--
-- Name: COLUMN purchases.plan_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.plan_id IS '@notNull';


--
-- Name: COLUMN purchases.status; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.status IS '@notNull
@enumValues completed refunded disputed';


--
-- Name: COLUMN purchases.amount_cents; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.amount_cents IS '@notNull';


--
-- Name: COLUMN purchases.currency; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.currency IS '@notNull';


--
-- Name: COLUMN purchases.paid_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.paid_at IS '@notNull';


--
-- Name: COLUMN purchases.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.purchases.created_at IS '@notNull';


--
-- Name: revenue_daily; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.revenue_daily WITH (security_invoker='true', security_barrier='false') AS
 SELECT r.day,
    r.currency,
    r.subscription_cents,
    r.purchase_cents,
    r.total_cents
   FROM analytics.revenue_daily r
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW revenue_daily; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.revenue_daily IS '@primaryKey day,currency
@scope analytics:read
@behavior -insert -update -delete
Revenue from subscriptions (paid invoices) and purchases by day, net of tax. Needs analytics:read.';


--
-- Name: subscribers; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.subscribers WITH (security_invoker='true', security_barrier='false') AS
 SELECT 1 AS id,
    s.active_subscribers
   FROM analytics.subscribers s
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW subscribers; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.subscribers IS '@primaryKey id
@scope analytics:read
@behavior -insert -update -delete
Members with access through a subscription now. Needs analytics:read.';


--
-- Name: subscriptions; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.subscriptions WITH (security_invoker='true', security_barrier='false') AS
 SELECT s.id,
    s.member_id,
    s.plan_id,
    s.status,
    s.current_period_start,
    s.current_period_end,
    s.trial_end,
    s.cancel_at,
    s.cancelled_at,
    s.cancellation_reason,
    s.paused_until,
    s.scheduled_plan_id,
    s.scheduled_at,
    s.client_reference_id,
    s.discount_id,
    s.created_at,
    s.updated_at
   FROM billing.subscriptions s
  WHERE ( SELECT billing.has_scope('subscriptions:read'::text) AS has_scope);


--
-- Name: VIEW subscriptions; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.subscriptions IS '@primaryKey id
@foreignKey (member_id) references billing_graphql.members (id)
@foreignKey (plan_id) references billing_graphql.plans (id)
@scope subscriptions:read
@behavior -insert -update -delete
Subscriptions. Needs subscriptions:read.';


--
-- Name: COLUMN subscriptions.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.subscriptions.id IS '@notNull';


--
-- Name: COLUMN subscriptions.member_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.subscriptions.member_id IS '@notNull';


--
-- Name: COLUMN subscriptions.plan_id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.subscriptions.plan_id IS '@notNull';


--
-- Name: COLUMN subscriptions.status; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.subscriptions.status IS '@notNull
@enumValues active trialing past_due cancelling cancelled paused';


--
-- Name: COLUMN subscriptions.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.subscriptions.created_at IS '@notNull';


--
-- Name: COLUMN subscriptions.updated_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.subscriptions.updated_at IS '@notNull';


--
-- Name: tiers; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.tiers WITH (security_invoker='true', security_barrier='false') AS
 SELECT t.id,
    t.key,
    t.name,
    t.description,
    t.kind,
    t.billing_mode,
    t.rank,
    t.active,
    t.features,
    t.perks,
    t.created_at,
    t.updated_at
   FROM billing.tiers t
  WHERE ( SELECT billing.has_scope('plans:read'::text) AS has_scope);


--
-- Name: VIEW tiers; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.tiers IS '@primaryKey id
@scope plans:read
@behavior -insert -update -delete
Plan tiers (customer-facing offerings). Needs plans:read.';


--
-- Name: COLUMN tiers.id; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.id IS '@notNull';


--
-- Name: COLUMN tiers.key; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.key IS '@notNull';


--
-- Name: COLUMN tiers.name; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.name IS '@notNull';


--
-- Name: COLUMN tiers.kind; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.kind IS '@notNull';


--
-- Name: COLUMN tiers.billing_mode; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.billing_mode IS '@notNull';


--
-- Name: COLUMN tiers.rank; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.rank IS '@notNull';


--
-- Name: COLUMN tiers.active; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.active IS '@notNull';


--
-- Name: COLUMN tiers.features; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.features IS '@notNull';


--
-- Name: COLUMN tiers.perks; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.perks IS '@notNull';


--
-- Name: COLUMN tiers.created_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.created_at IS '@notNull';


--
-- Name: COLUMN tiers.updated_at; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON COLUMN billing_graphql.tiers.updated_at IS '@notNull';


--
-- Name: trial_conversion; Type: VIEW; Schema: billing_graphql; Owner: -
--

CREATE VIEW billing_graphql.trial_conversion WITH (security_invoker='true', security_barrier='false') AS
 SELECT 1 AS id,
    t.trials,
    t.trials_ended,
    t.converted,
    t.conversion_rate
   FROM analytics.trial_conversion t
  WHERE ( SELECT billing.has_scope('analytics:read'::text) AS has_scope);


--
-- Name: VIEW trial_conversion; Type: COMMENT; Schema: billing_graphql; Owner: -
--

COMMENT ON VIEW billing_graphql.trial_conversion IS '@primaryKey id
@scope analytics:read
@behavior -insert -update -delete
Trials started, ended and converted. Needs analytics:read.';


--
-- Name: analytics_deltas; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.analytics_deltas (
    community_id text NOT NULL COLLATE pg_catalog."C",
    day date NOT NULL,
    currency text NOT NULL COLLATE pg_catalog."C",
    mrr_cents numeric DEFAULT 0 NOT NULL,
    billing integer DEFAULT 0 NOT NULL,
    signups integer DEFAULT 0 NOT NULL,
    cancels integer DEFAULT 0 NOT NULL,
    past_due integer DEFAULT 0 NOT NULL,
    subscribers integer DEFAULT 0 NOT NULL,
    new_cents numeric DEFAULT 0 NOT NULL,
    expansion_cents numeric DEFAULT 0 NOT NULL,
    contraction_cents numeric DEFAULT 0 NOT NULL,
    churn_cents numeric DEFAULT 0 NOT NULL,
    reactivation_cents numeric DEFAULT 0 NOT NULL
);

ALTER TABLE ONLY billing_private.analytics_deltas FORCE ROW LEVEL SECURITY;


--
-- Name: analytics_facts; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.analytics_facts (
    community_id text NOT NULL COLLATE pg_catalog."C",
    subscription_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    currency text NOT NULL COLLATE pg_catalog."C",
    monthly_cents numeric NOT NULL,
    created_day date NOT NULL,
    cancel_day date,
    past_due boolean NOT NULL,
    subscriber boolean NOT NULL,
    recorded_billing boolean
);

ALTER TABLE ONLY billing_private.analytics_facts FORCE ROW LEVEL SECURITY;


--
-- Name: event_types; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.event_types (
    type text NOT NULL COLLATE pg_catalog."C",
    description text NOT NULL
);

ALTER TABLE ONLY billing_private.event_types FORCE ROW LEVEL SECURITY;


--
-- Name: id_seq; Type: SEQUENCE; Schema: billing_private; Owner: -
--

CREATE SEQUENCE billing_private.id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    MAXVALUE 16777215
    CACHE 1
    CYCLE;


--
-- Name: member_portal_sessions; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.member_portal_sessions (
    community_id text NOT NULL COLLATE pg_catalog."C",
    id text DEFAULT billing.gen_id('mps'::text) NOT NULL COLLATE pg_catalog."C",
    token_sha256 text NOT NULL,
    portal_session_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

ALTER TABLE ONLY billing_private.member_portal_sessions FORCE ROW LEVEL SECURITY;


--
-- Name: number_counters; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.number_counters (
    community_id text NOT NULL COLLATE pg_catalog."C",
    kind text NOT NULL,
    series text NOT NULL COLLATE pg_catalog."C",
    last_number bigint NOT NULL,
    CONSTRAINT number_counters_kind_check CHECK ((kind = ANY (ARRAY['invoice'::text, 'credit_note'::text]))),
    CONSTRAINT number_counters_last_number_check CHECK ((last_number > 0))
);

ALTER TABLE ONLY billing_private.number_counters FORCE ROW LEVEL SECURITY;


--
-- Name: operator_known_addresses; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_known_addresses (
    user_id text NOT NULL COLLATE pg_catalog."C",
    ip text NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing_private.operator_known_addresses FORCE ROW LEVEL SECURITY;


--
-- Name: operator_links; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_links (
    community_id text NOT NULL COLLATE pg_catalog."C",
    token_sha256 text NOT NULL,
    user_id text NOT NULL COLLATE pg_catalog."C",
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing_private.operator_links FORCE ROW LEVEL SECURITY;


--
-- Name: operator_policies; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_policies (
    community_id text NOT NULL COLLATE pg_catalog."C",
    second_factor_required boolean DEFAULT false NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by text COLLATE pg_catalog."C"
);

ALTER TABLE ONLY billing_private.operator_policies FORCE ROW LEVEL SECURITY;


--
-- Name: operator_recovery_codes; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_recovery_codes (
    community_id text NOT NULL COLLATE pg_catalog."C",
    user_id text NOT NULL COLLATE pg_catalog."C",
    code_sha256 text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    used_at timestamp with time zone
);

ALTER TABLE ONLY billing_private.operator_recovery_codes FORCE ROW LEVEL SECURITY;


--
-- Name: operator_roles; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_roles (
    role_name text NOT NULL COLLATE pg_catalog."C",
    community_id text NOT NULL COLLATE pg_catalog."C",
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing_private.operator_roles FORCE ROW LEVEL SECURITY;


--
-- Name: operator_second_factors; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.operator_second_factors (
    community_id text NOT NULL COLLATE pg_catalog."C",
    user_id text NOT NULL COLLATE pg_catalog."C",
    secret_ciphertext text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    confirmed_at timestamp with time zone,
    last_step bigint,
    CONSTRAINT operator_second_factors_secret_ciphertext_check CHECK ((secret_ciphertext ~~ 'v1:%'::text))
);

ALTER TABLE ONLY billing_private.operator_second_factors FORCE ROW LEVEL SECURITY;


--
-- Name: payment_secrets; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.payment_secrets (
    community_id text NOT NULL COLLATE pg_catalog."C",
    provider text NOT NULL,
    name text NOT NULL,
    ciphertext text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT payment_secrets_ciphertext_check CHECK ((ciphertext ~~ 'v1:%'::text)),
    CONSTRAINT payment_secrets_name_check CHECK ((name = ANY (ARRAY['secret_key'::text, 'webhook_secret'::text]))),
    CONSTRAINT payment_secrets_provider_check CHECK ((provider = 'stripe'::text))
);

ALTER TABLE ONLY billing_private.payment_secrets FORCE ROW LEVEL SECURITY;


--
-- Name: platform_defaults; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.platform_defaults (
    platform text NOT NULL,
    has_bot_token boolean NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT platform_defaults_platform_check CHECK ((platform = ANY (ARRAY['discord'::text, 'telegram'::text])))
);

ALTER TABLE ONLY billing_private.platform_defaults FORCE ROW LEVEL SECURITY;


--
-- Name: platform_secrets; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.platform_secrets (
    community_id text NOT NULL COLLATE pg_catalog."C",
    platform_config_id text NOT NULL COLLATE pg_catalog."C",
    name text NOT NULL,
    ciphertext text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT platform_secrets_ciphertext_check CHECK ((ciphertext ~~ 'v1:%'::text)),
    CONSTRAINT platform_secrets_name_check CHECK ((name = ANY (ARRAY['bot_token'::text, 'client_secret'::text])))
);

ALTER TABLE ONLY billing_private.platform_secrets FORCE ROW LEVEL SECURITY;


--
-- Name: rate_buckets; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE UNLOGGED TABLE billing_private.rate_buckets (
    bucket text NOT NULL,
    tokens double precision NOT NULL,
    allowed boolean DEFAULT true NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    granted integer DEFAULT 0 NOT NULL
);

ALTER TABLE ONLY billing_private.rate_buckets FORCE ROW LEVEL SECURITY;


--
-- Name: webhook_secrets; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.webhook_secrets (
    community_id text NOT NULL COLLATE pg_catalog."C",
    endpoint_id text NOT NULL COLLATE pg_catalog."C",
    secret_ciphertext text NOT NULL,
    previous_ciphertext text,
    previous_expires_at timestamp with time zone
);

ALTER TABLE ONLY billing_private.webhook_secrets FORCE ROW LEVEL SECURITY;


--
-- Name: worker_heartbeats; Type: TABLE; Schema: billing_private; Owner: -
--

CREATE TABLE billing_private.worker_heartbeats (
    worker_id text NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY billing_private.worker_heartbeats FORCE ROW LEVEL SECURITY;


--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (community_id, id);


--
-- Name: benefit_deliveries benefit_deliveries_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.benefit_deliveries
    ADD CONSTRAINT benefit_deliveries_pkey PRIMARY KEY (community_id, member_id, platform_config_id, type, value);


--
-- Name: checkout_sessions checkout_sessions_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.checkout_sessions
    ADD CONSTRAINT checkout_sessions_pkey PRIMARY KEY (community_id, id);


--
-- Name: communities communities_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.communities
    ADD CONSTRAINT communities_pkey PRIMARY KEY (id);


--
-- Name: credit_notes credit_notes_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.credit_notes
    ADD CONSTRAINT credit_notes_pkey PRIMARY KEY (community_id, id);


--
-- Name: discount_codes discount_codes_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.discount_codes
    ADD CONSTRAINT discount_codes_pkey PRIMARY KEY (community_id, id);


--
-- Name: discount_redemptions discount_redemptions_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.discount_redemptions
    ADD CONSTRAINT discount_redemptions_pkey PRIMARY KEY (community_id, discount_id, checkout_id);


--
-- Name: disputes disputes_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.disputes
    ADD CONSTRAINT disputes_pkey PRIMARY KEY (community_id, id);


--
-- Name: entitlement_benefits entitlement_benefits_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.entitlement_benefits
    ADD CONSTRAINT entitlement_benefits_pkey PRIMARY KEY (community_id, entitlement_id, platform_config_id, type, value);


--
-- Name: entitlements entitlements_community_id_key_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.entitlements
    ADD CONSTRAINT entitlements_community_id_key_key UNIQUE (community_id, key);


--
-- Name: entitlements entitlements_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.entitlements
    ADD CONSTRAINT entitlements_pkey PRIMARY KEY (community_id, id);


--
-- Name: events events_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (community_id, id);


--
-- Name: external_subjects external_subjects_community_id_member_id_namespace_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.external_subjects
    ADD CONSTRAINT external_subjects_community_id_member_id_namespace_key UNIQUE (community_id, member_id, namespace);


--
-- Name: external_subjects external_subjects_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.external_subjects
    ADD CONSTRAINT external_subjects_pkey PRIMARY KEY (community_id, namespace, external_user_id);


--
-- Name: grants grants_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.grants
    ADD CONSTRAINT grants_pkey PRIMARY KEY (community_id, id);


--
-- Name: idempotency_keys idempotency_keys_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (community_id, endpoint, key);


--
-- Name: invoices invoices_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_pkey PRIMARY KEY (community_id, id);


--
-- Name: link_codes link_codes_community_id_code_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.link_codes
    ADD CONSTRAINT link_codes_community_id_code_key UNIQUE (community_id, code);


--
-- Name: link_codes link_codes_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.link_codes
    ADD CONSTRAINT link_codes_pkey PRIMARY KEY (community_id, id);


--
-- Name: mail_messages mail_messages_community_id_event_id_template_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_messages
    ADD CONSTRAINT mail_messages_community_id_event_id_template_key UNIQUE (community_id, event_id, template);


--
-- Name: mail_messages mail_messages_community_id_ref_template_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_messages
    ADD CONSTRAINT mail_messages_community_id_ref_template_key UNIQUE (community_id, ref, template);


--
-- Name: mail_messages mail_messages_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_messages
    ADD CONSTRAINT mail_messages_pkey PRIMARY KEY (community_id, id);


--
-- Name: mail_unsubscribes mail_unsubscribes_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_unsubscribes
    ADD CONSTRAINT mail_unsubscribes_pkey PRIMARY KEY (community_id, member_id, template);


--
-- Name: member_entitlements member_entitlements_community_id_member_id_entitlement_id_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_entitlements
    ADD CONSTRAINT member_entitlements_community_id_member_id_entitlement_id_key UNIQUE (community_id, member_id, entitlement_id);


--
-- Name: member_entitlements member_entitlements_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_entitlements
    ADD CONSTRAINT member_entitlements_pkey PRIMARY KEY (community_id, id);


--
-- Name: member_identities member_identities_community_id_member_id_platform_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_identities
    ADD CONSTRAINT member_identities_community_id_member_id_platform_key UNIQUE (community_id, member_id, platform);


--
-- Name: member_identities member_identities_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_identities
    ADD CONSTRAINT member_identities_pkey PRIMARY KEY (community_id, platform, platform_uid);


--
-- Name: member_provider_customers member_provider_customers_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_provider_customers
    ADD CONSTRAINT member_provider_customers_pkey PRIMARY KEY (community_id, member_id, provider);


--
-- Name: members members_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.members
    ADD CONSTRAINT members_pkey PRIMARY KEY (community_id, id);


--
-- Name: mrr_movements mrr_movements_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mrr_movements
    ADD CONSTRAINT mrr_movements_pkey PRIMARY KEY (community_id, id);


--
-- Name: payment_attempts payment_attempts_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.payment_attempts
    ADD CONSTRAINT payment_attempts_pkey PRIMARY KEY (community_id, id);


--
-- Name: plans plans_community_id_key_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.plans
    ADD CONSTRAINT plans_community_id_key_key UNIQUE (community_id, key);


--
-- Name: plans plans_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.plans
    ADD CONSTRAINT plans_pkey PRIMARY KEY (community_id, id);


--
-- Name: platform_actions platform_actions_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.platform_actions
    ADD CONSTRAINT platform_actions_pkey PRIMARY KEY (community_id, id);


--
-- Name: platform_configs platform_configs_community_id_key_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.platform_configs
    ADD CONSTRAINT platform_configs_community_id_key_key UNIQUE (community_id, key);


--
-- Name: platform_configs platform_configs_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.platform_configs
    ADD CONSTRAINT platform_configs_pkey PRIMARY KEY (community_id, id);


--
-- Name: platform_configs platform_configs_settings_valid; Type: CHECK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE billing.platform_configs
    ADD CONSTRAINT platform_configs_settings_valid CHECK ((billing.platform_settings_problem(platform, settings) IS NULL)) NOT VALID;


--
-- Name: portal_sessions portal_sessions_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.portal_sessions
    ADD CONSTRAINT portal_sessions_pkey PRIMARY KEY (community_id, id);


--
-- Name: price_migrations price_migrations_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.price_migrations
    ADD CONSTRAINT price_migrations_pkey PRIMARY KEY (community_id, id);


--
-- Name: provider_events provider_events_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.provider_events
    ADD CONSTRAINT provider_events_pkey PRIMARY KEY (community_id, provider, event_id);


--
-- Name: purchases purchases_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.purchases
    ADD CONSTRAINT purchases_pkey PRIMARY KEY (community_id, id);


--
-- Name: refunds refunds_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.refunds
    ADD CONSTRAINT refunds_pkey PRIMARY KEY (community_id, id);


--
-- Name: sandbox_cards sandbox_cards_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.sandbox_cards
    ADD CONSTRAINT sandbox_cards_pkey PRIMARY KEY (community_id, subscription_id);


--
-- Name: subscriptions subscriptions_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.subscriptions
    ADD CONSTRAINT subscriptions_pkey PRIMARY KEY (community_id, id);


--
-- Name: tax_rates tax_rates_community_id_country_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tax_rates
    ADD CONSTRAINT tax_rates_community_id_country_key UNIQUE (community_id, country);


--
-- Name: tax_rates tax_rates_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tax_rates
    ADD CONSTRAINT tax_rates_pkey PRIMARY KEY (community_id, id);


--
-- Name: tier_entitlements tier_entitlements_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tier_entitlements
    ADD CONSTRAINT tier_entitlements_pkey PRIMARY KEY (community_id, tier_id, entitlement_id);


--
-- Name: tiers tiers_community_id_key_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tiers
    ADD CONSTRAINT tiers_community_id_key_key UNIQUE (community_id, key);


--
-- Name: tiers tiers_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tiers
    ADD CONSTRAINT tiers_pkey PRIMARY KEY (community_id, id);


--
-- Name: webhook_attempts webhook_attempts_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_attempts
    ADD CONSTRAINT webhook_attempts_pkey PRIMARY KEY (community_id, id);


--
-- Name: webhook_deliveries webhook_deliveries_community_id_endpoint_id_event_id_key; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_community_id_endpoint_id_event_id_key UNIQUE (community_id, endpoint_id, event_id);


--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (community_id, id);


--
-- Name: webhook_endpoints webhook_endpoints_pkey; Type: CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (community_id, id);


--
-- Name: analytics_facts analytics_facts_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.analytics_facts
    ADD CONSTRAINT analytics_facts_pkey PRIMARY KEY (community_id, subscription_id);


--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (community_id, id);


--
-- Name: event_types event_types_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.event_types
    ADD CONSTRAINT event_types_pkey PRIMARY KEY (type);


--
-- Name: member_portal_sessions member_portal_sessions_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.member_portal_sessions
    ADD CONSTRAINT member_portal_sessions_pkey PRIMARY KEY (community_id, id);


--
-- Name: number_counters number_counters_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.number_counters
    ADD CONSTRAINT number_counters_pkey PRIMARY KEY (community_id, kind, series);


--
-- Name: operator_known_addresses operator_known_addresses_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_known_addresses
    ADD CONSTRAINT operator_known_addresses_pkey PRIMARY KEY (user_id, ip);


--
-- Name: operator_links operator_links_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_links
    ADD CONSTRAINT operator_links_pkey PRIMARY KEY (token_sha256);


--
-- Name: operator_policies operator_policies_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_policies
    ADD CONSTRAINT operator_policies_pkey PRIMARY KEY (community_id);


--
-- Name: operator_recovery_codes operator_recovery_codes_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_recovery_codes
    ADD CONSTRAINT operator_recovery_codes_pkey PRIMARY KEY (community_id, user_id, code_sha256);


--
-- Name: operator_roles operator_roles_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_roles
    ADD CONSTRAINT operator_roles_pkey PRIMARY KEY (role_name);


--
-- Name: operator_second_factors operator_second_factors_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_second_factors
    ADD CONSTRAINT operator_second_factors_pkey PRIMARY KEY (community_id, user_id);


--
-- Name: operator_sessions operator_sessions_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_sessions
    ADD CONSTRAINT operator_sessions_pkey PRIMARY KEY (community_id, id);


--
-- Name: operator_users operator_users_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_users
    ADD CONSTRAINT operator_users_pkey PRIMARY KEY (community_id, id);


--
-- Name: payment_secrets payment_secrets_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.payment_secrets
    ADD CONSTRAINT payment_secrets_pkey PRIMARY KEY (community_id, provider, name);


--
-- Name: platform_defaults platform_defaults_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.platform_defaults
    ADD CONSTRAINT platform_defaults_pkey PRIMARY KEY (platform);


--
-- Name: platform_secrets platform_secrets_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.platform_secrets
    ADD CONSTRAINT platform_secrets_pkey PRIMARY KEY (community_id, platform_config_id, name);


--
-- Name: rate_buckets rate_buckets_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.rate_buckets
    ADD CONSTRAINT rate_buckets_pkey PRIMARY KEY (bucket);


--
-- Name: webhook_secrets webhook_secrets_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.webhook_secrets
    ADD CONSTRAINT webhook_secrets_pkey PRIMARY KEY (community_id, endpoint_id);


--
-- Name: worker_heartbeats worker_heartbeats_pkey; Type: CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.worker_heartbeats
    ADD CONSTRAINT worker_heartbeats_pkey PRIMARY KEY (worker_id);


--
-- Name: audit_log_actor; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX audit_log_actor ON billing.audit_log USING btree (community_id, actor_id, id);


--
-- Name: audit_log_row; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX audit_log_row ON billing.audit_log USING btree (community_id, row_id, id);


--
-- Name: audit_log_table; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX audit_log_table ON billing.audit_log USING btree (community_id, table_name, id);


--
-- Name: audit_log_time; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX audit_log_time ON billing.audit_log USING btree (community_id, occurred_at);


--
-- Name: benefit_deliveries_config; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX benefit_deliveries_config ON billing.benefit_deliveries USING btree (community_id, platform_config_id, status);


--
-- Name: checkout_sessions_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX checkout_sessions_member ON billing.checkout_sessions USING btree (community_id, member_id);


--
-- Name: checkout_sessions_open; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX checkout_sessions_open ON billing.checkout_sessions USING btree (community_id, expires_at) WHERE (status = 'open'::text);


--
-- Name: checkout_sessions_provider_ref; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX checkout_sessions_provider_ref ON billing.checkout_sessions USING btree (community_id, provider_ref) WHERE (provider_ref IS NOT NULL);


--
-- Name: credit_notes_invoice; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX credit_notes_invoice ON billing.credit_notes USING btree (community_id, invoice_id, id);


--
-- Name: credit_notes_number; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX credit_notes_number ON billing.credit_notes USING btree (community_id, number);


--
-- Name: credit_notes_refund; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX credit_notes_refund ON billing.credit_notes USING btree (community_id, refund_id);


--
-- Name: discount_codes_code; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX discount_codes_code ON billing.discount_codes USING btree (community_id, lower(code));


--
-- Name: discount_redemptions_checkout; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX discount_redemptions_checkout ON billing.discount_redemptions USING btree (community_id, checkout_id);


--
-- Name: disputes_invoice; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX disputes_invoice ON billing.disputes USING btree (community_id, invoice_id);


--
-- Name: disputes_provider_ref; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX disputes_provider_ref ON billing.disputes USING btree (community_id, provider_ref) WHERE (provider_ref IS NOT NULL);


--
-- Name: events_member_entitlement; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX events_member_entitlement ON billing.events USING btree (community_id, (((data -> 'member'::text) ->> 'id'::text)), id) WHERE (type = ANY (ARRAY['member.entitlement.granted'::text, 'member.entitlement.updated'::text, 'member.entitlement.revoked'::text]));


--
-- Name: events_type; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX events_type ON billing.events USING btree (community_id, type, id);


--
-- Name: grants_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX grants_member ON billing.grants USING btree (community_id, member_id, id);


--
-- Name: grants_tier; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX grants_tier ON billing.grants USING btree (community_id, tier_id) WHERE (revoked_at IS NULL);


--
-- Name: invoices_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX invoices_member ON billing.invoices USING btree (community_id, member_id, id);


--
-- Name: invoices_number; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX invoices_number ON billing.invoices USING btree (community_id, number);


--
-- Name: invoices_provider_ref; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX invoices_provider_ref ON billing.invoices USING btree (community_id, provider_ref) WHERE (provider_ref IS NOT NULL);


--
-- Name: invoices_retry; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX invoices_retry ON billing.invoices USING btree (community_id, next_attempt_at) WHERE ((status = 'open'::text) AND (next_attempt_at IS NOT NULL));


--
-- Name: invoices_status; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX invoices_status ON billing.invoices USING btree (community_id, status, id);


--
-- Name: invoices_subscription; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX invoices_subscription ON billing.invoices USING btree (community_id, subscription_id, id);


--
-- Name: link_codes_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX link_codes_member ON billing.link_codes USING btree (community_id, member_id, intended_platform);


--
-- Name: member_entitlements_entitlement; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX member_entitlements_entitlement ON billing.member_entitlements USING btree (community_id, entitlement_id) WHERE (status = 'active'::text);


--
-- Name: member_entitlements_next_check; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX member_entitlements_next_check ON billing.member_entitlements USING btree (community_id, next_check_at) WHERE ((status = 'active'::text) AND (next_check_at IS NOT NULL));


--
-- Name: members_created; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX members_created ON billing.members USING btree (community_id, created_at);


--
-- Name: members_email; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX members_email ON billing.members USING btree (community_id, lower(email)) WHERE (email IS NOT NULL);


--
-- Name: members_search; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX members_search ON billing.members USING gin (search_text public.gin_trgm_ops);


--
-- Name: members_tags; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX members_tags ON billing.members USING gin (tags);


--
-- Name: mrr_movements_day; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX mrr_movements_day ON billing.mrr_movements USING btree (community_id, day);


--
-- Name: mrr_movements_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX mrr_movements_member ON billing.mrr_movements USING btree (community_id, member_id);


--
-- Name: mrr_movements_subscription; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX mrr_movements_subscription ON billing.mrr_movements USING btree (community_id, subscription_id);


--
-- Name: payment_attempts_invoice; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX payment_attempts_invoice ON billing.payment_attempts USING btree (community_id, invoice_id, id);


--
-- Name: payment_attempts_one_success; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX payment_attempts_one_success ON billing.payment_attempts USING btree (community_id, invoice_id) WHERE (status = 'succeeded'::text);


--
-- Name: plans_tier; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX plans_tier ON billing.plans USING btree (community_id, tier_id);


--
-- Name: platform_actions_config; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX platform_actions_config ON billing.platform_actions USING btree (community_id, platform_config_id, id);


--
-- Name: platform_actions_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX platform_actions_member ON billing.platform_actions USING btree (community_id, member_id, id);


--
-- Name: platform_configs_id; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX platform_configs_id ON billing.platform_configs USING btree (id);


--
-- Name: price_migrations_plan; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX price_migrations_plan ON billing.price_migrations USING btree (community_id, plan_id, id);


--
-- Name: purchases_expiry; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX purchases_expiry ON billing.purchases USING btree (access_expires_at) WHERE (access_expires_at IS NOT NULL);


--
-- Name: purchases_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX purchases_member ON billing.purchases USING btree (community_id, member_id);


--
-- Name: refunds_invoice; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX refunds_invoice ON billing.refunds USING btree (community_id, invoice_id, id);


--
-- Name: refunds_provider_ref; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX refunds_provider_ref ON billing.refunds USING btree (community_id, provider_ref) WHERE (provider_ref IS NOT NULL);


--
-- Name: subscriptions_member; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX subscriptions_member ON billing.subscriptions USING btree (community_id, member_id);


--
-- Name: subscriptions_period_end; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX subscriptions_period_end ON billing.subscriptions USING btree (current_period_end) WHERE (status = ANY (ARRAY['active'::text, 'trialing'::text, 'past_due'::text, 'cancelling'::text]));


--
-- Name: subscriptions_plan; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX subscriptions_plan ON billing.subscriptions USING btree (community_id, plan_id, id);


--
-- Name: subscriptions_price_migration; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX subscriptions_price_migration ON billing.subscriptions USING btree (community_id, price_migration_id) WHERE (price_migration_id IS NOT NULL);


--
-- Name: subscriptions_provider_ref; Type: INDEX; Schema: billing; Owner: -
--

CREATE UNIQUE INDEX subscriptions_provider_ref ON billing.subscriptions USING btree (community_id, provider_ref) WHERE (provider_ref IS NOT NULL);


--
-- Name: subscriptions_status; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX subscriptions_status ON billing.subscriptions USING btree (community_id, status, id);


--
-- Name: tier_entitlements_ent; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX tier_entitlements_ent ON billing.tier_entitlements USING btree (community_id, entitlement_id);


--
-- Name: webhook_attempts_delivery; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX webhook_attempts_delivery ON billing.webhook_attempts USING btree (community_id, delivery_id, attempt);


--
-- Name: webhook_deliveries_endpoint; Type: INDEX; Schema: billing; Owner: -
--

CREATE INDEX webhook_deliveries_endpoint ON billing.webhook_deliveries USING btree (community_id, endpoint_id, id);


--
-- Name: analytics_deltas_community; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE INDEX analytics_deltas_community ON billing_private.analytics_deltas USING btree (community_id, day);


--
-- Name: analytics_facts_subscriber; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE INDEX analytics_facts_subscriber ON billing_private.analytics_facts USING btree (community_id, member_id) WHERE subscriber;


--
-- Name: api_keys_hash; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE UNIQUE INDEX api_keys_hash ON billing_private.api_keys USING btree (key_hash);


--
-- Name: api_keys_id; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE UNIQUE INDEX api_keys_id ON billing_private.api_keys USING btree (id);


--
-- Name: member_portal_sessions_portal; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE INDEX member_portal_sessions_portal ON billing_private.member_portal_sessions USING btree (community_id, portal_session_id);


--
-- Name: member_portal_sessions_token; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE UNIQUE INDEX member_portal_sessions_token ON billing_private.member_portal_sessions USING btree (token_sha256);


--
-- Name: operator_roles_community; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE INDEX operator_roles_community ON billing_private.operator_roles USING btree (community_id);


--
-- Name: operator_sessions_token; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE UNIQUE INDEX operator_sessions_token ON billing_private.operator_sessions USING btree (token_sha256);


--
-- Name: operator_users_by_email; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE INDEX operator_users_by_email ON billing_private.operator_users USING btree (email);


--
-- Name: operator_users_email; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE UNIQUE INDEX operator_users_email ON billing_private.operator_users USING btree (community_id, email);


--
-- Name: operator_users_id; Type: INDEX; Schema: billing_private; Owner: -
--

CREATE UNIQUE INDEX operator_users_id ON billing_private.operator_users USING btree (id);


--
-- Name: events _010_community_clock; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _010_community_clock BEFORE INSERT ON billing.events FOR EACH ROW WHEN ((new.created_at IS NULL)) EXECUTE FUNCTION billing.tg_events__community_clock();


--
-- Name: checkout_sessions _050_not_erased; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_not_erased BEFORE INSERT ON billing.checkout_sessions FOR EACH ROW EXECUTE FUNCTION billing.tg_member_rows__not_erased();


--
-- Name: external_subjects _050_not_erased; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_not_erased BEFORE INSERT ON billing.external_subjects FOR EACH ROW EXECUTE FUNCTION billing.tg_member_rows__not_erased();


--
-- Name: grants _050_not_erased; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_not_erased BEFORE INSERT ON billing.grants FOR EACH ROW EXECUTE FUNCTION billing.tg_member_rows__not_erased();


--
-- Name: link_codes _050_not_erased; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_not_erased BEFORE INSERT ON billing.link_codes FOR EACH ROW EXECUTE FUNCTION billing.tg_member_rows__not_erased();


--
-- Name: member_identities _050_not_erased; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_not_erased BEFORE INSERT ON billing.member_identities FOR EACH ROW EXECUTE FUNCTION billing.tg_member_rows__not_erased();


--
-- Name: portal_sessions _050_not_erased; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_not_erased BEFORE INSERT ON billing.portal_sessions FOR EACH ROW EXECUTE FUNCTION billing.tg_member_rows__not_erased();


--
-- Name: invoices _050_number; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_number BEFORE INSERT OR UPDATE OF status ON billing.invoices FOR EACH ROW WHEN (((new.number IS NULL) AND (new.status <> 'draft'::text))) EXECUTE FUNCTION billing.tg_invoices__number();


--
-- Name: subscriptions _050_price_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_price_insert BEFORE INSERT ON billing.subscriptions FOR EACH ROW WHEN ((new.price_cents IS NULL)) EXECUTE FUNCTION billing.tg_subscriptions__price();


--
-- Name: subscriptions _050_price_plan; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _050_price_plan BEFORE UPDATE OF plan_id ON billing.subscriptions FOR EACH ROW WHEN ((old.plan_id IS DISTINCT FROM new.plan_id)) EXECUTE FUNCTION billing.tg_subscriptions__price();


--
-- Name: members _090_erased; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _090_erased BEFORE UPDATE ON billing.members FOR EACH ROW WHEN (((old.erased_at IS NOT NULL) AND ((new.erased_at IS NULL) OR (new.email IS NOT NULL) OR (new.billing_name IS NOT NULL) OR (new.billing_address_lines IS NOT NULL) OR (new.billing_country IS NOT NULL) OR (new.billing_tax_id IS NOT NULL) OR (new.note IS NOT NULL) OR (new.tags <> '{}'::text[])))) EXECUTE FUNCTION billing.tg_members__erased();


--
-- Name: audit_log _100_append_only_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _100_append_only_delete BEFORE DELETE ON billing.audit_log FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit_log__append_only();


--
-- Name: audit_log _100_append_only_truncate; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _100_append_only_truncate BEFORE TRUNCATE ON billing.audit_log FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit_log__append_only();


--
-- Name: audit_log _100_append_only_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _100_append_only_update BEFORE UPDATE ON billing.audit_log FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit_log__append_only();


--
-- Name: entitlement_benefits _100_benefit_type; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE CONSTRAINT TRIGGER _100_benefit_type AFTER INSERT OR UPDATE OF type, platform_config_id ON billing.entitlement_benefits NOT DEFERRABLE INITIALLY IMMEDIATE FOR EACH ROW EXECUTE FUNCTION billing.tg_entitlement_benefits__type();


--
-- Name: platform_configs _100_benefit_type; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE CONSTRAINT TRIGGER _100_benefit_type AFTER UPDATE OF platform ON billing.platform_configs NOT DEFERRABLE INITIALLY IMMEDIATE FOR EACH ROW WHEN ((old.platform IS DISTINCT FROM new.platform)) EXECUTE FUNCTION billing.tg_platform_configs__benefit_types();


--
-- Name: webhook_endpoints _100_check_event_types; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _100_check_event_types BEFORE INSERT OR UPDATE OF event_types ON billing.webhook_endpoints FOR EACH ROW EXECUTE FUNCTION billing_private.tg_webhook_endpoints__check_event_types();


--
-- Name: invoices _100_immutable; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _100_immutable BEFORE UPDATE ON billing.invoices FOR EACH ROW EXECUTE FUNCTION billing.tg_invoices__immutable();


--
-- Name: members _100_people; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _100_people BEFORE INSERT OR UPDATE OF email ON billing.members FOR EACH ROW EXECUTE FUNCTION billing.tg_members__people();


--
-- Name: plans _100_tier_plan_rules; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE CONSTRAINT TRIGGER _100_tier_plan_rules AFTER INSERT OR UPDATE OF tier_id, "interval", trial_days, access_days ON billing.plans DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION billing.tg_plans__tier_plan_rules();


--
-- Name: tiers _100_tier_plan_rules; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE CONSTRAINT TRIGGER _100_tier_plan_rules AFTER UPDATE OF billing_mode ON billing.tiers DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((new.billing_mode IS DISTINCT FROM old.billing_mode)) EXECUTE FUNCTION billing.tg_tiers__tier_plan_rules();


--
-- Name: audit_log _110_retention_only; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _110_retention_only AFTER DELETE ON billing.audit_log REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit_log__retention_only();


--
-- Name: webhook_endpoints _200_endpoint_limit; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _200_endpoint_limit BEFORE INSERT ON billing.webhook_endpoints FOR EACH ROW EXECUTE FUNCTION billing_private.tg_webhook_endpoints__limit();


--
-- Name: external_subjects _400_people; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _400_people AFTER INSERT OR DELETE OR UPDATE ON billing.external_subjects FOR EACH ROW EXECUTE FUNCTION billing.tg_external_subjects__people();


--
-- Name: member_identities _400_people; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _400_people AFTER INSERT OR DELETE OR UPDATE ON billing.member_identities FOR EACH ROW EXECUTE FUNCTION billing.tg_member_identities__people();


--
-- Name: grants _500_ledger; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger AFTER INSERT OR UPDATE ON billing.grants FOR EACH ROW EXECUTE FUNCTION billing.tg_grants__ledger();


--
-- Name: plans _500_ledger; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger AFTER UPDATE OF tier_id ON billing.plans FOR EACH ROW WHEN ((old.tier_id IS DISTINCT FROM new.tier_id)) EXECUTE FUNCTION billing.tg_plans__ledger();


--
-- Name: platform_configs _500_ledger; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger AFTER UPDATE OF platform ON billing.platform_configs FOR EACH ROW WHEN ((old.platform IS DISTINCT FROM new.platform)) EXECUTE FUNCTION billing.tg_platform_configs__ledger();


--
-- Name: entitlement_benefits _500_ledger_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger_delete AFTER DELETE ON billing.entitlement_benefits REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_entitlement_benefits__ledger_delete();


--
-- Name: subscriptions _500_ledger_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger_delete AFTER DELETE ON billing.subscriptions FOR EACH ROW EXECUTE FUNCTION billing.tg_subscriptions__ledger_delete();


--
-- Name: tier_entitlements _500_ledger_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger_delete AFTER DELETE ON billing.tier_entitlements REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_tier_entitlements__ledger_delete();


--
-- Name: entitlement_benefits _500_ledger_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger_insert AFTER INSERT ON billing.entitlement_benefits REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_entitlement_benefits__ledger_insert();


--
-- Name: tier_entitlements _500_ledger_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger_insert AFTER INSERT ON billing.tier_entitlements REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_tier_entitlements__ledger_insert();


--
-- Name: entitlement_benefits _500_ledger_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger_update AFTER UPDATE ON billing.entitlement_benefits REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_entitlement_benefits__ledger();


--
-- Name: tier_entitlements _500_ledger_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_ledger_update AFTER UPDATE ON billing.tier_entitlements REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_tier_entitlements__ledger();


--
-- Name: checkout_sessions _500_outbox; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox AFTER INSERT OR UPDATE OF status ON billing.checkout_sessions FOR EACH ROW EXECUTE FUNCTION billing.tg_checkout_sessions__outbox();


--
-- Name: members _500_outbox; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox AFTER INSERT ON billing.members FOR EACH ROW EXECUTE FUNCTION billing.tg_members__outbox();


--
-- Name: external_subjects _500_outbox_and_ledger; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger AFTER INSERT OR DELETE OR UPDATE ON billing.external_subjects FOR EACH ROW EXECUTE FUNCTION billing.tg_external_subjects__outbox_and_ledger();


--
-- Name: member_identities _500_outbox_and_ledger; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger AFTER INSERT OR DELETE OR UPDATE ON billing.member_identities FOR EACH ROW EXECUTE FUNCTION billing.tg_member_identities__outbox_and_ledger();


--
-- Name: purchases _500_outbox_and_ledger; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger AFTER DELETE OR UPDATE ON billing.purchases FOR EACH ROW EXECUTE FUNCTION billing.tg_purchases__outbox_and_ledger();


--
-- Name: invoices _500_outbox_and_ledger_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger_insert AFTER INSERT ON billing.invoices REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_invoices__outbox_and_ledger_insert();


--
-- Name: purchases _500_outbox_and_ledger_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger_insert AFTER INSERT ON billing.purchases REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_purchases__outbox_and_ledger_insert();


--
-- Name: subscriptions _500_outbox_and_ledger_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger_insert AFTER INSERT ON billing.subscriptions REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_subscriptions__outbox_and_ledger_insert();


--
-- Name: invoices _500_outbox_and_ledger_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger_update AFTER UPDATE ON billing.invoices REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_invoices__outbox_and_ledger_update();


--
-- Name: subscriptions _500_outbox_and_ledger_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _500_outbox_and_ledger_update AFTER UPDATE ON billing.subscriptions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_subscriptions__outbox_and_ledger_update();


--
-- Name: invoices _550_subscription_tax; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _550_subscription_tax AFTER INSERT ON billing.invoices REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing.tg_invoices__subscription_tax();


--
-- Name: discount_codes _600_analytics; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _600_analytics AFTER UPDATE ON billing.discount_codes FOR EACH ROW WHEN ((((((old.value_type IS DISTINCT FROM new.value_type) OR (old.percent_off IS DISTINCT FROM new.percent_off)) OR (old.amount_off_cents IS DISTINCT FROM new.amount_off_cents)) OR (old.duration IS DISTINCT FROM new.duration)) OR (old.duration_months IS DISTINCT FROM new.duration_months))) EXECUTE FUNCTION billing_private.tg_discount_codes__analytics();


--
-- Name: plans _600_analytics; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _600_analytics AFTER UPDATE OF amount_cents, currency, "interval" ON billing.plans FOR EACH ROW WHEN ((((old.amount_cents IS DISTINCT FROM new.amount_cents) OR (old.currency IS DISTINCT FROM new.currency)) OR (old."interval" IS DISTINCT FROM new."interval"))) EXECUTE FUNCTION billing_private.tg_plans__analytics();


--
-- Name: subscriptions _600_analytics_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _600_analytics_delete AFTER DELETE ON billing.subscriptions REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_subscriptions__analytics();


--
-- Name: invoices _600_analytics_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _600_analytics_insert AFTER INSERT ON billing.invoices REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_invoices__analytics();


--
-- Name: subscriptions _600_analytics_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _600_analytics_insert AFTER INSERT ON billing.subscriptions REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_subscriptions__analytics();


--
-- Name: subscriptions _600_analytics_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _600_analytics_update AFTER UPDATE ON billing.subscriptions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_subscriptions__analytics_update();


--
-- Name: events _800_mail; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _800_mail AFTER INSERT ON billing.events REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_events__mail();


--
-- Name: events _900_enqueue_deliveries; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _900_enqueue_deliveries AFTER INSERT ON billing.events REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_events__enqueue_deliveries();


--
-- Name: communities _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.communities REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: discount_codes _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.discount_codes REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'members');


--
-- Name: entitlement_benefits _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.entitlement_benefits REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('entitlement_id,platform_config_id,type,value');


--
-- Name: entitlements _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.entitlements REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: grants _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.grants REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'note');


--
-- Name: invoices _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.invoices REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');


--
-- Name: members _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.members REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');


--
-- Name: plans _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.plans REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: platform_configs _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.platform_configs REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: price_migrations _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.price_migrations REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: refunds _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.refunds REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: subscriptions _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.subscriptions REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: tax_rates _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.tax_rates REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: tier_entitlements _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.tier_entitlements REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('tier_id,entitlement_id');


--
-- Name: tiers _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.tiers REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: webhook_endpoints _950_audit_delete; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing.webhook_endpoints REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', '', 'failing_since');


--
-- Name: communities _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.communities REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: discount_codes _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.discount_codes REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'members');


--
-- Name: entitlement_benefits _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.entitlement_benefits REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('entitlement_id,platform_config_id,type,value');


--
-- Name: entitlements _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.entitlements REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: grants _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.grants REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'note');


--
-- Name: invoices _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.invoices REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');


--
-- Name: members _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.members REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');


--
-- Name: plans _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.plans REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: platform_configs _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.platform_configs REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: price_migrations _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.price_migrations REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: refunds _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.refunds REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: subscriptions _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.subscriptions REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: tax_rates _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.tax_rates REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: tier_entitlements _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.tier_entitlements REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('tier_id,entitlement_id');


--
-- Name: tiers _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.tiers REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: webhook_endpoints _950_audit_insert; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing.webhook_endpoints REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', '', 'failing_since');


--
-- Name: communities _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.communities REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: discount_codes _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.discount_codes REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'members');


--
-- Name: entitlement_benefits _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.entitlement_benefits REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('entitlement_id,platform_config_id,type,value');


--
-- Name: entitlements _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.entitlements REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: grants _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.grants REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'note');


--
-- Name: invoices _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.invoices REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');


--
-- Name: members _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.members REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');


--
-- Name: plans _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.plans REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: platform_configs _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.platform_configs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: price_migrations _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.price_migrations REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: refunds _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.refunds REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: subscriptions _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.subscriptions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (billing_private.audit_wanted()) EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: tax_rates _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.tax_rates REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: tier_entitlements _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.tier_entitlements REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('tier_id,entitlement_id');


--
-- Name: tiers _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.tiers REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id');


--
-- Name: webhook_endpoints _950_audit_update; Type: TRIGGER; Schema: billing; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing.webhook_endpoints REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', '', 'failing_since');


--
-- Name: platform_secrets _700_deliveries; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _700_deliveries AFTER INSERT OR UPDATE OF ciphertext ON billing_private.platform_secrets FOR EACH ROW WHEN ((new.name = 'bot_token'::text)) EXECUTE FUNCTION billing_private.tg_platform_secrets__deliveries();


--
-- Name: api_keys _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.api_keys REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'key_hash', 'last_used_at');


--
-- Name: operator_policies _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.operator_policies REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('community_id');


--
-- Name: operator_recovery_codes _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.operator_recovery_codes REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('user_id', 'code_sha256', 'used_at');


--
-- Name: operator_roles _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.operator_roles REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('role_name');


--
-- Name: operator_second_factors _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.operator_second_factors REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('user_id', 'secret_ciphertext', 'last_step');


--
-- Name: operator_users _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.operator_users REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'password_hash');


--
-- Name: payment_secrets _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.payment_secrets REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('provider,name', 'ciphertext');


--
-- Name: platform_secrets _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.platform_secrets REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('platform_config_id,name', 'ciphertext');


--
-- Name: webhook_secrets _950_audit_delete; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_delete AFTER DELETE ON billing_private.webhook_secrets REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('endpoint_id', 'secret_ciphertext,previous_ciphertext');


--
-- Name: api_keys _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.api_keys REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'key_hash', 'last_used_at');


--
-- Name: operator_policies _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.operator_policies REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('community_id');


--
-- Name: operator_recovery_codes _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.operator_recovery_codes REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('user_id', 'code_sha256', 'used_at');


--
-- Name: operator_roles _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.operator_roles REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('role_name');


--
-- Name: operator_second_factors _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.operator_second_factors REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('user_id', 'secret_ciphertext', 'last_step');


--
-- Name: operator_users _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.operator_users REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'password_hash');


--
-- Name: payment_secrets _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.payment_secrets REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('provider,name', 'ciphertext');


--
-- Name: platform_secrets _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.platform_secrets REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('platform_config_id,name', 'ciphertext');


--
-- Name: webhook_secrets _950_audit_insert; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_insert AFTER INSERT ON billing_private.webhook_secrets REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('endpoint_id', 'secret_ciphertext,previous_ciphertext');


--
-- Name: api_keys _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.api_keys REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'key_hash', 'last_used_at');


--
-- Name: operator_policies _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.operator_policies REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('community_id');


--
-- Name: operator_recovery_codes _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.operator_recovery_codes REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('user_id', 'code_sha256', 'used_at');


--
-- Name: operator_roles _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.operator_roles REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('role_name');


--
-- Name: operator_second_factors _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.operator_second_factors REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('user_id', 'secret_ciphertext', 'last_step');


--
-- Name: operator_users _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.operator_users REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('id', 'password_hash');


--
-- Name: payment_secrets _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.payment_secrets REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('provider,name', 'ciphertext');


--
-- Name: platform_secrets _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.platform_secrets REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('platform_config_id,name', 'ciphertext');


--
-- Name: webhook_secrets _950_audit_update; Type: TRIGGER; Schema: billing_private; Owner: -
--

CREATE TRIGGER _950_audit_update AFTER UPDATE ON billing_private.webhook_secrets REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_private.tg_audit('endpoint_id', 'secret_ciphertext,previous_ciphertext');


--
-- Name: benefit_deliveries benefit_deliveries_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.benefit_deliveries
    ADD CONSTRAINT benefit_deliveries_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: benefit_deliveries benefit_deliveries_community_id_platform_config_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.benefit_deliveries
    ADD CONSTRAINT benefit_deliveries_community_id_platform_config_id_fkey FOREIGN KEY (community_id, platform_config_id) REFERENCES billing.platform_configs(community_id, id) ON DELETE CASCADE;


--
-- Name: checkout_sessions checkout_sessions_community_id_discount_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.checkout_sessions
    ADD CONSTRAINT checkout_sessions_community_id_discount_id_fkey FOREIGN KEY (community_id, discount_id) REFERENCES billing.discount_codes(community_id, id) ON DELETE RESTRICT;


--
-- Name: checkout_sessions checkout_sessions_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.checkout_sessions
    ADD CONSTRAINT checkout_sessions_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: checkout_sessions checkout_sessions_community_id_plan_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.checkout_sessions
    ADD CONSTRAINT checkout_sessions_community_id_plan_id_fkey FOREIGN KEY (community_id, plan_id) REFERENCES billing.plans(community_id, id) ON DELETE RESTRICT;


--
-- Name: credit_notes credit_notes_community_id_invoice_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.credit_notes
    ADD CONSTRAINT credit_notes_community_id_invoice_id_fkey FOREIGN KEY (community_id, invoice_id) REFERENCES billing.invoices(community_id, id) ON DELETE CASCADE;


--
-- Name: credit_notes credit_notes_community_id_refund_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.credit_notes
    ADD CONSTRAINT credit_notes_community_id_refund_id_fkey FOREIGN KEY (community_id, refund_id) REFERENCES billing.refunds(community_id, id) ON DELETE CASCADE;


--
-- Name: discount_codes discount_codes_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.discount_codes
    ADD CONSTRAINT discount_codes_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: discount_redemptions discount_redemptions_community_id_checkout_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.discount_redemptions
    ADD CONSTRAINT discount_redemptions_community_id_checkout_id_fkey FOREIGN KEY (community_id, checkout_id) REFERENCES billing.checkout_sessions(community_id, id) ON DELETE CASCADE;


--
-- Name: discount_redemptions discount_redemptions_community_id_discount_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.discount_redemptions
    ADD CONSTRAINT discount_redemptions_community_id_discount_id_fkey FOREIGN KEY (community_id, discount_id) REFERENCES billing.discount_codes(community_id, id) ON DELETE CASCADE;


--
-- Name: disputes disputes_community_id_invoice_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.disputes
    ADD CONSTRAINT disputes_community_id_invoice_id_fkey FOREIGN KEY (community_id, invoice_id) REFERENCES billing.invoices(community_id, id) ON DELETE CASCADE;


--
-- Name: entitlement_benefits entitlement_benefits_community_id_entitlement_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.entitlement_benefits
    ADD CONSTRAINT entitlement_benefits_community_id_entitlement_id_fkey FOREIGN KEY (community_id, entitlement_id) REFERENCES billing.entitlements(community_id, id) ON DELETE CASCADE;


--
-- Name: entitlement_benefits entitlement_benefits_community_id_platform_config_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.entitlement_benefits
    ADD CONSTRAINT entitlement_benefits_community_id_platform_config_id_fkey FOREIGN KEY (community_id, platform_config_id) REFERENCES billing.platform_configs(community_id, id) ON DELETE CASCADE;


--
-- Name: entitlements entitlements_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.entitlements
    ADD CONSTRAINT entitlements_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: events events_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.events
    ADD CONSTRAINT events_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: external_subjects external_subjects_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.external_subjects
    ADD CONSTRAINT external_subjects_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: grants grants_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.grants
    ADD CONSTRAINT grants_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: grants grants_community_id_tier_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.grants
    ADD CONSTRAINT grants_community_id_tier_id_fkey FOREIGN KEY (community_id, tier_id) REFERENCES billing.tiers(community_id, id) ON DELETE CASCADE;


--
-- Name: idempotency_keys idempotency_keys_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.idempotency_keys
    ADD CONSTRAINT idempotency_keys_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: invoices invoices_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: invoices invoices_community_id_purchase_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_community_id_purchase_id_fkey FOREIGN KEY (community_id, purchase_id) REFERENCES billing.purchases(community_id, id) ON DELETE CASCADE;


--
-- Name: invoices invoices_community_id_subscription_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_community_id_subscription_id_fkey FOREIGN KEY (community_id, subscription_id) REFERENCES billing.subscriptions(community_id, id) ON DELETE CASCADE;


--
-- Name: link_codes link_codes_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.link_codes
    ADD CONSTRAINT link_codes_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: mail_messages mail_messages_community_id_event_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_messages
    ADD CONSTRAINT mail_messages_community_id_event_id_fkey FOREIGN KEY (community_id, event_id) REFERENCES billing.events(community_id, id) ON DELETE CASCADE;


--
-- Name: mail_messages mail_messages_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_messages
    ADD CONSTRAINT mail_messages_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: mail_messages mail_messages_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_messages
    ADD CONSTRAINT mail_messages_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: mail_unsubscribes mail_unsubscribes_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_unsubscribes
    ADD CONSTRAINT mail_unsubscribes_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: mail_unsubscribes mail_unsubscribes_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mail_unsubscribes
    ADD CONSTRAINT mail_unsubscribes_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: member_entitlements member_entitlements_community_id_entitlement_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_entitlements
    ADD CONSTRAINT member_entitlements_community_id_entitlement_id_fkey FOREIGN KEY (community_id, entitlement_id) REFERENCES billing.entitlements(community_id, id) ON DELETE CASCADE;


--
-- Name: member_entitlements member_entitlements_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_entitlements
    ADD CONSTRAINT member_entitlements_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: member_identities member_identities_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_identities
    ADD CONSTRAINT member_identities_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: member_provider_customers member_provider_customers_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_provider_customers
    ADD CONSTRAINT member_provider_customers_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: member_provider_customers member_provider_customers_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.member_provider_customers
    ADD CONSTRAINT member_provider_customers_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: members members_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.members
    ADD CONSTRAINT members_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: mrr_movements mrr_movements_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.mrr_movements
    ADD CONSTRAINT mrr_movements_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: payment_attempts payment_attempts_community_id_invoice_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.payment_attempts
    ADD CONSTRAINT payment_attempts_community_id_invoice_id_fkey FOREIGN KEY (community_id, invoice_id) REFERENCES billing.invoices(community_id, id) ON DELETE CASCADE;


--
-- Name: plans plans_community_id_tier_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.plans
    ADD CONSTRAINT plans_community_id_tier_id_fkey FOREIGN KEY (community_id, tier_id) REFERENCES billing.tiers(community_id, id) ON DELETE CASCADE;


--
-- Name: platform_actions platform_actions_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.platform_actions
    ADD CONSTRAINT platform_actions_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: platform_actions platform_actions_community_id_platform_config_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.platform_actions
    ADD CONSTRAINT platform_actions_community_id_platform_config_id_fkey FOREIGN KEY (community_id, platform_config_id) REFERENCES billing.platform_configs(community_id, id) ON DELETE CASCADE;


--
-- Name: platform_configs platform_configs_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.platform_configs
    ADD CONSTRAINT platform_configs_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: portal_sessions portal_sessions_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.portal_sessions
    ADD CONSTRAINT portal_sessions_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: price_migrations price_migrations_community_id_plan_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.price_migrations
    ADD CONSTRAINT price_migrations_community_id_plan_id_fkey FOREIGN KEY (community_id, plan_id) REFERENCES billing.plans(community_id, id) ON DELETE CASCADE;


--
-- Name: provider_events provider_events_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.provider_events
    ADD CONSTRAINT provider_events_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: purchases purchases_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.purchases
    ADD CONSTRAINT purchases_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: purchases purchases_community_id_plan_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.purchases
    ADD CONSTRAINT purchases_community_id_plan_id_fkey FOREIGN KEY (community_id, plan_id) REFERENCES billing.plans(community_id, id) ON DELETE RESTRICT;


--
-- Name: refunds refunds_community_id_invoice_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.refunds
    ADD CONSTRAINT refunds_community_id_invoice_id_fkey FOREIGN KEY (community_id, invoice_id) REFERENCES billing.invoices(community_id, id) ON DELETE CASCADE;


--
-- Name: sandbox_cards sandbox_cards_community_id_subscription_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.sandbox_cards
    ADD CONSTRAINT sandbox_cards_community_id_subscription_id_fkey FOREIGN KEY (community_id, subscription_id) REFERENCES billing.subscriptions(community_id, id) ON DELETE CASCADE;


--
-- Name: subscriptions subscriptions_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.subscriptions
    ADD CONSTRAINT subscriptions_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: subscriptions subscriptions_community_id_plan_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.subscriptions
    ADD CONSTRAINT subscriptions_community_id_plan_id_fkey FOREIGN KEY (community_id, plan_id) REFERENCES billing.plans(community_id, id) ON DELETE RESTRICT;


--
-- Name: subscriptions subscriptions_community_id_scheduled_plan_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.subscriptions
    ADD CONSTRAINT subscriptions_community_id_scheduled_plan_id_fkey FOREIGN KEY (community_id, scheduled_plan_id) REFERENCES billing.plans(community_id, id) ON DELETE SET NULL (scheduled_plan_id);


--
-- Name: subscriptions subscriptions_price_migration_fk; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.subscriptions
    ADD CONSTRAINT subscriptions_price_migration_fk FOREIGN KEY (community_id, price_migration_id) REFERENCES billing.price_migrations(community_id, id) ON DELETE SET NULL (price_migration_id);


--
-- Name: tax_rates tax_rates_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tax_rates
    ADD CONSTRAINT tax_rates_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: tier_entitlements tier_entitlements_community_id_entitlement_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tier_entitlements
    ADD CONSTRAINT tier_entitlements_community_id_entitlement_id_fkey FOREIGN KEY (community_id, entitlement_id) REFERENCES billing.entitlements(community_id, id) ON DELETE CASCADE;


--
-- Name: tier_entitlements tier_entitlements_community_id_tier_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tier_entitlements
    ADD CONSTRAINT tier_entitlements_community_id_tier_id_fkey FOREIGN KEY (community_id, tier_id) REFERENCES billing.tiers(community_id, id) ON DELETE CASCADE;


--
-- Name: tiers tiers_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.tiers
    ADD CONSTRAINT tiers_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: webhook_attempts webhook_attempts_community_id_delivery_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_attempts
    ADD CONSTRAINT webhook_attempts_community_id_delivery_id_fkey FOREIGN KEY (community_id, delivery_id) REFERENCES billing.webhook_deliveries(community_id, id) ON DELETE CASCADE;


--
-- Name: webhook_deliveries webhook_deliveries_community_id_endpoint_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_community_id_endpoint_id_fkey FOREIGN KEY (community_id, endpoint_id) REFERENCES billing.webhook_endpoints(community_id, id) ON DELETE CASCADE;


--
-- Name: webhook_deliveries webhook_deliveries_community_id_event_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_community_id_event_id_fkey FOREIGN KEY (community_id, event_id) REFERENCES billing.events(community_id, id) ON DELETE CASCADE;


--
-- Name: webhook_endpoints webhook_endpoints_community_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: -
--

ALTER TABLE ONLY billing.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: api_keys api_keys_community_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.api_keys
    ADD CONSTRAINT api_keys_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: member_portal_sessions member_portal_sessions_community_id_member_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.member_portal_sessions
    ADD CONSTRAINT member_portal_sessions_community_id_member_id_fkey FOREIGN KEY (community_id, member_id) REFERENCES billing.members(community_id, id) ON DELETE CASCADE;


--
-- Name: member_portal_sessions member_portal_sessions_community_id_portal_session_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.member_portal_sessions
    ADD CONSTRAINT member_portal_sessions_community_id_portal_session_id_fkey FOREIGN KEY (community_id, portal_session_id) REFERENCES billing.portal_sessions(community_id, id) ON DELETE CASCADE;


--
-- Name: number_counters number_counters_community_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.number_counters
    ADD CONSTRAINT number_counters_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: operator_known_addresses operator_known_addresses_user_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_known_addresses
    ADD CONSTRAINT operator_known_addresses_user_id_fkey FOREIGN KEY (user_id) REFERENCES billing_private.operator_users(id) ON DELETE CASCADE;


--
-- Name: operator_links operator_links_community_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_links
    ADD CONSTRAINT operator_links_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: operator_links operator_links_community_id_user_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_links
    ADD CONSTRAINT operator_links_community_id_user_id_fkey FOREIGN KEY (community_id, user_id) REFERENCES billing_private.operator_users(community_id, id) ON DELETE CASCADE;


--
-- Name: operator_policies operator_policies_community_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_policies
    ADD CONSTRAINT operator_policies_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: operator_recovery_codes operator_recovery_codes_community_id_user_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_recovery_codes
    ADD CONSTRAINT operator_recovery_codes_community_id_user_id_fkey FOREIGN KEY (community_id, user_id) REFERENCES billing_private.operator_users(community_id, id) ON DELETE CASCADE;


--
-- Name: operator_roles operator_roles_community_fk; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_roles
    ADD CONSTRAINT operator_roles_community_fk FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: operator_second_factors operator_second_factors_community_id_user_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_second_factors
    ADD CONSTRAINT operator_second_factors_community_id_user_id_fkey FOREIGN KEY (community_id, user_id) REFERENCES billing_private.operator_users(community_id, id) ON DELETE CASCADE;


--
-- Name: operator_sessions operator_sessions_community_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_sessions
    ADD CONSTRAINT operator_sessions_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: operator_sessions operator_sessions_community_id_user_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_sessions
    ADD CONSTRAINT operator_sessions_community_id_user_id_fkey FOREIGN KEY (community_id, user_id) REFERENCES billing_private.operator_users(community_id, id) ON DELETE CASCADE;


--
-- Name: operator_users operator_users_community_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.operator_users
    ADD CONSTRAINT operator_users_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: payment_secrets payment_secrets_community_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.payment_secrets
    ADD CONSTRAINT payment_secrets_community_id_fkey FOREIGN KEY (community_id) REFERENCES billing.communities(id) ON DELETE CASCADE;


--
-- Name: platform_secrets platform_secrets_community_id_platform_config_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.platform_secrets
    ADD CONSTRAINT platform_secrets_community_id_platform_config_id_fkey FOREIGN KEY (community_id, platform_config_id) REFERENCES billing.platform_configs(community_id, id) ON DELETE CASCADE;


--
-- Name: webhook_secrets webhook_secrets_community_id_endpoint_id_fkey; Type: FK CONSTRAINT; Schema: billing_private; Owner: -
--

ALTER TABLE ONLY billing_private.webhook_secrets
    ADD CONSTRAINT webhook_secrets_community_id_endpoint_id_fkey FOREIGN KEY (community_id, endpoint_id) REFERENCES billing.webhook_endpoints(community_id, id) ON DELETE CASCADE;


--
-- Name: audit_log; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.audit_log ENABLE ROW LEVEL SECURITY;

--
-- Name: benefit_deliveries; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.benefit_deliveries ENABLE ROW LEVEL SECURITY;

--
-- Name: checkout_sessions; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.checkout_sessions ENABLE ROW LEVEL SECURITY;

--
-- Name: communities; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.communities ENABLE ROW LEVEL SECURITY;

--
-- Name: credit_notes; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.credit_notes ENABLE ROW LEVEL SECURITY;

--
-- Name: discount_codes; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.discount_codes ENABLE ROW LEVEL SECURITY;

--
-- Name: discount_redemptions; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.discount_redemptions ENABLE ROW LEVEL SECURITY;

--
-- Name: disputes; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.disputes ENABLE ROW LEVEL SECURITY;

--
-- Name: entitlement_benefits; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.entitlement_benefits ENABLE ROW LEVEL SECURITY;

--
-- Name: entitlements; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.entitlements ENABLE ROW LEVEL SECURITY;

--
-- Name: events; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.events ENABLE ROW LEVEL SECURITY;

--
-- Name: external_subjects; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.external_subjects ENABLE ROW LEVEL SECURITY;

--
-- Name: grants; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.grants ENABLE ROW LEVEL SECURITY;

--
-- Name: idempotency_keys; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.idempotency_keys ENABLE ROW LEVEL SECURITY;

--
-- Name: invoices; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.invoices ENABLE ROW LEVEL SECURITY;

--
-- Name: link_codes; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.link_codes ENABLE ROW LEVEL SECURITY;

--
-- Name: mail_messages; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.mail_messages ENABLE ROW LEVEL SECURITY;

--
-- Name: mail_unsubscribes; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.mail_unsubscribes ENABLE ROW LEVEL SECURITY;

--
-- Name: member_entitlements; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.member_entitlements ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_log member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.audit_log AS RESTRICTIVE TO billing_api, billing_writer USING ((( SELECT billing.current_member_id() AS current_member_id) IS NULL));


--
-- Name: benefit_deliveries member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.benefit_deliveries AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: checkout_sessions member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.checkout_sessions AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: external_subjects member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.external_subjects AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: grants member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.grants AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: invoices member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.invoices AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: link_codes member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.link_codes AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: mail_messages member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.mail_messages AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: mail_unsubscribes member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.mail_unsubscribes AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: member_entitlements member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.member_entitlements AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: member_identities member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.member_identities AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: members member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.members AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: platform_actions member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.platform_actions AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: portal_sessions member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.portal_sessions AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: purchases member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.purchases AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: subscriptions member_fence; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY member_fence ON billing.subscriptions AS RESTRICTIVE TO billing_api, billing_writer USING (((( SELECT billing.current_member_id() AS current_member_id) IS NULL) OR (member_id = ( SELECT billing.current_member_id() AS current_member_id))));


--
-- Name: member_identities; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.member_identities ENABLE ROW LEVEL SECURITY;

--
-- Name: member_provider_customers; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.member_provider_customers ENABLE ROW LEVEL SECURITY;

--
-- Name: members; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.members ENABLE ROW LEVEL SECURITY;

--
-- Name: mrr_movements; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.mrr_movements ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_log owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.audit_log TO postgres USING (true) WITH CHECK (true);


--
-- Name: benefit_deliveries owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.benefit_deliveries TO postgres USING (true) WITH CHECK (true);


--
-- Name: checkout_sessions owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.checkout_sessions TO postgres USING (true) WITH CHECK (true);


--
-- Name: communities owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.communities TO postgres USING (true) WITH CHECK (true);


--
-- Name: credit_notes owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.credit_notes TO postgres USING (true) WITH CHECK (true);


--
-- Name: discount_codes owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.discount_codes TO postgres USING (true) WITH CHECK (true);


--
-- Name: discount_redemptions owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.discount_redemptions TO postgres USING (true) WITH CHECK (true);


--
-- Name: disputes owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.disputes TO postgres USING (true) WITH CHECK (true);


--
-- Name: entitlement_benefits owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.entitlement_benefits TO postgres USING (true) WITH CHECK (true);


--
-- Name: entitlements owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.entitlements TO postgres USING (true) WITH CHECK (true);


--
-- Name: events owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.events TO postgres USING (true) WITH CHECK (true);


--
-- Name: external_subjects owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.external_subjects TO postgres USING (true) WITH CHECK (true);


--
-- Name: grants owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.grants TO postgres USING (true) WITH CHECK (true);


--
-- Name: idempotency_keys owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.idempotency_keys TO postgres USING (true) WITH CHECK (true);


--
-- Name: invoices owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.invoices TO postgres USING (true) WITH CHECK (true);


--
-- Name: link_codes owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.link_codes TO postgres USING (true) WITH CHECK (true);


--
-- Name: mail_messages owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.mail_messages TO postgres USING (true) WITH CHECK (true);


--
-- Name: mail_unsubscribes owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.mail_unsubscribes TO postgres USING (true) WITH CHECK (true);


--
-- Name: member_entitlements owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.member_entitlements TO postgres USING (true) WITH CHECK (true);


--
-- Name: member_identities owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.member_identities TO postgres USING (true) WITH CHECK (true);


--
-- Name: member_provider_customers owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.member_provider_customers TO postgres USING (true) WITH CHECK (true);


--
-- Name: members owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.members TO postgres USING (true) WITH CHECK (true);


--
-- Name: mrr_movements owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.mrr_movements TO postgres USING (true) WITH CHECK (true);


--
-- Name: payment_attempts owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.payment_attempts TO postgres USING (true) WITH CHECK (true);


--
-- Name: plans owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.plans TO postgres USING (true) WITH CHECK (true);


--
-- Name: platform_actions owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.platform_actions TO postgres USING (true) WITH CHECK (true);


--
-- Name: platform_configs owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.platform_configs TO postgres USING (true) WITH CHECK (true);


--
-- Name: portal_sessions owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.portal_sessions TO postgres USING (true) WITH CHECK (true);


--
-- Name: price_migrations owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.price_migrations TO postgres USING (true) WITH CHECK (true);


--
-- Name: provider_events owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.provider_events TO postgres USING (true) WITH CHECK (true);


--
-- Name: purchases owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.purchases TO postgres USING (true) WITH CHECK (true);


--
-- Name: refunds owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.refunds TO postgres USING (true) WITH CHECK (true);


--
-- Name: sandbox_cards owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.sandbox_cards TO postgres USING (true) WITH CHECK (true);


--
-- Name: subscriptions owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.subscriptions TO postgres USING (true) WITH CHECK (true);


--
-- Name: tax_rates owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.tax_rates TO postgres USING (true) WITH CHECK (true);


--
-- Name: tier_entitlements owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.tier_entitlements TO postgres USING (true) WITH CHECK (true);


--
-- Name: tiers owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.tiers TO postgres USING (true) WITH CHECK (true);


--
-- Name: webhook_attempts owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.webhook_attempts TO postgres USING (true) WITH CHECK (true);


--
-- Name: webhook_deliveries owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.webhook_deliveries TO postgres USING (true) WITH CHECK (true);


--
-- Name: webhook_endpoints owner_access; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY owner_access ON billing.webhook_endpoints TO postgres USING (true) WITH CHECK (true);


--
-- Name: payment_attempts; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.payment_attempts ENABLE ROW LEVEL SECURITY;

--
-- Name: plans; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.plans ENABLE ROW LEVEL SECURITY;

--
-- Name: platform_actions; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.platform_actions ENABLE ROW LEVEL SECURITY;

--
-- Name: platform_configs; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.platform_configs ENABLE ROW LEVEL SECURITY;

--
-- Name: portal_sessions; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.portal_sessions ENABLE ROW LEVEL SECURITY;

--
-- Name: price_migrations; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.price_migrations ENABLE ROW LEVEL SECURITY;

--
-- Name: provider_events; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.provider_events ENABLE ROW LEVEL SECURITY;

--
-- Name: purchases; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.purchases ENABLE ROW LEVEL SECURITY;

--
-- Name: refunds; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.refunds ENABLE ROW LEVEL SECURITY;

--
-- Name: sandbox_cards; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.sandbox_cards ENABLE ROW LEVEL SECURITY;

--
-- Name: subscriptions; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.subscriptions ENABLE ROW LEVEL SECURITY;

--
-- Name: tax_rates; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.tax_rates ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_log tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.audit_log FOR SELECT USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: benefit_deliveries tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.benefit_deliveries USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: checkout_sessions tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.checkout_sessions USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: communities tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.communities USING ((id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: credit_notes tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.credit_notes USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: discount_codes tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.discount_codes USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: discount_redemptions tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.discount_redemptions USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: disputes tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.disputes USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: entitlement_benefits tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.entitlement_benefits USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: entitlements tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.entitlements USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: events tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.events USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: external_subjects tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.external_subjects USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: grants tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.grants USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: idempotency_keys tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.idempotency_keys USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: invoices tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.invoices USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: link_codes tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.link_codes USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: mail_messages tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.mail_messages USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: mail_unsubscribes tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.mail_unsubscribes USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: member_entitlements tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.member_entitlements USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: member_identities tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.member_identities USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: member_provider_customers tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.member_provider_customers USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: members tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.members USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: mrr_movements tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.mrr_movements USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: payment_attempts tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.payment_attempts USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: plans tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.plans USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: platform_actions tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.platform_actions USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: platform_configs tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.platform_configs USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: portal_sessions tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.portal_sessions USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: price_migrations tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.price_migrations USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: provider_events tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.provider_events USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: purchases tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.purchases USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: refunds tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.refunds USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: sandbox_cards tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.sandbox_cards USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: subscriptions tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.subscriptions USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: tax_rates tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.tax_rates USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: tier_entitlements tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.tier_entitlements USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: tiers tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.tiers USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: webhook_attempts tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.webhook_attempts USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: webhook_deliveries tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.webhook_deliveries USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: webhook_endpoints tenant; Type: POLICY; Schema: billing; Owner: -
--

CREATE POLICY tenant ON billing.webhook_endpoints USING ((community_id = ( SELECT billing.current_community_id() AS current_community_id))) WITH CHECK ((community_id = ( SELECT billing.current_community_id() AS current_community_id)));


--
-- Name: tier_entitlements; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.tier_entitlements ENABLE ROW LEVEL SECURITY;

--
-- Name: tiers; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.tiers ENABLE ROW LEVEL SECURITY;

--
-- Name: webhook_attempts; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.webhook_attempts ENABLE ROW LEVEL SECURITY;

--
-- Name: webhook_deliveries; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.webhook_deliveries ENABLE ROW LEVEL SECURITY;

--
-- Name: webhook_endpoints; Type: ROW SECURITY; Schema: billing; Owner: -
--

ALTER TABLE billing.webhook_endpoints ENABLE ROW LEVEL SECURITY;

--
-- Name: analytics_deltas; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.analytics_deltas ENABLE ROW LEVEL SECURITY;

--
-- Name: analytics_facts; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.analytics_facts ENABLE ROW LEVEL SECURITY;

--
-- Name: api_keys; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.api_keys ENABLE ROW LEVEL SECURITY;

--
-- Name: event_types; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.event_types ENABLE ROW LEVEL SECURITY;

--
-- Name: member_portal_sessions; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.member_portal_sessions ENABLE ROW LEVEL SECURITY;

--
-- Name: number_counters; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.number_counters ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_known_addresses; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_known_addresses ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_links; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_links ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_policies; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_policies ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_recovery_codes; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_recovery_codes ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_roles; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_roles ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_second_factors; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_second_factors ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_sessions; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_sessions ENABLE ROW LEVEL SECURITY;

--
-- Name: operator_users; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.operator_users ENABLE ROW LEVEL SECURITY;

--
-- Name: analytics_deltas owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.analytics_deltas USING (true);


--
-- Name: analytics_facts owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.analytics_facts USING (true);


--
-- Name: api_keys owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.api_keys USING (true);


--
-- Name: event_types owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.event_types USING (true);


--
-- Name: member_portal_sessions owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.member_portal_sessions USING (true);


--
-- Name: number_counters owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.number_counters USING (true);


--
-- Name: operator_known_addresses owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_known_addresses USING (true);


--
-- Name: operator_links owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_links USING (true);


--
-- Name: operator_policies owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_policies USING (true);


--
-- Name: operator_recovery_codes owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_recovery_codes USING (true);


--
-- Name: operator_roles owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_roles USING (true);


--
-- Name: operator_second_factors owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_second_factors USING (true);


--
-- Name: operator_sessions owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_sessions USING (true);


--
-- Name: operator_users owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.operator_users USING (true);


--
-- Name: payment_secrets owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.payment_secrets USING (true);


--
-- Name: platform_defaults owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.platform_defaults USING (true);


--
-- Name: platform_secrets owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.platform_secrets USING (true);


--
-- Name: rate_buckets owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.rate_buckets USING (true);


--
-- Name: webhook_secrets owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.webhook_secrets USING (true);


--
-- Name: worker_heartbeats owner_only; Type: POLICY; Schema: billing_private; Owner: -
--

CREATE POLICY owner_only ON billing_private.worker_heartbeats USING (true);


--
-- Name: payment_secrets; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.payment_secrets ENABLE ROW LEVEL SECURITY;

--
-- Name: platform_defaults; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.platform_defaults ENABLE ROW LEVEL SECURITY;

--
-- Name: platform_secrets; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.platform_secrets ENABLE ROW LEVEL SECURITY;

--
-- Name: rate_buckets; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.rate_buckets ENABLE ROW LEVEL SECURITY;

--
-- Name: webhook_secrets; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.webhook_secrets ENABLE ROW LEVEL SECURITY;

--
-- Name: worker_heartbeats; Type: ROW SECURITY; Schema: billing_private; Owner: -
--

ALTER TABLE billing_private.worker_heartbeats ENABLE ROW LEVEL SECURITY;

--
-- Name: SCHEMA analytics; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA analytics TO billing_api;
GRANT USAGE ON SCHEMA analytics TO billing_operator;


--
-- Name: SCHEMA billing; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA billing TO billing_api;
GRANT USAGE ON SCHEMA billing TO billing_operator;


--
-- Name: SCHEMA billing_api; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA billing_api TO billing_api;


--
-- Name: SCHEMA billing_graphql; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA billing_graphql TO billing_api;


--
-- Name: SCHEMA billing_private; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA billing_private TO billing_api;
GRANT USAGE ON SCHEMA billing_private TO billing_operator;
GRANT USAGE ON SCHEMA billing_private TO billing_worker;


--
-- Name: FUNCTION gtrgm_in(cstring); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_in(cstring) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_out(public.gtrgm); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_out(public.gtrgm) FROM PUBLIC;


--
-- Name: FUNCTION add_utc(p_ts timestamp with time zone, p_interval interval); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.add_utc(p_ts timestamp with time zone, p_interval interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.add_utc(p_ts timestamp with time zone, p_interval interval) TO billing_api;


--
-- Name: FUNCTION api_call(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_op text, p_args jsonb, p_idem jsonb, p_leased boolean, p_request_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.api_call(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_op text, p_args jsonb, p_idem jsonb, p_leased boolean, p_request_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.api_call(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_op text, p_args jsonb, p_idem jsonb, p_leased boolean, p_request_id text) TO billing_api;


--
-- Name: FUNCTION api_version(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.api_version() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.api_version() TO billing_api;


--
-- Name: FUNCTION apply_due(p_community_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.apply_due(p_community_id text) FROM PUBLIC;


--
-- Name: FUNCTION apply_due_all(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.apply_due_all() FROM PUBLIC;


--
-- Name: FUNCTION apply_due_batch(p_community_id text, p_after text, p_limit integer); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.apply_due_batch(p_community_id text, p_after text, p_limit integer) FROM PUBLIC;


--
-- Name: FUNCTION apply_provider_invoice(p_state jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.apply_provider_invoice(p_state jsonb) FROM PUBLIC;


--
-- Name: FUNCTION apply_provider_subscription(p_state jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.apply_provider_subscription(p_state jsonb) FROM PUBLIC;


--
-- Name: FUNCTION gen_id(p_prefix text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.gen_id(p_prefix text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.gen_id(p_prefix text) TO billing_api;


--
-- Name: TABLE audit_log; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.audit_log TO billing_api;
GRANT SELECT ON TABLE billing.audit_log TO billing_operator;


--
-- Name: FUNCTION audit_entry_json(a billing.audit_log); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.audit_entry_json(a billing.audit_log) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.audit_entry_json(a billing.audit_log) TO billing_api;


--
-- Name: FUNCTION benefit_type_problem(p_platform text, p_type text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.benefit_type_problem(p_platform text, p_type text) FROM PUBLIC;


--
-- Name: FUNCTION benefits_with_delivery(p_community_id text, p_member_id text, p_benefits jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.benefits_with_delivery(p_community_id text, p_member_id text, p_benefits jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.benefits_with_delivery(p_community_id text, p_member_id text, p_benefits jsonb) TO billing_api;


--
-- Name: TABLE plans; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.plans TO billing_api;
GRANT SELECT ON TABLE billing.plans TO billing_operator;


--
-- Name: TABLE tiers; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.tiers TO billing_api;
GRANT SELECT ON TABLE billing.tiers TO billing_operator;


--
-- Name: FUNCTION check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans) TO billing_api;


--
-- Name: FUNCTION check_tier_plans(p_community_id text, p_tier_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.check_tier_plans(p_community_id text, p_tier_id text) FROM PUBLIC;


--
-- Name: FUNCTION checkout_apply_discount(p_checkout_id text, p_code text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_apply_discount(p_checkout_id text, p_code text) FROM PUBLIC;


--
-- Name: FUNCTION email_valid(p_email text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.email_valid(p_email text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.email_valid(p_email text) TO billing_api;
GRANT ALL ON FUNCTION billing.email_valid(p_email text) TO billing_writer;


--
-- Name: TABLE checkout_sessions; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.checkout_sessions TO billing_api;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.checkout_sessions TO billing_writer;


--
-- Name: COLUMN checkout_sessions.community_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(community_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.member_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(member_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.tier_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(tier_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.plan_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(plan_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.discount_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(discount_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.amount_cents; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(amount_cents) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.discount_cents; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(discount_cents) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.currency; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(currency) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.client_reference_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(client_reference_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.return_url; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(return_url) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.subject_kind; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(subject_kind) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.status; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(status) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.provider; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(provider) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.expires_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(expires_at) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.completed_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(completed_at) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.created_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(created_at) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.subscription_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(subscription_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.purchase_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(purchase_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.customer_email; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(customer_email) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.customer_name; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(customer_name) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.customer_address_lines; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(customer_address_lines) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.customer_country; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(customer_country) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: COLUMN checkout_sessions.customer_tax_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(customer_tax_id) ON TABLE billing.checkout_sessions TO billing_operator;


--
-- Name: FUNCTION checkout_billing(p_cs billing.checkout_sessions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_billing(p_cs billing.checkout_sessions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.checkout_billing(p_cs billing.checkout_sessions) TO billing_api;


--
-- Name: FUNCTION checkout_details_problem(p jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_details_problem(p jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.checkout_details_problem(p jsonb) TO billing_api;


--
-- Name: FUNCTION checkout_discount(p_code text, p_member_id text, p_tier_id text, p_plan billing.plans, OUT discount_id uuid, OUT discount_cents integer); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_discount(p_code text, p_member_id text, p_tier_id text, p_plan billing.plans, OUT discount_id uuid, OUT discount_cents integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.checkout_discount(p_code text, p_member_id text, p_tier_id text, p_plan billing.plans, OUT discount_id uuid, OUT discount_cents integer) TO billing_api;


--
-- Name: FUNCTION checkout_event_json(p_cs billing.checkout_sessions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_event_json(p_cs billing.checkout_sessions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.checkout_event_json(p_cs billing.checkout_sessions) TO billing_api;


--
-- Name: FUNCTION checkout_json(p_cs billing.checkout_sessions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_json(p_cs billing.checkout_sessions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.checkout_json(p_cs billing.checkout_sessions) TO billing_api;


--
-- Name: FUNCTION checkout_lifetime(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_lifetime() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.checkout_lifetime() TO billing_api;


--
-- Name: FUNCTION checkout_member(p_subject jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_member(p_subject jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.checkout_member(p_subject jsonb) TO billing_api;


--
-- Name: FUNCTION checkout_set_details(p_checkout_id text, p_details jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.checkout_set_details(p_checkout_id text, p_details jsonb) FROM PUBLIC;


--
-- Name: FUNCTION community_now(p_community_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.community_now(p_community_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.community_now(p_community_id text) TO billing_api;
GRANT ALL ON FUNCTION billing.community_now(p_community_id text) TO billing_operator;


--
-- Name: FUNCTION complete_checkout(p_checkout_id text, p_details jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.complete_checkout(p_checkout_id text, p_details jsonb) FROM PUBLIC;


--
-- Name: TABLE credit_notes; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.credit_notes TO billing_operator;
GRANT SELECT ON TABLE billing.credit_notes TO billing_api;


--
-- Name: FUNCTION credit_note_json(p_cn billing.credit_notes); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.credit_note_json(p_cn billing.credit_notes) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.credit_note_json(p_cn billing.credit_notes) TO billing_api;


--
-- Name: FUNCTION current_community_id(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.current_community_id() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.current_community_id() TO billing_api;
GRANT ALL ON FUNCTION billing.current_community_id() TO billing_operator;


--
-- Name: FUNCTION current_member_id(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.current_member_id() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.current_member_id() TO billing_api;
GRANT ALL ON FUNCTION billing.current_member_id() TO billing_writer;


--
-- Name: FUNCTION current_scopes(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.current_scopes() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.current_scopes() TO billing_api;


--
-- Name: TABLE discount_codes; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.discount_codes TO billing_api;
GRANT SELECT ON TABLE billing.discount_codes TO billing_operator;


--
-- Name: FUNCTION discount_inactive_reason(p_d billing.discount_codes); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.discount_inactive_reason(p_d billing.discount_codes) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.discount_inactive_reason(p_d billing.discount_codes) TO billing_api;


--
-- Name: FUNCTION discount_json(p_d billing.discount_codes); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.discount_json(p_d billing.discount_codes) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.discount_json(p_d billing.discount_codes) TO billing_api;


--
-- Name: FUNCTION discount_line(p_code text, p_amount bigint, p_start timestamp with time zone, p_end timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.discount_line(p_code text, p_amount bigint, p_start timestamp with time zone, p_end timestamp with time zone) FROM PUBLIC;


--
-- Name: TABLE disputes; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.disputes TO billing_operator;
GRANT SELECT ON TABLE billing.disputes TO billing_api;


--
-- Name: FUNCTION dispute_json(p_dp billing.disputes); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.dispute_json(p_dp billing.disputes) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.dispute_json(p_dp billing.disputes) TO billing_api;


--
-- Name: FUNCTION dunning_next_attempt(p_community_id text, p_due timestamp with time zone, p_attempt integer); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.dunning_next_attempt(p_community_id text, p_due timestamp with time zone, p_attempt integer) FROM PUBLIC;


--
-- Name: FUNCTION dunning_valid(p jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.dunning_valid(p jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.dunning_valid(p jsonb) TO billing_api;


--
-- Name: FUNCTION emit_event(p_community_id text, p_type text, p_data jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.emit_event(p_community_id text, p_type text, p_data jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.emit_event(p_community_id text, p_type text, p_data jsonb) TO billing_api;


--
-- Name: FUNCTION encode_cursor(p_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.encode_cursor(p_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.encode_cursor(p_id text) TO billing_api;


--
-- Name: FUNCTION eu_member(p_country text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.eu_member(p_country text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.eu_member(p_country text) TO billing_api;


--
-- Name: FUNCTION eu_vat_id_valid(p_country text, p_tax_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.eu_vat_id_valid(p_country text, p_tax_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.eu_vat_id_valid(p_country text, p_tax_id text) TO billing_api;


--
-- Name: TABLE events; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.events TO billing_api;
GRANT SELECT ON TABLE billing.events TO billing_operator;
GRANT SELECT,INSERT ON TABLE billing.events TO billing_writer;


--
-- Name: FUNCTION event_json(p_event billing.events); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.event_json(p_event billing.events) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.event_json(p_event billing.events) TO billing_api;


--
-- Name: FUNCTION expire_checkout(p_checkout_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.expire_checkout(p_checkout_id text) FROM PUBLIC;


--
-- Name: FUNCTION expire_checkouts(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.expire_checkouts() FROM PUBLIC;


--
-- Name: FUNCTION gate_close(p_limits jsonb, p_idem jsonb, p_answer jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.gate_close(p_limits jsonb, p_idem jsonb, p_answer jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.gate_close(p_limits jsonb, p_idem jsonb, p_answer jsonb) TO billing_api;


--
-- Name: FUNCTION gate_open(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_idem jsonb, p_leased boolean, p_request_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.gate_open(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_idem jsonb, p_leased boolean, p_request_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.gate_open(p_credential text, p_ip text, p_limits jsonb, p_scope text, p_idem jsonb, p_leased boolean, p_request_id text) TO billing_api;


--
-- Name: TABLE grants; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.grants TO billing_operator;
GRANT SELECT ON TABLE billing.grants TO billing_api;


--
-- Name: FUNCTION grant_json(p_g billing.grants); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.grant_json(p_g billing.grants) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.grant_json(p_g billing.grants) TO billing_api;


--
-- Name: FUNCTION has_scope(p_scope text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.has_scope(p_scope text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.has_scope(p_scope text) TO billing_api;


--
-- Name: FUNCTION html_escape(p_text text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.html_escape(p_text text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.html_escape(p_text text) TO billing_api;


--
-- Name: FUNCTION idempotency_begin(p_endpoint text, p_key text, p_hash text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.idempotency_begin(p_endpoint text, p_key text, p_hash text) FROM PUBLIC;


--
-- Name: FUNCTION idempotency_finish(p_endpoint text, p_key text, p_hash text, p_status integer, p_body jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.idempotency_finish(p_endpoint text, p_key text, p_hash text, p_status integer, p_body jsonb) FROM PUBLIC;


--
-- Name: FUNCTION invoice_by_payment(p_payment_ref text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_by_payment(p_payment_ref text) FROM PUBLIC;


--
-- Name: FUNCTION invoice_lines_sum(p_lines jsonb, p_types text[]); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_lines_sum(p_lines jsonb, p_types text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_lines_sum(p_lines jsonb, p_types text[]) TO billing_api;


--
-- Name: FUNCTION invoice_lines_valid(p_lines jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_lines_valid(p_lines jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_lines_valid(p_lines jsonb) TO billing_api;


--
-- Name: FUNCTION invoice_tax_lines_valid(p_lines jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_tax_lines_valid(p_lines jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_tax_lines_valid(p_lines jsonb) TO billing_api;


--
-- Name: FUNCTION invoice_tax_sum(p_lines jsonb, p_inclusive boolean); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_tax_sum(p_lines jsonb, p_inclusive boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_tax_sum(p_lines jsonb, p_inclusive boolean) TO billing_api;


--
-- Name: TABLE invoices; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.invoices TO billing_api;
GRANT SELECT ON TABLE billing.invoices TO billing_operator;


--
-- Name: FUNCTION invoice_end_access(p_inv billing.invoices, p_cause text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_end_access(p_inv billing.invoices, p_cause text) FROM PUBLIC;


--
-- Name: FUNCTION invoice_json(p_inv billing.invoices); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_json(p_inv billing.invoices) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_json(p_inv billing.invoices) TO billing_api;


--
-- Name: FUNCTION invoice_mark_failed(p_inv billing.invoices, p_at timestamp with time zone, p_message text, p_next_attempt_at timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_mark_failed(p_inv billing.invoices, p_at timestamp with time zone, p_message text, p_next_attempt_at timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION invoice_mark_paid(p_inv billing.invoices, p_at timestamp with time zone, p_provider_ref text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_mark_paid(p_inv billing.invoices, p_at timestamp with time zone, p_provider_ref text) FROM PUBLIC;


--
-- Name: FUNCTION invoice_open(p_sub_id text, p_pur_id text, p_member_id text, p_reason text, p_currency text, p_lines jsonb, p_start timestamp with time zone, p_end timestamp with time zone, p_provider text, p_at timestamp with time zone, p_checkout_id text, p_provider_ref text, p_tax jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_open(p_sub_id text, p_pur_id text, p_member_id text, p_reason text, p_currency text, p_lines jsonb, p_start timestamp with time zone, p_end timestamp with time zone, p_provider text, p_at timestamp with time zone, p_checkout_id text, p_provider_ref text, p_tax jsonb) FROM PUBLIC;


--
-- Name: FUNCTION invoice_record_dispute(p_invoice_id text, p_amount bigint, p_status text, p_reason text, p_provider_ref text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_record_dispute(p_invoice_id text, p_amount bigint, p_status text, p_reason text, p_provider_ref text) FROM PUBLIC;


--
-- Name: FUNCTION invoice_record_refund(p_invoice_id text, p_amount bigint, p_revoke boolean, p_provider_ref text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_record_refund(p_invoice_id text, p_amount bigint, p_revoke boolean, p_provider_ref text) FROM PUBLIC;


--
-- Name: FUNCTION invoice_refuse_disputed(p_invoice_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_refuse_disputed(p_invoice_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_refuse_disputed(p_invoice_id text) TO billing_api;


--
-- Name: FUNCTION invoice_tax(p_community text, p_buyer jsonb, p_lines jsonb, p_given jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_tax(p_community text, p_buyer jsonb, p_lines jsonb, p_given jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_tax(p_community text, p_buyer jsonb, p_lines jsonb, p_given jsonb) TO billing_api;


--
-- Name: FUNCTION invoice_tax_inclusive_ppm(p_lines jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoice_tax_inclusive_ppm(p_lines jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.invoice_tax_inclusive_ppm(p_lines jsonb) TO billing_api;


--
-- Name: FUNCTION invoices_ledger_refresh(p_changed billing.invoices[], p_event_ids text[]); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.invoices_ledger_refresh(p_changed billing.invoices[], p_event_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION iso(p_ts timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.iso(p_ts timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.iso(p_ts timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION billing.iso(p_ts timestamp with time zone) TO billing_operator;


--
-- Name: FUNCTION jsonb_array_minus(a jsonb, b jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.jsonb_array_minus(a jsonb, b jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.jsonb_array_minus(a jsonb, b jsonb) TO billing_api;


--
-- Name: FUNCTION jsonb_changed(p_old jsonb, p_new jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.jsonb_changed(p_old jsonb, p_new jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.jsonb_changed(p_old jsonb, p_new jsonb) TO billing_api;


--
-- Name: FUNCTION ledger_benefits_changed(p_community_id text, p_entitlement_ids text[]); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_benefits_changed(p_community_id text, p_entitlement_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION ledger_desired(p_community_id text, p_member_id text, p_now timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_desired(p_community_id text, p_member_id text, p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.ledger_desired(p_community_id text, p_member_id text, p_now timestamp with time zone) TO billing_api;


--
-- Name: FUNCTION ledger_members_on_tiers(p_community_id text, p_tier_ids text[]); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_members_on_tiers(p_community_id text, p_tier_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION ledger_refresh_each(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_refresh_each(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.ledger_refresh_each(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]) TO billing_api;


--
-- Name: FUNCTION ledger_refresh_list(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[], p_reasons text[], p_trigger_event_ids text[]) TO billing_api;


--
-- Name: FUNCTION ledger_refresh_member(p_community_id text, p_member_id text, p_reason text, p_trigger_event_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_refresh_member(p_community_id text, p_member_id text, p_reason text, p_trigger_event_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.ledger_refresh_member(p_community_id text, p_member_id text, p_reason text, p_trigger_event_id text) TO billing_api;


--
-- Name: FUNCTION ledger_refresh_members(p_community_id text, p_member_ids text[], p_reason text, p_trigger_event_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_refresh_members(p_community_id text, p_member_ids text[], p_reason text, p_trigger_event_id text) FROM PUBLIC;


--
-- Name: FUNCTION ledger_row_delivers(p_type text, p_stored_id text, p_s_status text, p_status text, p_s_benefits jsonb, p_d_benefits jsonb, p_s_identities jsonb, p_identities jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_row_delivers(p_type text, p_stored_id text, p_s_status text, p_status text, p_s_benefits jsonb, p_d_benefits jsonb, p_s_identities jsonb, p_identities jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.ledger_row_delivers(p_type text, p_stored_id text, p_s_status text, p_status text, p_s_benefits jsonb, p_d_benefits jsonb, p_s_identities jsonb, p_identities jsonb) TO billing_api;


--
-- Name: FUNCTION ledger_sweep(p_community_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.ledger_sweep(p_community_id text) FROM PUBLIC;


--
-- Name: FUNCTION link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text) TO billing_writer;


--
-- Name: TABLE subscriptions; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.subscriptions TO billing_api;
GRANT SELECT ON TABLE billing.subscriptions TO billing_operator;
GRANT SELECT,UPDATE ON TABLE billing.subscriptions TO billing_writer;


--
-- Name: FUNCTION lock_subscription(p_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.lock_subscription(p_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.lock_subscription(p_id text) TO billing_api;


--
-- Name: TABLE mail_messages; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.mail_messages TO billing_api;


--
-- Name: COLUMN mail_messages.community_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(community_id) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(id) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.member_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(member_id) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.template; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(template) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.event_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(event_id) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.ref; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(ref) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.to_address; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(to_address) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.subject; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(subject) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.status; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(status) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.attempts; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(attempts) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.last_error; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(last_error) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.claimed_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(claimed_at) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.created_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(created_at) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.sent_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(sent_at) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: COLUMN mail_messages.unsubscribable; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(unsubscribable) ON TABLE billing.mail_messages TO billing_operator;


--
-- Name: FUNCTION mail_message_json(p_m billing.mail_messages, p_full boolean); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.mail_message_json(p_m billing.mail_messages, p_full boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.mail_message_json(p_m billing.mail_messages, p_full boolean) TO billing_api;


--
-- Name: TABLE communities; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.communities TO billing_api;
GRANT SELECT ON TABLE billing.communities TO billing_operator;
GRANT SELECT ON TABLE billing.communities TO billing_writer;


--
-- Name: COLUMN communities.mail_templates_off; Type: ACL; Schema: billing; Owner: -
--

GRANT UPDATE(mail_templates_off) ON TABLE billing.communities TO billing_writer;


--
-- Name: COLUMN communities.mail_templates_required; Type: ACL; Schema: billing; Owner: -
--

GRANT UPDATE(mail_templates_required) ON TABLE billing.communities TO billing_writer;


--
-- Name: FUNCTION mail_optional(p_community billing.communities, p_template text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.mail_optional(p_community billing.communities, p_template text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.mail_optional(p_community billing.communities, p_template text) TO billing_api;


--
-- Name: FUNCTION mail_render(p_community_name text, p_template text, p_data jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.mail_render(p_community_name text, p_template text, p_data jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.mail_render(p_community_name text, p_template text, p_data jsonb) TO billing_api;


--
-- Name: FUNCTION mail_tax_label(p_line jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.mail_tax_label(p_line jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.mail_tax_label(p_line jsonb) TO billing_api;


--
-- Name: FUNCTION mail_templates(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.mail_templates() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.mail_templates() TO billing_api;


--
-- Name: FUNCTION member_api_json(p_community_id text, p_member_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_api_json(p_community_id text, p_member_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_api_json(p_community_id text, p_member_id text) TO billing_api;


--
-- Name: FUNCTION member_billing(p_community_id text, p_member_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_billing(p_community_id text, p_member_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_billing(p_community_id text, p_member_id text) TO billing_api;


--
-- Name: FUNCTION member_changed(p_community_id text, p_member_id text, p_change jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_changed(p_community_id text, p_member_id text, p_change jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_changed(p_community_id text, p_member_id text, p_change jsonb) TO billing_api;


--
-- Name: TABLE member_entitlements; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.member_entitlements TO billing_api;
GRANT SELECT ON TABLE billing.member_entitlements TO billing_operator;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.member_entitlements TO billing_writer;


--
-- Name: FUNCTION member_entitlement_json(p_me billing.member_entitlements); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_entitlement_json(p_me billing.member_entitlements) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_entitlement_json(p_me billing.member_entitlements) TO billing_api;


--
-- Name: TABLE entitlements; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.entitlements TO billing_api;
GRANT SELECT ON TABLE billing.entitlements TO billing_operator;


--
-- Name: FUNCTION member_entitlement_json(p_me billing.member_entitlements, p_ent billing.entitlements); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_entitlement_json(p_me billing.member_entitlements, p_ent billing.entitlements) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_entitlement_json(p_me billing.member_entitlements, p_ent billing.entitlements) TO billing_api;


--
-- Name: FUNCTION member_note_valid(p_note text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_note_valid(p_note text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_note_valid(p_note text) TO billing_api;
GRANT ALL ON FUNCTION billing.member_note_valid(p_note text) TO billing_writer;


--
-- Name: FUNCTION member_tags_valid(p_tags text[]); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_tags_valid(p_tags text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_tags_valid(p_tags text[]) TO billing_api;
GRANT ALL ON FUNCTION billing.member_tags_valid(p_tags text[]) TO billing_writer;


--
-- Name: TABLE members; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.members TO billing_api;
GRANT SELECT ON TABLE billing.members TO billing_operator;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.members TO billing_writer;


--
-- Name: FUNCTION member_export_json(p_m billing.members); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_export_json(p_m billing.members) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_export_json(p_m billing.members) TO billing_api;


--
-- Name: FUNCTION member_identity_attach(p_member_id text, p_platform text, p_platform_uid text, p_username text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_identity_attach(p_member_id text, p_platform text, p_platform_uid text, p_username text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_identity_attach(p_member_id text, p_platform text, p_platform_uid text, p_username text) TO billing_writer;


--
-- Name: FUNCTION member_json(p_community_id text, p_member_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_json(p_community_id text, p_member_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_json(p_community_id text, p_member_id text) TO billing_api;


--
-- Name: FUNCTION member_object(p_community_id text, p_member_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_object(p_community_id text, p_member_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_object(p_community_id text, p_member_id text) TO billing_api;


--
-- Name: FUNCTION member_people(p_community_id text, p_member_id text, p_email text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_people(p_community_id text, p_member_id text, p_email text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_people(p_community_id text, p_member_id text, p_email text) TO billing_api;


--
-- Name: FUNCTION member_people_refresh(p_community_id text, p_member_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_people_refresh(p_community_id text, p_member_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_people_refresh(p_community_id text, p_member_id text) TO billing_api;


--
-- Name: FUNCTION member_trial_days(p_community_id text, p_member_id text, p_plan billing.plans, p_except_checkout_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.member_trial_days(p_community_id text, p_member_id text, p_plan billing.plans, p_except_checkout_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.member_trial_days(p_community_id text, p_member_id text, p_plan billing.plans, p_except_checkout_id text) TO billing_api;


--
-- Name: FUNCTION money_text(p_minor bigint, p_currency text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.money_text(p_minor bigint, p_currency text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.money_text(p_minor bigint, p_currency text) TO billing_api;


--
-- Name: FUNCTION next_period_end(p_anchor timestamp with time zone, p_interval text, p_end timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.next_period_end(p_anchor timestamp with time zone, p_interval text, p_end timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION now(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.now() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.now() TO billing_api;
GRANT ALL ON FUNCTION billing.now() TO billing_operator;


--
-- Name: FUNCTION page_json(p_ids text[], p_items jsonb[], p_limit integer); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.page_json(p_ids text[], p_items jsonb[], p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.page_json(p_ids text[], p_items jsonb[], p_limit integer) TO billing_api;


--
-- Name: FUNCTION plan_interval(p_interval text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.plan_interval(p_interval text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.plan_interval(p_interval text) TO billing_api;


--
-- Name: FUNCTION plan_line(p_plan billing.plans, p_amount bigint, p_start timestamp with time zone, p_end timestamp with time zone, p_description text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.plan_line(p_plan billing.plans, p_amount bigint, p_start timestamp with time zone, p_end timestamp with time zone, p_description text) FROM PUBLIC;


--
-- Name: FUNCTION plan_price_migrate(p_community_id text, p_plan_id text, p_notice_days integer); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.plan_price_migrate(p_community_id text, p_plan_id text, p_notice_days integer) FROM PUBLIC;


--
-- Name: FUNCTION plan_price_subscribers(p_community_id text, p_plan_id text, p_limit integer); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.plan_price_subscribers(p_community_id text, p_plan_id text, p_limit integer) FROM PUBLIC;


--
-- Name: FUNCTION platform_checkout_connect(p_platform_config_id text, p_checkout_id text, p_token_sha256 bytea, p_platform_uid text, p_username text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.platform_checkout_connect(p_platform_config_id text, p_checkout_id text, p_token_sha256 bytea, p_platform_uid text, p_username text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.platform_checkout_connect(p_platform_config_id text, p_checkout_id text, p_token_sha256 bytea, p_platform_uid text, p_username text) TO billing_api;


--
-- Name: FUNCTION platform_link_redeem(p_platform_config_id text, p_platform text, p_platform_uid text, p_code text, p_username text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.platform_link_redeem(p_platform_config_id text, p_platform text, p_platform_uid text, p_code text, p_username text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.platform_link_redeem(p_platform_config_id text, p_platform text, p_platform_uid text, p_code text, p_username text) TO billing_api;


--
-- Name: FUNCTION platform_member_connect(p_platform_config_id text, p_member_id text, p_platform_uid text, p_username text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.platform_member_connect(p_platform_config_id text, p_member_id text, p_platform_uid text, p_username text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.platform_member_connect(p_platform_config_id text, p_member_id text, p_platform_uid text, p_username text) TO billing_api;


--
-- Name: FUNCTION platform_settings_problem(p_platform text, p_settings jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.platform_settings_problem(p_platform text, p_settings jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.platform_settings_problem(p_platform text, p_settings jsonb) TO billing_api;


--
-- Name: TABLE price_migrations; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.price_migrations TO billing_operator;
GRANT SELECT ON TABLE billing.price_migrations TO billing_api;


--
-- Name: FUNCTION price_migration_json(p_mig billing.price_migrations); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.price_migration_json(p_mig billing.price_migrations) FROM PUBLIC;


--
-- Name: FUNCTION provider_retries_exhausted(p_subscription_ref text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.provider_retries_exhausted(p_subscription_ref text) FROM PUBLIC;


--
-- Name: TABLE purchases; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.purchases TO billing_api;
GRANT SELECT ON TABLE billing.purchases TO billing_operator;


--
-- Name: FUNCTION purchase_event_json(p_pur billing.purchases); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.purchase_event_json(p_pur billing.purchases) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.purchase_event_json(p_pur billing.purchases) TO billing_api;


--
-- Name: FUNCTION purchase_json(p_pur billing.purchases); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.purchase_json(p_pur billing.purchases) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.purchase_json(p_pur billing.purchases) TO billing_api;


--
-- Name: FUNCTION purchase_json(p_pur billing.purchases, p_plan billing.plans, p_tier billing.tiers); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.purchase_json(p_pur billing.purchases, p_plan billing.plans, p_tier billing.tiers) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.purchase_json(p_pur billing.purchases, p_plan billing.plans, p_tier billing.tiers) TO billing_api;


--
-- Name: FUNCTION raise(p_sqlstate text, p_message text, p_detail text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.raise(p_sqlstate text, p_message text, p_detail text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.raise(p_sqlstate text, p_message text, p_detail text) TO billing_api;


--
-- Name: FUNCTION random_token(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.random_token() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.random_token() TO billing_api;


--
-- Name: FUNCTION record_provider_event(p_provider text, p_event_id text, p_type text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.record_provider_event(p_provider text, p_event_id text, p_type text) FROM PUBLIC;


--
-- Name: TABLE refunds; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.refunds TO billing_operator;
GRANT SELECT ON TABLE billing.refunds TO billing_api;


--
-- Name: FUNCTION refund_json(p_re billing.refunds); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.refund_json(p_re billing.refunds) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.refund_json(p_re billing.refunds) TO billing_api;


--
-- Name: FUNCTION refund_purchase(p_provider_ref text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.refund_purchase(p_provider_ref text) FROM PUBLIC;


--
-- Name: FUNCTION renew_batch(p_ids text[], p_now timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.renew_batch(p_ids text[], p_now timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION renewal_terms(p_sub billing.subscriptions, p_at timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.renewal_terms(p_sub billing.subscriptions, p_at timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION require_switchable(p_sub billing.subscriptions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.require_switchable(p_sub billing.subscriptions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.require_switchable(p_sub billing.subscriptions) TO billing_api;


--
-- Name: FUNCTION resolve_identity(p_args jsonb); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.resolve_identity(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.resolve_identity(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION reverse_charge_applies(p_seller_country text, p_buyer_country text, p_buyer_tax_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.reverse_charge_applies(p_seller_country text, p_buyer_country text, p_buyer_tax_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.reverse_charge_applies(p_seller_country text, p_buyer_country text, p_buyer_tax_id text) TO billing_api;


--
-- Name: FUNCTION reverse_charge_note(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.reverse_charge_note() FROM PUBLIC;
GRANT ALL ON FUNCTION billing.reverse_charge_note() TO billing_api;


--
-- Name: FUNCTION sandbox_advance(p_community_id text, p_days numeric); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.sandbox_advance(p_community_id text, p_days numeric) FROM PUBLIC;


--
-- Name: FUNCTION sandbox_charge_succeeds(p_inv billing.invoices); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.sandbox_charge_succeeds(p_inv billing.invoices) FROM PUBLIC;


--
-- Name: FUNCTION sandbox_collect(p_inv billing.invoices, p_at timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.sandbox_collect(p_inv billing.invoices, p_at timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION sandbox_set_card(p_subscription_id text, p_declines boolean); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.sandbox_set_card(p_subscription_id text, p_declines boolean) FROM PUBLIC;


--
-- Name: FUNCTION source_grants_access(p_type text, p_community_id text, p_id text, p_status text, p_valid_until timestamp with time zone, p_now timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.source_grants_access(p_type text, p_community_id text, p_id text, p_status text, p_valid_until timestamp with time zone, p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.source_grants_access(p_type text, p_community_id text, p_id text, p_status text, p_valid_until timestamp with time zone, p_now timestamp with time zone) TO billing_api;


--
-- Name: FUNCTION subscription_advance(p_sub_id text, p_now timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_advance(p_sub_id text, p_now timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint, p_start timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint, p_start timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint, p_start timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION billing.subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint, p_start timestamp with time zone) TO billing_operator;


--
-- Name: FUNCTION subscription_event_json(p_sub billing.subscriptions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_event_json(p_sub billing.subscriptions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.subscription_event_json(p_sub billing.subscriptions) TO billing_api;


--
-- Name: FUNCTION subscription_json(p_sub billing.subscriptions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_json(p_sub billing.subscriptions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.subscription_json(p_sub billing.subscriptions) TO billing_api;


--
-- Name: FUNCTION subscription_json(p_sub billing.subscriptions, p_plan billing.plans, p_tier billing.tiers); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_json(p_sub billing.subscriptions, p_plan billing.plans, p_tier billing.tiers) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.subscription_json(p_sub billing.subscriptions, p_plan billing.plans, p_tier billing.tiers) TO billing_api;


--
-- Name: FUNCTION subscription_provider(p_sub billing.subscriptions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_provider(p_sub billing.subscriptions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.subscription_provider(p_sub billing.subscriptions) TO billing_api;


--
-- Name: FUNCTION subscription_resume_at(p_sub_id text, p_at timestamp with time zone); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_resume_at(p_sub_id text, p_at timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION subscription_retry_open(p_community_id text, p_subscription_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_retry_open(p_community_id text, p_subscription_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.subscription_retry_open(p_community_id text, p_subscription_id text) TO billing_api;


--
-- Name: FUNCTION subscription_unpaid(p_community_id text, p_subscription_id text); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.subscription_unpaid(p_community_id text, p_subscription_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.subscription_unpaid(p_community_id text, p_subscription_id text) TO billing_api;


--
-- Name: FUNCTION switch_options(p_sub billing.subscriptions); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.switch_options(p_sub billing.subscriptions) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.switch_options(p_sub billing.subscriptions) TO billing_api;


--
-- Name: FUNCTION switch_proration(p_sub billing.subscriptions, p_old billing.plans, p_new billing.plans, p_now timestamp with time zone, OUT new_period boolean, OUT period_start timestamp with time zone, OUT period_end timestamp with time zone, OUT charge_cents bigint, OUT credit_cents bigint, OUT applied_cents bigint); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.switch_proration(p_sub billing.subscriptions, p_old billing.plans, p_new billing.plans, p_now timestamp with time zone, OUT new_period boolean, OUT period_start timestamp with time zone, OUT period_end timestamp with time zone, OUT charge_cents bigint, OUT credit_cents bigint, OUT applied_cents bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.switch_proration(p_sub billing.subscriptions, p_old billing.plans, p_new billing.plans, p_now timestamp with time zone, OUT new_period boolean, OUT period_start timestamp with time zone, OUT period_end timestamp with time zone, OUT charge_cents bigint, OUT credit_cents bigint, OUT applied_cents bigint) TO billing_api;


--
-- Name: FUNCTION switch_validate(p_sub billing.subscriptions, p_plan_id text, p_immediate boolean); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.switch_validate(p_sub billing.subscriptions, p_plan_id text, p_immediate boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.switch_validate(p_sub billing.subscriptions, p_plan_id text, p_immediate boolean) TO billing_api;


--
-- Name: TABLE tax_rates; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.tax_rates TO billing_operator;
GRANT SELECT ON TABLE billing.tax_rates TO billing_api;


--
-- Name: FUNCTION tax_rate_json(p_r billing.tax_rates); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tax_rate_json(p_r billing.tax_rates) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.tax_rate_json(p_r billing.tax_rates) TO billing_api;


--
-- Name: FUNCTION tg_checkout_sessions__outbox(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_checkout_sessions__outbox() FROM PUBLIC;


--
-- Name: FUNCTION tg_entitlement_benefits__ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_entitlement_benefits__ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_entitlement_benefits__ledger_delete(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_entitlement_benefits__ledger_delete() FROM PUBLIC;


--
-- Name: FUNCTION tg_entitlement_benefits__ledger_insert(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_entitlement_benefits__ledger_insert() FROM PUBLIC;


--
-- Name: FUNCTION tg_entitlement_benefits__type(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_entitlement_benefits__type() FROM PUBLIC;


--
-- Name: FUNCTION tg_events__community_clock(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_events__community_clock() FROM PUBLIC;


--
-- Name: FUNCTION tg_external_subjects__outbox_and_ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_external_subjects__outbox_and_ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_external_subjects__people(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_external_subjects__people() FROM PUBLIC;


--
-- Name: FUNCTION tg_grants__ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_grants__ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_invoices__immutable(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_invoices__immutable() FROM PUBLIC;


--
-- Name: FUNCTION tg_invoices__number(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_invoices__number() FROM PUBLIC;


--
-- Name: FUNCTION tg_invoices__outbox_and_ledger_insert(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_invoices__outbox_and_ledger_insert() FROM PUBLIC;


--
-- Name: FUNCTION tg_invoices__outbox_and_ledger_update(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_invoices__outbox_and_ledger_update() FROM PUBLIC;


--
-- Name: FUNCTION tg_invoices__subscription_tax(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_invoices__subscription_tax() FROM PUBLIC;


--
-- Name: FUNCTION tg_member_identities__outbox_and_ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_member_identities__outbox_and_ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_member_identities__people(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_member_identities__people() FROM PUBLIC;


--
-- Name: FUNCTION tg_member_rows__not_erased(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_member_rows__not_erased() FROM PUBLIC;


--
-- Name: FUNCTION tg_members__erased(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_members__erased() FROM PUBLIC;


--
-- Name: FUNCTION tg_members__outbox(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_members__outbox() FROM PUBLIC;


--
-- Name: FUNCTION tg_members__people(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_members__people() FROM PUBLIC;


--
-- Name: FUNCTION tg_plans__ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_plans__ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_plans__tier_plan_rules(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_plans__tier_plan_rules() FROM PUBLIC;


--
-- Name: FUNCTION tg_platform_configs__benefit_types(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_platform_configs__benefit_types() FROM PUBLIC;


--
-- Name: FUNCTION tg_platform_configs__ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_platform_configs__ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_purchases__outbox_and_ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_purchases__outbox_and_ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_purchases__outbox_and_ledger_insert(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_purchases__outbox_and_ledger_insert() FROM PUBLIC;


--
-- Name: FUNCTION tg_subscriptions__ledger_delete(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_subscriptions__ledger_delete() FROM PUBLIC;


--
-- Name: FUNCTION tg_subscriptions__outbox_and_ledger_insert(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_subscriptions__outbox_and_ledger_insert() FROM PUBLIC;


--
-- Name: FUNCTION tg_subscriptions__outbox_and_ledger_update(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_subscriptions__outbox_and_ledger_update() FROM PUBLIC;


--
-- Name: FUNCTION tg_subscriptions__price(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_subscriptions__price() FROM PUBLIC;


--
-- Name: FUNCTION tg_tier_entitlements__ledger(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_tier_entitlements__ledger() FROM PUBLIC;


--
-- Name: FUNCTION tg_tier_entitlements__ledger_delete(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_tier_entitlements__ledger_delete() FROM PUBLIC;


--
-- Name: FUNCTION tg_tier_entitlements__ledger_insert(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_tier_entitlements__ledger_insert() FROM PUBLIC;


--
-- Name: FUNCTION tg_tiers__tier_plan_rules(); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tg_tiers__tier_plan_rules() FROM PUBLIC;


--
-- Name: FUNCTION tier_json(p_tier billing.tiers); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.tier_json(p_tier billing.tiers) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.tier_json(p_tier billing.tiers) TO billing_api;


--
-- Name: TABLE webhook_deliveries; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.webhook_deliveries TO billing_api;
GRANT SELECT ON TABLE billing.webhook_deliveries TO billing_operator;
GRANT SELECT,UPDATE ON TABLE billing.webhook_deliveries TO billing_writer;


--
-- Name: FUNCTION webhook_delivery_json(p_delivery billing.webhook_deliveries); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.webhook_delivery_json(p_delivery billing.webhook_deliveries) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.webhook_delivery_json(p_delivery billing.webhook_deliveries) TO billing_api;


--
-- Name: TABLE webhook_endpoints; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.webhook_endpoints TO billing_api;
GRANT SELECT ON TABLE billing.webhook_endpoints TO billing_operator;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE billing.webhook_endpoints TO billing_writer;


--
-- Name: FUNCTION webhook_endpoint_json(p_endpoint billing.webhook_endpoints); Type: ACL; Schema: billing; Owner: -
--

REVOKE ALL ON FUNCTION billing.webhook_endpoint_json(p_endpoint billing.webhook_endpoints) FROM PUBLIC;
GRANT ALL ON FUNCTION billing.webhook_endpoint_json(p_endpoint billing.webhook_endpoints) TO billing_api;


--
-- Name: FUNCTION analytics_overview(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.analytics_overview(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.analytics_overview(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION analytics_series(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.analytics_series(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.analytics_series(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION analytics_summary(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.analytics_summary(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.analytics_summary(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION api_keys_create(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.api_keys_create(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.api_keys_create(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION api_keys_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.api_keys_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.api_keys_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION api_keys_revoke(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.api_keys_revoke(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.api_keys_revoke(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION audit_log_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.audit_log_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.audit_log_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION catalog_file(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.catalog_file(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.catalog_file(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION checkout_create(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.checkout_create(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.checkout_create(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION checkout_set_provider(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.checkout_set_provider(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.checkout_set_provider(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION discounts_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.discounts_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.discounts_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION entitlements_check(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.entitlements_check(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.entitlements_check(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION events_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.events_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.events_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION events_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.events_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.events_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION external_subjects_attach(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.external_subjects_attach(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.external_subjects_attach(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION grants_create(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.grants_create(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.grants_create(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION grants_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.grants_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.grants_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION grants_revoke(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.grants_revoke(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.grants_revoke(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION invoice_refund(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.invoice_refund(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.invoice_refund(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION invoice_refund_prepare(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.invoice_refund_prepare(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.invoice_refund_prepare(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION invoices_document(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.invoices_document(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.invoices_document(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION invoices_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.invoices_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.invoices_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION invoices_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.invoices_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.invoices_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION link_code_create(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.link_code_create(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.link_code_create(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION link_code_redeem(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.link_code_redeem(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.link_code_redeem(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION mail_messages_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.mail_messages_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.mail_messages_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION mail_messages_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.mail_messages_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.mail_messages_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION mail_template_set(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.mail_template_set(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.mail_template_set(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION mail_templates_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.mail_templates_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.mail_templates_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION member_deliveries_retry(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.member_deliveries_retry(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.member_deliveries_retry(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION member_entitlement_history(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.member_entitlement_history(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.member_entitlement_history(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION member_entitlements_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.member_entitlements_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.member_entitlements_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION member_erase(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.member_erase(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.member_erase(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION member_export(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.member_export(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.member_export(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION member_portal_benefits(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.member_portal_benefits(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.member_portal_benefits(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION members_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.members_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.members_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION members_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.members_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.members_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION members_lookup(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.members_lookup(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.members_lookup(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION members_update(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.members_update(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.members_update(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operator_policy_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operator_policy_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operator_policy_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operator_policy_update(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operator_policy_update(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operator_policy_update(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operator_sessions_end(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operator_sessions_end(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operator_sessions_end(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operator_sessions_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operator_sessions_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operator_sessions_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operators_invite(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operators_invite(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operators_invite(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operators_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operators_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operators_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operators_remove(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operators_remove(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operators_remove(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operators_reset_second_factor(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operators_reset_second_factor(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operators_reset_second_factor(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operators_sign_out(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operators_sign_out(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operators_sign_out(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operators_update(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.operators_update(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.operators_update(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION plans_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.plans_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.plans_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION plans_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.plans_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.plans_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION platform_actions_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.platform_actions_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.platform_actions_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION platform_config_save(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.platform_config_save(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.platform_config_save(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION platform_configs_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.platform_configs_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.platform_configs_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION platform_connections_health(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.platform_connections_health(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.platform_connections_health(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION portal_session_create(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.portal_session_create(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.portal_session_create(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION portal_session_set_url(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.portal_session_set_url(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.portal_session_set_url(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION purchases_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.purchases_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.purchases_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION purchases_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.purchases_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.purchases_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_cancel(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_cancel(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_cancel(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_cancel_scheduled_switch(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_cancel_scheduled_switch(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_cancel_scheduled_switch(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_card_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_card_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_card_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_card_set(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_card_set(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_card_set(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_pause(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_pause(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_pause(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_reactivate(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_reactivate(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_reactivate(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_resume(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_resume(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_resume(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_switch(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_switch(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_switch(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_switch_options(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_switch_options(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_switch_options(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscription_switch_preview(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscription_switch_preview(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscription_switch_preview(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscriptions_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscriptions_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscriptions_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION subscriptions_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.subscriptions_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.subscriptions_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION tax_settings_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.tax_settings_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.tax_settings_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_deliveries_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_deliveries_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_deliveries_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_deliveries_redeliver(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_deliveries_redeliver(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_deliveries_redeliver(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_endpoints_create(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_endpoints_create(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_endpoints_create(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_endpoints_delete(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_endpoints_delete(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_endpoints_delete(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_endpoints_get(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_endpoints_get(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_endpoints_get(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_endpoints_list(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_endpoints_list(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_endpoints_list(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_endpoints_rotate_secret(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_endpoints_rotate_secret(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_endpoints_rotate_secret(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION webhook_endpoints_update(p_args jsonb); Type: ACL; Schema: billing_api; Owner: -
--

REVOKE ALL ON FUNCTION billing_api.webhook_endpoints_update(p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_api.webhook_endpoints_update(p_args jsonb) TO billing_api;


--
-- Name: FUNCTION add_job(p_identifier text, p_payloads json[], p_run_at timestamp with time zone, p_max_attempts integer, p_flag_key text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.add_job(p_identifier text, p_payloads json[], p_run_at timestamp with time zone, p_max_attempts integer, p_flag_key text) FROM PUBLIC;


--
-- Name: FUNCTION analytics_compact(p_min_rows integer, p_community text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.analytics_compact(p_min_rows integer, p_community text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.analytics_compact(p_min_rows integer, p_community text) TO billing_worker;


--
-- Name: FUNCTION analytics_overview(p_days integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.analytics_overview(p_days integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.analytics_overview(p_days integer) TO billing_api;


--
-- Name: FUNCTION analytics_rebuild(p_community text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.analytics_rebuild(p_community text) FROM PUBLIC;


--
-- Name: FUNCTION analytics_refresh(p_communities text[], p_ids text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.analytics_refresh(p_communities text[], p_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION analytics_refresh_locking(p_communities text[], p_ids text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.analytics_refresh_locking(p_communities text[], p_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION api_key_insert(p_name text, p_prefix text, p_key_hash text, p_scopes text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.api_key_insert(p_name text, p_prefix text, p_key_hash text, p_scopes text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.api_key_insert(p_name text, p_prefix text, p_key_hash text, p_scopes text[]) TO billing_api;


--
-- Name: FUNCTION api_key_json(k billing_private.api_keys); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.api_key_json(k billing_private.api_keys) FROM PUBLIC;


--
-- Name: FUNCTION api_key_revoke(p_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.api_key_revoke(p_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.api_key_revoke(p_id text) TO billing_api;


--
-- Name: FUNCTION api_key_scopes(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.api_key_scopes() FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.api_key_scopes() TO billing_api;


--
-- Name: FUNCTION api_keys_page(p_cursor text, p_limit integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.api_keys_page(p_cursor text, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.api_keys_page(p_cursor text, p_limit integer) TO billing_api;


--
-- Name: FUNCTION audit_actor(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.audit_actor() FROM PUBLIC;


--
-- Name: FUNCTION audit_purge(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.audit_purge() FROM PUBLIC;


--
-- Name: FUNCTION audit_wanted(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.audit_wanted() FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.audit_wanted() TO billing_api;
GRANT ALL ON FUNCTION billing_private.audit_wanted() TO billing_worker;
GRANT ALL ON FUNCTION billing_private.audit_wanted() TO billing_operator;


--
-- Name: FUNCTION charge_key_tokens(p_key_id text, p_n integer, p_limits jsonb); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.charge_key_tokens(p_key_id text, p_n integer, p_limits jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.charge_key_tokens(p_key_id text, p_n integer, p_limits jsonb) TO billing_api;


--
-- Name: FUNCTION current_operator_user_id(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.current_operator_user_id() FROM PUBLIC;


--
-- Name: FUNCTION enqueue_connection_deliveries(p_community_id text, p_platform_config_id text, p_platform text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.enqueue_connection_deliveries(p_community_id text, p_platform_config_id text, p_platform text) FROM PUBLIC;


--
-- Name: FUNCTION enqueue_deliveries(p_communities text[], p_members text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.enqueue_deliveries(p_communities text[], p_members text[]) FROM PUBLIC;


--
-- Name: FUNCTION grant_create(p_member_id text, p_tier_id text, p_expires_at timestamp with time zone, p_note text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.grant_create(p_member_id text, p_tier_id text, p_expires_at timestamp with time zone, p_note text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.grant_create(p_member_id text, p_tier_id text, p_expires_at timestamp with time zone, p_note text) TO billing_api;


--
-- Name: FUNCTION grant_revoke(p_member_id text, p_grant_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.grant_revoke(p_member_id text, p_grant_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.grant_revoke(p_member_id text, p_grant_id text) TO billing_api;


--
-- Name: FUNCTION invoice_refund(p_invoice_id text, p_amount bigint, p_revoke boolean, p_provider_ref text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.invoice_refund(p_invoice_id text, p_amount bigint, p_revoke boolean, p_provider_ref text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.invoice_refund(p_invoice_id text, p_amount bigint, p_revoke boolean, p_provider_ref text) TO billing_api;


--
-- Name: FUNCTION json_mentions(p_value jsonb, p_secrets text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.json_mentions(p_value jsonb, p_secrets text[]) FROM PUBLIC;


--
-- Name: FUNCTION json_redact(p_value jsonb, p_secrets text[], p_member_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.json_redact(p_value jsonb, p_secrets text[], p_member_id text) FROM PUBLIC;


--
-- Name: FUNCTION lease_key_tokens(p_key_hash text, p_n integer, p_limits jsonb, p_return integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.lease_key_tokens(p_key_hash text, p_n integer, p_limits jsonb, p_return integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.lease_key_tokens(p_key_hash text, p_n integer, p_limits jsonb, p_return integer) TO billing_api;


--
-- Name: FUNCTION ledger_deliveries(p_communities text[], p_members text[], p_benefits jsonb[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.ledger_deliveries(p_communities text[], p_members text[], p_benefits jsonb[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.ledger_deliveries(p_communities text[], p_members text[], p_benefits jsonb[]) TO billing_api;


--
-- Name: FUNCTION mail_claim(p_community_id text, p_ids text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.mail_claim(p_community_id text, p_ids text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.mail_claim(p_community_id text, p_ids text[]) TO billing_worker;


--
-- Name: FUNCTION mail_invoice_document(p_community_id text, p_member_id text, p_invoice_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.mail_invoice_document(p_community_id text, p_member_id text, p_invoice_id text) FROM PUBLIC;


--
-- Name: FUNCTION mail_link_codes(p_community_id text, p_member_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.mail_link_codes(p_community_id text, p_member_id text) FROM PUBLIC;


--
-- Name: FUNCTION mail_preference(p_community_id text, p_member_id text, p_template text, p_subscribe boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.mail_preference(p_community_id text, p_member_id text, p_template text, p_subscribe boolean) FROM PUBLIC;


--
-- Name: FUNCTION mail_record(p_community_id text, p_id text, p_status text, p_error text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.mail_record(p_community_id text, p_id text, p_status text, p_error text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.mail_record(p_community_id text, p_id text, p_status text, p_error text) TO billing_worker;


--
-- Name: FUNCTION mail_reminders(p_community_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.mail_reminders(p_community_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.mail_reminders(p_community_id text) TO billing_worker;


--
-- Name: FUNCTION member_deliveries_enqueue(p_member_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.member_deliveries_enqueue(p_member_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.member_deliveries_enqueue(p_member_id text) TO billing_api;


--
-- Name: FUNCTION member_entitlement_event_ids(p_member text, p_cursor text, p_limit integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.member_entitlement_event_ids(p_member text, p_cursor text, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.member_entitlement_event_ids(p_member text, p_cursor text, p_limit integer) TO billing_api;


--
-- Name: FUNCTION member_erase(p_member_id text, p_provider_calls boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.member_erase(p_member_id text, p_provider_calls boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.member_erase(p_member_id text, p_provider_calls boolean) TO billing_api;


--
-- Name: FUNCTION member_portal_info(p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.member_portal_info(p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.member_portal_info(p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION member_portal_open(p_portal_id text, p_access_sha256 bytea, p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.member_portal_open(p_portal_id text, p_access_sha256 bytea, p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.member_portal_open(p_portal_id text, p_access_sha256 bytea, p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION member_portal_scopes(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.member_portal_scopes() FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.member_portal_scopes() TO billing_api;


--
-- Name: FUNCTION members_search(p_args jsonb, p_limit integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.members_search(p_args jsonb, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.members_search(p_args jsonb, p_limit integer) TO billing_api;


--
-- Name: FUNCTION number_backfill(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.number_backfill() FROM PUBLIC;


--
-- Name: FUNCTION number_next(p_community text, p_kind text, p_series text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.number_next(p_community text, p_kind text, p_series text) FROM PUBLIC;


--
-- Name: FUNCTION number_series(p_community text, p_at timestamp with time zone); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.number_series(p_community text, p_at timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION number_text(p_series text, p_n bigint); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.number_text(p_series text, p_n bigint) FROM PUBLIC;


--
-- Name: FUNCTION op_dispatch(p_op text, p_args jsonb); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.op_dispatch(p_op text, p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.op_dispatch(p_op text, p_args jsonb) TO billing_api;


--
-- Name: FUNCTION op_dispatch_dynamic(p_op text, p_args jsonb); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.op_dispatch_dynamic(p_op text, p_args jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.op_dispatch_dynamic(p_op text, p_args jsonb) TO billing_api;


--
-- Name: FUNCTION operator_address_shown(p_ip text, p_full boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_address_shown(p_ip text, p_full boolean) FROM PUBLIC;


--
-- Name: FUNCTION operator_change_password(p_token_sha256 text, p_current_derived text, p_password_hash text, p_ip text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_change_password(p_token_sha256 text, p_current_derived text, p_password_hash text, p_ip text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_change_password(p_token_sha256 text, p_current_derived text, p_password_hash text, p_ip text) TO billing_api;


--
-- Name: FUNCTION operator_code_begin(p_token_sha256 text, p_ip text, p_purpose text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_code_begin(p_token_sha256 text, p_ip text, p_purpose text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_code_begin(p_token_sha256 text, p_ip text, p_purpose text) TO billing_api;


--
-- Name: FUNCTION operator_code_succeeded(p_user_id text, p_ip text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_code_succeeded(p_user_id text, p_ip text) FROM PUBLIC;


--
-- Name: FUNCTION operator_community_id(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_community_id() FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_community_id() TO billing_api;
GRANT ALL ON FUNCTION billing_private.operator_community_id() TO billing_operator;


--
-- Name: FUNCTION operator_end_own_sessions(p_token_sha256 text, p_session_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_end_own_sessions(p_token_sha256 text, p_session_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_end_own_sessions(p_token_sha256 text, p_session_id text) TO billing_api;


--
-- Name: FUNCTION operator_fence(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_fence() FROM PUBLIC;


--
-- Name: FUNCTION operator_fence_gaps(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_fence_gaps() FROM PUBLIC;


--
-- Name: FUNCTION operator_grant_reads(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_grant_reads() FROM PUBLIC;


--
-- Name: FUNCTION operator_hidden_columns(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_hidden_columns() FROM PUBLIC;


--
-- Name: FUNCTION operator_invite(p_community_id text, p_email text, p_role text, p_token_sha256 text, p_ttl interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_invite(p_community_id text, p_email text, p_role text, p_token_sha256 text, p_ttl interval) FROM PUBLIC;


--
-- Name: FUNCTION operator_invite_here(p_email text, p_role text, p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_invite_here(p_email text, p_role text, p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_invite_here(p_email text, p_role text, p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION operator_link_redeem(p_link_sha256 text, p_token_sha256 text, p_ttl interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_link_redeem(p_link_sha256 text, p_token_sha256 text, p_ttl interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_link_redeem(p_link_sha256 text, p_token_sha256 text, p_ttl interval) TO billing_api;


--
-- Name: FUNCTION operator_mailed_link(p_user_id text, p_derived text, p_link_sha256 text, p_ttl interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_mailed_link(p_user_id text, p_derived text, p_link_sha256 text, p_ttl interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_mailed_link(p_user_id text, p_derived text, p_link_sha256 text, p_ttl interval) TO billing_api;


--
-- Name: FUNCTION operator_own_sessions(p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_own_sessions(p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_own_sessions(p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION operator_password_candidates(p_email text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_password_candidates(p_email text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_password_candidates(p_email text) TO billing_api;


--
-- Name: FUNCTION operator_password_sign_in(p_user_id text, p_derived text, p_token_sha256 text, p_ttl interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_password_sign_in(p_user_id text, p_derived text, p_token_sha256 text, p_ttl interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_password_sign_in(p_user_id text, p_derived text, p_token_sha256 text, p_ttl interval) TO billing_api;


--
-- Name: FUNCTION operator_policy_here(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_policy_here() FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_policy_here() TO billing_api;


--
-- Name: FUNCTION operator_policy_set(p_second_factor_required boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_policy_set(p_second_factor_required boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_policy_set(p_second_factor_required boolean) TO billing_api;


--
-- Name: FUNCTION operator_recovery_replace(p_community_id text, p_user_id text, p_hashes text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_recovery_replace(p_community_id text, p_user_id text, p_hashes text[]) FROM PUBLIC;


--
-- Name: FUNCTION operator_recovery_spend(p_community_id text, p_user_id text, p_code_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_recovery_spend(p_community_id text, p_user_id text, p_code_sha256 text) FROM PUBLIC;


--
-- Name: FUNCTION operator_role_scopes(p_role text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_role_scopes(p_role text) FROM PUBLIC;


--
-- Name: FUNCTION operator_second_factor_confirm(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_hashes text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_second_factor_confirm(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_hashes text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_second_factor_confirm(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_hashes text[]) TO billing_api;


--
-- Name: FUNCTION operator_second_factor_manage(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_action text, p_recovery_hashes text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_second_factor_manage(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_action text, p_recovery_hashes text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_second_factor_manage(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_action text, p_recovery_hashes text[]) TO billing_api;


--
-- Name: FUNCTION operator_second_factor_pending(p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_second_factor_pending(p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_second_factor_pending(p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION operator_second_factor_reset_here(p_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_second_factor_reset_here(p_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_second_factor_reset_here(p_id text) TO billing_api;


--
-- Name: FUNCTION operator_second_factor_start(p_token_sha256 text, p_ciphertext text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_second_factor_start(p_token_sha256 text, p_ciphertext text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_second_factor_start(p_token_sha256 text, p_ciphertext text) TO billing_api;


--
-- Name: FUNCTION operator_session_close(p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_session_close(p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_session_close(p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION operator_session_info(p_token_sha256 text, p_ip text, p_user_agent text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_session_info(p_token_sha256 text, p_ip text, p_user_agent text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_session_info(p_token_sha256 text, p_ip text, p_user_agent text) TO billing_api;


--
-- Name: FUNCTION operator_session_json(s billing_private.operator_sessions, p_email text, p_full boolean, p_current_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_session_json(s billing_private.operator_sessions, p_email text, p_full boolean, p_current_id text) FROM PUBLIC;


--
-- Name: FUNCTION operator_session_needs(p_community_id text, p_user_id text, p_code_pending boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_session_needs(p_community_id text, p_user_id text, p_code_pending boolean) FROM PUBLIC;


--
-- Name: FUNCTION operator_session_open(p_user_id text, p_token_sha256 text, p_ttl interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_session_open(p_user_id text, p_token_sha256 text, p_ttl interval) FROM PUBLIC;


--
-- Name: FUNCTION operator_session_password_params(p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_session_password_params(p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_session_password_params(p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION operator_sessions_end_here(p_session_id text, p_user_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_sessions_end_here(p_session_id text, p_user_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_sessions_end_here(p_session_id text, p_user_id text) TO billing_api;


--
-- Name: FUNCTION operator_sessions_here(p_user_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_sessions_here(p_user_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_sessions_here(p_user_id text) TO billing_api;


--
-- Name: FUNCTION operator_sign_in_code(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_new_token_sha256 text, p_ttl interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_sign_in_code(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_new_token_sha256 text, p_ttl interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_sign_in_code(p_token_sha256 text, p_ip text, p_step bigint, p_recovery_sha256 text, p_new_token_sha256 text, p_ttl interval) TO billing_api;


--
-- Name: FUNCTION operator_sign_in_succeeded(p_session_id text, p_ip text, p_email text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_sign_in_succeeded(p_session_id text, p_ip text, p_email text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_sign_in_succeeded(p_session_id text, p_ip text, p_email text) TO billing_api;


--
-- Name: FUNCTION operator_sign_in_throttle(p_ip text, p_email text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_sign_in_throttle(p_ip text, p_email text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_sign_in_throttle(p_ip text, p_email text) TO billing_api;


--
-- Name: FUNCTION operator_step_accept(p_community_id text, p_user_id text, p_step bigint, p_confirmed boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_step_accept(p_community_id text, p_user_id text, p_step bigint, p_confirmed boolean) FROM PUBLIC;


--
-- Name: FUNCTION operator_user_json(u billing_private.operator_users); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_user_json(u billing_private.operator_users) FROM PUBLIC;


--
-- Name: FUNCTION operator_user_remove(p_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_user_remove(p_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_user_remove(p_id text) TO billing_api;


--
-- Name: FUNCTION operator_user_update(p_id text, p_role text, p_disabled boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_user_update(p_id text, p_role text, p_disabled boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_user_update(p_id text, p_role text, p_disabled boolean) TO billing_api;


--
-- Name: FUNCTION operator_users_page(p_cursor text, p_limit integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.operator_users_page(p_cursor text, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.operator_users_page(p_cursor text, p_limit integer) TO billing_api;


--
-- Name: FUNCTION payment_secret_ciphertext(p_provider text, p_name text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.payment_secret_ciphertext(p_provider text, p_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.payment_secret_ciphertext(p_provider text, p_name text) TO billing_api;


--
-- Name: FUNCTION platform_config_can_deliver(p_community_id text, p_platform_config_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_config_can_deliver(p_community_id text, p_platform_config_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_config_can_deliver(p_community_id text, p_platform_config_id text) TO billing_api;


--
-- Name: FUNCTION platform_config_inbound(p_platform_config_id text, p_platform text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_config_inbound(p_platform_config_id text, p_platform text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_config_inbound(p_platform_config_id text, p_platform text) TO billing_api;


--
-- Name: FUNCTION platform_defaults_set(p_discord boolean, p_telegram boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_defaults_set(p_discord boolean, p_telegram boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_defaults_set(p_discord boolean, p_telegram boolean) TO billing_worker;


--
-- Name: FUNCTION platform_delivery_plan(p_community_id text, p_member_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_delivery_plan(p_community_id text, p_member_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_delivery_plan(p_community_id text, p_member_id text) TO billing_worker;


--
-- Name: FUNCTION platform_delivery_record(p_community_id text, p_member_id text, p_results jsonb, p_actions jsonb); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_delivery_record(p_community_id text, p_member_id text, p_results jsonb, p_actions jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_delivery_record(p_community_id text, p_member_id text, p_results jsonb, p_actions jsonb) TO billing_worker;


--
-- Name: FUNCTION platform_reconcile_connection(p_community_id text, p_platform_config_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_reconcile_connection(p_community_id text, p_platform_config_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_reconcile_connection(p_community_id text, p_platform_config_id text) TO billing_worker;


--
-- Name: FUNCTION platform_reconcile_enqueue(p_community_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_reconcile_enqueue(p_community_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_reconcile_enqueue(p_community_id text) TO billing_worker;


--
-- Name: FUNCTION platform_reconcile_former(p_community_id text, p_platform_config_id text, p_type text, p_value text, p_after text, p_limit integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_reconcile_former(p_community_id text, p_platform_config_id text, p_type text, p_value text, p_after text, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_reconcile_former(p_community_id text, p_platform_config_id text, p_type text, p_value text, p_after text, p_limit integer) TO billing_worker;


--
-- Name: FUNCTION platform_reconcile_log(p_community_id text, p_actions jsonb); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_reconcile_log(p_community_id text, p_actions jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_reconcile_log(p_community_id text, p_actions jsonb) TO billing_worker;


--
-- Name: FUNCTION platform_reconcile_observed(p_community_id text, p_platform_config_id text, p_type text, p_values text[], p_complete boolean, p_observed jsonb); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_reconcile_observed(p_community_id text, p_platform_config_id text, p_type text, p_values text[], p_complete boolean, p_observed jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_reconcile_observed(p_community_id text, p_platform_config_id text, p_type text, p_values text[], p_complete boolean, p_observed jsonb) TO billing_worker;


--
-- Name: FUNCTION platform_reconcile_targets(p_community_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_reconcile_targets(p_community_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_reconcile_targets(p_community_id text) TO billing_worker;


--
-- Name: FUNCTION platform_secret_ciphertext(p_platform_config_id text, p_name text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_secret_ciphertext(p_platform_config_id text, p_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_secret_ciphertext(p_platform_config_id text, p_name text) TO billing_api;


--
-- Name: FUNCTION platform_secret_set(p_platform_config_id text, p_name text, p_ciphertext text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.platform_secret_set(p_platform_config_id text, p_name text, p_ciphertext text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.platform_secret_set(p_platform_config_id text, p_name text, p_ciphertext text) TO billing_api;


--
-- Name: FUNCTION portal_set_card(p_subscription_id text, p_declines boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.portal_set_card(p_subscription_id text, p_declines boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.portal_set_card(p_subscription_id text, p_declines boolean) TO billing_api;


--
-- Name: FUNCTION purge_expired(p_delivery_retention interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.purge_expired(p_delivery_retention interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.purge_expired(p_delivery_retention interval) TO billing_worker;


--
-- Name: FUNCTION session_credential(p_token_sha256 text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.session_credential(p_token_sha256 text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.session_credential(p_token_sha256 text) TO billing_api;


--
-- Name: FUNCTION subscription_cancel_now(p_subscription_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.subscription_cancel_now(p_subscription_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.subscription_cancel_now(p_subscription_id text) TO billing_api;


--
-- Name: FUNCTION subscription_pause(p_subscription_id text, p_until timestamp with time zone); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.subscription_pause(p_subscription_id text, p_until timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.subscription_pause(p_subscription_id text, p_until timestamp with time zone) TO billing_api;


--
-- Name: FUNCTION subscription_resume(p_subscription_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.subscription_resume(p_subscription_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.subscription_resume(p_subscription_id text) TO billing_api;


--
-- Name: FUNCTION subscription_switch_now(p_subscription_id text, p_plan_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.subscription_switch_now(p_subscription_id text, p_plan_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.subscription_switch_now(p_subscription_id text, p_plan_id text) TO billing_api;


--
-- Name: FUNCTION take_token(p_bucket text, p_per_minute double precision, p_burst double precision); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.take_token(p_bucket text, p_per_minute double precision, p_burst double precision) FROM PUBLIC;


--
-- Name: FUNCTION take_tokens(p_bucket text, p_per_minute double precision, p_burst double precision, p_n integer, p_return integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.take_tokens(p_bucket text, p_per_minute double precision, p_burst double precision, p_n integer, p_return integer) FROM PUBLIC;


--
-- Name: FUNCTION tg_audit(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_audit() FROM PUBLIC;


--
-- Name: FUNCTION tg_audit_log__append_only(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_audit_log__append_only() FROM PUBLIC;


--
-- Name: FUNCTION tg_audit_log__retention_only(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_audit_log__retention_only() FROM PUBLIC;


--
-- Name: FUNCTION tg_discount_codes__analytics(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_discount_codes__analytics() FROM PUBLIC;


--
-- Name: FUNCTION tg_events__enqueue_deliveries(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_events__enqueue_deliveries() FROM PUBLIC;


--
-- Name: FUNCTION tg_events__mail(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_events__mail() FROM PUBLIC;


--
-- Name: FUNCTION tg_invoices__analytics(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_invoices__analytics() FROM PUBLIC;


--
-- Name: FUNCTION tg_plans__analytics(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_plans__analytics() FROM PUBLIC;


--
-- Name: FUNCTION tg_platform_secrets__deliveries(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_platform_secrets__deliveries() FROM PUBLIC;


--
-- Name: FUNCTION tg_subscriptions__analytics(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_subscriptions__analytics() FROM PUBLIC;


--
-- Name: FUNCTION tg_subscriptions__analytics_update(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_subscriptions__analytics_update() FROM PUBLIC;


--
-- Name: FUNCTION tg_webhook_endpoints__check_event_types(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_webhook_endpoints__check_event_types() FROM PUBLIC;


--
-- Name: FUNCTION tg_webhook_endpoints__limit(); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.tg_webhook_endpoints__limit() FROM PUBLIC;


--
-- Name: FUNCTION user_agent_summary(p_ua text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.user_agent_summary(p_ua text) FROM PUBLIC;


--
-- Name: FUNCTION webhook_deliveries_load(p_community_id text, p_ids text[], p_after integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.webhook_deliveries_load(p_community_id text, p_ids text[], p_after integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.webhook_deliveries_load(p_community_id text, p_ids text[], p_after integer) TO billing_worker;


--
-- Name: FUNCTION webhook_delivery_enqueue(p_delivery_id text, p_manual boolean); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.webhook_delivery_enqueue(p_delivery_id text, p_manual boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.webhook_delivery_enqueue(p_delivery_id text, p_manual boolean) TO billing_api;


--
-- Name: FUNCTION webhook_record_attempts(p_community_id text, p_after integer, p_manual boolean, p_results jsonb, p_retry_at timestamp with time zone, p_disable_after interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.webhook_record_attempts(p_community_id text, p_after integer, p_manual boolean, p_results jsonb, p_retry_at timestamp with time zone, p_disable_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.webhook_record_attempts(p_community_id text, p_after integer, p_manual boolean, p_results jsonb, p_retry_at timestamp with time zone, p_disable_after interval) TO billing_worker;


--
-- Name: FUNCTION webhook_secret_store(p_endpoint_id text, p_ciphertext text, p_rotate boolean, p_grace interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.webhook_secret_store(p_endpoint_id text, p_ciphertext text, p_rotate boolean, p_grace interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.webhook_secret_store(p_endpoint_id text, p_ciphertext text, p_rotate boolean, p_grace interval) TO billing_api;


--
-- Name: FUNCTION webhook_signing_ciphertexts(p_community_id text, p_endpoint_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.webhook_signing_ciphertexts(p_community_id text, p_endpoint_id text) FROM PUBLIC;


--
-- Name: FUNCTION webhook_test_target(p_endpoint_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.webhook_test_target(p_endpoint_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.webhook_test_target(p_endpoint_id text) TO billing_api;


--
-- Name: FUNCTION worker_apply_due(p_community_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.worker_apply_due(p_community_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.worker_apply_due(p_community_id text) TO billing_worker;


--
-- Name: FUNCTION worker_apply_due_batch(p_community_id text, p_after text, p_limit integer); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.worker_apply_due_batch(p_community_id text, p_after text, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.worker_apply_due_batch(p_community_id text, p_after text, p_limit integer) TO billing_worker;


--
-- Name: FUNCTION worker_apply_due_finish(p_community_id text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.worker_apply_due_finish(p_community_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.worker_apply_due_finish(p_community_id text) TO billing_worker;


--
-- Name: FUNCTION worker_community_ids(p_only text); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.worker_community_ids(p_only text) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.worker_community_ids(p_only text) TO billing_worker;


--
-- Name: FUNCTION worker_heartbeat(p_worker_ids text[], p_stale interval); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.worker_heartbeat(p_worker_ids text[], p_stale interval) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.worker_heartbeat(p_worker_ids text[], p_stale interval) TO billing_worker;


--
-- Name: FUNCTION worker_heartbeat_stop(p_worker_ids text[]); Type: ACL; Schema: billing_private; Owner: -
--

REVOKE ALL ON FUNCTION billing_private.worker_heartbeat_stop(p_worker_ids text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION billing_private.worker_heartbeat_stop(p_worker_ids text[]) TO billing_worker;


--
-- Name: FUNCTION lo_creat(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.lo_creat(integer) FROM PUBLIC;


--
-- Name: FUNCTION lo_create(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.lo_create(oid) FROM PUBLIC;


--
-- Name: FUNCTION lo_from_bytea(oid, bytea); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.lo_from_bytea(oid, bytea) FROM PUBLIC;


--
-- Name: FUNCTION pg_database_size(name); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_database_size(name) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(name) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(name) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(name) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(name) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(name) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_database_size(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_database_size(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_database_size(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_indexes_size(regclass); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_indexes_size(regclass) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_indexes_size(regclass) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_indexes_size(regclass) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_indexes_size(regclass) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_indexes_size(regclass) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_indexes_size(regclass) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_relation_size(regclass); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_relation_size(regclass) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_relation_size(regclass, text); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_relation_size(regclass, text) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass, text) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass, text) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass, text) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass, text) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_relation_size(regclass, text) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_analyze_count(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_analyze_count(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_analyze_count(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_analyze_count(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_analyze_count(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_analyze_count(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_analyze_count(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_archiver(OUT archived_count bigint, OUT last_archived_wal text, OUT last_archived_time timestamp with time zone, OUT failed_count bigint, OUT last_failed_wal text, OUT last_failed_time timestamp with time zone, OUT stats_reset timestamp with time zone); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_archiver(OUT archived_count bigint, OUT last_archived_wal text, OUT last_archived_time timestamp with time zone, OUT failed_count bigint, OUT last_failed_wal text, OUT last_failed_time timestamp with time zone, OUT stats_reset timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_archiver(OUT archived_count bigint, OUT last_archived_wal text, OUT last_archived_time timestamp with time zone, OUT failed_count bigint, OUT last_failed_wal text, OUT last_failed_time timestamp with time zone, OUT stats_reset timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_archiver(OUT archived_count bigint, OUT last_archived_wal text, OUT last_archived_time timestamp with time zone, OUT failed_count bigint, OUT last_failed_wal text, OUT last_failed_time timestamp with time zone, OUT stats_reset timestamp with time zone) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_archiver(OUT archived_count bigint, OUT last_archived_wal text, OUT last_archived_time timestamp with time zone, OUT failed_count bigint, OUT last_failed_wal text, OUT last_failed_time timestamp with time zone, OUT stats_reset timestamp with time zone) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_archiver(OUT archived_count bigint, OUT last_archived_wal text, OUT last_archived_time timestamp with time zone, OUT failed_count bigint, OUT last_failed_wal text, OUT last_failed_time timestamp with time zone, OUT stats_reset timestamp with time zone) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_archiver(OUT archived_count bigint, OUT last_archived_wal text, OUT last_archived_time timestamp with time zone, OUT failed_count bigint, OUT last_failed_wal text, OUT last_failed_time timestamp with time zone, OUT stats_reset timestamp with time zone) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_autoanalyze_count(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_autoanalyze_count(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autoanalyze_count(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autoanalyze_count(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autoanalyze_count(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autoanalyze_count(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autoanalyze_count(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_autovacuum_count(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_autovacuum_count(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autovacuum_count(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autovacuum_count(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autovacuum_count(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autovacuum_count(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_autovacuum_count(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_activity(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_activity_start(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity_start(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity_start(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity_start(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity_start(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity_start(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity_start(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_client_addr(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_addr(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_addr(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_addr(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_addr(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_addr(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_addr(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_client_port(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_port(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_port(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_port(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_port(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_port(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_client_port(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_dbid(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_dbid(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_dbid(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_dbid(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_dbid(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_dbid(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_dbid(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_idset(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_idset() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_idset() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_idset() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_idset() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_idset() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_idset() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_pid(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_pid(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_pid(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_pid(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_pid(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_pid(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_pid(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_start(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_start(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_start(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_start(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_start(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_start(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_start(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_userid(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_userid(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_userid(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_userid(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_userid(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_userid(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_userid(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_wait_event(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_wait_event_type(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event_type(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event_type(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event_type(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event_type(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event_type(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_wait_event_type(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_backend_xact_start(integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_xact_start(integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_xact_start(integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_xact_start(integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_xact_start(integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_xact_start(integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_backend_xact_start(integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_bgwriter_buf_written_checkpoints(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_checkpoints() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_checkpoints() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_checkpoints() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_checkpoints() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_checkpoints() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_checkpoints() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_bgwriter_buf_written_clean(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_clean() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_clean() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_clean() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_clean() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_clean() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_buf_written_clean() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_bgwriter_maxwritten_clean(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_maxwritten_clean() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_maxwritten_clean() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_maxwritten_clean() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_maxwritten_clean() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_maxwritten_clean() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_maxwritten_clean() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_bgwriter_requested_checkpoints(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_requested_checkpoints() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_requested_checkpoints() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_requested_checkpoints() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_requested_checkpoints() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_requested_checkpoints() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_requested_checkpoints() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_bgwriter_stat_reset_time(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_stat_reset_time() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_stat_reset_time() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_stat_reset_time() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_stat_reset_time() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_stat_reset_time() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_stat_reset_time() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_bgwriter_timed_checkpoints(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_timed_checkpoints() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_timed_checkpoints() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_timed_checkpoints() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_timed_checkpoints() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_timed_checkpoints() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_bgwriter_timed_checkpoints() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_blocks_fetched(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_fetched(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_fetched(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_fetched(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_fetched(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_fetched(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_fetched(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_blocks_hit(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_hit(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_hit(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_hit(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_hit(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_hit(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_blocks_hit(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_buf_alloc(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_buf_alloc() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_alloc() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_alloc() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_alloc() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_alloc() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_alloc() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_buf_fsync_backend(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_buf_fsync_backend() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_fsync_backend() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_fsync_backend() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_fsync_backend() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_fsync_backend() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_fsync_backend() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_buf_written_backend(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_buf_written_backend() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_written_backend() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_written_backend() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_written_backend() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_written_backend() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_buf_written_backend() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_checkpoint_sync_time(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_sync_time() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_sync_time() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_sync_time() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_sync_time() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_sync_time() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_sync_time() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_checkpoint_write_time(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_write_time() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_write_time() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_write_time() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_write_time() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_write_time() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_checkpoint_write_time() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_active_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_active_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_active_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_active_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_active_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_active_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_active_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_blk_read_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_read_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_read_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_read_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_read_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_read_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_read_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_blk_write_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_write_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_write_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_write_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_write_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_write_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blk_write_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_blocks_fetched(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_fetched(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_fetched(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_fetched(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_fetched(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_fetched(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_fetched(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_blocks_hit(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_hit(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_hit(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_hit(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_hit(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_hit(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_blocks_hit(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_checksum_failures(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_failures(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_failures(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_failures(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_failures(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_failures(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_failures(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_checksum_last_failure(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_last_failure(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_last_failure(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_last_failure(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_last_failure(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_last_failure(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_checksum_last_failure(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_conflict_all(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_all(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_all(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_all(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_all(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_all(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_all(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_conflict_bufferpin(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_bufferpin(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_bufferpin(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_bufferpin(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_bufferpin(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_bufferpin(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_bufferpin(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_conflict_lock(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_lock(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_lock(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_lock(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_lock(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_lock(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_lock(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_conflict_snapshot(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_snapshot(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_snapshot(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_snapshot(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_snapshot(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_snapshot(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_snapshot(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_conflict_startup_deadlock(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_startup_deadlock(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_startup_deadlock(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_startup_deadlock(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_startup_deadlock(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_startup_deadlock(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_startup_deadlock(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_conflict_tablespace(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_tablespace(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_tablespace(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_tablespace(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_tablespace(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_tablespace(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_conflict_tablespace(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_deadlocks(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_deadlocks(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_deadlocks(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_deadlocks(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_deadlocks(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_deadlocks(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_deadlocks(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_idle_in_transaction_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_idle_in_transaction_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_idle_in_transaction_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_idle_in_transaction_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_idle_in_transaction_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_idle_in_transaction_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_idle_in_transaction_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_numbackends(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_numbackends(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_numbackends(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_numbackends(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_numbackends(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_numbackends(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_numbackends(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_session_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_session_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_session_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_session_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_session_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_session_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_session_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_sessions(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_sessions_abandoned(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_abandoned(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_abandoned(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_abandoned(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_abandoned(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_abandoned(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_abandoned(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_sessions_fatal(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_fatal(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_fatal(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_fatal(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_fatal(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_fatal(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_fatal(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_sessions_killed(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_killed(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_killed(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_killed(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_killed(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_killed(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_sessions_killed(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_stat_reset_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_stat_reset_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_stat_reset_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_stat_reset_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_stat_reset_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_stat_reset_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_stat_reset_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_temp_bytes(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_bytes(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_bytes(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_bytes(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_bytes(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_bytes(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_bytes(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_temp_files(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_files(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_files(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_files(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_files(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_files(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_temp_files(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_tuples_deleted(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_deleted(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_deleted(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_deleted(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_deleted(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_deleted(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_deleted(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_tuples_fetched(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_fetched(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_fetched(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_fetched(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_fetched(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_fetched(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_fetched(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_tuples_inserted(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_inserted(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_inserted(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_inserted(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_inserted(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_inserted(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_inserted(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_tuples_returned(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_returned(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_returned(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_returned(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_returned(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_returned(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_returned(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_tuples_updated(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_updated(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_updated(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_updated(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_updated(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_updated(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_tuples_updated(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_xact_commit(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_commit(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_commit(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_commit(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_commit(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_commit(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_commit(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_db_xact_rollback(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_rollback(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_rollback(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_rollback(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_rollback(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_rollback(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_db_xact_rollback(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_dead_tuples(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_dead_tuples(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_dead_tuples(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_dead_tuples(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_dead_tuples(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_dead_tuples(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_dead_tuples(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_function_calls(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_function_calls(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_calls(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_calls(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_calls(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_calls(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_calls(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_function_self_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_function_self_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_self_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_self_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_self_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_self_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_self_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_function_total_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_function_total_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_total_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_total_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_total_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_total_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_function_total_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_ins_since_vacuum(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_ins_since_vacuum(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_ins_since_vacuum(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_ins_since_vacuum(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_ins_since_vacuum(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_ins_since_vacuum(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_ins_since_vacuum(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_last_analyze_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_last_analyze_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_analyze_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_analyze_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_analyze_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_analyze_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_analyze_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_last_autoanalyze_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_last_autoanalyze_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autoanalyze_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autoanalyze_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autoanalyze_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autoanalyze_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autoanalyze_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_last_autovacuum_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_last_autovacuum_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autovacuum_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autovacuum_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autovacuum_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autovacuum_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_autovacuum_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_last_vacuum_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_last_vacuum_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_vacuum_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_vacuum_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_vacuum_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_vacuum_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_last_vacuum_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_live_tuples(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_live_tuples(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_live_tuples(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_live_tuples(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_live_tuples(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_live_tuples(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_live_tuples(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_mod_since_analyze(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_mod_since_analyze(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_mod_since_analyze(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_mod_since_analyze(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_mod_since_analyze(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_mod_since_analyze(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_mod_since_analyze(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_numscans(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_numscans(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_numscans(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_numscans(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_numscans(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_numscans(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_numscans(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_progress_info(cmdtype text, OUT pid integer, OUT datid oid, OUT relid oid, OUT param1 bigint, OUT param2 bigint, OUT param3 bigint, OUT param4 bigint, OUT param5 bigint, OUT param6 bigint, OUT param7 bigint, OUT param8 bigint, OUT param9 bigint, OUT param10 bigint, OUT param11 bigint, OUT param12 bigint, OUT param13 bigint, OUT param14 bigint, OUT param15 bigint, OUT param16 bigint, OUT param17 bigint, OUT param18 bigint, OUT param19 bigint, OUT param20 bigint); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_progress_info(cmdtype text, OUT pid integer, OUT datid oid, OUT relid oid, OUT param1 bigint, OUT param2 bigint, OUT param3 bigint, OUT param4 bigint, OUT param5 bigint, OUT param6 bigint, OUT param7 bigint, OUT param8 bigint, OUT param9 bigint, OUT param10 bigint, OUT param11 bigint, OUT param12 bigint, OUT param13 bigint, OUT param14 bigint, OUT param15 bigint, OUT param16 bigint, OUT param17 bigint, OUT param18 bigint, OUT param19 bigint, OUT param20 bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_progress_info(cmdtype text, OUT pid integer, OUT datid oid, OUT relid oid, OUT param1 bigint, OUT param2 bigint, OUT param3 bigint, OUT param4 bigint, OUT param5 bigint, OUT param6 bigint, OUT param7 bigint, OUT param8 bigint, OUT param9 bigint, OUT param10 bigint, OUT param11 bigint, OUT param12 bigint, OUT param13 bigint, OUT param14 bigint, OUT param15 bigint, OUT param16 bigint, OUT param17 bigint, OUT param18 bigint, OUT param19 bigint, OUT param20 bigint) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_progress_info(cmdtype text, OUT pid integer, OUT datid oid, OUT relid oid, OUT param1 bigint, OUT param2 bigint, OUT param3 bigint, OUT param4 bigint, OUT param5 bigint, OUT param6 bigint, OUT param7 bigint, OUT param8 bigint, OUT param9 bigint, OUT param10 bigint, OUT param11 bigint, OUT param12 bigint, OUT param13 bigint, OUT param14 bigint, OUT param15 bigint, OUT param16 bigint, OUT param17 bigint, OUT param18 bigint, OUT param19 bigint, OUT param20 bigint) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_progress_info(cmdtype text, OUT pid integer, OUT datid oid, OUT relid oid, OUT param1 bigint, OUT param2 bigint, OUT param3 bigint, OUT param4 bigint, OUT param5 bigint, OUT param6 bigint, OUT param7 bigint, OUT param8 bigint, OUT param9 bigint, OUT param10 bigint, OUT param11 bigint, OUT param12 bigint, OUT param13 bigint, OUT param14 bigint, OUT param15 bigint, OUT param16 bigint, OUT param17 bigint, OUT param18 bigint, OUT param19 bigint, OUT param20 bigint) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_progress_info(cmdtype text, OUT pid integer, OUT datid oid, OUT relid oid, OUT param1 bigint, OUT param2 bigint, OUT param3 bigint, OUT param4 bigint, OUT param5 bigint, OUT param6 bigint, OUT param7 bigint, OUT param8 bigint, OUT param9 bigint, OUT param10 bigint, OUT param11 bigint, OUT param12 bigint, OUT param13 bigint, OUT param14 bigint, OUT param15 bigint, OUT param16 bigint, OUT param17 bigint, OUT param18 bigint, OUT param19 bigint, OUT param20 bigint) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_progress_info(cmdtype text, OUT pid integer, OUT datid oid, OUT relid oid, OUT param1 bigint, OUT param2 bigint, OUT param3 bigint, OUT param4 bigint, OUT param5 bigint, OUT param6 bigint, OUT param7 bigint, OUT param8 bigint, OUT param9 bigint, OUT param10 bigint, OUT param11 bigint, OUT param12 bigint, OUT param13 bigint, OUT param14 bigint, OUT param15 bigint, OUT param16 bigint, OUT param17 bigint, OUT param18 bigint, OUT param19 bigint, OUT param20 bigint) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_recovery_prefetch(OUT stats_reset timestamp with time zone, OUT prefetch bigint, OUT hit bigint, OUT skip_init bigint, OUT skip_new bigint, OUT skip_fpw bigint, OUT skip_rep bigint, OUT wal_distance integer, OUT block_distance integer, OUT io_depth integer); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_recovery_prefetch(OUT stats_reset timestamp with time zone, OUT prefetch bigint, OUT hit bigint, OUT skip_init bigint, OUT skip_new bigint, OUT skip_fpw bigint, OUT skip_rep bigint, OUT wal_distance integer, OUT block_distance integer, OUT io_depth integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_recovery_prefetch(OUT stats_reset timestamp with time zone, OUT prefetch bigint, OUT hit bigint, OUT skip_init bigint, OUT skip_new bigint, OUT skip_fpw bigint, OUT skip_rep bigint, OUT wal_distance integer, OUT block_distance integer, OUT io_depth integer) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_recovery_prefetch(OUT stats_reset timestamp with time zone, OUT prefetch bigint, OUT hit bigint, OUT skip_init bigint, OUT skip_new bigint, OUT skip_fpw bigint, OUT skip_rep bigint, OUT wal_distance integer, OUT block_distance integer, OUT io_depth integer) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_recovery_prefetch(OUT stats_reset timestamp with time zone, OUT prefetch bigint, OUT hit bigint, OUT skip_init bigint, OUT skip_new bigint, OUT skip_fpw bigint, OUT skip_rep bigint, OUT wal_distance integer, OUT block_distance integer, OUT io_depth integer) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_recovery_prefetch(OUT stats_reset timestamp with time zone, OUT prefetch bigint, OUT hit bigint, OUT skip_init bigint, OUT skip_new bigint, OUT skip_fpw bigint, OUT skip_rep bigint, OUT wal_distance integer, OUT block_distance integer, OUT io_depth integer) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_recovery_prefetch(OUT stats_reset timestamp with time zone, OUT prefetch bigint, OUT hit bigint, OUT skip_init bigint, OUT skip_new bigint, OUT skip_fpw bigint, OUT skip_rep bigint, OUT wal_distance integer, OUT block_distance integer, OUT io_depth integer) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_replication_slot(slot_name text, OUT slot_name text, OUT spill_txns bigint, OUT spill_count bigint, OUT spill_bytes bigint, OUT stream_txns bigint, OUT stream_count bigint, OUT stream_bytes bigint, OUT total_txns bigint, OUT total_bytes bigint, OUT stats_reset timestamp with time zone); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_replication_slot(slot_name text, OUT slot_name text, OUT spill_txns bigint, OUT spill_count bigint, OUT spill_bytes bigint, OUT stream_txns bigint, OUT stream_count bigint, OUT stream_bytes bigint, OUT total_txns bigint, OUT total_bytes bigint, OUT stats_reset timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_replication_slot(slot_name text, OUT slot_name text, OUT spill_txns bigint, OUT spill_count bigint, OUT spill_bytes bigint, OUT stream_txns bigint, OUT stream_count bigint, OUT stream_bytes bigint, OUT total_txns bigint, OUT total_bytes bigint, OUT stats_reset timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_replication_slot(slot_name text, OUT slot_name text, OUT spill_txns bigint, OUT spill_count bigint, OUT spill_bytes bigint, OUT stream_txns bigint, OUT stream_count bigint, OUT stream_bytes bigint, OUT total_txns bigint, OUT total_bytes bigint, OUT stats_reset timestamp with time zone) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_replication_slot(slot_name text, OUT slot_name text, OUT spill_txns bigint, OUT spill_count bigint, OUT spill_bytes bigint, OUT stream_txns bigint, OUT stream_count bigint, OUT stream_bytes bigint, OUT total_txns bigint, OUT total_bytes bigint, OUT stats_reset timestamp with time zone) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_replication_slot(slot_name text, OUT slot_name text, OUT spill_txns bigint, OUT spill_count bigint, OUT spill_bytes bigint, OUT stream_txns bigint, OUT stream_count bigint, OUT stream_bytes bigint, OUT total_txns bigint, OUT total_bytes bigint, OUT stats_reset timestamp with time zone) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_replication_slot(slot_name text, OUT slot_name text, OUT spill_txns bigint, OUT spill_count bigint, OUT spill_bytes bigint, OUT stream_txns bigint, OUT stream_count bigint, OUT stream_bytes bigint, OUT total_txns bigint, OUT total_bytes bigint, OUT stats_reset timestamp with time zone) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_slru(OUT name text, OUT blks_zeroed bigint, OUT blks_hit bigint, OUT blks_read bigint, OUT blks_written bigint, OUT blks_exists bigint, OUT flushes bigint, OUT truncates bigint, OUT stats_reset timestamp with time zone); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_slru(OUT name text, OUT blks_zeroed bigint, OUT blks_hit bigint, OUT blks_read bigint, OUT blks_written bigint, OUT blks_exists bigint, OUT flushes bigint, OUT truncates bigint, OUT stats_reset timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_slru(OUT name text, OUT blks_zeroed bigint, OUT blks_hit bigint, OUT blks_read bigint, OUT blks_written bigint, OUT blks_exists bigint, OUT flushes bigint, OUT truncates bigint, OUT stats_reset timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_slru(OUT name text, OUT blks_zeroed bigint, OUT blks_hit bigint, OUT blks_read bigint, OUT blks_written bigint, OUT blks_exists bigint, OUT flushes bigint, OUT truncates bigint, OUT stats_reset timestamp with time zone) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_slru(OUT name text, OUT blks_zeroed bigint, OUT blks_hit bigint, OUT blks_read bigint, OUT blks_written bigint, OUT blks_exists bigint, OUT flushes bigint, OUT truncates bigint, OUT stats_reset timestamp with time zone) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_slru(OUT name text, OUT blks_zeroed bigint, OUT blks_hit bigint, OUT blks_read bigint, OUT blks_written bigint, OUT blks_exists bigint, OUT flushes bigint, OUT truncates bigint, OUT stats_reset timestamp with time zone) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_slru(OUT name text, OUT blks_zeroed bigint, OUT blks_hit bigint, OUT blks_read bigint, OUT blks_written bigint, OUT blks_exists bigint, OUT flushes bigint, OUT truncates bigint, OUT stats_reset timestamp with time zone) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_snapshot_timestamp(); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_snapshot_timestamp() FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_snapshot_timestamp() TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_snapshot_timestamp() TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_snapshot_timestamp() TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_snapshot_timestamp() TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_snapshot_timestamp() TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_subscription(subid oid, OUT subid oid, OUT relid oid, OUT pid integer, OUT received_lsn pg_lsn, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_subscription(subid oid, OUT subid oid, OUT relid oid, OUT pid integer, OUT received_lsn pg_lsn, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription(subid oid, OUT subid oid, OUT relid oid, OUT pid integer, OUT received_lsn pg_lsn, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription(subid oid, OUT subid oid, OUT relid oid, OUT pid integer, OUT received_lsn pg_lsn, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription(subid oid, OUT subid oid, OUT relid oid, OUT pid integer, OUT received_lsn pg_lsn, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription(subid oid, OUT subid oid, OUT relid oid, OUT pid integer, OUT received_lsn pg_lsn, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription(subid oid, OUT subid oid, OUT relid oid, OUT pid integer, OUT received_lsn pg_lsn, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_subscription_stats(subid oid, OUT subid oid, OUT apply_error_count bigint, OUT sync_error_count bigint, OUT stats_reset timestamp with time zone); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_subscription_stats(subid oid, OUT subid oid, OUT apply_error_count bigint, OUT sync_error_count bigint, OUT stats_reset timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription_stats(subid oid, OUT subid oid, OUT apply_error_count bigint, OUT sync_error_count bigint, OUT stats_reset timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription_stats(subid oid, OUT subid oid, OUT apply_error_count bigint, OUT sync_error_count bigint, OUT stats_reset timestamp with time zone) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription_stats(subid oid, OUT subid oid, OUT apply_error_count bigint, OUT sync_error_count bigint, OUT stats_reset timestamp with time zone) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription_stats(subid oid, OUT subid oid, OUT apply_error_count bigint, OUT sync_error_count bigint, OUT stats_reset timestamp with time zone) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_subscription_stats(subid oid, OUT subid oid, OUT apply_error_count bigint, OUT sync_error_count bigint, OUT stats_reset timestamp with time zone) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_tuples_deleted(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_deleted(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_deleted(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_deleted(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_deleted(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_deleted(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_deleted(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_tuples_fetched(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_fetched(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_fetched(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_fetched(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_fetched(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_fetched(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_fetched(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_tuples_hot_updated(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_hot_updated(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_hot_updated(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_hot_updated(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_hot_updated(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_hot_updated(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_hot_updated(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_tuples_inserted(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_inserted(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_inserted(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_inserted(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_inserted(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_inserted(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_inserted(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_tuples_returned(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_returned(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_returned(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_returned(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_returned(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_returned(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_returned(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_tuples_updated(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_updated(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_updated(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_updated(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_updated(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_updated(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_tuples_updated(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_vacuum_count(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_vacuum_count(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_vacuum_count(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_vacuum_count(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_vacuum_count(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_vacuum_count(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_vacuum_count(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_wal(OUT wal_records bigint, OUT wal_fpi bigint, OUT wal_bytes numeric, OUT wal_buffers_full bigint, OUT wal_write bigint, OUT wal_sync bigint, OUT wal_write_time double precision, OUT wal_sync_time double precision, OUT stats_reset timestamp with time zone); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_wal(OUT wal_records bigint, OUT wal_fpi bigint, OUT wal_bytes numeric, OUT wal_buffers_full bigint, OUT wal_write bigint, OUT wal_sync bigint, OUT wal_write_time double precision, OUT wal_sync_time double precision, OUT stats_reset timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal(OUT wal_records bigint, OUT wal_fpi bigint, OUT wal_bytes numeric, OUT wal_buffers_full bigint, OUT wal_write bigint, OUT wal_sync bigint, OUT wal_write_time double precision, OUT wal_sync_time double precision, OUT stats_reset timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal(OUT wal_records bigint, OUT wal_fpi bigint, OUT wal_bytes numeric, OUT wal_buffers_full bigint, OUT wal_write bigint, OUT wal_sync bigint, OUT wal_write_time double precision, OUT wal_sync_time double precision, OUT stats_reset timestamp with time zone) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal(OUT wal_records bigint, OUT wal_fpi bigint, OUT wal_bytes numeric, OUT wal_buffers_full bigint, OUT wal_write bigint, OUT wal_sync bigint, OUT wal_write_time double precision, OUT wal_sync_time double precision, OUT stats_reset timestamp with time zone) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal(OUT wal_records bigint, OUT wal_fpi bigint, OUT wal_bytes numeric, OUT wal_buffers_full bigint, OUT wal_write bigint, OUT wal_sync bigint, OUT wal_write_time double precision, OUT wal_sync_time double precision, OUT stats_reset timestamp with time zone) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal(OUT wal_records bigint, OUT wal_fpi bigint, OUT wal_bytes numeric, OUT wal_buffers_full bigint, OUT wal_write bigint, OUT wal_sync bigint, OUT wal_write_time double precision, OUT wal_sync_time double precision, OUT stats_reset timestamp with time zone) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_wal_receiver(OUT pid integer, OUT status text, OUT receive_start_lsn pg_lsn, OUT receive_start_tli integer, OUT written_lsn pg_lsn, OUT flushed_lsn pg_lsn, OUT received_tli integer, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone, OUT slot_name text, OUT sender_host text, OUT sender_port integer, OUT conninfo text); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_wal_receiver(OUT pid integer, OUT status text, OUT receive_start_lsn pg_lsn, OUT receive_start_tli integer, OUT written_lsn pg_lsn, OUT flushed_lsn pg_lsn, OUT received_tli integer, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone, OUT slot_name text, OUT sender_host text, OUT sender_port integer, OUT conninfo text) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_receiver(OUT pid integer, OUT status text, OUT receive_start_lsn pg_lsn, OUT receive_start_tli integer, OUT written_lsn pg_lsn, OUT flushed_lsn pg_lsn, OUT received_tli integer, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone, OUT slot_name text, OUT sender_host text, OUT sender_port integer, OUT conninfo text) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_receiver(OUT pid integer, OUT status text, OUT receive_start_lsn pg_lsn, OUT receive_start_tli integer, OUT written_lsn pg_lsn, OUT flushed_lsn pg_lsn, OUT received_tli integer, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone, OUT slot_name text, OUT sender_host text, OUT sender_port integer, OUT conninfo text) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_receiver(OUT pid integer, OUT status text, OUT receive_start_lsn pg_lsn, OUT receive_start_tli integer, OUT written_lsn pg_lsn, OUT flushed_lsn pg_lsn, OUT received_tli integer, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone, OUT slot_name text, OUT sender_host text, OUT sender_port integer, OUT conninfo text) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_receiver(OUT pid integer, OUT status text, OUT receive_start_lsn pg_lsn, OUT receive_start_tli integer, OUT written_lsn pg_lsn, OUT flushed_lsn pg_lsn, OUT received_tli integer, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone, OUT slot_name text, OUT sender_host text, OUT sender_port integer, OUT conninfo text) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_receiver(OUT pid integer, OUT status text, OUT receive_start_lsn pg_lsn, OUT receive_start_tli integer, OUT written_lsn pg_lsn, OUT flushed_lsn pg_lsn, OUT received_tli integer, OUT last_msg_send_time timestamp with time zone, OUT last_msg_receipt_time timestamp with time zone, OUT latest_end_lsn pg_lsn, OUT latest_end_time timestamp with time zone, OUT slot_name text, OUT sender_host text, OUT sender_port integer, OUT conninfo text) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_wal_senders(OUT pid integer, OUT state text, OUT sent_lsn pg_lsn, OUT write_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT replay_lsn pg_lsn, OUT write_lag interval, OUT flush_lag interval, OUT replay_lag interval, OUT sync_priority integer, OUT sync_state text, OUT reply_time timestamp with time zone); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_wal_senders(OUT pid integer, OUT state text, OUT sent_lsn pg_lsn, OUT write_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT replay_lsn pg_lsn, OUT write_lag interval, OUT flush_lag interval, OUT replay_lag interval, OUT sync_priority integer, OUT sync_state text, OUT reply_time timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_senders(OUT pid integer, OUT state text, OUT sent_lsn pg_lsn, OUT write_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT replay_lsn pg_lsn, OUT write_lag interval, OUT flush_lag interval, OUT replay_lag interval, OUT sync_priority integer, OUT sync_state text, OUT reply_time timestamp with time zone) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_senders(OUT pid integer, OUT state text, OUT sent_lsn pg_lsn, OUT write_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT replay_lsn pg_lsn, OUT write_lag interval, OUT flush_lag interval, OUT replay_lag interval, OUT sync_priority integer, OUT sync_state text, OUT reply_time timestamp with time zone) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_senders(OUT pid integer, OUT state text, OUT sent_lsn pg_lsn, OUT write_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT replay_lsn pg_lsn, OUT write_lag interval, OUT flush_lag interval, OUT replay_lag interval, OUT sync_priority integer, OUT sync_state text, OUT reply_time timestamp with time zone) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_senders(OUT pid integer, OUT state text, OUT sent_lsn pg_lsn, OUT write_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT replay_lsn pg_lsn, OUT write_lag interval, OUT flush_lag interval, OUT replay_lag interval, OUT sync_priority integer, OUT sync_state text, OUT reply_time timestamp with time zone) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_wal_senders(OUT pid integer, OUT state text, OUT sent_lsn pg_lsn, OUT write_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT replay_lsn pg_lsn, OUT write_lag interval, OUT flush_lag interval, OUT replay_lag interval, OUT sync_priority integer, OUT sync_state text, OUT reply_time timestamp with time zone) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_blocks_fetched(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_fetched(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_fetched(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_fetched(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_fetched(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_fetched(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_fetched(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_blocks_hit(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_hit(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_hit(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_hit(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_hit(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_hit(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_blocks_hit(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_function_calls(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_calls(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_calls(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_calls(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_calls(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_calls(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_calls(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_function_self_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_self_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_self_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_self_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_self_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_self_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_self_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_function_total_time(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_total_time(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_total_time(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_total_time(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_total_time(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_total_time(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_function_total_time(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_numscans(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_numscans(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_numscans(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_numscans(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_numscans(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_numscans(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_numscans(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_tuples_deleted(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_deleted(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_deleted(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_deleted(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_deleted(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_deleted(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_deleted(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_tuples_fetched(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_fetched(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_fetched(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_fetched(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_fetched(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_fetched(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_fetched(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_tuples_hot_updated(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_hot_updated(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_hot_updated(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_hot_updated(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_hot_updated(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_hot_updated(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_hot_updated(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_tuples_inserted(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_inserted(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_inserted(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_inserted(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_inserted(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_inserted(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_inserted(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_tuples_returned(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_returned(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_returned(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_returned(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_returned(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_returned(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_returned(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_get_xact_tuples_updated(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_updated(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_updated(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_updated(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_updated(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_updated(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_get_xact_tuples_updated(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_stat_have_stats(text, oid, oid); Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT ALL ON FUNCTION pg_catalog.pg_stat_have_stats(text, oid, oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_have_stats(text, oid, oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_have_stats(text, oid, oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_have_stats(text, oid, oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_stat_have_stats(text, oid, oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_table_size(regclass); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_table_size(regclass) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_table_size(regclass) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_table_size(regclass) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_table_size(regclass) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_table_size(regclass) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_table_size(regclass) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_tablespace_size(name); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_tablespace_size(name) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(name) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(name) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(name) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(name) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(name) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_tablespace_size(oid); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_tablespace_size(oid) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(oid) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(oid) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(oid) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(oid) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_tablespace_size(oid) TO pg_read_all_stats;


--
-- Name: FUNCTION pg_total_relation_size(regclass); Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE ALL ON FUNCTION pg_catalog.pg_total_relation_size(regclass) FROM PUBLIC;
GRANT ALL ON FUNCTION pg_catalog.pg_total_relation_size(regclass) TO billing_api;
GRANT ALL ON FUNCTION pg_catalog.pg_total_relation_size(regclass) TO billing_writer;
GRANT ALL ON FUNCTION pg_catalog.pg_total_relation_size(regclass) TO billing_worker;
GRANT ALL ON FUNCTION pg_catalog.pg_total_relation_size(regclass) TO billing_app;
GRANT ALL ON FUNCTION pg_catalog.pg_total_relation_size(regclass) TO pg_read_all_stats;


--
-- Name: FUNCTION gin_extract_query_trgm(text, internal, smallint, internal, internal, internal, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gin_extract_query_trgm(text, internal, smallint, internal, internal, internal, internal) FROM PUBLIC;


--
-- Name: FUNCTION gin_extract_value_trgm(text, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gin_extract_value_trgm(text, internal) FROM PUBLIC;


--
-- Name: FUNCTION gin_trgm_consistent(internal, smallint, text, integer, internal, internal, internal, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gin_trgm_consistent(internal, smallint, text, integer, internal, internal, internal, internal) FROM PUBLIC;


--
-- Name: FUNCTION gin_trgm_triconsistent(internal, smallint, text, integer, internal, internal, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gin_trgm_triconsistent(internal, smallint, text, integer, internal, internal, internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_compress(internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_compress(internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_consistent(internal, text, smallint, oid, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_consistent(internal, text, smallint, oid, internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_decompress(internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_decompress(internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_distance(internal, text, smallint, oid, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_distance(internal, text, smallint, oid, internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_options(internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_options(internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_penalty(internal, internal, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_penalty(internal, internal, internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_picksplit(internal, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_picksplit(internal, internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_same(public.gtrgm, public.gtrgm, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_same(public.gtrgm, public.gtrgm, internal) FROM PUBLIC;


--
-- Name: FUNCTION gtrgm_union(internal, internal); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.gtrgm_union(internal, internal) FROM PUBLIC;


--
-- Name: FUNCTION set_limit(real); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.set_limit(real) FROM PUBLIC;


--
-- Name: FUNCTION show_limit(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.show_limit() FROM PUBLIC;


--
-- Name: FUNCTION show_trgm(text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.show_trgm(text) FROM PUBLIC;


--
-- Name: FUNCTION similarity(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.similarity(text, text) FROM PUBLIC;


--
-- Name: FUNCTION similarity_dist(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.similarity_dist(text, text) FROM PUBLIC;


--
-- Name: FUNCTION similarity_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.similarity_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION strict_word_similarity(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.strict_word_similarity(text, text) FROM PUBLIC;


--
-- Name: FUNCTION strict_word_similarity_commutator_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.strict_word_similarity_commutator_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION strict_word_similarity_dist_commutator_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.strict_word_similarity_dist_commutator_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION strict_word_similarity_dist_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.strict_word_similarity_dist_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION strict_word_similarity_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.strict_word_similarity_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION word_similarity(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.word_similarity(text, text) FROM PUBLIC;


--
-- Name: FUNCTION word_similarity_commutator_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.word_similarity_commutator_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION word_similarity_dist_commutator_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.word_similarity_dist_commutator_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION word_similarity_dist_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.word_similarity_dist_op(text, text) FROM PUBLIC;


--
-- Name: FUNCTION word_similarity_op(text, text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.word_similarity_op(text, text) FROM PUBLIC;


--
-- Name: TABLE subscription_mrr; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.subscription_mrr TO billing_api;
GRANT SELECT ON TABLE analytics.subscription_mrr TO billing_operator;


--
-- Name: TABLE churn; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.churn TO billing_api;
GRANT SELECT ON TABLE analytics.churn TO billing_operator;


--
-- Name: TABLE daily_activity; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.daily_activity TO billing_api;
GRANT SELECT ON TABLE analytics.daily_activity TO billing_operator;


--
-- Name: TABLE days; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.days TO billing_api;
GRANT SELECT ON TABLE analytics.days TO billing_operator;


--
-- Name: TABLE entitlement_activity_daily; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.entitlement_activity_daily TO billing_api;
GRANT SELECT ON TABLE analytics.entitlement_activity_daily TO billing_operator;


--
-- Name: TABLE mrr; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.mrr TO billing_api;
GRANT SELECT ON TABLE analytics.mrr TO billing_operator;


--
-- Name: TABLE mrr_by_tier; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.mrr_by_tier TO billing_api;
GRANT SELECT ON TABLE analytics.mrr_by_tier TO billing_operator;


--
-- Name: TABLE mrr_movements; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.mrr_movements TO billing_operator;
GRANT SELECT ON TABLE billing.mrr_movements TO billing_api;


--
-- Name: TABLE mrr_daily; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.mrr_daily TO billing_api;
GRANT SELECT ON TABLE analytics.mrr_daily TO billing_operator;


--
-- Name: TABLE mrr_movements_daily; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.mrr_movements_daily TO billing_api;
GRANT SELECT ON TABLE analytics.mrr_movements_daily TO billing_operator;


--
-- Name: TABLE mrr_movements_monthly; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.mrr_movements_monthly TO billing_api;
GRANT SELECT ON TABLE analytics.mrr_movements_monthly TO billing_operator;


--
-- Name: TABLE paid_invoices_daily; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.paid_invoices_daily TO billing_api;
GRANT SELECT ON TABLE analytics.paid_invoices_daily TO billing_operator;


--
-- Name: TABLE recent_activity; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.recent_activity TO billing_api;
GRANT SELECT ON TABLE analytics.recent_activity TO billing_operator;


--
-- Name: TABLE revenue_daily; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.revenue_daily TO billing_api;
GRANT SELECT ON TABLE analytics.revenue_daily TO billing_operator;


--
-- Name: TABLE subscribers; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.subscribers TO billing_api;
GRANT SELECT ON TABLE analytics.subscribers TO billing_operator;


--
-- Name: TABLE trial_conversion; Type: ACL; Schema: analytics; Owner: -
--

GRANT SELECT ON TABLE analytics.trial_conversion TO billing_api;
GRANT SELECT ON TABLE analytics.trial_conversion TO billing_operator;


--
-- Name: TABLE benefit_deliveries; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.benefit_deliveries TO billing_operator;
GRANT SELECT ON TABLE billing.benefit_deliveries TO billing_api;


--
-- Name: TABLE discount_redemptions; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.discount_redemptions TO billing_api;
GRANT SELECT ON TABLE billing.discount_redemptions TO billing_operator;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.discount_redemptions TO billing_writer;


--
-- Name: TABLE entitlement_benefits; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.entitlement_benefits TO billing_api;
GRANT SELECT ON TABLE billing.entitlement_benefits TO billing_operator;


--
-- Name: TABLE external_subjects; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.external_subjects TO billing_api;
GRANT SELECT ON TABLE billing.external_subjects TO billing_operator;
GRANT SELECT,INSERT ON TABLE billing.external_subjects TO billing_writer;


--
-- Name: TABLE idempotency_keys; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.idempotency_keys TO billing_api;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.idempotency_keys TO billing_writer;


--
-- Name: COLUMN idempotency_keys.community_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(community_id) ON TABLE billing.idempotency_keys TO billing_operator;


--
-- Name: COLUMN idempotency_keys.endpoint; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(endpoint) ON TABLE billing.idempotency_keys TO billing_operator;


--
-- Name: COLUMN idempotency_keys.key; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(key) ON TABLE billing.idempotency_keys TO billing_operator;


--
-- Name: COLUMN idempotency_keys.request_hash; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(request_hash) ON TABLE billing.idempotency_keys TO billing_operator;


--
-- Name: COLUMN idempotency_keys.response_status; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(response_status) ON TABLE billing.idempotency_keys TO billing_operator;


--
-- Name: COLUMN idempotency_keys.created_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(created_at) ON TABLE billing.idempotency_keys TO billing_operator;


--
-- Name: COLUMN idempotency_keys.expires_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(expires_at) ON TABLE billing.idempotency_keys TO billing_operator;


--
-- Name: TABLE link_codes; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.link_codes TO billing_api;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.link_codes TO billing_writer;


--
-- Name: COLUMN link_codes.community_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(community_id) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: COLUMN link_codes.id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(id) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: COLUMN link_codes.member_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(member_id) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: COLUMN link_codes.intended_platform; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(intended_platform) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: COLUMN link_codes.expires_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(expires_at) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: COLUMN link_codes.redeemed_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(redeemed_at) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: COLUMN link_codes.invalidated_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(invalidated_at) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: COLUMN link_codes.created_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(created_at) ON TABLE billing.link_codes TO billing_operator;


--
-- Name: TABLE mail_unsubscribes; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.mail_unsubscribes TO billing_operator;
GRANT SELECT ON TABLE billing.mail_unsubscribes TO billing_api;


--
-- Name: TABLE member_identities; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.member_identities TO billing_api;
GRANT SELECT ON TABLE billing.member_identities TO billing_operator;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.member_identities TO billing_writer;


--
-- Name: TABLE member_provider_customers; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.member_provider_customers TO billing_operator;
GRANT SELECT ON TABLE billing.member_provider_customers TO billing_api;


--
-- Name: TABLE payment_attempts; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.payment_attempts TO billing_api;
GRANT SELECT ON TABLE billing.payment_attempts TO billing_operator;


--
-- Name: TABLE platform_actions; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.platform_actions TO billing_operator;
GRANT SELECT ON TABLE billing.platform_actions TO billing_api;


--
-- Name: TABLE platform_configs; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.platform_configs TO billing_api;
GRANT SELECT ON TABLE billing.platform_configs TO billing_operator;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.platform_configs TO billing_writer;


--
-- Name: TABLE portal_sessions; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.portal_sessions TO billing_api;
GRANT SELECT,INSERT,UPDATE ON TABLE billing.portal_sessions TO billing_writer;


--
-- Name: COLUMN portal_sessions.community_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(community_id) ON TABLE billing.portal_sessions TO billing_operator;


--
-- Name: COLUMN portal_sessions.id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(id) ON TABLE billing.portal_sessions TO billing_operator;


--
-- Name: COLUMN portal_sessions.member_id; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(member_id) ON TABLE billing.portal_sessions TO billing_operator;


--
-- Name: COLUMN portal_sessions.return_url; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(return_url) ON TABLE billing.portal_sessions TO billing_operator;


--
-- Name: COLUMN portal_sessions.expires_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(expires_at) ON TABLE billing.portal_sessions TO billing_operator;


--
-- Name: COLUMN portal_sessions.created_at; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT(created_at) ON TABLE billing.portal_sessions TO billing_operator;


--
-- Name: TABLE provider_events; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.provider_events TO billing_api;
GRANT SELECT ON TABLE billing.provider_events TO billing_operator;


--
-- Name: TABLE sandbox_cards; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.sandbox_cards TO billing_api;
GRANT SELECT ON TABLE billing.sandbox_cards TO billing_operator;


--
-- Name: TABLE tier_entitlements; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.tier_entitlements TO billing_api;
GRANT SELECT ON TABLE billing.tier_entitlements TO billing_operator;


--
-- Name: TABLE webhook_attempts; Type: ACL; Schema: billing; Owner: -
--

GRANT SELECT ON TABLE billing.webhook_attempts TO billing_api;
GRANT SELECT ON TABLE billing.webhook_attempts TO billing_operator;


--
-- Name: TABLE benefit_deliveries; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.benefit_deliveries TO billing_api;


--
-- Name: TABLE churn; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.churn TO billing_api;


--
-- Name: TABLE daily_activity; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.daily_activity TO billing_api;


--
-- Name: TABLE discounts; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.discounts TO billing_api;


--
-- Name: TABLE entitlement_activity_daily; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.entitlement_activity_daily TO billing_api;


--
-- Name: TABLE entitlements; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.entitlements TO billing_api;


--
-- Name: TABLE events; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.events TO billing_api;


--
-- Name: TABLE external_subjects; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.external_subjects TO billing_api;


--
-- Name: TABLE invoices; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.invoices TO billing_api;


--
-- Name: TABLE member_entitlements; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.member_entitlements TO billing_api;


--
-- Name: TABLE member_identities; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.member_identities TO billing_api;


--
-- Name: TABLE members; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.members TO billing_api;


--
-- Name: TABLE mrr; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.mrr TO billing_api;


--
-- Name: TABLE mrr_by_tier; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.mrr_by_tier TO billing_api;


--
-- Name: TABLE mrr_daily; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.mrr_daily TO billing_api;


--
-- Name: TABLE mrr_movements_daily; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.mrr_movements_daily TO billing_api;


--
-- Name: TABLE mrr_movements_monthly; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.mrr_movements_monthly TO billing_api;


--
-- Name: TABLE paid_invoices_daily; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.paid_invoices_daily TO billing_api;


--
-- Name: TABLE payment_attempts; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.payment_attempts TO billing_api;


--
-- Name: TABLE plans; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.plans TO billing_api;


--
-- Name: TABLE purchases; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.purchases TO billing_api;


--
-- Name: TABLE revenue_daily; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.revenue_daily TO billing_api;


--
-- Name: TABLE subscribers; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.subscribers TO billing_api;


--
-- Name: TABLE subscriptions; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.subscriptions TO billing_api;


--
-- Name: TABLE tiers; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.tiers TO billing_api;


--
-- Name: TABLE trial_conversion; Type: ACL; Schema: billing_graphql; Owner: -
--

GRANT SELECT ON TABLE billing_graphql.trial_conversion TO billing_api;


--
-- Name: SEQUENCE id_seq; Type: ACL; Schema: billing_private; Owner: -
--

GRANT USAGE ON SEQUENCE billing_private.id_seq TO billing_api;


--
-- Name: TABLE pg_class; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_class FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_class TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_class TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_class TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_class TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_class TO pg_read_all_stats;


--
-- Name: COLUMN pg_class.oid; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(oid) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relname; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relname) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relnamespace; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relnamespace) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.reltype; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(reltype) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.reloftype; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(reloftype) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relowner; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relowner) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relam; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relam) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relfilenode; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relfilenode) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.reltablespace; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(reltablespace) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.reltoastrelid; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(reltoastrelid) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relhasindex; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relhasindex) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relisshared; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relisshared) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relpersistence; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relpersistence) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relkind; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relkind) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relnatts; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relnatts) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relchecks; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relchecks) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relhasrules; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relhasrules) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relhastriggers; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relhastriggers) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relhassubclass; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relhassubclass) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relrowsecurity; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relrowsecurity) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relforcerowsecurity; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relforcerowsecurity) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relispopulated; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relispopulated) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relreplident; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relreplident) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relispartition; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relispartition) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relrewrite; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relrewrite) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relfrozenxid; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relfrozenxid) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relminmxid; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relminmxid) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relacl; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relacl) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.reloptions; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(reloptions) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: COLUMN pg_class.relpartbound; Type: ACL; Schema: pg_catalog; Owner: -
--

GRANT SELECT(relpartbound) ON TABLE pg_catalog.pg_class TO PUBLIC;


--
-- Name: TABLE pg_stat_all_indexes; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_all_indexes FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_indexes TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_indexes TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_indexes TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_indexes TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_indexes TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_all_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_all_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_all_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_archiver; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_archiver FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_archiver TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_archiver TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_archiver TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_archiver TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_archiver TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_bgwriter; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_bgwriter FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_bgwriter TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_bgwriter TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_bgwriter TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_bgwriter TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_bgwriter TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_database; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_database FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_database_conflicts; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_database_conflicts FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database_conflicts TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database_conflicts TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database_conflicts TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database_conflicts TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_database_conflicts TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_progress_analyze; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_progress_analyze FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_analyze TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_analyze TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_analyze TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_analyze TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_analyze TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_progress_basebackup; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_progress_basebackup FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_basebackup TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_basebackup TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_basebackup TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_basebackup TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_basebackup TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_progress_cluster; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_progress_cluster FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_cluster TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_cluster TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_cluster TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_cluster TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_cluster TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_progress_copy; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_progress_copy FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_copy TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_copy TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_copy TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_copy TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_copy TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_progress_create_index; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_progress_create_index FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_create_index TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_create_index TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_create_index TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_create_index TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_create_index TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_progress_vacuum; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_progress_vacuum FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_vacuum TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_vacuum TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_vacuum TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_vacuum TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_progress_vacuum TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_recovery_prefetch; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_recovery_prefetch FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_recovery_prefetch TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_recovery_prefetch TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_recovery_prefetch TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_recovery_prefetch TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_recovery_prefetch TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_replication; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_replication FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_replication_slots; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_replication_slots FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication_slots TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication_slots TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication_slots TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication_slots TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_replication_slots TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_slru; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_slru FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_slru TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_slru TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_slru TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_slru TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_slru TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_subscription; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_subscription FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_subscription_stats; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_subscription_stats FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription_stats TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription_stats TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription_stats TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription_stats TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_subscription_stats TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_sys_indexes; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_sys_indexes FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_indexes TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_indexes TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_indexes TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_indexes TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_indexes TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_sys_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_sys_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_sys_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_user_functions; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_user_functions FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_functions TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_functions TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_functions TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_functions TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_functions TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_user_indexes; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_user_indexes FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_indexes TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_indexes TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_indexes TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_indexes TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_indexes TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_user_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_user_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_user_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_wal; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_wal FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_wal_receiver; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_wal_receiver FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal_receiver TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal_receiver TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal_receiver TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal_receiver TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_wal_receiver TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_xact_all_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_xact_all_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_all_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_all_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_all_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_all_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_all_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_xact_sys_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_xact_sys_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_sys_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_sys_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_sys_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_sys_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_sys_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_xact_user_functions; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_xact_user_functions FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_functions TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_functions TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_functions TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_functions TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_functions TO pg_read_all_stats;


--
-- Name: TABLE pg_stat_xact_user_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_stat_xact_user_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_stat_xact_user_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_all_indexes; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_all_indexes FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_indexes TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_indexes TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_indexes TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_indexes TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_indexes TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_all_sequences; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_all_sequences FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_sequences TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_sequences TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_sequences TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_sequences TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_sequences TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_all_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_all_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_all_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_sys_indexes; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_sys_indexes FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_indexes TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_indexes TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_indexes TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_indexes TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_indexes TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_sys_sequences; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_sys_sequences FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_sequences TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_sequences TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_sequences TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_sequences TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_sequences TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_sys_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_sys_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_sys_tables TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_user_indexes; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_user_indexes FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_indexes TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_indexes TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_indexes TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_indexes TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_indexes TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_user_sequences; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_user_sequences FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_sequences TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_sequences TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_sequences TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_sequences TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_sequences TO pg_read_all_stats;


--
-- Name: TABLE pg_statio_user_tables; Type: ACL; Schema: pg_catalog; Owner: -
--

REVOKE SELECT ON TABLE pg_catalog.pg_statio_user_tables FROM PUBLIC;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_tables TO billing_api;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_tables TO billing_writer;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_tables TO billing_worker;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_tables TO billing_app;
GRANT SELECT ON TABLE pg_catalog.pg_statio_user_tables TO pg_read_all_stats;


--
-- Name: DEFAULT PRIVILEGES FOR TABLES; Type: DEFAULT ACL; Schema: billing; Owner: -
--

ALTER DEFAULT PRIVILEGES FOR ROLE postgres IN SCHEMA billing GRANT SELECT ON TABLES  TO billing_operator;


--
-- Name: DEFAULT PRIVILEGES FOR FUNCTIONS; Type: DEFAULT ACL; Schema: -; Owner: -
--

ALTER DEFAULT PRIVILEGES FOR ROLE postgres REVOKE ALL ON FUNCTIONS  FROM PUBLIC;


--
-- PostgreSQL database dump complete
--


