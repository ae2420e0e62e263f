-- Checkout: creating checkout links (every rule of the spec's request table and
-- eligibility list), discount codes at checkout, completing a paid checkout (the
-- sandbox page, `billing sandbox complete` and the Stripe webhook all end here),
-- portal sessions and link codes.
--
-- Lifetimes: a checkout is open 24 hours; a portal session and a link code 10 minutes.

alter table billing.checkout_sessions add column access_token text;
alter table billing.checkout_sessions add column subscription_id text collate "C";
alter table billing.checkout_sessions add column purchase_id text collate "C";
alter table billing.subscriptions add column provider_customer_ref text;
alter table billing.subscriptions add column provider_schedule_ref text;
-- Proration of the last immediate switch: credit for the unused time of the old plan
-- and charge for the rest of the period on the new one (minor units).
alter table billing.subscriptions add column proration_credit_cents integer;
alter table billing.subscriptions add column proration_charge_cents integer;
alter table billing.subscriptions add column prorated_at timestamptz;
alter table billing.portal_sessions add column access_token text;

create index checkout_sessions_open on billing.checkout_sessions (community_id, expires_at) where status = 'open';
create index checkout_sessions_provider_ref on billing.checkout_sessions (community_id, provider_ref)
  where provider_ref is not null;
create index discount_redemptions_checkout on billing.discount_redemptions (community_id, checkout_id);
create index link_codes_member on billing.link_codes (community_id, member_id, intended_platform);

create or replace function billing.checkout_lifetime() returns interval
  language sql immutable parallel safe as $$ select interval '24 hours' $$;

create or replace function billing.plan_interval(p_interval text) returns interval
  language sql immutable parallel safe
as $$ select case p_interval when 'month' then interval '1 month' when 'year' then interval '1 year' end $$;

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
  v_sub_id text;
  v_pur_id text;
  v_trial_end timestamptz;
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
        provider_customer_ref, provider_updated_at)
      values (v_cs.community_id, v_cs.member_id, v_plan.id,
        coalesce(p_details->>'status', case when v_trial_end is not null then 'trialing' else 'active' end),
        coalesce((p_details->>'period_start')::timestamptz, v_now),
        coalesce((p_details->>'period_end')::timestamptz, v_trial_end, v_now + billing.plan_interval(v_plan.interval)),
        v_trial_end, (p_details->>'cancel_at')::timestamptz, v_cs.client_reference_id, v_cs.id, v_cs.provider,
        p_details->>'provider_ref', p_details->>'customer_ref', (p_details->>'provider_updated_at')::timestamptz)
      returning id into v_sub_id;
    else
      update billing.subscriptions s set checkout_id = v_cs.id,
        client_reference_id = coalesce(s.client_reference_id, v_cs.client_reference_id),
        provider_customer_ref = coalesce(s.provider_customer_ref, p_details->>'customer_ref')
      where s.community_id = v_cs.community_id and s.id = v_sub_id
        and (s.checkout_id is distinct from v_cs.id or s.client_reference_id is null and v_cs.client_reference_id is not null);
    end if;
  else
    insert into billing.purchases (community_id, member_id, plan_id, status, amount_cents, currency,
      access_expires_at, paid_at, client_reference_id, checkout_id, provider_ref)
    values (v_cs.community_id, v_cs.member_id, v_plan.id, 'completed', v_cs.amount_cents - v_cs.discount_cents,
      v_cs.currency, case when v_plan.access_days is not null then v_now + make_interval(days => v_plan.access_days) end,
      v_now, v_cs.client_reference_id, v_cs.id, p_details->>'provider_ref')
    returning id into v_pur_id;
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
revoke execute on function billing.complete_checkout(text, jsonb) from public, billing_api;

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
