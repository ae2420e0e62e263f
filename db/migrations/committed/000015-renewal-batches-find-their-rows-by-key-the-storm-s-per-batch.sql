--! Previous: sha1:ffb2fda1d6eb112ee16477f22bcfbd656f73f7ac
--! Hash: sha1:6f3f7ce1d28526f48302b0f5ad872c2256cf5797
--! Message: Renewal batches find their rows by key: the storm's per-batch scans of the community are gone

--! split: 1-current.sql
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
  check (cancellation_reason in ('cancellation_requested', 'payment_failed', 'refunded', 'payment_disputed'));
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
grant select on billing.subscriptions to billing_api;
revoke insert, update, delete on billing.subscriptions from billing_api;
grant select, update on billing.subscriptions to billing_writer;

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
-- statement's transaction. Inserts and deletes row by row; updates statement-level
-- (below).
create or replace function billing.tg_subscriptions__outbox_and_ledger() returns trigger
  language plpgsql
as $$
declare
  v_event_id text;
begin
  if tg_op = 'DELETE' then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, 'subscription_deleted', null);
    return null;
  end if;
  v_event_id := billing.emit_event(new.community_id, 'subscription.created',
    jsonb_build_object('subscription', billing.subscription_event_json(new), 'previous_attributes', null));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, 'subscription_created', v_event_id);
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.subscriptions;
create trigger _500_outbox_and_ledger after insert or delete on billing.subscriptions
  for each row execute function billing.tg_subscriptions__outbox_and_ledger();

-- Updates, over the transition tables: one subscription.updated / .cancelled per row
-- whose visible fields changed (none when only updated_at did), all in one insert in
-- subscription id order, then each changed member's ledger with its row's event as
-- trigger (the member it left too, when member_id changed), for all rows at once. A
-- statement that renews a whole batch (billing.renew_batch) so writes its events and
-- ledgers in a few statements; a one-row statement does what a row trigger did.
create or replace function billing.tg_subscriptions__outbox_and_ledger_update() returns trigger
  language plpgsql
as $$
declare
  v_communities text[];
  v_members text[];
  v_old_members text[];
  v_reasons text[];
  v_event_ids text[];
begin
  with ch as (
    select n.community_id, n.id, n.member_id, o.member_id as old_member_id, j.new_json,
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
    left join billing.plans np on np.community_id = n.community_id and np.id = n.plan_id
    left join billing.tiers nt on nt.community_id = np.community_id and nt.id = np.tier_id
    left join billing.plans op on op.community_id = o.community_id and op.id = o.plan_id
    left join billing.tiers ot on ot.community_id = op.community_id and ot.id = op.tier_id
    -- billing.subscription_event_json, with the plans and tiers joined once
    cross join lateral (select
      billing.subscription_json(n, np, nt) || jsonb_build_object('client_reference_id', n.client_reference_id) as new_json,
      billing.subscription_json(o, op, ot) || jsonb_build_object('client_reference_id', o.client_reference_id) as old_json) j
  ), ev as (
    insert into billing.events (community_id, type, data)
    select ch.community_id, ch.type, jsonb_build_object('subscription', ch.new_json, 'previous_attributes', ch.prev)
    from ch
    where ch.prev <> '{}' -- nothing a consumer sees (nor a ledger source) changed
    order by ch.id
    returning id, data->'subscription'->>'id' as subscription_id
  )
  select array_agg(ch.community_id order by ch.id), array_agg(ch.member_id order by ch.id),
    array_agg(ch.old_member_id order by ch.id), array_agg(ch.reason order by ch.id), array_agg(ev.id order by ch.id)
  into v_communities, v_members, v_old_members, v_reasons, v_event_ids
  from ch join ev on ev.subscription_id = ch.id;
  -- The ledgers, row by row in id order (the member it left after the member it has):
  -- a few rows one member at a time (ledger_refresh_member), more in a few statements
  -- for the whole list (billing.ledger_refresh_each, the same outcome; its one big
  -- statement costs more than the per-member functions for a single row).
  if cardinality(v_event_ids) <= 8 then
    for i in 1 .. cardinality(v_event_ids) loop
      perform billing.ledger_refresh_member(v_communities[i], v_members[i], v_reasons[i], v_event_ids[i]);
      if v_old_members[i] <> v_members[i] then
        perform billing.ledger_refresh_member(v_communities[i], v_old_members[i], v_reasons[i], v_event_ids[i]);
      end if;
    end loop;
  elsif v_event_ids is not null then
    perform billing.ledger_refresh_each(array_agg(v_communities[i] order by i, x.j), array_agg(x.m order by i, x.j),
      array_agg(v_reasons[i] order by i, x.j), array_agg(v_event_ids[i] order by i, x.j))
    from generate_subscripts(v_event_ids, 1) i
    cross join lateral (values (1, v_members[i]), (2, nullif(v_old_members[i], v_members[i]))) x(j, m)
    where x.m is not null;
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger_update on billing.subscriptions;
create trigger _500_outbox_and_ledger_update after update on billing.subscriptions
  referencing old table as old_rows new table as new_rows
  for each statement execute function billing.tg_subscriptions__outbox_and_ledger_update();

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
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_prov jsonb;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  v_prov := billing.subscription_provider(v_sub);
  if p_args->>'at' = 'now' then
    -- An operator's immediate cancel (additive option): it ends now and access with it.
    if v_sub.status = 'cancelled' then
      return jsonb_build_object('status', 'cancelled', '_changed', false, '_provider', v_prov || '{"at": "now"}');
    end if;
    perform billing_private.subscription_cancel_now(v_sub.id);
    return jsonb_build_object('status', 'cancelled', '_changed', true, '_provider', v_prov || '{"at": "now"}');
  end if;
  if v_sub.status = 'cancelling' then
    return jsonb_build_object('status', 'cancelling', '_changed', false, '_provider', v_prov);
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

