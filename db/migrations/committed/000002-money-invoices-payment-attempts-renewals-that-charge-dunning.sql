--! Previous: sha1:bb55f292c40b9a5014dc35afe1136aabf3674715
--! Hash: sha1:bbbe424b3aec378da066e2da1a77139c901e8729
--! Message: money: invoices, payment attempts, renewals that charge, dunning, paid upgrades

--! split: 1-current.sql
-- Money (issue 11): invoices and payment attempts, renewals that charge, failed
-- payments and dunning, upgrades paid before they grant, discounts on every invoice,
-- Stripe invoices mirrored. Each changed domain fixture is included again (fixtures are
-- idempotent; see docs/development.md), the new one (46-invoices) in its place.
--! Included 10-tenancy.sql
-- Tenancy: communities, their time, API keys, and the API's door into the database.
-- One call (billing.api_call) authenticates the key, takes a rate token, sets the
-- community and scopes transaction-locally and (for SQL operations) runs the
-- operation: one round trip per request. Rate buckets and idempotency records are in
-- 85-idempotency-and-limits.sql.

-- ---- communities ------------------------------------------------------------------

create table if not exists billing.communities (
  id text collate "C" primary key default billing.gen_id('com'),
  name text not null check (length(name) between 1 and 200),
  payment_provider text check (payment_provider in ('sandbox', 'stripe')),
  payment_config jsonb not null default '{}',
  clock_offset interval not null default '0',
  created_at timestamptz not null default now()
);
alter table billing.communities enable row level security;
alter table billing.communities force row level security;
drop policy if exists tenant on billing.communities;
create policy tenant on billing.communities
  using (id = (select billing.current_community_id()))
  with check (id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.communities;
create policy owner_access on billing.communities to current_user using (true) with check (true);
grant select on billing.communities to billing_api;
grant update (clock_offset) on billing.communities to billing_api;

-- ---- dunning settings (per community) -----------------------------------------------

-- retry_days: days after the failed renewal (the invoice's due time) on which the
-- payment is retried, ascending, 1 to 28 (a retry never reaches the next period end
-- of a monthly plan); final_action: what happens when the last retry fails.
create or replace function billing.dunning_valid(p jsonb) returns boolean
  language sql immutable parallel safe
as $$
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
$$;

alter table billing.communities add column if not exists dunning jsonb not null
  default '{"retry_days": [1, 3, 5], "final_action": "cancel"}';
alter table billing.communities drop constraint if exists communities_dunning_valid;
alter table billing.communities add constraint communities_dunning_valid check (billing.dunning_valid(dunning));
-- The API role may update a community row (its test clock): the check runs with its rights.
grant execute on function billing.dunning_valid(jsonb) to billing_api;


-- The time every rule reads: the community's sandbox test clock, or the real time.
create or replace function billing.now() returns timestamptz
  language sql stable parallel safe
as $$
  select now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = billing.current_community_id()),
    '0'::interval)
$$;

-- A community's time (its sandbox clock) for code that runs outside that community's
-- request, such as triggers fired by the owner or a sweep over many communities.
create or replace function billing.community_now(p_community_id text) returns timestamptz
  language sql stable parallel safe
as $$
  select now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = p_community_id), '0'::interval)
$$;

-- ---- API keys (owner only) ----------------------------------------------------------

create table if not exists billing_private.api_keys (
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
create unique index if not exists api_keys_hash on billing_private.api_keys (key_hash);
create unique index if not exists api_keys_id on billing_private.api_keys (id);
alter table billing_private.api_keys enable row level security;
alter table billing_private.api_keys force row level security;
drop policy if exists owner_only on billing_private.api_keys;
create policy owner_only on billing_private.api_keys using (true);

-- ---- authentication ------------------------------------------------------------------

-- Looks a key up by its hash (owner rights: keys are private) and takes a token
-- from the key's bucket, or from the client IP's bucket when the key is missing,
-- unknown or revoked.
create or replace function billing_private.authenticate(p_key_hash text, p_ip text, p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key_id text;
  v_community_id text;
  v_scopes text[];
  v_rl jsonb;
begin
  if p_key_hash is not null then
    select k.id, k.community_id, k.scopes into v_key_id, v_community_id, v_scopes
    from billing_private.api_keys k
    where k.key_hash = p_key_hash and k.revoked_at is null;
  end if;
  if v_key_id is null then
    v_rl := billing_private.take_token('ip:' || coalesce(p_ip, '?'),
      coalesce((p_limits->>'ip_per_minute')::float8, 20), coalesce((p_limits->>'ip_burst')::float8, 10));
    return jsonb_build_object('ok', false,
      'error', case when (v_rl->>'allowed')::boolean then 'unauthorized' else 'rate_limited' end,
      'rl', v_rl);
  end if;
  v_rl := billing_private.take_token('key:' || v_key_id,
    coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
  if not (v_rl->>'allowed')::boolean then
    return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
  end if;
  return jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
    'scopes', to_jsonb(v_scopes), 'rl', v_rl);
end
$$;

create or replace function billing.api_auth(p_key_hash text, p_ip text, p_limits jsonb)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb := billing_private.authenticate(p_key_hash, p_ip, p_limits);
begin
  if (v_auth->>'ok')::boolean then
    perform set_config('app.community_id', v_auth->>'community_id', true);
    perform set_config('app.key_id', v_auth->>'key_id', true);
    perform set_config('app.scopes',
      array_to_string(array(select jsonb_array_elements_text(v_auth->'scopes')), ' '), true);
  end if;
  return v_auth;
end
$$;

-- Deferred token (read-API speed): for non-idempotent SQL operations billing.api_call
-- takes the key's token AFTER running the operation, so the bucket row is locked only
-- from that update to commit instead of for the whole operation (with the token first,
-- every request of one key queued behind the previous one's operation). A bucket that
-- is already empty still answers 429 before anything runs.
create or replace function billing_private.authenticate_deferred(p_key_hash text, p_ip text, p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key_id text;
  v_community_id text;
  v_scopes text[];
  v_available boolean;
begin
  if p_key_hash is not null then
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
    where k.key_hash = p_key_hash and k.revoked_at is null;
  end if;
  if v_key_id is null then
    return billing_private.authenticate(null, p_ip, p_limits);
  end if;
  return jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
    'scopes', to_jsonb(v_scopes), 'token_available', coalesce(v_available, true));
end
$$;

-- Takes a token from the bucket of the transaction's key (set by billing.api_call).
create or replace function billing_private.take_key_token(p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return billing_private.take_token('key:' || current_setting('app.key_id'),
    coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
end
$$;

create or replace function billing.api_call_deferred(p_key_hash text, p_ip text, p_limits jsonb,
  p_scope text, p_op text, p_args jsonb)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb := billing_private.authenticate_deferred(p_key_hash, p_ip, p_limits);
  v_rl jsonb;
  v_out jsonb;
  v_state text;
  v_msg text;
  v_detail text;
begin
  if not (v_auth->>'ok')::boolean then
    return v_auth;
  end if;
  perform set_config('app.community_id', v_auth->>'community_id', true);
  perform set_config('app.key_id', v_auth->>'key_id', true);
  perform set_config('app.scopes', array_to_string(array(select jsonb_array_elements_text(v_auth->'scopes')), ' '), true);
  if not (v_auth->>'token_available')::boolean then
    v_rl := billing_private.take_key_token(p_limits);
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
  end if;
  v_auth := v_auth - 'token_available';
  if p_scope is not null and not (p_scope = any (billing.current_scopes())) then
    v_rl := coalesce(v_rl, billing_private.take_key_token(p_limits));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  begin
    execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
    if v_rl is null then
      v_rl := billing_private.take_key_token(p_limits);
      if not (v_rl->>'allowed')::boolean then
        raise exception using errcode = 'BL429', message = 'rate limited';  -- undoes the operation's writes
      end if;
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'result', v_out);
  exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
    if v_state = 'BL429' and v_rl is not null and not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    if v_state not like 'BL%' then
      raise;
    end if;
    v_rl := coalesce(v_rl, billing_private.take_key_token(p_limits));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'error', jsonb_build_object('sqlstate', v_state,
      'message', v_msg, 'detail', nullif(v_detail, '')));
  end;
end
$$;

-- One round trip for SQL operations: authenticate, then run billing_api.<op>(args).
-- An error of the operation is returned as a value (its writes rolled back) so the
-- rate token stays taken and the idempotency record can keep the answer.
create or replace function billing.api_call(p_key_hash text, p_ip text, p_limits jsonb,
  p_scope text, p_op text, p_args jsonb, p_idem jsonb default null)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb;
  v_out jsonb;
  v_replay jsonb;
  v_state text;
  v_msg text;
  v_detail text;
begin
  if p_op is not null and p_idem is null then
    return billing.api_call_deferred(p_key_hash, p_ip, p_limits, p_scope, p_op, p_args);
  end if;
  v_auth := billing.api_auth(p_key_hash, p_ip, p_limits);
  if not (v_auth->>'ok')::boolean then
    return v_auth;
  end if;
  if p_scope is not null and not (p_scope = any (billing.current_scopes())) then
    return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  if p_op is null then
    return v_auth;
  end if;
  if p_idem is null then
    begin
      execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
      return v_auth || jsonb_build_object('result', v_out);
    exception when others then
      get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
      if v_state not like 'BL%' then
        raise;
      end if;
      return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
        'detail', nullif(v_detail, '')));
    end;
  end if;
  begin
    if p_idem is not null then
      v_replay := billing.idempotency_begin(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash');
      if v_replay is not null then
        return v_auth || jsonb_build_object('replayed', true) || (v_replay->'body');
      end if;
    end if;
    begin
      execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
      v_out := jsonb_build_object('result', v_out);
    exception when others then
      get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
      if v_state not like 'BL%' then
        raise;
      end if;
      v_out := jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
        'detail', nullif(v_detail, '')));
    end;
    if p_idem is not null then
      perform billing.idempotency_finish(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash', 0, v_out);
    end if;
  exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
    if v_state not like 'BL%' then
      raise;
    end if;
    return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
      'detail', nullif(v_detail, '')));
  end;
  return v_auth || v_out;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.api_auth(text,text,jsonb) to billing_api;
grant execute on function billing.api_call(text,text,jsonb,text,text,jsonb,jsonb) to billing_api;
grant execute on function billing.api_call_deferred(text,text,jsonb,text,text,jsonb) to billing_api;
grant execute on function billing.community_now(text) to billing_api;
grant execute on function billing.now() to billing_api;
grant execute on function billing_private.authenticate(text,text,jsonb) to billing_api;
grant execute on function billing_private.authenticate_deferred(text,text,jsonb) to billing_api;
grant execute on function billing_private.take_key_token(jsonb) to billing_api;
--! EndIncluded 10-tenancy.sql
--! Included 40-subscriptions.sql
-- Subscriptions: the table, the subscription JSON object (API and events), its
-- outbox-and-ledger trigger, the read API, the lifecycle (the spec's states table:
-- cancel at period end, reactivate, switch options, switch, cancel a scheduled
-- switch), time (period ends, the sandbox test clock) and Stripe subscription state.
--
-- The lifecycle billing_api functions return the subscription's JSON plus "_provider"
-- facts (provider, provider_ref, ...) that the handler uses for the provider call and
-- strips.

