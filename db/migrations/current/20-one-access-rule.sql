-- Issue 28 item 3, "Files that hold one idea" (changed functions restated whole; the
-- fixtures hold the same text).
-- The entitlement rule, once: billing.source_grants_access (fixtures/41-access-rule.sql,
-- with billing.subscription_retry_open and subscription_unpaid, moved there from
-- 46-invoices.sql unchanged), called by the ledger (ledger_desired,
-- ledger_members_on_tiers), grant_json and check_eligible.

-- Does this source grant access (its tier's entitlements) at p_now? The rule:
--   subscription: active or trialing; past_due while one of its open invoices still has
--     a retry scheduled (billing.subscription_retry_open above); cancelling
--     until its period ends (no end: no limit), unless one of its open invoices has no
--     retry left (billing.subscription_unpaid); paused until paid_through, the end of
--     the period it had paid when paused (issue 26: a pause never takes paid time);
--     cancelled never.
--   purchase: completed, until access_expires_at (no limit when null).
--   grant (47-grants.sql): not revoked, until expires_at (no limit when null).
-- The arguments are the source's own columns: p_type 'subscription', 'purchase' or
-- 'grant'; p_status its status (a grant's: 'active', or 'revoked' once revoked_at is
-- set); p_valid_until its end (a subscription's current_period_end, paid_through while
-- paused; a purchase's access_expires_at; a grant's expires_at); p_now the community's
-- clock. Time set aside (p_now => '-infinity': no end has passed) it answers "could this
-- source grant?" (billing.ledger_members_on_tiers); at p_now => p_valid_until, whether
-- the source stops granting by itself at its end (the ledger's next_check_at).
-- One SQL expression, so it is inlined into the queries that call it (a plain filter
-- of a set-based plan, never a call per row; test/db/hot-path-plans.test.ts); the
-- invoice lookups run only for the past_due and cancelling subscriptions they concern.
create or replace function billing.source_grants_access(p_type text, p_community_id text, p_id text,
  p_status text, p_valid_until timestamptz, p_now timestamptz) returns boolean
  language sql stable
as $$
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

comment on function billing.source_grants_access(text, text, text, text, timestamptz, timestamptz) is
  'The entitlement rule: does this source (subscription, purchase or grant) grant access at p_now? See 41-access-rule.sql.';

grant execute on function billing.source_grants_access(text,text,text,text,timestamptz,timestamptz) to billing_api;

-- Desired ledger of one member: entitlement -> supporting sources, benefits and the
-- earliest time one of those sources lapses by itself.
create or replace function billing.ledger_desired(p_community_id text, p_member_id text, p_now timestamptz)
  returns table (entitlement_id text, sources jsonb, benefits jsonb, next_check_at timestamptz)
  language sql stable
as $$
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

-- Members whose supporting sources (that could grant) sit on one of the tiers.
create or replace function billing.ledger_members_on_tiers(p_community_id text, p_tier_ids text[])
  returns text[] language sql stable
as $$
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

create or replace function billing.grant_json(p_g billing.grants) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_g.id, 'member_id', p_g.member_id, 'tier_id', p_g.tier_id, 'note', p_g.note,
    'expires_at', billing.iso(p_g.expires_at), 'revoked_at', billing.iso(p_g.revoked_at),
    'status', case when p_g.revoked_at is not null then 'revoked'
                   when not billing.source_grants_access('grant', p_g.community_id, p_g.id, 'active', p_g.expires_at,
                          billing.community_now(p_g.community_id)) then 'expired'
                   else 'active' end,
    'created_at', billing.iso(p_g.created_at))
$$;

-- not_eligible: the member already holds this tier (a non-cancelled subscription on
-- one of its plans, or a purchase of it that still grants access: 50-ledger.sql), or is buying a recurring plan
-- while holding a non-cancelled subscription on another tier (that needs a switch,
-- not a second subscription).
create or replace function billing.check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans) returns void
  language plpgsql stable
as $$
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
