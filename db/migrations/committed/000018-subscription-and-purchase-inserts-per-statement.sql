--! Previous: sha1:36867f82eafd45a92eb917eafd7ecd6d715ec810
--! Hash: sha1:52290e493e9d2411272dc30cb6439a170582803b
--! Message: Subscription and purchase inserts per statement

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

-- Inserts, over the transition table: one subscription.created per row, all in one
-- insert in subscription id order (the order they were written), then each row's
-- member's ledger (50-ledger.sql) with its row's event as trigger_event_id, for all
-- rows at once (billing.ledger_refresh_list). A one-row insert (a checkout) writes
-- what a row trigger wrote, in the same order; a statement of many writes the
-- subscriptions' events first, then the entitlement events.
create or replace function billing.tg_subscriptions__outbox_and_ledger_insert() returns trigger
  language plpgsql
as $$
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

drop trigger if exists _500_outbox_and_ledger_insert on billing.subscriptions;
create trigger _500_outbox_and_ledger_insert after insert on billing.subscriptions
  referencing new table as new_rows
  for each statement execute function billing.tg_subscriptions__outbox_and_ledger_insert();

-- A deleted subscription's member's ledger, row by row (only tests and cleanup delete).
create or replace function billing.tg_subscriptions__ledger_delete() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_refresh_member(old.community_id, old.member_id, 'subscription_deleted', null);
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.subscriptions;
drop function if exists billing.tg_subscriptions__outbox_and_ledger();
drop trigger if exists _500_ledger_delete on billing.subscriptions;
create trigger _500_ledger_delete after delete on billing.subscriptions
  for each row execute function billing.tg_subscriptions__ledger_delete();

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
--! Included 45-purchases.sql
-- Purchases (one-time payments): the table, the purchase JSON object (API and
-- events), its outbox-and-ledger trigger, the read API and refunds.