create table if not exists billing.subscriptions (
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
  provider_customer_ref text,
  provider_schedule_ref text,
  -- Proration of the last immediate switch: credit for the unused time of the old plan
  -- and charge for the rest of the period on the new one (minor units).
  proration_credit_cents integer,
  proration_charge_cents integer,
  prorated_at timestamptz,
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict,
  foreign key (community_id, scheduled_plan_id) references billing.plans on delete set null (scheduled_plan_id)
);
-- Money (46-invoices.sql): the billing anchor every period end counts from, the
-- discount the subscription keeps, why it ended, when a cancel was asked for (by the
-- community's clock) and credit from plan changes that pays later renewals.
alter table billing.subscriptions add column if not exists billing_anchor timestamptz;
alter table billing.subscriptions add column if not exists discount_id uuid;
alter table billing.subscriptions add column if not exists cancellation_reason text;
alter table billing.subscriptions add column if not exists cancel_requested_at timestamptz;
alter table billing.subscriptions add column if not exists credit_cents bigint not null default 0;
alter table billing.subscriptions drop constraint if exists subscriptions_cancellation_reason_check;
alter table billing.subscriptions add constraint subscriptions_cancellation_reason_check
  check (cancellation_reason in ('cancellation_requested', 'payment_failed'));
alter table billing.subscriptions drop constraint if exists subscriptions_credit_cents_check;
alter table billing.subscriptions add constraint subscriptions_credit_cents_check check (credit_cents >= 0);
comment on column billing.subscriptions.billing_anchor is
  'Start of the first paid period; every period end is billing_anchor + n intervals (31 Jan -> 28 Feb -> 31 Mar), as Stripe keeps its billing cycle anchor.'
;
create index if not exists subscriptions_member on billing.subscriptions (community_id, member_id);
create index if not exists subscriptions_status on billing.subscriptions (community_id, status, id);
create index if not exists subscriptions_plan on billing.subscriptions (community_id, plan_id, id);
create index if not exists subscriptions_period_end on billing.subscriptions (current_period_end) where status in ('active', 'trialing', 'past_due', 'cancelling');
create unique index if not exists subscriptions_provider_ref on billing.subscriptions (community_id, provider_ref) where provider_ref is not null;
alter table billing.subscriptions enable row level security;
alter table billing.subscriptions force row level security;
drop policy if exists tenant on billing.subscriptions;
create policy tenant on billing.subscriptions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.subscriptions;
create policy owner_access on billing.subscriptions to current_user using (true) with check (true);
grant select, insert, update, delete on billing.subscriptions to billing_api;

-- ---- the subscription object ---------------------------------------------------------

-- Subscription: amount, currency and interval come from the CURRENT plan.
-- The three-argument form is a plain expression (PostgreSQL inlines it), for lists
-- that join plans and tiers once; the one-argument form looks them up.
create or replace function billing.subscription_json(p_sub billing.subscriptions, p_plan billing.plans,
  p_tier billing.tiers) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_sub.id,
    'status', p_sub.status,
    'plan_id', p_sub.plan_id,
    'plan_name', p_plan.name,
    'tier_id', p_plan.tier_id,
    'tier_name', p_tier.name,
    'member_id', p_sub.member_id,
    'amount_cents', p_plan.amount_cents,
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

create or replace function billing.subscription_json(p_sub billing.subscriptions) returns jsonb
  language sql stable parallel safe
as $$
  select billing.subscription_json(p_sub, p, t)
  from (select 1) one
  left join billing.plans p on p.community_id = p_sub.community_id and p.id = p_sub.plan_id
  left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
$$;

-- The subscription of events: the API object plus client_reference_id.
-- plpgsql (not sql) so its plans are cached: it runs twice per subscription change.
create or replace function billing.subscription_event_json(p_sub billing.subscriptions) returns jsonb
  language plpgsql stable
as $$
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

-- ---- outbox and ledger -----------------------------------------------------------------

-- Writes the subscription's lifecycle event (60-events.sql), then refreshes the
-- member's ledger (50-ledger.sql) with that event's id as trigger_event_id, in the
-- statement's transaction.
create or replace function billing.tg_subscriptions__outbox_and_ledger() returns trigger
  language plpgsql
as $$
declare
  v_new jsonb;
  v_prev jsonb;
  v_type text;
  v_reason text;
  v_event_id text;
begin
  if tg_op = 'DELETE' then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, 'subscription_deleted', null);
    return null;
  end if;
  v_new := billing.subscription_event_json(new);
  if tg_op = 'INSERT' then
    v_type := 'subscription.created';
    v_reason := 'subscription_created';
    v_prev := null;
  else
    v_prev := billing.jsonb_changed(billing.subscription_event_json(old) - 'updated_at' - 'tier_name' - 'plan_name',
      v_new);
    if v_prev = '{}' then
      return null; -- nothing a consumer sees (nor a ledger source) changed
    end if;
    v_type := case when new.status = 'cancelled' and old.status <> 'cancelled'
      then 'subscription.cancelled' else 'subscription.updated' end;
    v_reason := case
      when new.status = 'cancelled' and new.cancellation_reason = 'payment_failed' then 'payment_failed'
      when new.plan_id <> old.plan_id then 'plan_changed'
      when new.status = old.status then 'subscription_updated'
      when new.status = 'cancelled' then 'subscription_ended'
      when new.status = 'paused' then 'subscription_paused'
      when new.status = 'cancelling' then 'subscription_cancelling'
      when new.status = 'past_due' then 'payment_failed'
      when old.status in ('cancelled', 'paused') then 'subscription_activated'
      else 'subscription_updated' end;
  end if;
  v_event_id := billing.emit_event(new.community_id, v_type,
    jsonb_build_object('subscription', v_new, 'previous_attributes', v_prev));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  if tg_op = 'UPDATE' and old.member_id <> new.member_id then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.subscriptions;
create trigger _500_outbox_and_ledger after insert or update or delete on billing.subscriptions
  for each row execute function billing.tg_subscriptions__outbox_and_ledger();

-- ---- read API ----------------------------------------------------------------------------

-- Filters are added from fixed fragments (values always bound), so each call is planned
-- for the filters it has and uses the matching index.
create or replace function billing_api.subscriptions_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_where text := '';
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('subscriptions:read');
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
$$;

create or replace function billing_api.subscriptions_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:read');
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || (p_args->>'id') || '.');
  end if;
  return billing.subscription_json(v_sub);
end
$$;

-- ---- lifecycle ---------------------------------------------------------------------------

create or replace function billing.lock_subscription(p_id text) returns billing.subscriptions
  language plpgsql volatile
as $$
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

create or replace function billing.subscription_provider(p_sub billing.subscriptions) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('provider', p_sub.provider, 'provider_ref', p_sub.provider_ref,
    'plan_id', p_sub.plan_id, 'stripe_price_id', (select p.stripe_price_id from billing.plans p
      where p.community_id = p_sub.community_id and p.id = p_sub.plan_id),
    'current_period_end', billing.iso(p_sub.current_period_end))
$$;