-- Ends a subscription of the current community now (SECURITY DEFINER: the API role
-- does not write cancelled_at and cancellation_reason itself).
create or replace function billing_private.subscription_cancel_now(p_subscription_id text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('subscriptions:write');
  update billing.subscriptions s set status = 'cancelled', cancelled_at = billing.now(),
    cancel_requested_at = coalesce(s.cancel_requested_at, billing.now()), cancellation_reason = 'cancellation_requested',
    cancel_at = null, scheduled_plan_id = null, scheduled_at = null, paused_until = null, updated_at = now()
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id and s.status <> 'cancelled';
end
$$;

-- POST /v1/subscriptions/{id}/pause {resumes_at?}: from active or trialing; no
-- invoices while paused, no access (the ledger revokes); it resumes by itself at
-- resumes_at (billing.apply_due) or on request.
create or replace function billing_api.subscription_pause(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_until timestamptz := (p_args->>'resumes_at')::timestamptz;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status = 'paused' and v_sub.paused_until is not distinct from v_until then
    return billing.subscription_json(v_sub) || jsonb_build_object('_changed', false, '_provider', billing.subscription_provider(v_sub));
  elsif v_sub.status not in ('active', 'trialing', 'paused') then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status
      || ': only an active or trialing subscription can be paused.');
  end if;
  if v_until is not null and v_until <= billing.now() then
    perform billing.raise('BL422', 'resumes_at must be in the future.', 'resumes_at');
  end if;
  v_sub := billing_private.subscription_pause(v_sub.id, v_until);
  return billing.subscription_json(v_sub) || jsonb_build_object('_changed', true, '_provider',
    billing.subscription_provider(v_sub) || jsonb_build_object('resumes_at', billing.iso(v_until)));
end
$$;

create or replace function billing_private.subscription_pause(p_subscription_id text, p_until timestamptz)
  returns billing.subscriptions language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  update billing.subscriptions s set status = 'paused', paused_until = p_until, scheduled_plan_id = null,
    scheduled_at = null, updated_at = now()
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id
    and s.status in ('active', 'trialing', 'paused')
  returning * into v_sub;
  return v_sub;
end
$$;

-- POST /v1/subscriptions/{id}/resume: a paused subscription resumes now, its billing
-- period restarting (46-invoices.sql, billing.subscription_resume_at).
create or replace function billing_api.subscription_resume(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status <> 'paused' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not paused: nothing to resume.');
  end if;
  v_sub := billing_private.subscription_resume(v_sub.id);
  return billing.subscription_json(v_sub) || jsonb_build_object('_changed', true, '_provider', billing.subscription_provider(v_sub));
end
$$;

create or replace function billing_api.subscription_reactivate(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
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
    -- Back to what it was: past_due while a renewal is still being retried.
    status = case when billing.subscription_retry_open(s.community_id, s.id) then 'past_due'
                  when s.trial_end is not null and s.trial_end > billing.now() then 'trialing' else 'active' end,
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
  security definer
  set search_path = pg_catalog, pg_temp
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
  security definer
  set search_path = pg_catalog, pg_temp
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

-- One batch of what became due in a community: up to p_limit subscriptions whose id
-- sorts after p_after, each advanced by billing.subscription_advance (period ends,
-- renewals charged, retries, trial ends, scheduled switches, resumes after a pause).
-- Answers {now, period_changes, last_id, more}: more is true when the batch was full
-- (call again with p_after = last_id). A subscription is visited once per sweep, even
-- if it stays due. Batches let the worker commit as it goes, so a storm of renewals
-- (100,000 due at one period end) never becomes one transaction that holds every
-- member's row and outlives the worker's statement_timeout.
create or replace function billing.apply_due_batch(p_community_id text, p_after text, p_limit integer)
  returns jsonb language plpgsql volatile
as $$
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

-- Applies everything due in one community at billing.now(), in one transaction (the
-- sandbox test clock, tests; the worker goes batch by batch): open checkouts expire;
-- sandbox subscriptions whose period ended move on (cancelling -> cancelled; trialing
-- -> active at trial end; active renews for a new period, first taking a scheduled
-- switch), repeatedly until their period end is in the future; then the ledger sweep
-- re-evaluates access that lapsed by time (purchase expiry). Stripe subscriptions are
-- moved by Stripe's webhooks, not here. Owner only: it sets the community itself.
create or replace function billing.apply_due(p_community_id text) returns jsonb
  language plpgsql volatile
as $$
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


-- The worker's doors (billing_worker holds no table): the communities to sweep, and
-- apply_due with the owner's rights, one community per call (and transaction).
create or replace function billing_private.worker_community_ids(p_only text) returns setof text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$ select c.id::text from billing.communities c where p_only is null or c.id = p_only order by c.id $$;

create or replace function billing_private.worker_apply_due(p_community_id text) returns jsonb
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$ select billing.apply_due(p_community_id) $$;

-- The worker's sweep in steps, one transaction each (worker/tasks/subscriptions__apply_due.ts):
-- batches of subscriptions, then the rest (expired checkouts, the ledger sweep).
create or replace function billing_private.worker_apply_due_batch(p_community_id text, p_after text, p_limit integer)
  returns jsonb language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$ select billing.apply_due_batch(p_community_id, p_after, p_limit) $$;

create or replace function billing_private.worker_apply_due_finish(p_community_id text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_expired integer;
begin
  perform set_config('app.community_id', p_community_id, true);
  v_expired := billing.expire_checkouts();
  perform billing.ledger_sweep(p_community_id);
  return jsonb_build_object('expired_checkouts', v_expired);
end
$$;

grant execute on function billing_private.worker_community_ids(text) to billing_worker;
grant execute on function billing_private.worker_apply_due(text) to billing_worker;
grant execute on function billing_private.worker_apply_due_batch(text, text, integer) to billing_worker;
grant execute on function billing_private.worker_apply_due_finish(text) to billing_worker;

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
grant execute on function billing_private.subscription_cancel_now(text) to billing_api;
grant execute on function billing_private.subscription_pause(text, timestamptz) to billing_api;
grant execute on function billing_api.subscription_pause(jsonb) to billing_api;
grant execute on function billing_api.subscription_resume(jsonb) to billing_api;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing_api to billing_writer;
alter function billing_api.subscription_cancel(jsonb) owner to billing_writer;
alter function billing_api.subscription_reactivate(jsonb) owner to billing_writer;
alter function billing_api.subscription_switch(jsonb) owner to billing_writer;
alter function billing_api.subscription_cancel_scheduled_switch(jsonb) owner to billing_writer;
alter function billing_api.subscription_pause(jsonb) owner to billing_writer;
alter function billing_api.subscription_resume(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
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
-- plpgsql, not sql, here and below: these run in CHECK constraints on every invoice
-- row written, and a SQL function with a subquery cannot be inlined, so it was planned
-- again on every call (0.1 to 0.3 ms each); plpgsql keeps its plans for the session.
create or replace function billing.invoice_lines_valid(p_lines jsonb) returns boolean
  language plpgsql immutable parallel safe
as $$
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
$$;

-- Sum of the lines of the given kinds (all when p_types is null).
create or replace function billing.invoice_lines_sum(p_lines jsonb, p_types text[]) returns bigint
  language plpgsql immutable parallel safe
as $$
begin
  return (select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
          from jsonb_array_elements(p_lines) l
          where p_types is null or l->>'type' = any (p_types));
end
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
-- Statement-level, over the transition tables: a statement that writes many invoices
-- (the renewals of a batch, billing.renew_batch) writes all their events in one insert,
-- in invoice id order, then refreshes the ledgers; a one-row statement does exactly
-- what a row trigger did.
drop trigger if exists _500_outbox_and_ledger on billing.invoices;
drop function if exists billing.tg_invoices__outbox_and_ledger();

-- Only a past_due subscription's access depends on its invoices (sandbox dunning
-- changes the subscription itself first; this serves mirrored Stripe invoices).
create or replace function billing.invoices_ledger_refresh(p_changed billing.invoices[], p_event_ids text[])
  returns void language plpgsql volatile
as $$
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

create or replace function billing.tg_invoices__outbox_and_ledger_insert() returns trigger
  language plpgsql
as $$
declare
  v_changed billing.invoices[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, 'invoice.created',
      jsonb_build_object('invoice', billing.invoice_json(n), 'previous_attributes', null)
    from new_rows n
    order by n.id
    returning id, data->'invoice'->>'id' as invoice_id
  )
  select array_agg(n order by n.id), array_agg(ev.id order by n.id) into v_changed, v_event_ids
  from new_rows n join ev on ev.invoice_id = n.id
  where n.subscription_id is not null;
  if v_changed is not null then
    perform billing.invoices_ledger_refresh(v_changed, v_event_ids);
  end if;
  return null;
end
$$;

create or replace function billing.tg_invoices__outbox_and_ledger_update() returns trigger
  language plpgsql
as $$
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
drop trigger if exists _500_outbox_and_ledger_insert on billing.invoices;
create trigger _500_outbox_and_ledger_insert after insert on billing.invoices
  referencing new table as new_rows
  for each statement execute function billing.tg_invoices__outbox_and_ledger_insert();
drop trigger if exists _500_outbox_and_ledger_update on billing.invoices;
create trigger _500_outbox_and_ledger_update after update on billing.invoices
  referencing old table as old_rows new table as new_rows
  for each statement execute function billing.tg_invoices__outbox_and_ledger_update();

-- Which sources grant (the rule of 50-ledger.sql, with money): a past_due subscription
-- only while one of its open invoices still has a retry scheduled.
create or replace function billing.subscription_retry_open(p_community_id text, p_subscription_id text) returns boolean
  language sql stable
as $$
  select exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is not null)
$$;

-- An open invoice of the subscription has no retry left (a cancelling subscription
-- whose renewal failed keeps access only while a retry is scheduled).
create or replace function billing.subscription_unpaid(p_community_id text, p_subscription_id text) returns boolean
  language sql stable
as $$
  select exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is null)
$$;

-- ---- writing and collecting invoices ------------------------------------------------------------

-- Periods keep the billing anchor: the end of the period after p_end is the first
-- anchor + n intervals later than p_end (31 Jan + 1 month = 28 Feb, + 2 months = 31 Mar).
-- Calendar arithmetic in UTC, whatever the session's TimeZone: 31 Jan + 1 month is
-- 28 Feb at the same UTC time of day on every server.
create or replace function billing.add_utc(p_ts timestamptz, p_interval interval) returns timestamptz
  language sql immutable parallel safe
as $$ select ((p_ts at time zone 'UTC') + p_interval) at time zone 'UTC' $$;

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
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) > p_end and v_n > 1 loop
    v_n := v_n - 1;
  end loop;
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) <= p_end loop
    v_n := v_n + 1;
  end loop;
  return billing.add_utc(p_anchor, make_interval(months => v_months * v_n));
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
      and p_start >= billing.add_utc(p_sub.created_at, make_interval(months => coalesce(v_d.duration_months, 1))) then
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

