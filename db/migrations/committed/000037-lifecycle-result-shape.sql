--! Previous: sha1:2a6cb165641b9dd1666af84dded7e16a713ae3d1
--! Hash: sha1:992df271503886003b2990098285066d2dceec0e
--! Message: lifecycle-result-shape

--! split: 1-current.sql
-- Enter migration here

--! split: 30-lifecycle-result-shape.sql
-- Issue 28 item 3: the lifecycle billing_api functions return an explicit result,
-- {"subscription": the public answer, "changed": bool, "provider": the provider call's
-- facts}, instead of the public JSON with private "_provider"/"_changed" keys in it
-- (db/migrations/fixtures/40-subscriptions.sql; the handler reads it in
-- src/domain/subscriptions/lifecycle-operations.ts). Names and signatures are
-- unchanged (op_dispatch is not rewritten); ownership and grants stay as they are.

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
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', billing.subscription_provider(v_sub));
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
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', billing.subscription_provider(v_sub));
end
$$;

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
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', v_prov || jsonb_build_object(
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
  return jsonb_build_object('subscription', billing.subscription_json(v_sub), 'changed', true,
    'provider', billing.subscription_provider(v_sub));
end
$$;