-- Cancel at period end. Allowed from active, trialing, past_due and paused; a repeat
-- on a cancelling subscription changes nothing ("changed": false: no provider call).
-- A scheduled switch is dropped: a cancelling subscription renews into nothing.
create or replace function billing_api.subscription_cancel(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status = 'cancelling' then
    return jsonb_build_object('status', 'cancelling', '_changed', false, '_provider', billing.subscription_provider(v_sub));
  elsif v_sub.status = 'cancelled' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is already cancelled.');
  end if;
  update billing.subscriptions s set status = 'cancelling', cancel_at = s.current_period_end,
    scheduled_plan_id = null, scheduled_at = null, cancel_requested_at = billing.now(),
    cancellation_reason = 'cancellation_requested', updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id
  returning * into v_sub;
  return jsonb_build_object('status', 'cancelling', '_changed', true, '_provider', billing.subscription_provider(v_sub));
end
$$;

create or replace function billing_api.subscription_reactivate(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status <> 'cancelling' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not cancelling: nothing to reactivate.');
  end if;
  update billing.subscriptions s set
    status = case when s.trial_end is not null and s.trial_end > billing.now() then 'trialing' else 'active' end,
    cancel_at = null, cancel_requested_at = null, cancellation_reason = null, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id
  returning * into v_sub;
  return billing.subscription_json(v_sub) || jsonb_build_object('_provider', billing.subscription_provider(v_sub));
end
$$;

-- Options by tier rank: other active plans of the same tier, and active recurring
-- plans of other active subscription tiers (higher rank: upgrades; lower: downgrades;
-- equal rank: listed with upgrades, applied immediately).
create or replace function billing.switch_options(p_sub billing.subscriptions) returns jsonb
  language sql stable
as $$
  with cur as (
    select t.id as tier_id, t.rank, p.currency from billing.plans p
    join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    where p.community_id = p_sub.community_id and p.id = p_sub.plan_id),
  opts as (
    select jsonb_build_object('plan_id', p.id, 'plan_name', p.name, 'tier_id', p.tier_id,
             'amount_cents', p.amount_cents, 'currency', p.currency, 'interval', p.interval,
             'trial_days', p.trial_days) as j,
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

create or replace function billing.require_switchable(p_sub billing.subscriptions) returns void
  language plpgsql stable
as $$
begin
  if p_sub.status not in ('active', 'trialing') then
    perform billing.raise('BL409', 'Subscription ' || p_sub.id || ' is ' || p_sub.status
      || ': only active or trialing subscriptions can switch plans.');
  end if;
end
$$;

create or replace function billing_api.subscription_switch_options(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:read');
  select * into v_sub from billing.subscriptions s where s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || (p_args->>'id') || '.');
  end if;
  perform billing.require_switchable(v_sub);
  return billing.switch_options(v_sub);
end
$$;

-- Same tier or upgrade: applies now; the period is kept and the proration recorded
-- (credit for the unused time of the old plan, charge for the same time on the new
-- one; nothing while trialing). Downgrade: scheduled for the period end.
-- A plan that is not among the switch options answers 422 invalid_request (plan_id).
create or replace function billing_api.subscription_switch(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_grp text;
  v_old billing.plans;
  v_new billing.plans;
  v_prov jsonb;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  perform billing.require_switchable(v_sub);
  select g into v_grp from jsonb_each(billing.switch_options(v_sub)) e(g, arr), jsonb_array_elements(arr) o
  where o->>'plan_id' = p_args->>'plan_id';
  if v_grp is null then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_args->>'plan_id', '') || ' is not among this subscription''s switch options.', 'plan_id');
  end if;
  v_prov := billing.subscription_provider(v_sub);
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_args->>'plan_id';
  if v_grp = 'downgrades' then
    update billing.subscriptions s set scheduled_plan_id = v_new.id, scheduled_at = s.current_period_end, updated_at = now()
    where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  else
    v_sub := billing_private.subscription_switch_now(v_sub.id, v_new.id);
  end if;
  return billing.subscription_json(v_sub) || jsonb_build_object('_provider', v_prov || jsonb_build_object(
    'kind', case when v_grp = 'downgrades' then 'scheduled' else 'immediate' end,
    'new_plan_id', v_new.id, 'new_stripe_price_id', v_new.stripe_price_id, 'old_stripe_price_id', v_old.stripe_price_id));
end
$$;

create or replace function billing_api.subscription_cancel_scheduled_switch(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.scheduled_plan_id is null then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' has no scheduled switch.');
  end if;
  update billing.subscriptions s set scheduled_plan_id = null, scheduled_at = null, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return billing.subscription_json(v_sub) || jsonb_build_object('_provider', billing.subscription_provider(v_sub));
end
$$;

-- ---- time ------------------------------------------------------------------------------

-- Applies everything due in one community at billing.now(): open checkouts expire;
-- sandbox subscriptions whose period ended move on (cancelling -> cancelled; trialing
-- -> active at trial end; active renews for a new period, first taking a scheduled
-- switch), repeatedly until their period end is in the future; then the ledger sweep
-- re-evaluates access that lapsed by time (purchase expiry). Stripe subscriptions are
-- moved by Stripe's webhooks, not here. Owner only: it sets the community itself.
create or replace function billing.apply_due(p_community_id text) returns jsonb
  language plpgsql volatile
as $$
declare
  v_now timestamptz;
  v_id text;
  v_n integer := 0;
  v_expired integer;
begin
  perform set_config('app.community_id', p_community_id, true);
  v_now := billing.now();
  v_expired := billing.expire_checkouts();
  for v_id in
    select s.id from billing.subscriptions s
    where s.community_id = p_community_id and s.provider = 'sandbox'
      and s.status in ('active', 'trialing', 'cancelling') and s.current_period_end <= v_now
    union
    select i.subscription_id from billing.invoices i
    where i.community_id = p_community_id and i.provider = 'sandbox' and i.status = 'open'
      and i.next_attempt_at <= v_now and i.subscription_id is not null
    order by 1
  loop
    v_n := v_n + billing.subscription_advance(v_id, v_now);
  end loop;
  perform billing.ledger_sweep(p_community_id);
  return jsonb_build_object('now', billing.iso(v_now), 'period_changes', v_n, 'expired_checkouts', v_expired);
end
$$;

-- The worker's periodic job: every community, one after the other.
create or replace function billing.apply_due_all() returns integer
  language plpgsql volatile
as $$
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


-- The sandbox test clock: moves a sandbox community's time forward and applies
-- everything that became due before returning.
create or replace function billing.sandbox_advance(p_community_id text, p_days numeric) returns jsonb
  language plpgsql volatile
as $$
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

-- ---- Stripe subscription state ----------------------------------------------------------

-- Applies a Stripe subscription object (already mapped to our terms by the adapter)
-- to the subscription it names. Older state never overwrites newer: a change whose
-- provider time is before provider_updated_at is ignored. Returns the subscription id,
-- or null when no subscription has that provider_ref yet.
create or replace function billing.apply_provider_subscription(p_state jsonb) returns text
  language plpgsql volatile
as $$
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
    -- A scheduled switch is done once Stripe reports the new plan (its schedule moved on).
    scheduled_plan_id = case when v_plan is not null and v_plan = s.scheduled_plan_id then null else s.scheduled_plan_id end,
    scheduled_at = case when v_plan is not null and v_plan = s.scheduled_plan_id then null else s.scheduled_at end,
    provider_customer_ref = coalesce(p_state->>'customer_ref', s.provider_customer_ref),
    provider_updated_at = greatest(v_at, s.provider_updated_at),
    updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id;
  return v_sub.id;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.lock_subscription(text) to billing_api;
grant execute on function billing.require_switchable(billing.subscriptions) to billing_api;
grant execute on function billing.subscription_event_json(billing.subscriptions) to billing_api;
grant execute on function billing.subscription_json(billing.subscriptions) to billing_api;
grant execute on function billing.subscription_json(billing.subscriptions,billing.plans,billing.tiers) to billing_api;
grant execute on function billing.subscription_provider(billing.subscriptions) to billing_api;
grant execute on function billing.switch_options(billing.subscriptions) to billing_api;
grant execute on function billing_api.subscriptions_list(jsonb) to billing_api;
grant execute on function billing_api.subscriptions_get(jsonb) to billing_api;
grant execute on function billing_api.subscription_cancel(jsonb) to billing_api;
grant execute on function billing_api.subscription_reactivate(jsonb) to billing_api;
grant execute on function billing_api.subscription_switch_options(jsonb) to billing_api;
grant execute on function billing_api.subscription_switch(jsonb) to billing_api;
grant execute on function billing_api.subscription_cancel_scheduled_switch(jsonb) to billing_api;
--! EndIncluded 40-subscriptions.sql
--! Included 46-invoices.sql
-- Money: invoices and payment attempts (every charge is an invoice: checkout,
-- trial start, renewal, plan change, one-time purchase; every attempt to collect it
-- is a payment attempt), the sandbox's cards, renewals and dunning retries, immediate
-- plan changes paid before they apply, and Stripe invoices mirrored from invoice.*
-- events. The sums are CHECK constraints on the invoice row (its lines are a jsonb
-- array validated by billing.invoice_lines_valid), a finalized invoice is immutable,
-- and a unique index lets an invoice be paid once.
--
-- Access follows money (50-ledger.sql): a past_due subscription grants only while one
-- of its open invoices still has a retry scheduled (billing.subscription_retry_open);
-- the last failed retry ends the subscription (cancellation_reason payment_failed)
-- and the ledger revokes with reason payment_failed.

-- ---- invoices ---------------------------------------------------------------------------

-- Lines: [{type, description, amount_cents, period_start, period_end, plan_id?}].
-- plan lines charge (>= 0), discount lines credit (<= 0), proration lines either way.
create or replace function billing.invoice_lines_valid(p_lines jsonb) returns boolean
  language sql immutable parallel safe
as $$
  select jsonb_typeof(p_lines) = 'array'
    and not exists (
      select 1 from jsonb_array_elements(p_lines) l
      where jsonb_typeof(l) <> 'object'
        or l->>'type' is null or l->>'type' not in ('plan', 'proration', 'discount')
        or jsonb_typeof(l->'description') <> 'string' or length(l->>'description') = 0
        or jsonb_typeof(l->'amount_cents') <> 'number' or (l->>'amount_cents') !~ '^-?[0-9]+$'
        or (l->>'type' = 'plan' and (l->>'amount_cents')::bigint < 0)
        or (l->>'type' = 'discount' and (l->>'amount_cents')::bigint > 0))
$$;

-- Sum of the lines of the given kinds (all when p_types is null).
create or replace function billing.invoice_lines_sum(p_lines jsonb, p_types text[]) returns bigint
  language sql immutable parallel safe
as $$
  select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
  from jsonb_array_elements(p_lines) l
  where p_types is null or l->>'type' = any (p_types)
$$;

create table if not exists billing.invoices (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('inv'),
  member_id text collate "C" not null,
  subscription_id text collate "C",
  purchase_id text collate "C",
  checkout_id text collate "C",
  status text not null check (status in ('draft', 'open', 'paid', 'void', 'uncollectible')),
  billing_reason text not null
    check (billing_reason in ('subscription_create', 'subscription_cycle', 'subscription_update', 'purchase')),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  lines jsonb not null default '[]' check (billing.invoice_lines_valid(lines)),
  subtotal_cents bigint not null,
  discount_cents bigint not null check (discount_cents >= 0),
  total_cents bigint not null check (total_cents >= 0),
  amount_paid_cents bigint not null default 0 check (amount_paid_cents >= 0),
  amount_refunded_cents bigint not null default 0 check (amount_refunded_cents >= 0),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  next_attempt_at timestamptz,
  period_start timestamptz,
  period_end timestamptz,
  paid_at timestamptz,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  provider_updated_at timestamptz,
  created_at timestamptz not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, subscription_id) references billing.subscriptions on delete cascade,
  foreign key (community_id, purchase_id) references billing.purchases on delete cascade,
  -- What it is for: one subscription or one purchase.
  constraint invoices_one_owner check (num_nonnulls(subscription_id, purchase_id) = 1),
  -- The sums: lines add up to the subtotal, the discount and the total.
  constraint invoices_subtotal_is_lines check (subtotal_cents = billing.invoice_lines_sum(lines, array['plan', 'proration'])),
  constraint invoices_discount_is_lines check (discount_cents = -billing.invoice_lines_sum(lines, array['discount'])),
  constraint invoices_total check (total_cents = subtotal_cents - discount_cents),
  -- Paid means paid in full, once, at a time; nothing else has money on it.
  constraint invoices_paid_in_full check ((status = 'paid') = (paid_at is not null)
    and (status = 'paid' or amount_paid_cents = 0)
    and (status <> 'paid' or amount_paid_cents = total_cents)),
  constraint invoices_refund_at_most_paid check (amount_refunded_cents <= amount_paid_cents),
  -- Only an open invoice is retried.
  constraint invoices_retry_only_open check (next_attempt_at is null or status = 'open'),
  constraint invoices_period check (period_end is null or period_start <= period_end)
);
create index if not exists invoices_member on billing.invoices (community_id, member_id, id);
create index if not exists invoices_subscription on billing.invoices (community_id, subscription_id, id);
create index if not exists invoices_status on billing.invoices (community_id, status, id);
create index if not exists invoices_retry on billing.invoices (community_id, next_attempt_at)
  where status = 'open' and next_attempt_at is not null;
create unique index if not exists invoices_provider_ref on billing.invoices (community_id, provider_ref)
  where provider_ref is not null;

alter table billing.invoices enable row level security;
alter table billing.invoices force row level security;
drop policy if exists tenant on billing.invoices;
create policy tenant on billing.invoices
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.invoices;
create policy owner_access on billing.invoices to current_user using (true) with check (true);
grant select on billing.invoices to billing_api;

-- A finalized invoice keeps its amounts and lines (Stripe: finalized invoices are
-- immutable); a paid, void or uncollectible one never returns to open.
create or replace function billing.tg_invoices__immutable() returns trigger
  language plpgsql
as $$
begin
  if old.status <> 'draft' and (new.lines is distinct from old.lines or new.subtotal_cents <> old.subtotal_cents
      or new.discount_cents <> old.discount_cents or new.total_cents <> old.total_cents
      or new.currency <> old.currency or new.member_id <> old.member_id
      or new.subscription_id is distinct from old.subscription_id or new.purchase_id is distinct from old.purchase_id) then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is finalized: its lines and amounts cannot change.';
  end if;
  if old.status in ('paid', 'void', 'uncollectible') and new.status <> old.status then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is ' || old.status || ' and cannot become ' || new.status || '.';
  end if;
  new.updated_at := now();
  return new;
end
$$;
drop trigger if exists _100_immutable on billing.invoices;
create trigger _100_immutable before update on billing.invoices
  for each row execute function billing.tg_invoices__immutable();

-- ---- payment attempts ------------------------------------------------------------------

create table if not exists billing.payment_attempts (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pay'),
  invoice_id text collate "C" not null,
  status text not null check (status in ('succeeded', 'failed')),
  amount_cents bigint not null check (amount_cents >= 0),
  failure_message text,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  attempted_at timestamptz not null,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade,
  constraint payment_attempts_failure_explained check ((status = 'failed') = (failure_message is not null))
);
-- Nothing is paid twice: one succeeded attempt per invoice.
create unique index if not exists payment_attempts_one_success on billing.payment_attempts (community_id, invoice_id)
  where status = 'succeeded';
create index if not exists payment_attempts_invoice on billing.payment_attempts (community_id, invoice_id, id);

alter table billing.payment_attempts enable row level security;
alter table billing.payment_attempts force row level security;
drop policy if exists tenant on billing.payment_attempts;
create policy tenant on billing.payment_attempts
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.payment_attempts;
create policy owner_access on billing.payment_attempts to current_user using (true) with check (true);
grant select on billing.payment_attempts to billing_api;

-- ---- the sandbox's cards -----------------------------------------------------------------

-- Whether a sandbox subscription's future charges decline (billing sandbox decline /
-- accept); no row: they succeed.
create table if not exists billing.sandbox_cards (
  community_id text collate "C" not null,
  subscription_id text collate "C" not null,
  declines boolean not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, subscription_id),
  foreign key (community_id, subscription_id) references billing.subscriptions on delete cascade
);
alter table billing.sandbox_cards enable row level security;
alter table billing.sandbox_cards force row level security;
drop policy if exists tenant on billing.sandbox_cards;
create policy tenant on billing.sandbox_cards
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.sandbox_cards;
create policy owner_access on billing.sandbox_cards to current_user using (true) with check (true);
grant select on billing.sandbox_cards to billing_api;

-- ---- JSON --------------------------------------------------------------------------------

create or replace function billing.invoice_json(p_inv billing.invoices) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_inv.id,
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
    'created_at', billing.iso(p_inv.created_at))
$$;

-- ---- events and the ledger ------------------------------------------------------------------

-- invoice.created when it is written; invoice.paid when it becomes paid;
-- invoice.payment_failed for each failed attempt. A change of a subscription's open
-- invoice (paid, retry scheduled or given up) can change its access: the member's
-- ledger is refreshed with the event as trigger.
create or replace function billing.tg_invoices__outbox_and_ledger() returns trigger
  language plpgsql
as $$
declare
  v_type text;
  v_event_id text;
  v_reason text;