-- What renewing a subscription at its period end p_at charges and where it leads: the
-- plan (a scheduled switch applies), the billing anchor (a trial's end, or a scheduled
-- switch to another interval, starts a new one), the next period end, the invoice's
-- currency and lines (the plan; the discount code's share; credit left from a plan
-- change, which pays what it can) and the credit used. One place for both ways of
-- renewing: one subscription at a time (billing.subscription_advance) and a batch
-- (billing.renew_batch).
do $$
begin
  if not exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace
                 where n.nspname = 'billing' and t.typname = 'renewal_terms') then
    create type billing.renewal_terms as (plan_id text, anchor timestamptz, period_end timestamptz,
      currency text, lines jsonb, credit_cents bigint);
  end if;
end
$$;

create or replace function billing.renewal_terms(p_sub billing.subscriptions, p_at timestamptz)
  returns billing.renewal_terms language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_t billing.renewal_terms;
  v_discount bigint;
  v_code text;
begin
  select * into v_plan from billing.plans p
  where p.community_id = p_sub.community_id and p.id = coalesce(p_sub.scheduled_plan_id, p_sub.plan_id);
  v_t.plan_id := v_plan.id;
  v_t.currency := v_plan.currency;
  v_t.anchor := case when p_sub.status = 'trialing' or p_sub.billing_anchor is null
                       or v_plan.id <> p_sub.plan_id and v_plan.interval is distinct from
                         (select p.interval from billing.plans p where p.community_id = p_sub.community_id and p.id = p_sub.plan_id)
                     then p_at else p_sub.billing_anchor end;
  v_t.period_end := billing.next_period_end(v_t.anchor, v_plan.interval, p_at);
  v_discount := billing.subscription_discount_cents(p_sub, v_plan.amount_cents, p_at);
  v_t.lines := jsonb_build_array(billing.plan_line(v_plan, v_plan.amount_cents, p_at, v_t.period_end));
  if v_discount > 0 then
    select d.code into v_code from billing.discount_codes d where d.community_id = p_sub.community_id and d.id = p_sub.discount_id;
    v_t.lines := v_t.lines || billing.discount_line(v_code, v_discount, p_at, v_t.period_end);
  end if;
  v_t.credit_cents := least(p_sub.credit_cents, v_plan.amount_cents - v_discount);
  if v_t.credit_cents > 0 then
    v_t.lines := v_t.lines || jsonb_build_object('type', 'proration', 'description', 'Credit from an earlier plan change',
      'amount_cents', -v_t.credit_cents, 'period_start', billing.iso(p_at), 'period_end', billing.iso(v_t.period_end));
  end if;
  return v_t;