create table if not exists billing.purchases (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pur'),
  member_id text collate "C" not null,
  plan_id text collate "C" not null,
  status text not null default 'completed' check (status in ('completed', 'refunded', 'disputed')),
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
-- 'disputed' (issue 12) joined the list after the table was first created.
alter table billing.purchases drop constraint if exists purchases_status_check;
alter table billing.purchases add constraint purchases_status_check check (status in ('completed', 'refunded', 'disputed'));
create index if not exists purchases_member on billing.purchases (community_id, member_id);
create index if not exists purchases_expiry on billing.purchases (access_expires_at) where access_expires_at is not null;
create index if not exists purchases_plan on billing.purchases (community_id, plan_id);
alter table billing.purchases enable row level security;
alter table billing.purchases force row level security;
drop policy if exists tenant on billing.purchases;
create policy tenant on billing.purchases
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.purchases;
create policy owner_access on billing.purchases to current_user using (true) with check (true);
grant select on billing.purchases to billing_api;
revoke insert, update, delete on billing.purchases from billing_api;

-- ---- the purchase object -------------------------------------------------------------

-- As for subscriptions: the three-argument form is a plain expression (inlined) for
-- queries that join the plan and tier themselves; the one-argument form looks them up.
create or replace function billing.purchase_json(p_pur billing.purchases, p_plan billing.plans,
  p_tier billing.tiers) returns jsonb
  language sql stable parallel safe
as $$
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

create or replace function billing.purchase_json(p_pur billing.purchases) returns jsonb
  language sql stable parallel safe
as $$
  select billing.purchase_json(p_pur, p, t)
  from (select 1) one
  left join billing.plans p on p.community_id = p_pur.community_id and p.id = p_pur.plan_id
  left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
$$;

-- The purchase of events: the API object plus client_reference_id (plpgsql: cached plans).
create or replace function billing.purchase_event_json(p_pur billing.purchases) returns jsonb
  language plpgsql stable
as $$
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

-- ---- outbox and ledger -----------------------------------------------------------------

-- Inserts, over the transition table: one purchase.created per row, all in one insert
-- in purchase id order, then each row's member's ledger with its row's event as
-- trigger_event_id, for all rows at once (billing.ledger_refresh_list, 50-ledger.sql):
-- a one-row insert writes what a row trigger wrote, in the same order; a statement of
-- many writes the purchases' events first, then the entitlement events.
create or replace function billing.tg_purchases__outbox_and_ledger_insert() returns trigger
  language plpgsql
as $$
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

drop trigger if exists _500_outbox_and_ledger_insert on billing.purchases;
create trigger _500_outbox_and_ledger_insert after insert on billing.purchases
  referencing new table as new_rows
  for each statement execute function billing.tg_purchases__outbox_and_ledger_insert();

-- Updates and deletes, row by row: purchase.updated or purchase.refunded when a visible
-- field changed, then the member's ledger (and the one it left).
create or replace function billing.tg_purchases__outbox_and_ledger() returns trigger
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

drop trigger if exists _500_outbox_and_ledger on billing.purchases;
create trigger _500_outbox_and_ledger after update or delete on billing.purchases
  for each row execute function billing.tg_purchases__outbox_and_ledger();

-- ---- read API ----------------------------------------------------------------------------

create or replace function billing_api.purchases_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('purchases:read');
  select array_agg(p.id order by p.id desc), array_agg(billing.purchase_json(p) order by p.id desc)
    into v_ids, v_items
  from (select * from billing.purchases p
        where p.community_id = billing.current_community_id()
          and p.id < coalesce(p_args->>'cursor', chr(1114111))
        order by p.id desc limit v_limit + 1) p;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.purchases_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_pur billing.purchases;
begin
  perform billing.require_scope('purchases:read');
  select * into v_pur from billing.purchases p
  where p.community_id = billing.current_community_id() and p.id = p_args->>'id';
  if v_pur.id is null then
    perform billing.raise('BL404', 'No purchase ' || (p_args->>'id') || '.');
  end if;
  return billing.purchase_json(v_pur);
end
$$;

-- ---- refunds -------------------------------------------------------------------------------

-- A fully refunded one-time payment (Stripe: charge.refunded) ends the purchase's access.
create or replace function billing.refund_purchase(p_provider_ref text) returns text
  language sql volatile
as $$
  update billing.purchases pu set status = 'refunded'
  where pu.community_id = billing.current_community_id() and pu.provider_ref = p_provider_ref and pu.status = 'completed'
  returning pu.id
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.purchase_event_json(billing.purchases) to billing_api;
grant execute on function billing.purchase_json(billing.purchases) to billing_api;
grant execute on function billing.purchase_json(billing.purchases,billing.plans,billing.tiers) to billing_api;
grant execute on function billing_api.purchases_list(jsonb) to billing_api;
grant execute on function billing_api.purchases_get(jsonb) to billing_api;
--! EndIncluded 45-purchases.sql
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
--   subscription: status active or trialing; past_due while one of its open invoices
--     still has a retry scheduled (46-invoices.sql); cancelling while
--     current_period_end > the community's now (or has no end), unless an open invoice
--     of it has no retry left; paused and cancelled never.
--   purchase: status completed, until access_expires_at (forever when null).
--   grant (47-grants.sql): not revoked, until expires_at (forever when null).
-- Sources reach entitlements through their plan's tier (billing.tier_entitlements).
-- An inactive row keeps sources [] and benefits [] (so a revoke's
-- changes.removed_benefits lists what to take away); its identities snapshot is
-- frozen until the next grant.
--
-- Time: purchases expiring and cancelling periods ending change no row, so
-- billing.ledger_sweep re-evaluates rows whose next_check_at has passed.
-- Every table that feeds the ledger refreshes it from its own trigger: subscriptions
-- (inserts and updates per statement, _500_outbox_and_ledger_insert and _update;
-- deletes per row, _500_ledger_delete; 40-subscriptions.sql) and purchases (inserts
-- per statement, _500_outbox_and_ledger_insert; updates and deletes per row,
-- _500_outbox_and_ledger; 45-purchases.sql), the statement-level ones through
-- billing.ledger_refresh_list, invoices of past_due subscriptions (46-invoices.sql),
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
grant select on billing.member_entitlements to billing_api;
revoke insert, update, delete on billing.member_entitlements from billing_api;
grant select, insert, update on billing.member_entitlements to billing_writer;

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
        or (s.status = 'cancelling' and (s.current_period_end is null or s.current_period_end > p_now)
            and not billing.subscription_unpaid(s.community_id, s.id)))
    union all
    select 'grant', g.id, 'active', g.tier_id, null, null, g.expires_at, g.expires_at is not null
    from billing.grants g
    where g.community_id = p_community_id and g.member_id = p_member_id and g.revoked_at is null
      and (g.expires_at is null or g.expires_at > p_now)
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