begin
  if tg_op = 'INSERT' then
    v_type := 'invoice.created';
  elsif new.status = 'paid' and old.status <> 'paid' then
    v_type := 'invoice.paid';
  elsif new.attempt_count > old.attempt_count and new.status <> 'paid' then
    v_type := 'invoice.payment_failed';
  end if;
  if v_type is not null then
    v_event_id := billing.emit_event(new.community_id, v_type, jsonb_build_object(
      'invoice', billing.invoice_json(new),
      'previous_attributes', case when tg_op = 'UPDATE' then billing.jsonb_changed(
        billing.invoice_json(old) - 'lines', billing.invoice_json(new)) end));
  end if;
  -- Only a past_due subscription's access depends on its invoices (sandbox dunning
  -- changes the subscription itself first; this serves mirrored Stripe invoices).
  if new.subscription_id is not null and (tg_op = 'INSERT' or new.status <> old.status
      or new.next_attempt_at is distinct from old.next_attempt_at)
     and exists (select 1 from billing.subscriptions s where s.community_id = new.community_id
                 and s.id = new.subscription_id and s.status = 'past_due') then
    v_reason := case when new.status = 'paid' then 'invoice_paid'
                     when new.status = 'open' and new.next_attempt_at is not null then 'payment_retry_scheduled'
                     else 'payment_failed' end;
    perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;
drop trigger if exists _500_outbox_and_ledger on billing.invoices;
create trigger _500_outbox_and_ledger after insert or update on billing.invoices
  for each row execute function billing.tg_invoices__outbox_and_ledger();

-- Which sources grant (the rule of 020-ledger, with money): a past_due subscription
-- only while one of its open invoices still has a retry scheduled.
create or replace function billing.subscription_retry_open(p_community_id text, p_subscription_id text) returns boolean
  language sql stable
as $$
  select exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is not null)
$$;
-- ---- writing and collecting invoices ------------------------------------------------------------

-- Periods keep the billing anchor: the end of the period after p_end is the first
-- anchor + n intervals later than p_end (31 Jan + 1 month = 28 Feb, + 2 months = 31 Mar).
create or replace function billing.next_period_end(p_anchor timestamptz, p_interval text, p_end timestamptz)
  returns timestamptz language plpgsql stable
as $$
declare
  v_months integer := case p_interval when 'month' then 1 when 'year' then 12 end;
  v_n integer;
begin
  if v_months is null then
    return null;
  end if;
  v_n := greatest(1, ((extract(year from p_end at time zone 'UTC') - extract(year from p_anchor at time zone 'UTC')) * 12
    + extract(month from p_end at time zone 'UTC') - extract(month from p_anchor at time zone 'UTC'))::integer / v_months);
  while p_anchor + make_interval(months => v_months * v_n) > p_end and v_n > 1 loop
    v_n := v_n - 1;
  end loop;
  while p_anchor + make_interval(months => v_months * v_n) <= p_end loop
    v_n := v_n + 1;
  end loop;
  return p_anchor + make_interval(months => v_months * v_n);
end
$$;

create or replace function billing.plan_line(p_plan billing.plans, p_amount bigint, p_start timestamptz,
  p_end timestamptz, p_description text default null) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('type', 'plan',
    'description', coalesce(p_description, coalesce(t.name, 'Plan') || coalesce(' (' || p_plan.name || ')', '')
      || case p_plan.interval when 'month' then ', 1 month' when 'year' then ', 1 year' else '' end),
    'amount_cents', p_amount, 'plan_id', p_plan.id,
    'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
  from (select 1) one
  left join billing.tiers t on t.community_id = p_plan.community_id and t.id = p_plan.tier_id
$$;

create or replace function billing.discount_line(p_code text, p_amount bigint, p_start timestamptz, p_end timestamptz)
  returns jsonb language sql immutable
as $$
  select jsonb_build_object('type', 'discount', 'description', 'Discount ' || coalesce(p_code, ''),
    'amount_cents', -p_amount, 'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
$$;

-- The discount a subscription's discount code gives on an invoice for a period
-- starting at p_start: once on the first invoice that charges, repeating while the
-- period starts within duration_months of the subscription's start, forever always.
create or replace function billing.subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint,
  p_start timestamptz) returns bigint
  language plpgsql stable
as $$
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
      and p_start >= p_sub.created_at + make_interval(months => coalesce(v_d.duration_months, 1)) then
    return 0;
  end if;
  return least(p_amount, case v_d.value_type when 'percent' then round(p_amount * v_d.percent_off / 100)::bigint
                              else coalesce(v_d.amount_off_cents, 0) end);
end
$$;

-- Writes a finalized (open) invoice from its lines; the sums follow from the lines.
create or replace function billing.invoice_open(p_sub_id text, p_pur_id text, p_member_id text, p_reason text,
  p_currency text, p_lines jsonb, p_start timestamptz, p_end timestamptz, p_provider text, p_at timestamptz,
  p_checkout_id text default null, p_provider_ref text default null)
  returns billing.invoices language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_subtotal bigint := billing.invoice_lines_sum(p_lines, array['plan', 'proration']);
  v_discount bigint := -billing.invoice_lines_sum(p_lines, array['discount']);
begin
  insert into billing.invoices (community_id, member_id, subscription_id, purchase_id, checkout_id, status,
    billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, period_start, period_end,
    provider, provider_ref, created_at)
  values (billing.current_community_id(), p_member_id, p_sub_id, p_pur_id, p_checkout_id, 'open', p_reason,
    p_currency, p_lines, v_subtotal, v_discount, v_subtotal - v_discount, p_start, p_end, p_provider,
    p_provider_ref, p_at)
  returning * into v_inv;
  return v_inv;
end
$$;

-- Records a successful collection: the attempt, then the invoice paid in full.
create or replace function billing.invoice_mark_paid(p_inv billing.invoices, p_at timestamptz,
  p_provider_ref text default null) returns billing.invoices
  language plpgsql volatile
as $$
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

-- Records a failed collection and schedules the next retry (null: none left).
create or replace function billing.invoice_mark_failed(p_inv billing.invoices, p_at timestamptz,
  p_message text, p_next_attempt_at timestamptz) returns billing.invoices
  language plpgsql volatile
as $$
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

-- The sandbox's card for a subscription: true when the charge goes through.
create or replace function billing.sandbox_charge_succeeds(p_inv billing.invoices) returns boolean
  language sql stable
as $$
  select p_inv.total_cents = 0 or not coalesce((select c.declines from billing.sandbox_cards c
    where c.community_id = p_inv.community_id and c.subscription_id = p_inv.subscription_id), false)
$$;

-- When the retry after failed attempt number p_attempt is due (null: no retry left).
create or replace function billing.dunning_next_attempt(p_community_id text, p_due timestamptz, p_attempt integer)
  returns timestamptz language sql stable
as $$
  select p_due + make_interval(days => (c.dunning->'retry_days'->>(p_attempt - 1))::integer)
  from billing.communities c where c.id = p_community_id
$$;

-- Collects an open sandbox invoice at p_at: paid, or failed with the next retry
-- scheduled by the community's dunning settings. Returns the invoice.
create or replace function billing.sandbox_collect(p_inv billing.invoices, p_at timestamptz) returns billing.invoices
  language plpgsql volatile
as $$
begin
  if billing.sandbox_charge_succeeds(p_inv) then
    return billing.invoice_mark_paid(p_inv, p_at, 'sandbox_ch_' || substr(md5(p_inv.id || p_at::text), 1, 16));
  end if;
  return billing.invoice_mark_failed(p_inv, p_at, 'Your card was declined (sandbox).',
    billing.dunning_next_attempt(p_inv.community_id, p_inv.created_at, p_inv.attempt_count + 1));
end
$$;

-- ---- sandbox time: renewals and retries -------------------------------------------------------

-- Moves one sandbox subscription through everything due at p_now, in time order:
-- a cancelling one ends at its period end; an active or trialing one renews (the
-- period keeps its anchor; a scheduled switch applies) with an invoice collected at
create or replace function billing.subscription_advance(p_sub_id text, p_now timestamptz) returns integer
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_plan billing.plans;
  v_inv billing.invoices;
  v_at timestamptz;
  v_end timestamptz;
  v_anchor timestamptz;
  v_discount bigint;
  v_code text;
  v_lines jsonb;
  v_credit bigint;
  v_steps integer := 0;
begin
  loop
    select * into v_sub from billing.subscriptions s
    where s.community_id = billing.current_community_id() and s.id = p_sub_id for update;
    exit when v_sub.id is null or v_steps >= 1000;
    if v_sub.status = 'past_due' then
      select * into v_inv from billing.invoices i
      where i.community_id = v_sub.community_id and i.subscription_id = v_sub.id and i.status = 'open'
        and i.next_attempt_at is not null
      order by i.next_attempt_at limit 1 for update;
      exit when v_inv.id is null or v_inv.next_attempt_at > p_now;
      v_at := v_inv.next_attempt_at;
      -- The subscription changes first, so access never flickers: a paid retry makes
      -- it active before its invoice stops being retried; a last failed retry ends it
      -- (the ledger revokes with reason payment_failed) before the invoice is given up.
      if billing.sandbox_charge_succeeds(v_inv) then
        update billing.subscriptions s set status = 'active', updated_at = now()
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
    elsif v_sub.status in ('active', 'trialing', 'cancelling') and v_sub.current_period_end <= p_now then
      v_at := v_sub.current_period_end;
      if v_sub.status = 'cancelling' then
        update billing.subscriptions s set status = 'cancelled', cancelled_at = v_at, updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
      else
        select * into v_plan from billing.plans p
        where p.community_id = v_sub.community_id and p.id = coalesce(v_sub.scheduled_plan_id, v_sub.plan_id);
        -- A trial's end, or a scheduled switch to another interval, starts a new anchor.
        v_anchor := case when v_sub.status = 'trialing' or v_sub.billing_anchor is null
                           or v_plan.id <> v_sub.plan_id and v_plan.interval is distinct from
                             (select p.interval from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id)
                         then v_at else v_sub.billing_anchor end;
        v_end := billing.next_period_end(v_anchor, v_plan.interval, v_at);
        v_discount := billing.subscription_discount_cents(v_sub, v_plan.amount_cents, v_at);
        v_lines := jsonb_build_array(billing.plan_line(v_plan, v_plan.amount_cents, v_at, v_end));
        if v_discount > 0 then
          select d.code into v_code from billing.discount_codes d where d.community_id = v_sub.community_id and d.id = v_sub.discount_id;
          v_lines := v_lines || billing.discount_line(v_code, v_discount, v_at, v_end);
        end if;
        -- Credit left from a plan change pays what it can of this invoice.
        v_credit := least(v_sub.credit_cents, v_plan.amount_cents - v_discount);
        if v_credit > 0 then
          v_lines := v_lines || jsonb_build_object('type', 'proration', 'description', 'Credit from an earlier plan change',
            'amount_cents', -v_credit, 'period_start', billing.iso(v_at), 'period_end', billing.iso(v_end));
        end if;
        v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_cycle', v_plan.currency,
          v_lines, v_at, v_end, v_sub.provider, v_at);
        v_inv := billing.sandbox_collect(v_inv, v_at);
        update billing.subscriptions s set
          status = case when v_inv.status = 'paid' then 'active' else 'past_due' end,
          plan_id = v_plan.id, scheduled_plan_id = null, scheduled_at = null,
          current_period_start = v_at, current_period_end = v_end, billing_anchor = v_anchor,
          credit_cents = s.credit_cents - greatest(v_credit, 0),
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
-- ---- the sandbox's decline switch (CLI: billing sandbox decline / accept) -------------------------

create or replace function billing.sandbox_set_card(p_subscription_id text, p_declines boolean) returns jsonb
  language plpgsql volatile
as $$
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

-- ---- the read API ---------------------------------------------------------------------------------

-- GET /v1/invoices: newest first, keyset by id; filters member_id, subscription_id, status.
create or replace function billing_api.invoices_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('invoices:read');
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

create or replace function billing_api.invoices_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
begin
  perform billing.require_scope('invoices:read');
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  return billing.invoice_json(v_inv);
end
$$;
-- ---- Stripe: invoices mirrored from invoice.* events ------------------------------------------

-- Applies a Stripe invoice (already mapped to our terms by the adapter) to the
-- invoice with that provider_ref, creating it on first sight. p_state:
--   provider_ref, subscription_ref, status, billing_reason, currency, lines [{type,
--   description, amount_cents, period_start, period_end}], total_cents,
--   attempt_count, next_attempt_at, paid_at, created_at, period_start, period_end,
--   provider_updated_at, failed (true for invoice.payment_failed), payment_ref.
-- A finalized invoice keeps its lines; a paid, void or uncollectible one keeps its
-- status; a state older than the last one applied changes nothing. Returns the
-- invoice id, or null when no subscription has that subscription_ref yet.
create or replace function billing.apply_provider_invoice(p_state jsonb) returns text
  language plpgsql volatile