end
$$;


-- Moves one sandbox subscription through everything due at p_now, in time order:
-- a cancelling one ends at its period end; an active or trialing one renews (the
-- period keeps its anchor; a scheduled switch applies) with an invoice collected at
create or replace function billing.subscription_advance(p_sub_id text, p_now timestamptz) returns integer
  language plpgsql volatile
as $$
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

-- Renews, in a few statements for the whole set, those of p_ids (subscriptions of the
-- current community, locked by the caller) whose next step at p_now is a renewal that
-- is paid and leaves them current: active or trialing sandbox subscriptions whose
-- period ended, whose card does not decline (or the invoice is free) and whose new
-- period ends after p_now. Each gets what billing.subscription_advance would give it:
-- one invoice for the new period (billing.renewal_terms), paid by one succeeded
-- attempt at the period end, then the subscription moved on; the statement-level
-- triggers write invoice.created, invoice.paid, subscription.updated and the ledger's
-- events, in the transaction. Returns the ids it renewed; the others are left to
-- billing.subscription_advance (declines and dunning, cancellations, resumes,
-- periods more than one interval behind).
create or replace function billing.renew_batch(p_ids text[], p_now timestamptz) returns text[]
  language plpgsql volatile
as $$
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
      t billing.renewal_terms, subtotal_cents bigint, discount_cents bigint, invoice_id text collate "C"
    ) on commit delete rows;
  end if;
  delete from renew_batch_terms;
  insert into renew_batch_terms (subscription_id, member_id, at, provider, t, subtotal_cents, discount_cents)
  select r.id, r.member_id, r.current_period_end, r.provider, r.t,
    billing.invoice_lines_sum((r.t).lines, array['plan', 'proration']), -billing.invoice_lines_sum((r.t).lines, array['discount'])
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
                          where c.community_id = v_community and c.subscription_id = r.id), false));
  -- Row counts for the planner (a temporary table has no statistics of its own).
  analyze renew_batch_terms;
  -- The invoices (billing.invoice_open), then their payments (billing.invoice_mark_paid).
  with ins as (
    insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
      subtotal_cents, discount_cents, total_cents, period_start, period_end, provider, created_at)
    select v_community, b.member_id, b.subscription_id, 'open', 'subscription_cycle', (b.t).currency, (b.t).lines,
      b.subtotal_cents, b.discount_cents, b.subtotal_cents - b.discount_cents, b.at, (b.t).period_end, b.provider, b.at
    from renew_batch_terms b
    order by b.subscription_id
    returning id, subscription_id
  )
  update renew_batch_terms b set invoice_id = ins.id from ins where ins.subscription_id = b.subscription_id;
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, provider_ref, attempted_at)
  select v_community, b.invoice_id, 'succeeded', b.subtotal_cents - b.discount_cents, b.provider,
    'sandbox_ch_' || substr(md5(b.invoice_id || b.at::text), 1, 16), b.at
  from renew_batch_terms b
  order by b.invoice_id;
  -- The rows to update found by their keys, one index probe each, and updated by their
  -- ctid alone (a TID scan): joined by the planner they were a scan of every invoice
  -- (or subscription) of the community per batch, on statistics a storm makes stale
  -- (it adds the invoices), so a storm of n renewals cost n^2. The ctids are read just
  -- before their statement, of rows this transaction holds (its new invoices; the
  -- subscriptions the caller locked), and the counts are checked: a ctid whose row
  -- changed since would find nothing and fail the batch, never touch another row.
  select array_agg(p.ctid), count(*) into v_ctids, v_n
  from renew_batch_terms b
  cross join lateral (select i.ctid from billing.invoices i
                      where i.community_id = v_community and i.id = b.invoice_id offset 0) p;
  update billing.invoices i set status = 'paid', amount_paid_cents = i.total_cents, paid_at = b.at,
    attempt_count = i.attempt_count + 1, next_attempt_at = null
  from renew_batch_terms b
  where i.ctid = any (v_ctids) and i.id = b.invoice_id;
  get diagnostics v_done = row_count;
  if v_done <> v_n then
    raise exception 'renew_batch: % of % invoices marked paid', v_done, v_n;
  end if;
  select array_agg(p.ctid), count(*), array_agg(b.subscription_id order by b.subscription_id) into v_ctids, v_n, v_subs
  from renew_batch_terms b
  cross join lateral (select s.ctid from billing.subscriptions s
                      where s.community_id = v_community and s.id = b.subscription_id offset 0) p;
  update billing.subscriptions s set
    status = 'active', plan_id = (b.t).plan_id, scheduled_plan_id = null, scheduled_at = null,
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



