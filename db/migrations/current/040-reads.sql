-- Read API: subscriptions, members, purchases, discounts, analytics, entitlements.
--
-- The *_json builders below are the one place each resource's JSON shape is written;
-- other parts (ledger events, checkout, lifecycle, MCP) call them. Optional fields with
-- no value are null, never omitted.

-- ---- JSON builders ---------------------------------------------------------------

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

-- Member: identities and external subjects, in a stable order.

create or replace function billing.purchase_json(p_pur billing.purchases) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_pur.id,
    'status', p_pur.status,
    'plan_id', p_pur.plan_id,
    'plan_name', p.name,
    'tier_id', p.tier_id,
    'tier_name', t.name,
    'member_id', p_pur.member_id,
    'amount_cents', p_pur.amount_cents,
    'currency', p_pur.currency,
    'access_expires_at', billing.iso(p_pur.access_expires_at),
    'paid_at', billing.iso(p_pur.paid_at),
    'created_at', billing.iso(p_pur.created_at))
  from (select 1) one
  left join billing.plans p on p.community_id = p_pur.community_id and p.id = p_pur.plan_id
  left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
$$;

-- Member entitlement: sources and benefits exactly as the ledger holds them. The
-- two-argument form is a plain expression (inlined) for queries that join the
-- entitlement themselves; the one-argument form looks it up.


-- ---- shared helpers --------------------------------------------------------------

-- One page of a keyset list from at most limit+1 rows, newest first: p_ids and p_items
-- are their ids and JSON, in the same order. Answers {data, next_cursor}; next_cursor
-- (continuing after the page's last id) is null on the last page.
create or replace function billing.page_json(p_ids text[], p_items jsonb[], p_limit integer) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object(
    'data', coalesce(to_jsonb(p_items[1:p_limit]), '[]'),
    'next_cursor', case when coalesce(cardinality(p_ids), 0) > p_limit
      then billing.encode_cursor(p_ids[p_limit]) end)
$$;

-- The member one identity pair names, or null when no member has it. Exactly one pair
-- is required: platform + platform_uid, or namespace + external_user_id (400 naming the
-- missing or extra parameter otherwise); an unknown platform answers 422.
create or replace function billing.resolve_identity(p_args jsonb) returns text
  language plpgsql stable
as $$
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

-- ---- subscriptions ---------------------------------------------------------------

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

-- ---- members ---------------------------------------------------------------------

create or replace function billing_api.members_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('members:read');
  select array_agg(m.id order by m.id desc), array_agg(billing.member_json(m.community_id, m.id) order by m.id desc)
    into v_ids, v_items
  from (select m.community_id, m.id from billing.members m
        where m.community_id = billing.current_community_id()
          and m.id < coalesce(p_args->>'cursor', chr(1114111))
        order by m.id desc limit v_limit + 1) m;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.members_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_out jsonb;
begin
  perform billing.require_scope('members:read');
  v_out := billing.member_json(billing.current_community_id(), p_args->>'id');
  if v_out is null then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;

create or replace function billing_api.members_lookup(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text;
begin
  perform billing.require_scope('members:read');
  v_member := billing.resolve_identity(p_args);
  if v_member is null then
    perform billing.raise('BL404', 'No member has this identity.');
  end if;
  return billing.member_json(billing.current_community_id(), v_member);
end
$$;

-- ---- entitlements ----------------------------------------------------------------

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

-- ---- purchases -------------------------------------------------------------------

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

-- ---- discounts -------------------------------------------------------------------

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

-- ---- analytics -------------------------------------------------------------------
-- security_invoker views: an operator's own SQL session sees its community's figures
-- under the same RLS policies as the API.

-- Monthly recurring revenue per currency. Counts subscriptions that still bill:
-- active, past_due and cancelling (paid until period end). Trialing subscriptions do
-- not bill yet and are not counted; paused and cancelled do not bill. Annual plans
-- count amount/12; the sum per currency is rounded to a whole minor unit.
create or replace view analytics.mrr with (security_invoker = true) as
  select s.community_id, p.currency,
    round(sum(case when p.interval = 'year' then p.amount_cents / 12.0 else p.amount_cents end))::bigint as mrr_cents,
    count(*)::bigint as billing_subscriptions
  from billing.subscriptions s
  join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  where s.status in ('active', 'past_due', 'cancelling')
  group by s.community_id, p.currency;

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
        and coalesce(s.cancelled_at, s.updated_at) > billing.now() - interval '30 days'
        and coalesce(s.cancelled_at, s.updated_at) <= billing.now())::bigint as recent_cancels
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