as $$
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
    -- What the lines do not explain (Stripe's discounts, or tax) becomes one line, so
    -- the lines always add up to Stripe's total.
    v_gap := (p_state->>'total_cents')::bigint - billing.invoice_lines_sum(v_lines, null);
    if v_gap < 0 then
      v_lines := v_lines || jsonb_build_object('type', 'discount', 'description', 'Discount', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    elsif v_gap > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'plan', 'description', 'Tax and other charges', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id,
      coalesce(nullif(p_state->>'billing_reason', ''), 'subscription_cycle'), p_state->>'currency', v_lines,
      (p_state->>'period_start')::timestamptz, (p_state->>'period_end')::timestamptz, 'stripe',
      coalesce((p_state->>'created_at')::timestamptz, v_at), null, p_state->>'provider_ref');
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

-- Stripe's unpaid: retries are over, so the subscription's open invoices have no
-- retry left (and a past_due subscription no access).
create or replace function billing.provider_retries_exhausted(p_subscription_ref text) returns void
  language sql volatile
as $$
  update billing.invoices i set next_attempt_at = null
  from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_subscription_ref
    and i.community_id = s.community_id and i.subscription_id = s.id and i.status = 'open'
    and i.next_attempt_at is not null
$$;

-- ---- plan changes paid before they apply ---------------------------------------------------------



-- An immediate switch (same tier or upgrade) of the current community's subscription
-- to p_plan_id, validated again here because the API role may call it. The
-- proration: credit for the unused time of the old plan, charge for the new plan over
-- the rest of the period; a change of interval starts a new period now (charge: the
-- whole new period). Credit beyond the charge is kept (credit_cents) for the next
-- renewals. A sandbox subscription's proration is invoiced and collected first, and
-- the switch applies only when that invoice is paid: a decline raises BLPAY
-- (payment_failed) and changes nothing. While trialing nothing is charged.
-- Stripe subscriptions: the plan changes here and Stripe invoices the proration (its
-- invoice.* events are mirrored), refused by the handler if Stripe cannot collect.
create or replace function billing_private.subscription_switch_now(p_subscription_id text, p_plan_id text)
  returns billing.subscriptions language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_now timestamptz := billing.now();
  v_frac numeric;
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
  perform billing.require_switchable(v_sub);
  if not exists (select 1 from jsonb_each(billing.switch_options(v_sub)) e(g, arr), jsonb_array_elements(arr) o
                 where g in ('same_tier', 'upgrades') and o->>'plan_id' = p_plan_id) then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_plan_id, '') || ' is not an immediate switch option of this subscription.', 'plan_id');
  end if;
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_plan_id;
  v_frac := case when v_sub.current_period_end is null or v_sub.current_period_end <= v_sub.current_period_start then 0
                 else greatest(0, least(1, extract(epoch from (v_sub.current_period_end - v_now))
                   / extract(epoch from (v_sub.current_period_end - v_sub.current_period_start)))) end;
  v_new_period := v_sub.status <> 'trialing' and v_new.interval is distinct from v_old.interval;
  v_start := case when v_new_period then v_now else v_sub.current_period_start end;
  v_end := case when v_new_period then v_now + billing.plan_interval(v_new.interval) else v_sub.current_period_end end;
  if v_sub.status = 'trialing' then
    v_charge := 0;
    v_credit := 0;
  else
    v_charge := case when v_new_period then v_new.amount_cents else round(v_new.amount_cents * v_frac)::bigint end;
    v_credit := round(v_old.amount_cents * v_frac)::bigint;
  end if;
  v_applied := least(v_credit, v_charge);
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

-- ---- grants (execute is opt-in: 00-foundation.sql) --------------------------------------------------
-- The API role reads invoices, and its writes fire triggers and views that call these
-- with its rights; everything that writes money (invoice_open, the mark_* functions,
-- apply_due, apply_provider_invoice, sandbox_set_card) stays owner-only.
grant execute on function billing.invoice_lines_valid(jsonb) to billing_api;
grant execute on function billing.invoice_lines_sum(jsonb, text[]) to billing_api;
grant execute on function billing.invoice_json(billing.invoices) to billing_api;
grant execute on function billing.subscription_retry_open(text, text) to billing_api;
grant execute on function billing.subscription_discount_cents(billing.subscriptions, bigint, timestamptz) to billing_api;
grant execute on function billing_api.invoices_list(jsonb) to billing_api;
grant execute on function billing_api.invoices_get(jsonb) to billing_api;
-- An immediate plan change: SECURITY DEFINER, it re-validates the option itself.
grant execute on function billing_private.subscription_switch_now(text, text) to billing_api;
--! EndIncluded 46-invoices.sql
--! Included 48-analytics.sql
-- Analytics over subscriptions and plans.
-- security_invoker views: an operator's own SQL session sees its community's figures
-- under the same RLS policies as the API.

-- Monthly recurring revenue per currency. Counts subscriptions that still bill:
-- active, past_due and cancelling (paid until period end). Trialing subscriptions do
-- not bill yet and are not counted; paused and cancelled do not bill. Annual plans
-- count amount/12; the sum per currency is rounded to a whole minor unit.
create or replace view analytics.mrr with (security_invoker = true) as
  select s.community_id, p.currency,
    round(sum(case when p.interval = 'year' then (p.amount_cents - d.cents) / 12.0
                   else p.amount_cents - d.cents end))::bigint as mrr_cents,
    count(*)::bigint as billing_subscriptions
  from billing.subscriptions s
  join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  cross join lateral (select billing.subscription_discount_cents(s, p.amount_cents,
    greatest(s.current_period_end, billing.community_now(s.community_id))) as cents) d
  where s.status in ('active', 'past_due', 'cancelling')
  group by s.community_id, p.currency;

-- The last 30 days by the community's clock: subscriptions started (signups), and

-- Members with access through a subscription now: active, trialing, past_due or
-- cancelling (a member with two such subscriptions counts once).
create or replace view analytics.subscribers with (security_invoker = true) as
  select s.community_id, count(distinct s.member_id)::bigint as active_subscribers
  from billing.subscriptions s
  where s.status in ('active', 'trialing', 'past_due', 'cancelling')
  group by s.community_id;

-- The last 30 days by billing.now() (the community's clock): subscriptions created
-- (signups), and subscriptions cancelled or set to cancel (cancelled_at, or the last
-- update when a cancelling/cancelled row has no cancelled_at).
create or replace view analytics.recent_activity with (security_invoker = true) as
  select c.id as community_id,
    billing.now() - interval '30 days' as window_start,
    billing.now() as window_end,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.created_at > billing.now() - interval '30 days'
        and s.created_at <= billing.now())::bigint as recent_signups,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.status in ('cancelling', 'cancelled')
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) > billing.now() - interval '30 days'
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) <= billing.now())::bigint as recent_cancels
  from billing.communities c;

grant select on analytics.mrr, analytics.subscribers, analytics.recent_activity to billing_api;