-- What an immediate switch of p_sub from plan p_old to p_new at p_now charges (the
-- proration rule below, written once: subscription_switch_now applies it and the
-- portal's preview shows it). credit: the unused time of the old plan; charge: the new
-- plan over the rest of the period, or a whole new period when the interval changes;
-- applied: the part of the credit set against the charge. Trialing: nothing.
create or replace function billing.switch_proration(p_sub billing.subscriptions, p_old billing.plans, p_new billing.plans,
  p_now timestamptz, out new_period boolean, out period_start timestamptz, out period_end timestamptz,
  out charge_cents bigint, out credit_cents bigint, out applied_cents bigint)
  language plpgsql stable
as $$
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
    credit_cents := round(p_old.amount_cents * v_frac)::bigint;
  end if;
  applied_cents := least(credit_cents, charge_cents);
end
$$;

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

-- ---- grants (execute is opt-in: 00-foundation.sql) --------------------------------------------------
-- The API role reads invoices, and its writes fire triggers and views that call these
-- with its rights; everything that writes money (invoice_open, the mark_* functions,
-- apply_due, apply_provider_invoice, sandbox_set_card) stays owner-only.
grant execute on function billing.invoice_lines_valid(jsonb) to billing_api;
grant execute on function billing.add_utc(timestamptz, interval) to billing_api;
grant execute on function billing.invoice_lines_sum(jsonb, text[]) to billing_api;
grant execute on function billing.invoice_json(billing.invoices) to billing_api;
grant execute on function billing.subscription_retry_open(text, text) to billing_api;
grant execute on function billing.subscription_unpaid(text, text) to billing_api;
grant execute on function billing.subscription_discount_cents(billing.subscriptions, bigint, timestamptz) to billing_api;
grant execute on function billing_api.invoices_list(jsonb) to billing_api;
grant execute on function billing_api.invoices_get(jsonb) to billing_api;
-- An immediate plan change: SECURITY DEFINER, it re-validates the option itself.
grant execute on function billing_private.subscription_switch_now(text, text) to billing_api;
grant execute on function billing.switch_proration(billing.subscriptions, billing.plans, billing.plans, timestamptz) to billing_api;

-- ---- refunds (POST /v1/invoices/{id}/refunds; Stripe charge.refunded) --------------------------

create table if not exists billing.refunds (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('re'),
  invoice_id text collate "C" not null,
  amount_cents bigint not null check (amount_cents > 0),
  revoke_access boolean not null default false,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  created_at timestamptz not null,
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade
);
create index if not exists refunds_invoice on billing.refunds (community_id, invoice_id, id);
-- A refund made in Stripe's dashboard arrives once, whatever the number of events.
create unique index if not exists refunds_provider_ref on billing.refunds (community_id, provider_ref) where provider_ref is not null;
alter table billing.refunds enable row level security;
alter table billing.refunds force row level security;
drop policy if exists tenant on billing.refunds;
create policy tenant on billing.refunds
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.refunds;
create policy owner_access on billing.refunds to current_user using (true) with check (true);
grant select on billing.refunds to billing_api;

-- ---- disputes (Stripe charge.dispute.*; billing sandbox dispute) ---------------------------------

create table if not exists billing.disputes (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('dp'),
  invoice_id text collate "C" not null,
  amount_cents bigint not null check (amount_cents >= 0),
  status text not null check (status in ('needs_response', 'under_review', 'won', 'lost')),
  reason text,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  created_at timestamptz not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade
);
create index if not exists disputes_invoice on billing.disputes (community_id, invoice_id);
create unique index if not exists disputes_provider_ref on billing.disputes (community_id, provider_ref) where provider_ref is not null;
alter table billing.disputes enable row level security;
alter table billing.disputes force row level security;
drop policy if exists tenant on billing.disputes;
create policy tenant on billing.disputes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.disputes;
create policy owner_access on billing.disputes to current_user using (true) with check (true);
grant select on billing.disputes to billing_api;

create or replace function billing.refund_json(p_re billing.refunds) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_re.id, 'invoice_id', p_re.invoice_id, 'amount_cents', p_re.amount_cents,
    'revoke_access', p_re.revoke_access, 'created_at', billing.iso(p_re.created_at))