-- billing.ledger_refresh_member for each (p_community_ids[i], p_member_ids[i]) in turn,
-- with its own reason and trigger event, in a few statements for the whole list (a
-- statement that changes many subscriptions, such as a batch of renewals, refreshes
-- its members at once). The same rows, revisions, timestamps and events, in the same
-- order, as the calls one by one: a member listed again is refreshed once, at its first
-- place (nothing between the calls changes its sources, so a second call finds nothing
-- to change). Returns how many rows changed visibly.
create or replace function billing.ledger_refresh_each(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns integer language plpgsql volatile
as $$
declare
  v_changed integer;
begin
  -- One refresh of a member at a time (see ledger_refresh_member), taken in list order.
  perform count(*) from (
    select 1 from (select k, p_community_ids[k] as c, p_member_ids[k] as m from generate_subscripts(p_member_ids, 1) k) l
    join billing.members mb on mb.community_id = l.c and mb.id = l.m
    order by l.k
    for no key update of mb) x;
  with req as (
    -- each member at its first place in the list; a member being deleted is skipped
    select distinct on (l.c, l.m) l.k, l.c, l.m, p_reasons[l.k] as reason, p_trigger_event_ids[l.k] as trigger_event_id
    from (select k, p_community_ids[k] as c, p_member_ids[k] as m from generate_subscripts(p_member_ids, 1) k) l
    where exists (select 1 from billing.members mb where mb.community_id = l.c and mb.id = l.m)
    order by l.c, l.m, l.k
  ), mem as materialized (
    select r.*, t.now, t.member, jsonb_build_object('identities', t.member->'identities',
      'external_subjects', t.member->'external_subjects') as snapshot
    from req r
    cross join lateral (select billing.community_now(r.c) as now, billing.member_json(r.c, r.m) as member offset 0) t
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
  ), act as materialized (
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
  ), nxt as (
    update billing.member_entitlements x set next_check_at = a.d_next
    from act a
    where a.type is null and a.s_next is distinct from a.d_next and x.community_id = a.c and x.id = a.stored_id
  ), upd as (
    -- returning what the row's event needs, so no join finds the row again
    update billing.member_entitlements x set
      status = a.status,
      revision = x.revision + 1,
      sources = coalesce(a.d_sources, '[]'),
      benefits = coalesce(a.d_benefits, '[]'),
      identities = a.identities,
      granted_at = case when a.type = 'member.entitlement.granted' then a.now else x.granted_at end,
      revoked_at = case when a.type = 'member.entitlement.granted' then null
                        when a.type = 'member.entitlement.revoked' then a.now else x.revoked_at end,
      next_check_at = a.d_next,
      updated_at = now()
    from act a
    where a.type is not null and a.stored_id is not null and x.community_id = a.c and x.id = a.stored_id
    returning a.k, a.type, a.entitlement_id, a.s_benefits, a.member, a.reason, a.trigger_event_id, x as me
  ), ins as (
    insert into billing.member_entitlements (community_id, id, member_id, entitlement_id, status,
      revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
    select a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now, a.d_next, now()
    from act a
    where a.stored_id is null
    order by a.k, a.entitlement_id
  ), changed as (
    select u.k, u.type, u.entitlement_id, u.s_benefits, u.member, u.reason, u.trigger_event_id, u.me from upd u
    union all
    -- the row ins writes, as it writes it (columns it leaves to their defaults: none
    -- that an event shows)
    select a.k, a.type, a.entitlement_id, null, a.member, a.reason, a.trigger_event_id,
      jsonb_populate_record(null::billing.member_entitlements, jsonb_build_object(
        'community_id', a.c, 'id', a.new_id, 'member_id', a.m, 'entitlement_id', a.d_ent,
        'status', 'active', 'revision', 1, 'sources', a.d_sources, 'benefits', a.d_benefits,
        'identities', a.snapshot, 'granted_at', a.now, 'next_check_at', a.d_next, 'updated_at', now()))
    from act a
    where a.stored_id is null
  ), ev as (
    -- One event per changed row, in list order, then entitlement order (the calls' order).
    insert into billing.events (community_id, type, data)
    select (r.me).community_id, r.type, jsonb_build_object(
      'member', r.member,
      'entitlement', billing.member_entitlement_json(r.me),
      'changes', jsonb_build_object(
        'added_benefits', billing.jsonb_array_minus((r.me).benefits, coalesce(r.s_benefits, '[]')),
        'removed_benefits', billing.jsonb_array_minus(coalesce(r.s_benefits, '[]'), (r.me).benefits)),
      'reason', r.reason,
      'trigger_event_id', r.trigger_event_id)
    from changed r
    order by r.k, r.entitlement_id
    returning 1
  )
  select count(*)::integer into v_changed from ev;
  return v_changed;
end
$$;

-- The ledgers of a statement's rows, in list order (a member listed again is refreshed
-- once, at its first place): a few one member at a time (ledger_refresh_member), more
-- in a few statements for the whole list (ledger_refresh_each: the same outcome, and
-- its one big statement costs more than the per-member functions for a single row).
-- The statement-level triggers of subscriptions and purchases call it.
create or replace function billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns void language plpgsql volatile
as $$
begin
  if cardinality(p_member_ids) <= 8 then
    for i in 1 .. cardinality(p_member_ids) loop
      perform billing.ledger_refresh_member(p_community_ids[i], p_member_ids[i], p_reasons[i], p_trigger_event_ids[i]);
    end loop;
  elsif p_member_ids is not null then
    perform billing.ledger_refresh_each(p_community_ids, p_member_ids, p_reasons, p_trigger_event_ids);
  end if;
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
    union all
    select g.member_id from billing.grants g
    where g.community_id = p_community_id and g.tier_id = any (p_tier_ids) and g.revoked_at is null
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
grant execute on function billing.ledger_refresh_each(text[],text[],text[],text[]) to billing_api;
grant execute on function billing.ledger_refresh_list(text[],text[],text[],text[]) to billing_api;
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
-- statement's transaction: subscriptions (_500_outbox_and_ledger_insert and _update,
-- per statement over their transition tables, 40-subscriptions.sql), purchases
-- (_500_outbox_and_ledger_insert per statement, _500_outbox_and_ledger per row for
-- updates, 45-purchases.sql),
-- invoices (_500_outbox_and_ledger_insert and _update, per statement,
-- 46-invoices.sql), checkout sessions and members (_500_outbox), member identities and
-- external subjects (_500_outbox_and_ledger). Entitlement events come from the ledger
-- (billing.ledger_refresh_member for a few members, billing.ledger_refresh_each for a
-- statement's many, 50-ledger.sql) and webhook_endpoint.disabled from the delivery
-- worker (70-webhooks.sql). Other code only changes rows; it never writes
-- billing.events itself.
--
-- Lifecycle event types (data holds the object under its resource name, plus
-- previous_attributes: the visible fields that changed and their old values):
--   subscription.created, subscription.updated, subscription.cancelled
--   purchase.created, purchase.updated, purchase.refunded
--   invoice.created, invoice.paid, invoice.payment_failed, invoice.refunded,
--   invoice.disputed
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
grant select on billing.events to billing_api;
revoke insert, update, delete on billing.events from billing_api;
grant select, insert on billing.events to billing_writer;

-- Statement-level, over the transition table: one insert for all the statement's
-- deliveries (one per enabled endpoint of 70-webhooks.sql whose event_types match;
-- empty = all) and one add_jobs call for all its jobs, whatever the number of rows.
-- One job per 50 deliveries of one endpoint, flagged with the endpoint's id: a slow
-- or hanging endpoint then holds up only its own jobs (a job records its deliveries
-- when the last one ends) and the worker can leave its jobs aside (forbiddenFlags,
-- worker/tasks/webhook_deliveries__send.ts) while it holds its share of the slots.
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
  ('invoice.refunded', 'An invoice was refunded, in full or in part.'),
  ('invoice.disputed', 'A payment of an invoice was disputed; the access it paid for ended.'),
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