-- The summary's currency is the one most billing subscriptions use (ties: the larger
-- MRR, then alphabetical); mrr_cents is the MRR in that currency only. Every
-- currency's figure is in mrr_by_currency. With nothing billing, the currency of the
-- community's active plans (most common), else null.
create or replace function billing_api.analytics_summary(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_main analytics.mrr;
  v_currency text;
  v_out jsonb;
begin
  perform billing.require_scope('analytics:read');
  select * into v_main from analytics.mrr m where m.community_id = v_community
  order by m.billing_subscriptions desc, m.mrr_cents desc, m.currency limit 1;
  v_currency := v_main.currency;
  if v_currency is null then
    select p.currency into v_currency from billing.plans p
    where p.community_id = v_community and p.active
    group by p.currency order by count(*) desc, p.currency limit 1;
  end if;
  select jsonb_build_object(
    'mrr_cents', coalesce(v_main.mrr_cents, 0),
    'currency', v_currency,
    'active_subscribers', coalesce((select sb.active_subscribers from analytics.subscribers sb
      where sb.community_id = v_community), 0),
    'recent_signups', ra.recent_signups,
    'recent_cancels', ra.recent_cancels,
    'window_start', billing.iso(ra.window_start),
    'mrr_by_currency', coalesce((select jsonb_agg(jsonb_build_object('currency', m.currency,
      'mrr_cents', m.mrr_cents) order by m.currency) from analytics.mrr m where m.community_id = v_community), '[]'))
  into v_out
  from analytics.recent_activity ra where ra.community_id = v_community;
  return v_out;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing_api.analytics_summary(jsonb) to billing_api;
--! EndIncluded 48-analytics.sql
--! Included 50-ledger.sql
-- The entitlement ledger: one billing.member_entitlements row per (member,
-- entitlement), kept by the database whenever anything that feeds it changes.
--
-- Design: "recompute per member". billing.ledger_refresh_member computes, from the
-- current source rows, the desired (entitlement -> sources, benefits) of one member,
-- compares it with the stored ledger rows (including a snapshot of the member's
-- identities and external subjects) and updates every row whose status, sources,
-- benefits or identities changed: revision + 1, granted_at/revoked_at on the edges,
-- and one member.entitlement.* event per changed row, in the same transaction.
--
-- Which sources grant:
--   subscription: status active, trialing or past_due; cancelling while
--     current_period_end > the community's now (or has no end); paused and
--     cancelled never.
--   purchase: status completed, until access_expires_at (forever when null).
-- Sources reach entitlements through their plan's tier (billing.tier_entitlements).
-- An inactive row keeps sources [] and benefits [] (so a revoke's
-- changes.removed_benefits lists what to take away); its identities snapshot is
-- frozen until the next grant.
--
-- Time: purchases expiring and cancelling periods ending change no row, so
-- billing.ledger_sweep re-evaluates rows whose next_check_at has passed.
-- Every table that feeds the ledger refreshes it from its own trigger: subscriptions
-- and purchases (_500_outbox_and_ledger, 40-subscriptions.sql / 45-purchases.sql),
-- member identities and external subjects (30-members.sql), and the catalog tables
-- (_500_ledger on tier_entitlements, entitlement_benefits, platform_configs and plans,
-- 20-catalog.sql).

create table if not exists billing.member_entitlements (
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
  next_check_at timestamptz,
  primary key (community_id, id),
  unique (community_id, member_id, entitlement_id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade
);
comment on column billing.member_entitlements.next_check_at is
  'Earliest valid_until among time-limited sources (cancelling subscriptions, expiring purchases); billing.ledger_sweep re-evaluates the row once billing.now() reaches it.';
comment on column billing.member_entitlements.identities is
  'Snapshot {identities, external_subjects} of the member when last active: a change of it is a visible change (revision + 1, member.entitlement.updated).';

create index if not exists member_entitlements_next_check on billing.member_entitlements (community_id, next_check_at)
  where status = 'active' and next_check_at is not null;
create index if not exists member_entitlements_entitlement on billing.member_entitlements (community_id, entitlement_id)
  where status = 'active';
alter table billing.member_entitlements enable row level security;
alter table billing.member_entitlements force row level security;
drop policy if exists tenant on billing.member_entitlements;
create policy tenant on billing.member_entitlements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.member_entitlements;
create policy owner_access on billing.member_entitlements to current_user using (true) with check (true);
grant select, insert, update, delete on billing.member_entitlements to billing_api;

-- ---- the member entitlement object ---------------------------------------------------

-- Member entitlement: sources and benefits exactly as the ledger holds them. The
-- two-argument form is a plain expression (inlined) for queries that join the
-- entitlement themselves; the one-argument form looks it up.
create or replace function billing.member_entitlement_json(p_me billing.member_entitlements,
  p_ent billing.entitlements) returns jsonb
  language sql stable parallel safe
as $$
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

create or replace function billing.member_entitlement_json(p_me billing.member_entitlements) returns jsonb
  language sql stable parallel safe
as $$
  select billing.member_entitlement_json(p_me, e)
  from (select 1) one
  left join billing.entitlements e on e.community_id = p_me.community_id and e.id = p_me.entitlement_id
$$;

-- ---- computing the ledger --------------------------------------------------------------

-- Elements of array a that are not in array b, in a's order.
create or replace function billing.jsonb_array_minus(a jsonb, b jsonb) returns jsonb
  language plpgsql immutable parallel safe
as $$
declare
  v_x jsonb;
  v_out jsonb := '[]';
begin
  if b = '[]' then
    return a;
  end if;
  for v_x in select jsonb_array_elements(a) loop
    if not (b @> jsonb_build_array(v_x)) then
      v_out := v_out || jsonb_build_array(v_x);
    end if;
  end loop;
  return v_out;
end
$$;

-- Desired ledger of one member: entitlement -> supporting sources, benefits and the
-- earliest time one of those sources lapses by itself.
create or replace function billing.ledger_desired(p_community_id text, p_member_id text, p_now timestamptz)
  returns table (entitlement_id text, sources jsonb, benefits jsonb, next_check_at timestamptz)
  language sql stable
as $$
  with src as (
    select 'subscription' as type, s.id, s.status, p.tier_id, s.plan_id, s.client_reference_id,
      s.current_period_end as valid_until, s.status = 'cancelling' as lapses
    from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and s.member_id = p_member_id
      and (s.status in ('active', 'trialing')
        or (s.status = 'past_due' and billing.subscription_retry_open(s.community_id, s.id))
        or (s.status = 'cancelling' and (s.current_period_end is null or s.current_period_end > p_now)))
    union all
    select 'purchase', u.id, u.status, p.tier_id, u.plan_id, u.client_reference_id,
      u.access_expires_at, u.access_expires_at is not null
    from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and u.member_id = p_member_id
      and u.status = 'completed' and (u.access_expires_at is null or u.access_expires_at > p_now)
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

-- Recomputes one member's ledger; returns how many rows changed visibly (one event
-- each). p_reason and p_trigger_event_id go into the events' data.
create or replace function billing.ledger_refresh_member(p_community_id text, p_member_id text,
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
as $$
declare
  v_now timestamptz := billing.community_now(p_community_id);
  v_member jsonb;
  v_snapshot jsonb;
  v_rec record;
  v_row billing.member_entitlements;
  v_status text;
  v_identities jsonb;
  v_type text;
  v_types text[] := '{}';
  v_datas jsonb[] := '{}';
begin
  -- One refresh of a member at a time: a concurrent one waits for the first to
  -- commit, then reads what it wrote. A row lock on the member (not an advisory lock:
  -- one statement may refresh 100,000 members, more than the shared lock table holds);
  -- NO KEY UPDATE leaves inserts of rows that reference the member unblocked.
  perform 1 from billing.members m where m.community_id = p_community_id and m.id = p_member_id
    for no key update;
  if not found then
    return 0; -- the member is being deleted; its ledger rows go with it
  end if;
  v_member := billing.member_json(p_community_id, p_member_id);
  v_snapshot := jsonb_build_object('identities', v_member->'identities',
    'external_subjects', v_member->'external_subjects');

  for v_rec in
    select d.entitlement_id as d_ent, d.sources as d_sources, d.benefits as d_benefits,
      d.next_check_at as d_next, me.r as stored
    from billing.ledger_desired(p_community_id, p_member_id, v_now) d
    full join (select x as r, x.entitlement_id from billing.member_entitlements x
               where x.community_id = p_community_id and x.member_id = p_member_id) me
      on me.entitlement_id = d.entitlement_id
    order by coalesce(d.entitlement_id, me.entitlement_id)
  loop
    v_status := case when v_rec.d_ent is not null then 'active' else 'inactive' end;
    if (v_rec.stored).id is null then
      -- first grant of this entitlement to this member
      insert into billing.member_entitlements as x (community_id, member_id, entitlement_id, status,
        revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
      values (p_community_id, p_member_id, v_rec.d_ent, 'active', 1, v_rec.d_sources, v_rec.d_benefits,
        v_snapshot, v_now, v_rec.d_next, now())
      returning * into v_row;
      v_type := 'member.entitlement.granted';
    else
      v_row := v_rec.stored;
      v_identities := case when v_status = 'active' then v_snapshot else v_row.identities end;
      if v_row.status = v_status
         and v_row.sources = coalesce(v_rec.d_sources, '[]')
         and v_row.benefits = coalesce(v_rec.d_benefits, '[]')
         and v_row.identities = v_identities then
        if v_row.next_check_at is distinct from v_rec.d_next then
          update billing.member_entitlements x set next_check_at = v_rec.d_next
          where x.community_id = p_community_id and x.id = v_row.id;
        end if;
        continue;
      end if;
      v_type := case
        when v_row.status = v_status then 'member.entitlement.updated'
        when v_status = 'active' then 'member.entitlement.granted'
        else 'member.entitlement.revoked' end;
      update billing.member_entitlements x set
        status = v_status,
        revision = x.revision + 1,
        sources = coalesce(v_rec.d_sources, '[]'),
        benefits = coalesce(v_rec.d_benefits, '[]'),
        identities = v_identities,
        granted_at = case when v_type = 'member.entitlement.granted' then v_now else x.granted_at end,
        revoked_at = case when v_type = 'member.entitlement.granted' then null
                          when v_type = 'member.entitlement.revoked' then v_now else x.revoked_at end,
        next_check_at = v_rec.d_next,
        updated_at = now()
      where x.community_id = p_community_id and x.id = v_row.id
      returning * into v_row;
    end if;
    v_types := v_types || v_type;
    v_datas := v_datas || jsonb_build_object(
      'member', v_member,
      'entitlement', billing.member_entitlement_json(v_row),
      'changes', jsonb_build_object(
        'added_benefits', billing.jsonb_array_minus(v_row.benefits, coalesce((v_rec.stored).benefits, '[]')),
        'removed_benefits', billing.jsonb_array_minus(coalesce((v_rec.stored).benefits, '[]'), v_row.benefits)),
      'reason', p_reason,
      'trigger_event_id', p_trigger_event_id);
  end loop;
  -- One insert for the member's events (ids follow the entitlement order above).
  if cardinality(v_types) > 0 then
    insert into billing.events (community_id, type, data)
    select p_community_id, v_types[i], v_datas[i] from generate_subscripts(v_types, 1) i order by i;
  end if;
  return cardinality(v_types);
end
$$;

-- Time passing: re-evaluates every active row whose next_check_at has come (expired
-- purchases, cancelling subscriptions past their period end) in one community, or in
-- every community when p_community_id is null. Returns the number of rows changed.
create or replace function billing.ledger_sweep(p_community_id text) returns integer
  language plpgsql volatile
as $$
declare
  v_community text;
  v_member text;
  v_changed integer := 0;
begin
  for v_community in
    select c.id from billing.communities c
    where p_community_id is null or c.id = p_community_id
  loop
    for v_member in
      select distinct x.member_id from billing.member_entitlements x
      where x.community_id = v_community and x.status = 'active'
        and x.next_check_at <= billing.community_now(v_community)
      order by x.member_id
    loop
      v_changed := v_changed + billing.ledger_refresh_member(v_community, v_member, 'access_expired', null);
    end loop;
  end loop;
  return v_changed;
end
$$;

-- Refreshes a set of members (from a statement-level trigger) with one reason.
create or replace function billing.ledger_refresh_members(p_community_id text, p_member_ids text[],
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
as $$
declare
  v_member text;
  v_changed integer := 0;
begin
  for v_member in select distinct m from unnest(p_member_ids) m where m is not null order by 1 loop
    v_changed := v_changed + billing.ledger_refresh_member(p_community_id, v_member, p_reason, p_trigger_event_id);
  end loop;
  return v_changed;
end
$$;

-- Members whose supporting sources (that could grant) sit on one of the tiers.
create or replace function billing.ledger_members_on_tiers(p_community_id text, p_tier_ids text[])
  returns text[] language sql stable
as $$
  select coalesce(array_agg(distinct member_id), '{}') from (
    select s.member_id from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and p.tier_id = any (p_tier_ids)
      and s.status in ('active', 'trialing', 'past_due', 'cancelling')
    union all
    select u.member_id from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and p.tier_id = any (p_tier_ids) and u.status = 'completed'
  ) m
$$;

-- Entitlement benefits changed: refresh every member whose row for those
-- entitlements is active (inactive rows carry no benefits).
create or replace function billing.ledger_benefits_changed(p_community_id text, p_entitlement_ids text[])
  returns integer language sql volatile
as $$
  select billing.ledger_refresh_members(p_community_id, coalesce((
    select array_agg(distinct x.member_id) from billing.member_entitlements x
    where x.community_id = p_community_id and x.entitlement_id = any (p_entitlement_ids)
      and x.status = 'active'), '{}'), 'benefits_changed', null)
$$;

-- ---- API -------------------------------------------------------------------------------

create or replace function billing_api.member_entitlements_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('members:read');
  if not exists (select 1 from billing.members m
                 where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.member_entitlement_json(me, e) order by me.id)
    from billing.member_entitlements me
    join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where me.community_id = billing.current_community_id() and me.member_id = p_args->>'id'
      and me.status = 'active'), '[]'));
end
$$;

-- Entitled when the identity's member holds an active entitlement; with tier_id, only
-- an active entitlement one of whose sources carries that tier_id counts, and only
-- those entitlements are listed. An unknown identity is simply not entitled.
create or replace function billing_api.entitlements_check(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text;
  v_tier text := nullif(p_args->>'tier_id', '');
  v_list jsonb;
begin
  perform billing.require_scope('members:read');
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

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.jsonb_array_minus(jsonb,jsonb) to billing_api;
grant execute on function billing.ledger_desired(text,text,timestamptz) to billing_api;
grant execute on function billing.ledger_refresh_member(text,text,text,text) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements,billing.entitlements) to billing_api;
grant execute on function billing_api.member_entitlements_list(jsonb) to billing_api;
grant execute on function billing_api.entitlements_check(jsonb) to billing_api;
--! EndIncluded 50-ledger.sql
--! Included 60-events.sql
-- Events: the outbox table, the catalog of event types, the envelope JSON and the
-- events feed.
--
-- Every lifecycle event is written by the trigger of its source table, in the
-- statement's transaction: subscriptions and purchases (_500_outbox_and_ledger),
-- checkout sessions and members (_500_outbox), member identities and external
-- subjects (_500_outbox_and_ledger); entitlement events come from the ledger
-- (billing.ledger_refresh_member, 50-ledger.sql) and webhook_endpoint.disabled from
-- the delivery worker (70-webhooks.sql). Other code only changes rows; it never
-- writes billing.events itself.
--
-- Lifecycle event types (data holds the object under its resource name, plus
-- previous_attributes: the visible fields that changed and their old values):
--   subscription.created, subscription.updated, subscription.cancelled
--   purchase.created, purchase.updated, purchase.refunded
--   checkout.created, checkout.completed, checkout.expired
--   member.created, member.updated (identities or external subjects changed)
-- Entitlement events (the ones that decide access) come from the ledger:
--   member.entitlement.granted, member.entitlement.updated, member.entitlement.revoked
-- billing_private.event_types lists them all; test/db/event-types.test.ts keeps it
-- equal to EVENT_TYPES of src/domain/events/event-types.ts.

-- ---- the outbox ----------------------------------------------------------------------

-- The outbox: every event envelope, written in the transaction of its change.
create table if not exists billing.events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('evt'),
  type text not null,
  created_at timestamptz not null default now(),
  api_version text not null default billing.api_version(),
  data jsonb not null,
  primary key (community_id, id)
);
create index if not exists events_type on billing.events (community_id, type, id);
alter table billing.events enable row level security;
alter table billing.events force row level security;
drop policy if exists tenant on billing.events;
create policy tenant on billing.events
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.events;
create policy owner_access on billing.events to current_user using (true) with check (true);
grant select, insert, update, delete on billing.events to billing_api;

-- Statement-level, over the transition table: one insert for all the statement's
-- deliveries (one per enabled endpoint of 70-webhooks.sql whose event_types match;
-- empty = all) and one add_jobs call for all its jobs, whatever the number of rows.
create or replace function billing_private.tg_events__enqueue_deliveries() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
begin
  with d as (
    insert into billing.webhook_deliveries (community_id, endpoint_id, event_id, event_type, next_attempt_at)
    select e.community_id, w.id, e.id, e.type, now()
    from new_events e
    join billing.webhook_endpoints w
      on w.community_id = e.community_id and w.enabled
     and (w.event_types = '{}' or e.type = any (w.event_types))
    order by e.community_id, e.id, w.id
    returning community_id, id
  ), chunks as (
    select community_id, id, (row_number() over (partition by community_id order by id) - 1) / 50 as chunk
    from d
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids, 'after', 0))
  into v_payloads
  from (select community_id, array_agg(id order by id) as ids from chunks group by community_id, chunk) c;
  perform billing_private.add_job('webhook_deliveries__send', v_payloads);
  return null;