$$;

create or replace function billing.dispute_json(p_dp billing.disputes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_dp.id, 'invoice_id', p_dp.invoice_id, 'amount_cents', p_dp.amount_cents,
    'status', p_dp.status, 'reason', p_dp.reason, 'created_at', billing.iso(p_dp.created_at))
$$;

-- Ends what an invoice paid for, at once: its subscription is cancelled now, its
-- purchase refunded or disputed. The ledger then revokes (reasons refunded /
-- disputed for subscriptions; purchase_refunded / purchase_updated for purchases).
create or replace function billing.invoice_end_access(p_inv billing.invoices, p_cause text) returns void
  language plpgsql volatile
as $$
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

-- Records a refund of a paid invoice (all that is left to refund when p_amount is
-- null): amount_refunded_cents never exceeds amount_paid_cents (a constraint), and a
-- provider refund already recorded (same provider_ref) is not counted twice. With
-- p_revoke the covered subscription or purchase ends now. Returns {invoice, refund}.
create or replace function billing.invoice_record_refund(p_invoice_id text, p_amount bigint, p_revoke boolean,
  p_provider_ref text default null) returns jsonb
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_re billing.refunds;
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
      return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re), 'duplicate', true);
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
  update billing.invoices i set amount_refunded_cents = i.amount_refunded_cents + v_re.amount_cents
  where i.community_id = v_inv.community_id and i.id = v_inv.id returning * into v_inv;
  if coalesce(p_revoke, false) then
    perform billing.invoice_end_access(v_inv, 'refunded');
  end if;
  perform billing.emit_event(v_inv.community_id, 'invoice.refunded', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re), 'duplicate', false);
