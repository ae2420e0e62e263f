-- Subscription lifecycle (the spec's states table): cancel at period end, reactivate,
-- switch options, switch (immediate with proration, or scheduled for a downgrade),
-- cancel a scheduled switch; period ends (renewal, scheduled switches, trial ends,
-- cancellations), the sandbox test clock, and Stripe subscription state.
--
-- The billing_api functions return the subscription's JSON plus "_provider" facts
-- (provider, provider_ref, ...) that the handler uses for the provider call and strips.

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
    scheduled_plan_id = null, scheduled_at = null, updated_at = now()
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
    cancel_at = null, updated_at = now()
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
    select t.id as tier_id, t.rank from billing.plans p
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
      and p.interval is not null and p.id <> p_sub.plan_id)
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
  v_opts jsonb;
  v_grp text;
  v_old billing.plans;
  v_new billing.plans;
  v_now timestamptz := billing.now();
  v_frac numeric;
  v_prov jsonb;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  perform billing.require_switchable(v_sub);
  v_opts := billing.switch_options(v_sub);
  select g into v_grp from jsonb_each(v_opts) e(g, arr), jsonb_array_elements(arr) o
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
    v_frac := case when v_sub.status = 'trialing' or v_sub.current_period_end is null
                     or v_sub.current_period_end <= v_sub.current_period_start then 0
                   else greatest(0, least(1, extract(epoch from (v_sub.current_period_end - v_now))
                     / extract(epoch from (v_sub.current_period_end - v_sub.current_period_start)))) end;
    update billing.subscriptions s set plan_id = v_new.id, scheduled_plan_id = null, scheduled_at = null,
      proration_credit_cents = round(v_old.amount_cents * v_frac)::integer,
      proration_charge_cents = round(v_new.amount_cents * v_frac)::integer,
      prorated_at = v_now, updated_at = now()
    where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
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
  v_sub billing.subscriptions;
  v_plan billing.plans;
  v_n integer := 0;
  v_expired integer;
  v_new_start timestamptz;
begin
  perform set_config('app.community_id', p_community_id, true);
  v_now := billing.now();
  v_expired := billing.expire_checkouts();
  for v_sub in
    select * from billing.subscriptions s
    where s.community_id = p_community_id and s.provider = 'sandbox'
      and s.status in ('active', 'trialing', 'past_due', 'cancelling') and s.current_period_end <= v_now
    order by s.id
    for update
  loop
    while v_sub.status <> 'cancelled' and v_sub.current_period_end <= v_now loop
      if v_sub.status = 'cancelling' then
        update billing.subscriptions s set status = 'cancelled', cancelled_at = s.current_period_end, updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
      else
        select * into v_plan from billing.plans p
        where p.community_id = v_sub.community_id and p.id = coalesce(v_sub.scheduled_plan_id, v_sub.plan_id);
        v_new_start := v_sub.current_period_end;
        update billing.subscriptions s set status = 'active', plan_id = v_plan.id,
          scheduled_plan_id = null, scheduled_at = null,
          current_period_start = v_new_start,
          current_period_end = v_new_start + billing.plan_interval(v_plan.interval),
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
      end if;
      v_n := v_n + 1;
    end loop;
  end loop;
  perform billing.ledger_sweep(p_community_id);
  return jsonb_build_object('now', billing.iso(v_now), 'period_changes', v_n, 'expired_checkouts', v_expired);
end
$$;
revoke execute on function billing.apply_due(text) from public, billing_api;

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
revoke execute on function billing.apply_due_all() from public, billing_api;

-- The sandbox test clock: moves a sandbox community's time forward and applies
-- everything that became due before returning.
create or replace function billing.sandbox_advance(p_community_id text, p_days numeric) returns jsonb
  language plpgsql volatile
as $$
declare
  v_provider text;
begin
  if p_days is null or p_days <= 0 then
    perform billing.raise('BL422', '--days must be a positive number.', 'days');
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
revoke execute on function billing.sandbox_advance(text, numeric) from public, billing_api;

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
revoke execute on function billing.apply_provider_subscription(jsonb) from public, billing_api;

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
revoke execute on function billing.expire_checkout(text) from public, billing_api;

-- A fully refunded one-time payment (Stripe: charge.refunded) ends the purchase's access.
create or replace function billing.refund_purchase(p_provider_ref text) returns text
  language sql volatile
as $$
  update billing.purchases pu set status = 'refunded'
  where pu.community_id = billing.current_community_id() and pu.provider_ref = p_provider_ref and pu.status = 'completed'
  returning pu.id
$$;
revoke execute on function billing.refund_purchase(text) from public, billing_api;

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
revoke execute on function billing.record_provider_event(text, text, text) from public, billing_api;