end
$$;

drop trigger if exists _900_enqueue_deliveries on billing.events;
create trigger _900_enqueue_deliveries after insert on billing.events
  referencing new table as new_events
  for each statement execute function billing_private.tg_events__enqueue_deliveries();

-- The outbox: writes one event row and returns its id.
create or replace function billing.emit_event(p_community_id text, p_type text, p_data jsonb)
  returns text language plpgsql volatile
as $$
declare
  v_id text;
begin
  insert into billing.events (community_id, type, data) values (p_community_id, p_type, p_data)
  returning id into v_id;
  return v_id;
end
$$;

-- The envelope, exactly as the feed returns it and webhooks deliver it.
create or replace function billing.event_json(p_event billing.events) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object('id', p_event.id, 'type', p_event.type,
    'timestamp', billing.iso(p_event.created_at), 'api_version', p_event.api_version,
    'data', p_event.data)
$$;

-- Old values of the keys whose values differ between two objects.
create or replace function billing.jsonb_changed(p_old jsonb, p_new jsonb) returns jsonb
  language plpgsql immutable parallel safe
as $$
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

-- ---- the event type catalog --------------------------------------------------------------

-- Every event type the service emits: what webhook endpoints may subscribe to.
-- Owner only; billing_api reaches it through the endpoint trigger of 70-webhooks.sql.
create table if not exists billing_private.event_types (
  type text collate "C" primary key,
  description text not null
);
alter table billing_private.event_types enable row level security;
alter table billing_private.event_types force row level security;
drop policy if exists owner_only on billing_private.event_types;
create policy owner_only on billing_private.event_types using (true);

insert into billing_private.event_types (type, description) values
  ('member.entitlement.granted', 'An entitlement became active for a member.'),
  ('member.entitlement.updated', 'Sources, benefits or linked identities of an active entitlement changed.'),
  ('member.entitlement.revoked', 'An entitlement became inactive for a member.'),
  ('subscription.created', 'A subscription was created.'),
  ('subscription.updated', 'A subscription changed.'),
  ('subscription.cancelled', 'A subscription ended.'),
  ('purchase.created', 'A one-time purchase was recorded.'),
  ('purchase.updated', 'A purchase changed.'),
  ('purchase.refunded', 'A purchase was refunded.'),
  ('checkout.created', 'A checkout session was created.'),
  ('checkout.completed', 'A checkout session was paid.'),
  ('checkout.expired', 'A checkout session expired unpaid.'),
  ('member.created', 'A member was created.'),
  ('member.updated', 'A member''s platform identities or external subjects changed.'),
  ('invoice.created', 'An invoice was written.'),
  ('invoice.paid', 'An invoice was paid in full.'),
  ('invoice.payment_failed', 'An attempt to collect an invoice failed.'),
  ('webhook_endpoint.disabled', 'A webhook endpoint was disabled because its deliveries kept failing.')
on conflict (type) do update set description = excluded.description;

-- ---- the events feed ----------------------------------------------------------------

-- GET /v1/events: newest first, keyset by id. type: array of event types (any of);
-- after_id: only events newer than that id (id > after_id); cursor: the id to
-- continue after (id < cursor).
create or replace function billing_api.events_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
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
  perform billing.require_scope('events:read');
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

create or replace function billing_api.events_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_event billing.events;
begin
  perform billing.require_scope('events:read');
  select * into v_event from billing.events e
  where e.community_id = billing.current_community_id() and e.id = p_args->>'id';
  if v_event.id is null then
    perform billing.raise('BL404', 'No event ' || (p_args->>'id') || '.');
  end if;
  return billing.event_json(v_event);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.emit_event(text,text,jsonb) to billing_api;
grant execute on function billing.event_json(billing.events) to billing_api;
grant execute on function billing.jsonb_changed(jsonb,jsonb) to billing_api;
grant execute on function billing_api.events_list(jsonb) to billing_api;
grant execute on function billing_api.events_get(jsonb) to billing_api;
--! EndIncluded 60-events.sql
--! Included 80-checkout.sql
-- Checkout: creating checkout links (every rule of the spec's request table and
-- eligibility list), discount codes at checkout, completing a paid checkout (the
-- sandbox page, `billing sandbox complete` and the Stripe webhook all end here),
-- portal sessions and link codes.
--
-- Lifetimes: a checkout is open 24 hours; a portal session and a link code 10 minutes.
-- Discount codes are catalog rows (20-catalog.sql); their redemptions, JSON object
-- (with redemption counts) and list operation are here. Inbound provider events
-- (applied exactly once) are recorded here too.

-- ---- tables ----------------------------------------------------------------------------

create table if not exists billing.checkout_sessions (
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
  access_token text,
  subscription_id text collate "C",
  purchase_id text collate "C",
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict,
  foreign key (community_id, discount_id) references billing.discount_codes on delete restrict
);
create index if not exists checkout_sessions_member on billing.checkout_sessions (community_id, member_id);
create index if not exists checkout_sessions_open on billing.checkout_sessions (community_id, expires_at) where status = 'open';
create index if not exists checkout_sessions_provider_ref on billing.checkout_sessions (community_id, provider_ref)
  where provider_ref is not null;
alter table billing.checkout_sessions enable row level security;
alter table billing.checkout_sessions force row level security;
drop policy if exists tenant on billing.checkout_sessions;
create policy tenant on billing.checkout_sessions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.checkout_sessions;
create policy owner_access on billing.checkout_sessions to current_user using (true) with check (true);
grant select, insert, update, delete on billing.checkout_sessions to billing_api;

create table if not exists billing.discount_redemptions (
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
create index if not exists discount_redemptions_checkout on billing.discount_redemptions (community_id, checkout_id);
alter table billing.discount_redemptions enable row level security;
alter table billing.discount_redemptions force row level security;
drop policy if exists tenant on billing.discount_redemptions;
create policy tenant on billing.discount_redemptions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.discount_redemptions;
create policy owner_access on billing.discount_redemptions to current_user using (true) with check (true);
grant select, insert, update, delete on billing.discount_redemptions to billing_api;

create table if not exists billing.portal_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('ps'),
  member_id text collate "C" not null,
  return_url text,
  url text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  access_token text,
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
alter table billing.portal_sessions enable row level security;
alter table billing.portal_sessions force row level security;
drop policy if exists tenant on billing.portal_sessions;
create policy tenant on billing.portal_sessions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.portal_sessions;
create policy owner_access on billing.portal_sessions to current_user using (true) with check (true);
grant select, insert, update, delete on billing.portal_sessions to billing_api;

create table if not exists billing.link_codes (
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

create index if not exists link_codes_member on billing.link_codes (community_id, member_id, intended_platform);
alter table billing.link_codes enable row level security;
alter table billing.link_codes force row level security;
drop policy if exists tenant on billing.link_codes;
create policy tenant on billing.link_codes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.link_codes;
create policy owner_access on billing.link_codes to current_user using (true) with check (true);
grant select, insert, update, delete on billing.link_codes to billing_api;

-- Inbound provider events applied exactly once.
create table if not exists billing.provider_events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  provider text not null,
  event_id text not null,
  type text not null,
  received_at timestamptz not null default now(),
  primary key (community_id, provider, event_id)
);
alter table billing.provider_events enable row level security;
alter table billing.provider_events force row level security;
drop policy if exists tenant on billing.provider_events;
create policy tenant on billing.provider_events
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.provider_events;
create policy owner_access on billing.provider_events to current_user using (true) with check (true);
grant select, insert, update, delete on billing.provider_events to billing_api;

-- ---- helpers ---------------------------------------------------------------------------

create or replace function billing.checkout_lifetime() returns interval
  language sql immutable parallel safe as $$ select interval '24 hours' $$;

create or replace function billing.random_token() returns text
  language sql volatile parallel safe
as $$ select replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '') $$;

-- ---- buyer -------------------------------------------------------------------------

-- Finds or creates the member named by a checkout subject. Serialised per subject with
-- an advisory lock so two parallel checkouts for a new buyer make one member.
create or replace function billing.checkout_member(p_subject jsonb) returns text
  language plpgsql volatile
as $$
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

-- not_eligible: the member already holds this tier (a non-cancelled subscription on
-- one of its plans, or an unexpired purchase of it), or is buying a recurring plan
-- while holding a non-cancelled subscription on another tier (that needs a switch,
-- not a second subscription).
create or replace function billing.check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans) returns void
  language plpgsql stable
as $$
declare
  v_other text;
begin
  if exists (select 1 from billing.purchases pu join billing.plans p on p.community_id = pu.community_id and p.id = pu.plan_id
             where pu.member_id = p_member_id and p.tier_id = p_tier.id and pu.status = 'completed'
               and (pu.access_expires_at is null or pu.access_expires_at > billing.now())) then
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

-- ---- discounts ---------------------------------------------------------------------

-- Validates a code for this checkout and returns the discount and its amount. The
-- caller holds the discount's advisory lock, so the use limit holds under concurrency.
create or replace function billing.checkout_discount(p_code text, p_member_id text, p_tier_id text, p_plan billing.plans,
  out discount_id uuid, out discount_cents integer)
  language plpgsql volatile
as $$
declare
  v_d billing.discount_codes;
  v_now timestamptz := billing.now();
  v_used bigint;
begin
  select * into v_d from billing.discount_codes d where lower(d.code) = lower(p_code);
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

create or replace function billing.discount_json(p_d billing.discount_codes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_d.id, 'code', p_d.code, 'name', p_d.name, 'value_type', p_d.value_type,
    'percent_off', p_d.percent_off, 'amount_off_cents', p_d.amount_off_cents, 'currency', p_d.currency,
    'duration', p_d.duration, 'duration_months', p_d.duration_months, 'use_limit', p_d.use_limit,
    'min_spend_cents', p_d.min_spend_cents, 'max_spend_cents', p_d.max_spend_cents,
    'starts_at', billing.iso(p_d.starts_at), 'expires_at', billing.iso(p_d.expires_at),
    'is_active', p_d.is_active, 'tier_ids', to_jsonb(p_d.tier_ids),
    'members', coalesce((
      select jsonb_agg(jsonb_build_object('platform', m->>'platform', 'platform_uid', m->>'platform_uid',
        'username', m->>'username'))
      from jsonb_array_elements(p_d.members) m), '[]'),
    'redeemed_count', (select count(*) from billing.discount_redemptions r
      where r.community_id = p_d.community_id and r.discount_id = p_d.id and r.status = 'redeemed'),
    'pending_count', (select count(*) from billing.discount_redemptions r
      where r.community_id = p_d.community_id and r.discount_id = p_d.id and r.status = 'pending'),
    'created_at', billing.iso(p_d.created_at))
$$;

create or replace function billing_api.discounts_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('discounts:read');
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.discount_json(d) order by d.created_at desc, d.id)
    from billing.discount_codes d
    where d.community_id = billing.current_community_id() and d.archived_at is null), '[]'));
end
$$;

-- ---- create_checkout_link ----------------------------------------------------------