end
$$;

-- POST /v1/invoices/{id}/refunds, the API's door (SECURITY DEFINER: the API role
-- writes no money table itself). p_provider_ref: the provider's refund id, when the
-- handler has already refunded through Stripe.
create or replace function billing_private.invoice_refund(p_invoice_id text, p_amount bigint, p_revoke boolean,
  p_provider_ref text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('invoices:write');
  return billing.invoice_record_refund(p_invoice_id, p_amount, p_revoke, p_provider_ref);
end
$$;

-- What the refund handler needs before calling the provider: the invoice, what is
-- left to refund and the provider's payment reference.
create or replace function billing_api.invoice_refund_prepare(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
begin
  perform billing.require_scope('invoices:write');
  select * into v_inv from billing.invoices i where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  return jsonb_build_object('invoice_id', v_inv.id, 'provider', v_inv.provider, 'status', v_inv.status,
    'currency', v_inv.currency, 'left_cents', v_inv.amount_paid_cents - v_inv.amount_refunded_cents,
    'payment_ref', (select a.provider_ref from billing.payment_attempts a
      where a.community_id = v_inv.community_id and a.invoice_id = v_inv.id and a.status = 'succeeded'));
end
$$;

create or replace function billing_api.invoice_refund(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.invoice_refund(p_args->>'id', (p_args->>'amount_cents')::bigint,
    coalesce((p_args->>'revoke_access')::boolean, false), p_args->>'provider_ref');
end
$$;

-- A dispute opened against an invoice's payment (Stripe charge.dispute.created;
-- billing sandbox dispute): the covered access ends at once (reason disputed). A
-- dispute that is later won restores nothing by itself (see docs/decisions.md).
create or replace function billing.invoice_record_dispute(p_invoice_id text, p_amount bigint, p_status text,
  p_reason text, p_provider_ref text) returns jsonb
  language plpgsql volatile
as $$
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
    -- Later news of the same dispute: its status only.
    update billing.disputes d set status = coalesce(p_status, d.status), updated_at = now()
    where d.community_id = v_dp.community_id and d.id = v_dp.id returning * into v_dp;
    return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', true);
  end if;
  insert into billing.disputes (community_id, invoice_id, amount_cents, status, reason, provider, provider_ref, created_at)
  values (v_inv.community_id, v_inv.id, coalesce(p_amount, v_inv.amount_paid_cents), coalesce(p_status, 'needs_response'),
    p_reason, v_inv.provider, p_provider_ref, billing.now())
  returning * into v_dp;
  perform billing.invoice_end_access(v_inv, 'disputed');
  perform billing.emit_event(v_inv.community_id, 'invoice.disputed', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', false);
end
$$;

-- The invoice a Stripe charge or payment intent paid (refund and dispute events name those).
create or replace function billing.invoice_by_payment(p_payment_ref text) returns text
  language sql stable
as $$
  select coalesce(
    (select a.invoice_id from billing.payment_attempts a
     where a.community_id = billing.current_community_id() and a.provider_ref = p_payment_ref and a.status = 'succeeded' limit 1),
    (select i.id from billing.invoices i join billing.purchases pu on pu.community_id = i.community_id and pu.id = i.purchase_id
     where i.community_id = billing.current_community_id() and pu.provider_ref = p_payment_ref limit 1))
$$;

-- ---- pause and resume (sandbox money side) ------------------------------------------------------

-- A paused subscription resumes at p_at: the billing period restarts then (a new
-- anchor) with an invoice for the new period, collected at once; a decline leaves it
-- past_due with the community's retries.
create or replace function billing.subscription_resume_at(p_sub_id text, p_at timestamptz) returns billing.subscriptions
  language plpgsql volatile
as $$
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
  select * into v_plan from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  v_end := billing.next_period_end(p_at, v_plan.interval, p_at);
  if v_sub.provider = 'sandbox' then
    v_discount := billing.subscription_discount_cents(v_sub, v_plan.amount_cents, p_at);
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_plan.amount_cents, p_at, v_end));
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
    paused_until = null, current_period_start = p_at, current_period_end = v_end, billing_anchor = p_at, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;

create or replace function billing_private.subscription_resume(p_subscription_id text) returns billing.subscriptions
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('subscriptions:write');
  return billing.subscription_resume_at(p_subscription_id, billing.now());
end
$$;

grant execute on function billing.refund_json(billing.refunds) to billing_api;
grant execute on function billing.dispute_json(billing.disputes) to billing_api;
grant execute on function billing_api.invoice_refund_prepare(jsonb) to billing_api;
grant execute on function billing_api.invoice_refund(jsonb) to billing_api;
grant execute on function billing_private.invoice_refund(text, bigint, boolean, text) to billing_api;
grant execute on function billing_private.subscription_resume(text) to billing_api;
--! EndIncluded 46-invoices.sql
