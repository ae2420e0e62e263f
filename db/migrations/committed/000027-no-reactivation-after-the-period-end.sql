--! Previous: sha1:d9a9c565b4acc9dfab69422814e8434513da8f33
--! Hash: sha1:f8ea1ffe02be68ad43667cc52bf6efee021d105e
--! Message: No reactivation after the period end

--! split: 1-current.sql
-- A cancelling subscription whose period has ended is not reactivated (409): it has
-- ended, and made active again it gave access without a paid invoice.
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