-- Input: tier_id, plan_id?, subject, client_reference_id?, return_url?, discount_code?,
-- and from the handler provider_ready (false for a stripe community without keys).
-- Records an open checkout; the handler then asks the provider for its url.
create or replace function billing_api.checkout_create(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
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
  v_plans integer;
begin
  perform billing.require_scope('checkout:write');
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

  insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency,
    client_reference_id, return_url, subject_kind, provider, expires_at, access_token)
  values (v_cid, v_member, v_tier.id, v_plan.id, v_plan.amount_cents, v_plan.currency,
    p_args->>'client_reference_id', p_args->>'return_url', v_kind, v_provider,
    billing.now() + billing.checkout_lifetime(), billing.random_token())
  returning * into v_cs;

  if p_args->>'discount_code' is not null then
    select * into v_disc from billing.checkout_discount(p_args->>'discount_code', v_member, v_tier.id, v_plan);
    update billing.checkout_sessions set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cid, v_disc.discount_id, v_cs.id, v_member, 'pending');
  end if;

  return billing.checkout_json(v_cs);
end
$$;

-- Everything a provider adapter needs to present or pay a checkout.
create or replace function billing.checkout_json(p_cs billing.checkout_sessions) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'checkout_id', p_cs.id, 'member_id', p_cs.member_id, 'status', p_cs.status,
    'provider', p_cs.provider, 'access_token', p_cs.access_token, 'url', p_cs.url,
    'expires_at', billing.iso(p_cs.expires_at), 'expired', p_cs.status = 'expired' or (p_cs.status = 'open' and p_cs.expires_at <= billing.now()),
    'tier_id', t.id, 'tier_name', t.name, 'tier_kind', t.kind,
    'plan_id', p.id, 'plan_name', p.name, 'interval', p.interval, 'trial_days', p.trial_days,
    'access_days', p.access_days, 'stripe_price_id', p.stripe_price_id,
    'amount_cents', p_cs.amount_cents, 'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'discount_code', d.code, 'discount', case when d.id is null then null else jsonb_build_object(
      'id', d.id, 'value_type', d.value_type, 'percent_off', d.percent_off, 'amount_off_cents', d.amount_off_cents,
      'duration', d.duration, 'duration_months', d.duration_months) end,
    'client_reference_id', p_cs.client_reference_id, 'return_url', p_cs.return_url,
    'subscription_id', p_cs.subscription_id, 'purchase_id', p_cs.purchase_id)
  from billing.plans p
  join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
  left join billing.discount_codes d on d.community_id = p_cs.community_id and d.id = p_cs.discount_id
  where p.community_id = p_cs.community_id and p.id = p_cs.plan_id
$$;

-- The handler stores the provider's url and reference (and expiry, when reported).
create or replace function billing_api.checkout_set_provider(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_cs billing.checkout_sessions;
begin
  perform billing.require_scope('checkout:write');
  update billing.checkout_sessions cs set url = p_args->>'url', provider_ref = coalesce(p_args->>'provider_ref', cs.provider_ref),
    expires_at = coalesce((p_args->>'expires_at')::timestamptz, cs.expires_at)
  where cs.id = p_args->>'checkout_id'
  returning * into v_cs;
  return billing.checkout_json(v_cs);
end
$$;

-- ---- the checkout object of events --------------------------------------------------
-- (billing.checkout_json above is the provider adapters' view of a checkout, with its
-- access token: never an API or event object.)

create or replace function billing.checkout_event_json(p_cs billing.checkout_sessions) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object(
    'id', p_cs.id, 'checkout_id', p_cs.id, 'status', p_cs.status, 'member_id', p_cs.member_id,
    'tier_id', p_cs.tier_id, 'plan_id', p_cs.plan_id, 'amount_cents', p_cs.amount_cents,
    'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'client_reference_id', p_cs.client_reference_id, 'subject_kind', p_cs.subject_kind,
    'expires_at', billing.iso(p_cs.expires_at), 'completed_at', billing.iso(p_cs.completed_at),
    'created_at', billing.iso(p_cs.created_at))
$$;

-- No ledger effect: a checkout grants nothing.
create or replace function billing.tg_checkout_sessions__outbox() returns trigger
  language plpgsql
as $$
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

drop trigger if exists _500_outbox on billing.checkout_sessions;
create trigger _500_outbox after insert or update of status on billing.checkout_sessions
  for each row execute function billing.tg_checkout_sessions__outbox();

-- ---- completing a paid checkout ------------------------------------------------------

-- Completes a checkout in the current community: creates the subscription (trialing
-- when the plan has trial days, else active; period from billing.now()) or the
-- purchase (access_expires_at from access_days), marks the checkout completed and
-- redeems its discount. Idempotent: a completed checkout returns the same result.
-- p_details (from a provider): provider_ref, customer_ref, status, period_start,
-- period_end, trial_end, cancel_at, provider_updated_at (ISO), paid (true when the
-- provider has taken the money: no expiry or eligibility check then).
create or replace function billing.complete_checkout(p_checkout_id text, p_details jsonb default '{}')
  returns jsonb language plpgsql volatile
as $$
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
    perform billing.check_eligible(v_cs.member_id, v_tier, v_plan);
  end if;
  select d.code into v_code from billing.discount_codes d where d.community_id = v_cs.community_id and d.id = v_cs.discount_id;

  if v_plan.interval is not null then
    if p_details->>'provider_ref' is not null then
      select s.id into v_sub_id from billing.subscriptions s
      where s.community_id = v_cs.community_id and s.provider_ref = p_details->>'provider_ref';
    end if;
    if v_sub_id is null then
      v_trial_end := coalesce((p_details->>'trial_end')::timestamptz,
        case when v_plan.trial_days > 0 and p_details->>'status' is null then v_now + make_interval(days => v_plan.trial_days) end);
      insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start,
        current_period_end, trial_end, cancel_at, client_reference_id, checkout_id, provider, provider_ref,
        provider_customer_ref, provider_updated_at, billing_anchor, discount_id, created_at)
      values (v_cs.community_id, v_cs.member_id, v_plan.id,
        coalesce(p_details->>'status', case when v_trial_end is not null then 'trialing' else 'active' end),
        coalesce((p_details->>'period_start')::timestamptz, v_now),
        coalesce((p_details->>'period_end')::timestamptz, v_trial_end, v_now + billing.plan_interval(v_plan.interval)),
        v_trial_end, (p_details->>'cancel_at')::timestamptz, v_cs.client_reference_id, v_cs.id, v_cs.provider,
        p_details->>'provider_ref', p_details->>'customer_ref', (p_details->>'provider_updated_at')::timestamptz,
        coalesce(v_trial_end, (p_details->>'period_start')::timestamptz, v_now), v_cs.discount_id, v_now)
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
    v_inv := billing.invoice_open(null, v_pur_id, v_cs.member_id, 'purchase', v_cs.currency, v_lines, v_now, null,
      v_cs.provider, v_now, v_cs.id, case when v_cs.provider = 'stripe' then p_details->>'provider_ref' end);
    perform billing.invoice_mark_paid(v_inv, v_now, p_details->>'provider_ref');
  end if;

  update billing.checkout_sessions cs set status = 'completed', completed_at = v_now,
    subscription_id = v_sub_id, purchase_id = v_pur_id
  where cs.community_id = v_cs.community_id and cs.id = v_cs.id;
  update billing.discount_redemptions r set status = 'redeemed'
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id;

  return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
    'subscription_id', v_sub_id, 'purchase_id', v_pur_id, 'already_completed', false);
end
$$;

-- Open checkouts past their expiry become expired and release their discount holds.
-- No entitlement changes and no granted event: a checkout never grants anything.
create or replace function billing.expire_checkouts() returns integer
  language plpgsql volatile
as $$
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

-- A provider reports a checkout it will never complete (Stripe: checkout.session.expired).
create or replace function billing.expire_checkout(p_checkout_id text) returns boolean
  language plpgsql volatile
as $$
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

-- ---- inbound provider events ----------------------------------------------------------

-- Inbound provider events are applied exactly once: true the first time an id is seen.
create or replace function billing.record_provider_event(p_provider text, p_event_id text, p_type text) returns boolean
  language sql volatile
as $$
  with ins as (
    insert into billing.provider_events (community_id, provider, event_id, type)
    values (billing.current_community_id(), p_provider, p_event_id, p_type)
    on conflict do nothing returning 1)
  select exists (select 1 from ins)
$$;

-- ---- portal sessions -----------------------------------------------------------------

create or replace function billing_api.portal_session_create(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_ps billing.portal_sessions;
  v_provider text;
begin
  perform billing.require_scope('members:write');
  if not exists (select 1 from billing.members m where m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  insert into billing.portal_sessions (community_id, member_id, return_url, url, expires_at, access_token)
  values (v_cid, p_args->>'id', p_args->>'return_url', '', billing.now() + interval '10 minutes', billing.random_token())
  returning * into v_ps;
  return jsonb_build_object('id', v_ps.id, 'member_id', v_ps.member_id, 'access_token', v_ps.access_token,
    'expires_at', billing.iso(v_ps.expires_at), 'return_url', v_ps.return_url, 'provider', v_provider,
    'customer_ref', (select s.provider_customer_ref from billing.subscriptions s
      where s.member_id = v_ps.member_id and s.provider = 'stripe' and s.provider_customer_ref is not null
      order by s.id desc limit 1));
end
$$;

create or replace function billing_api.portal_session_set_url(p_args jsonb) returns void
  language sql volatile
as $$
  update billing.portal_sessions set url = p_args->>'url' where id = p_args->>'id'
$$;

-- ---- link codes ----------------------------------------------------------------------

-- A new code for the same member and platform invalidates the earlier one. Expiry
-- changes nothing (the code simply stops being redeemable).
create or replace function billing_api.link_code_create(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
begin
  perform billing.require_scope('members:write');
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

-- A platform bot finishes the link: the identity joins the code's member.
create or replace function billing_api.link_code_redeem(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_owner text;
begin
  perform billing.require_scope('members:write');
  select * into v_lc from billing.link_codes lc where lc.code = upper(p_args->>'code') for update;
  if v_lc.id is null or v_lc.redeemed_at is not null or v_lc.invalidated_at is not null
     or v_lc.expires_at <= billing.now() or v_lc.intended_platform <> p_args->>'platform' then
    perform billing.raise('BL404', 'No usable link code ' || (p_args->>'code') || ' for ' || (p_args->>'platform') || '.');
  end if;
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_args->>'platform' and i.platform_uid = p_args->>'platform_uid';
  if v_owner is not null and v_owner <> v_lc.member_id then
    perform billing.raise('BL409', 'This ' || (p_args->>'platform') || ' identity belongs to another member.');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = v_lc.member_id and i.platform = p_args->>'platform') then
      perform billing.raise('BL409', 'Member ' || v_lc.member_id || ' already has another ' || (p_args->>'platform') || ' identity.');
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (v_cid, v_lc.member_id, p_args->>'platform', p_args->>'platform_uid', p_args->>'username');
  end if;
  update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  return billing.member_json(v_cid, v_lc.member_id);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.check_eligible(text,billing.tiers,billing.plans) to billing_api;
grant execute on function billing.checkout_discount(text,text,text,billing.plans) to billing_api;
grant execute on function billing.checkout_event_json(billing.checkout_sessions) to billing_api;
grant execute on function billing.checkout_json(billing.checkout_sessions) to billing_api;
grant execute on function billing.checkout_lifetime() to billing_api;
grant execute on function billing.checkout_member(jsonb) to billing_api;
grant execute on function billing.discount_json(billing.discount_codes) to billing_api;
grant execute on function billing.random_token() to billing_api;
grant execute on function billing_api.discounts_list(jsonb) to billing_api;
grant execute on function billing_api.checkout_create(jsonb) to billing_api;
grant execute on function billing_api.checkout_set_provider(jsonb) to billing_api;
grant execute on function billing_api.portal_session_create(jsonb) to billing_api;
grant execute on function billing_api.portal_session_set_url(jsonb) to billing_api;
grant execute on function billing_api.link_code_create(jsonb) to billing_api;
grant execute on function billing_api.link_code_redeem(jsonb) to billing_api;
--! EndIncluded 80-checkout.sql
