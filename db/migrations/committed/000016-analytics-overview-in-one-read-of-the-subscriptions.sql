--! Previous: sha1:6f3f7ce1d28526f48302b0f5ad872c2256cf5797
--! Hash: sha1:44af54346bfe96507bb5a8a1294596401168fc00
--! Message: Analytics overview in one read of the subscriptions

--! split: 1-current.sql
--! Included 48-analytics.sql
-- Analytics over subscriptions and plans.
-- security_invoker views: an operator's own SQL session sees its community's figures
-- under the same RLS policies as the API.

-- One row per subscription: what it bills per month, net of its discount as it stands
-- at its next renewal (billing.subscription_discount_cents, 46-invoices.sql), and the
-- interval in which it billed. Every MRR figure below (analytics.mrr, mrr_by_tier,
-- mrr_daily) sums this one definition, so they agree by construction.
--   billing_now: active, past_due or cancelling (paid until period end). Trialing
--     subscriptions do not bill yet; paused and cancelled do not bill.
--   billing_from / billing_until: for past days. A subscription bills from its creation
--     or the end of its trial (never while it is still trialing) until it was cancelled
--     (cancelled_at, else the last update of a cancelled row); a paused one stopped
--     billing at its last update. Plan changes are not kept as history: past days
--     count today's plan.
--   monthly_cents: annual plans count amount/12 (unrounded; sums round once).
--   created_at, cancel_counted_at: what the activity figures count (the overview reads
--   every figure from this one view, billing_private.analytics_overview).
create or replace view analytics.subscription_mrr with (security_invoker = true) as
  select s.community_id, s.id as subscription_id, s.member_id, s.status, p.id as plan_id, p.tier_id,
    p.currency,
    case when p.interval = 'year' then (p.amount_cents - d.cents) / 12.0
         else (p.amount_cents - d.cents)::numeric end as monthly_cents,
    s.status in ('active', 'past_due', 'cancelling') as billing_now,
    case when s.status = 'trialing' then 'infinity'::timestamptz
         else greatest(s.created_at, coalesce(s.trial_end, s.created_at)) end as billing_from,
    case when s.status = 'cancelled' then coalesce(s.cancelled_at, s.updated_at)
         when s.status = 'paused' then s.updated_at end as billing_until,
    -- for the activity figures (analytics.recent_activity, daily_activity): its signup,
    -- and when a cancelling or cancelled one counts as a cancel
    s.created_at,
    case when s.status in ('cancelling', 'cancelled')
         then coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) end as cancel_counted_at
  from billing.subscriptions s
  join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  -- Most subscriptions carry no discount: the function (a plpgsql call with the row)
  -- runs only for those that do (with 200,000 subscriptions, seconds otherwise).
  cross join lateral (select case when s.discount_id is null then 0
    else billing.subscription_discount_cents(s, p.amount_cents,
      greatest(s.current_period_end, billing.community_now(s.community_id))) end as cents) d;

-- Monthly recurring revenue per currency, now: the subscriptions that bill now.
-- The sum per currency is rounded to a whole minor unit.
create or replace view analytics.mrr with (security_invoker = true) as
  select m.community_id, m.currency,
    round(sum(m.monthly_cents))::bigint as mrr_cents,
    count(*)::bigint as billing_subscriptions
  from analytics.subscription_mrr m
  where m.billing_now
  group by m.community_id, m.currency;

-- MRR now per tier and currency (same subscriptions as analytics.mrr).
create or replace view analytics.mrr_by_tier with (security_invoker = true) as
  select m.community_id, m.tier_id, t.name as tier_name, m.currency,
    round(sum(m.monthly_cents))::bigint as mrr_cents,
    count(*)::bigint as billing_subscriptions
  from analytics.subscription_mrr m
  join billing.tiers t on t.community_id = m.community_id and t.id = m.tier_id
  where m.billing_now
  group by m.community_id, m.tier_id, t.name, m.currency;

-- The days (UTC) of the last 90 by each community's clock, today last; as_of is the
-- end of the day, or now for today.
create or replace view analytics.days with (security_invoker = true) as
  select c.id as community_id, d::date as day,
    least(d + interval '1 day', billing.community_now(c.id)) as as_of,
    d::date = (billing.community_now(c.id) at time zone 'UTC')::date as today
  from billing.communities c
  cross join lateral generate_series(
    date_trunc('day', billing.community_now(c.id) at time zone 'UTC') - interval '89 days',
    date_trunc('day', billing.community_now(c.id) at time zone 'UTC'), interval '1 day') d;

-- MRR by day and currency over the last 90 days: for each day, the subscriptions that
-- billed at its end (today: those that bill now, so today's row is analytics.mrr).
-- A past day d counts the subscriptions with billing_from <= d + 1 day < billing_until.
-- Computed in one pass, not per day: each subscription adds its monthly amount on the
-- day its billing starts and takes it back on the day it ends (the UTC day of the
-- instant just before, so an instant at midnight belongs to the day it ends), and a
-- day's MRR is the running sum up to that day. (Joining every day to every subscription
-- took minutes at 200,000 subscriptions.) Subscriptions whose billing ended before it
-- began never bill.
create or replace view analytics.mrr_daily with (security_invoker = true) as
  with m as materialized (
    select community_id, currency, monthly_cents, billing_now, billing_from, billing_until
    from analytics.subscription_mrr),
  -- The days once (each computes its community's clock), not once per subscription.
  dd as materialized (select community_id, day, today from analytics.days),
  changes as (
    select community_id, currency, ((billing_from - interval '1 microsecond') at time zone 'UTC')::date as bucket,
      monthly_cents as delta, 1 as n
    from m where billing_from < 'infinity' and (billing_until is null or billing_until > billing_from)
    union all
    select community_id, currency, ((billing_until - interval '1 microsecond') at time zone 'UTC')::date,
      -monthly_cents, -1
    from m where billing_from < 'infinity' and billing_until > billing_from),
  per_day as materialized (
    select community_id, currency, bucket, sum(delta) as delta, sum(n) as n
    from changes group by community_id, currency, bucket),
  past as (
    select dy.community_id, dy.day, pd.currency, sum(pd.delta) as cents, sum(pd.n) as n
    from dd dy
    join per_day pd on pd.community_id = dy.community_id and pd.bucket <= dy.day
    where not dy.today
    group by dy.community_id, dy.day, pd.currency),
  today as (
    select dy.community_id, dy.day, m.currency, sum(m.monthly_cents) as cents, count(*) as n
    from dd dy
    join m on m.community_id = dy.community_id and m.billing_now
    where dy.today
    group by dy.community_id, dy.day, m.currency)
  select x.community_id, x.day, x.currency, round(x.cents)::bigint as mrr_cents, x.n::bigint as billing_subscriptions
  from (select * from past union all select * from today) x
  where x.n > 0;

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
-- billing.now() read once per community (a lateral), not once per subscription row.
create or replace view analytics.recent_activity with (security_invoker = true) as
  select c.id as community_id,
    n.now - interval '30 days' as window_start,
    n.now as window_end,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.created_at > n.now - interval '30 days'
        and s.created_at <= n.now)::bigint as recent_signups,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.status in ('cancelling', 'cancelled')
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) > n.now - interval '30 days'
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) <= n.now)::bigint as recent_cancels
  from billing.communities c
  cross join lateral (select billing.now() as now offset 0) n;  -- offset 0: kept a subquery, read once

-- Signups and cancels per day (UTC), every day with any: signups are subscriptions
-- created; cancels are cancellations requested or, without a request, cancelled
-- (the moment analytics.recent_activity counts); ended are subscriptions that stopped
-- (cancelled_at).
create or replace view analytics.daily_activity with (security_invoker = true) as
  select community_id, day, sum(signups)::bigint as signups, sum(cancels)::bigint as cancels,
    sum(ended)::bigint as ended
  from (
    select s.community_id, (s.created_at at time zone 'UTC')::date as day, 1 as signups, 0 as cancels, 0 as ended
    from billing.subscriptions s
    union all
    select s.community_id, (coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) at time zone 'UTC')::date, 0, 1, 0
    from billing.subscriptions s where s.status in ('cancelling', 'cancelled')
    union all
    select s.community_id, (s.cancelled_at at time zone 'UTC')::date, 0, 0, 1
    from billing.subscriptions s where s.cancelled_at is not null
  ) a
  group by community_id, day;

-- Churn over the last 30 days by the community's clock: of the subscriptions that
-- billed at the window's start (analytics.subscription_mrr), how many stopped billing
-- (cancelled or paused) within it. churn_rate is null when none billed at the start.
create or replace view analytics.churn with (security_invoker = true) as
  select c.id as community_id, w.window_start, w.window_end,
    count(m.subscription_id)::bigint as billing_at_start,
    count(m.subscription_id) filter (where m.billing_until <= w.window_end)::bigint as churned,
    round(count(m.subscription_id) filter (where m.billing_until <= w.window_end)::numeric
      / nullif(count(m.subscription_id), 0), 4) as churn_rate
  from billing.communities c
  cross join lateral (select billing.community_now(c.id) - interval '30 days' as window_start,
    billing.community_now(c.id) as window_end) w
  left join analytics.subscription_mrr m on m.community_id = c.id
    and m.billing_from <= w.window_start and (m.billing_until is null or m.billing_until > w.window_start)
  group by c.id, w.window_start, w.window_end;

-- Trials: subscriptions that had a trial (trial_end set); ended: the trial is over by
-- the community's clock; converted: an ended trial that went on to bill (it bills now,
-- or one of its invoices was paid after the trial).
create or replace view analytics.trial_conversion with (security_invoker = true) as
  select s.community_id,
    count(*)::bigint as trials,
    count(*) filter (where s.trial_end <= billing.community_now(s.community_id))::bigint as trials_ended,
    count(*) filter (where s.trial_end <= billing.community_now(s.community_id) and (
      s.status in ('active', 'past_due', 'cancelling')
      or exists (select 1 from billing.invoices i where i.community_id = s.community_id
        and i.subscription_id = s.id and i.status = 'paid' and i.total_cents > 0 and i.paid_at >= s.trial_end)))::bigint as converted,
    round(count(*) filter (where s.trial_end <= billing.community_now(s.community_id) and (
      s.status in ('active', 'past_due', 'cancelling')
      or exists (select 1 from billing.invoices i where i.community_id = s.community_id
        and i.subscription_id = s.id and i.status = 'paid' and i.total_cents > 0 and i.paid_at >= s.trial_end)))::numeric
      / nullif(count(*) filter (where s.trial_end <= billing.community_now(s.community_id)), 0), 4) as conversion_rate
  from billing.subscriptions s
  where s.trial_end is not null
  group by s.community_id;

-- Paid invoices by day (UTC of paid_at) and currency: what was collected, and what of
-- it has since been refunded.
create or replace view analytics.paid_invoices_daily with (security_invoker = true) as
  select i.community_id, (i.paid_at at time zone 'UTC')::date as day, i.currency,
    count(*)::bigint as invoices, sum(i.amount_paid_cents)::bigint as paid_cents,
    sum(i.amount_refunded_cents)::bigint as refunded_cents
  from billing.invoices i
  where i.status = 'paid'
  group by i.community_id, (i.paid_at at time zone 'UTC')::date, i.currency;

-- Revenue by day and currency: subscriptions from their paid invoices, one-time
-- purchases from the purchases (their own invoices are not counted twice), gross of
-- refunds.
create or replace view analytics.revenue_daily with (security_invoker = true) as
  select community_id, day, currency, sum(subscription_cents)::bigint as subscription_cents,
    sum(purchase_cents)::bigint as purchase_cents, sum(subscription_cents + purchase_cents)::bigint as total_cents
  from (
    select i.community_id, (i.paid_at at time zone 'UTC')::date as day, i.currency,
      i.amount_paid_cents as subscription_cents, 0::bigint as purchase_cents
    from billing.invoices i where i.status = 'paid' and i.subscription_id is not null
    union all
    select p.community_id, (p.paid_at at time zone 'UTC')::date, p.currency, 0, p.amount_cents
    from billing.purchases p
  ) r
  group by community_id, day, currency;

-- Entitlement grants and revokes per day (UTC), from the ledger's edge events.
create or replace view analytics.entitlement_activity_daily with (security_invoker = true) as
  select e.community_id, (e.created_at at time zone 'UTC')::date as day,
    count(*) filter (where e.type = 'member.entitlement.granted')::bigint as grants,
    count(*) filter (where e.type = 'member.entitlement.revoked')::bigint as revokes
  from billing.events e
  where e.type in ('member.entitlement.granted', 'member.entitlement.revoked')
  group by e.community_id, (e.created_at at time zone 'UTC')::date;

grant select on analytics.subscription_mrr, analytics.mrr, analytics.mrr_by_tier, analytics.days,
  analytics.mrr_daily, analytics.subscribers, analytics.recent_activity, analytics.daily_activity,
  analytics.churn, analytics.trial_conversion, analytics.paid_invoices_daily, analytics.revenue_daily,
  analytics.entitlement_activity_daily to billing_api;
grant select on analytics.subscription_mrr, analytics.mrr, analytics.mrr_by_tier, analytics.days,
  analytics.mrr_daily, analytics.subscribers, analytics.recent_activity, analytics.daily_activity,
  analytics.churn, analytics.trial_conversion, analytics.paid_invoices_daily, analytics.revenue_daily,
  analytics.entitlement_activity_daily to billing_operator;
grant execute on function billing.subscription_discount_cents(billing.subscriptions, bigint, timestamptz) to billing_operator;

-- The summary's currency is the one most billing subscriptions use (ties: the larger
-- MRR, then alphabetical); mrr_cents is the MRR in that currency only. Every
-- currency's figure is in mrr_by_currency. With nothing billing, the currency of the
-- community's active plans (most common), else null. The figures are the views' above,
-- read in one pass with the dashboard's series (billing_private.analytics_overview,
-- 96-dashboard.sql).
create or replace function billing_api.analytics_summary(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('analytics:read');
  return billing_private.analytics_overview(null)->'summary';
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing_api.analytics_summary(jsonb) to billing_api;
--! EndIncluded 48-analytics.sql
--! Included 96-dashboard.sql
-- Reads only the dashboard's pages make (src/operations/index.ts dashboardOperations):
-- the overview's daily series and a member's entitlement history. After every domain
-- fixture: they read analytics views and the outbox.

-- The overview's figures, the summary's and the series', in one read of the community's
-- subscriptions (analytics.subscription_mrr), each as its view defines it:
--   MRR per currency now: analytics.mrr; active_subscribers: analytics.subscribers;
--   recent_signups and recent_cancels: analytics.recent_activity; a day's MRR:
--   analytics.mrr_daily; a day's signups and cancels: analytics.daily_activity.
-- test/dashboard/overview-figures.test.ts holds them equal to the views over a varied
-- history. Read by the owner with the community fenced explicitly (SECURITY DEFINER,
-- like member_entitlement_event_ids below): under the API role the member portal's
-- restrictive member_fence policy (an OR over an InitPlan) made the planner expect a
-- few hundred of 200,000 rows, so it sorted them on disk where it would hash, and the
-- views one after the other read the subscriptions seven times (1.3 s for the
-- overview). JIT off: compiling took longer than the query; work_mem
-- for the day buckets and members to hash in memory. p_days null: the summary
-- only (no series).
create or replace function billing_private.analytics_overview(p_days integer) returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
  set jit = off
  set work_mem = '64MB'
  set timezone = 'UTC'
as $$
declare
  v_community text := billing.current_community_id();
  v_now timestamptz := billing.now();
  -- Days are UTC days: the session's time zone is UTC in here, so a timestamptz's ::date
  -- is its UTC day (a conversion to a zone named per value cost 0.45 us: 90 ms a column).
  v_today date := billing.now()::date;
  v_first date := billing.now()::date - coalesce(p_days, 0) + 1;  -- the series' first day
  v_out jsonb;
  v_fallback text;
begin
  with m as materialized (
    -- each subscription once, with the days its figures fall on
    select x.currency, x.monthly_cents, x.billing_now, x.member_id, x.status, x.created_at, x.cancel_counted_at,
      x.created_at::date as created_day,
      x.cancel_counted_at::date as cancel_day,
      -- analytics.mrr_daily: it adds its amount at the end of the day it starts billing and
      -- takes it back at the end of the day it stops (the UTC day of the instant just before)
      case when x.billing_from < 'infinity' and (x.billing_until is null or x.billing_until > x.billing_from)
        then (x.billing_from - interval '1 microsecond')::date end as from_day,
      case when x.billing_from < 'infinity' and x.billing_until > x.billing_from
        then (x.billing_until - interval '1 microsecond')::date end as until_day
    from analytics.subscription_mrr x
    where x.community_id = v_community),
  cur as (  -- analytics.mrr
    select m.currency, round(sum(m.monthly_cents))::bigint as mrr_cents, count(*)::bigint as n
    from m where m.billing_now group by m.currency),
  main as (
    select cur.* from cur order by cur.n desc, cur.mrr_cents desc, cur.currency limit 1),
  fig as (  -- analytics.subscribers, analytics.recent_activity, the past_due count; and the
            -- MRR (main currency) at the end of the day before the series' first day
    select (select count(*) from (select m.member_id from m where m.status in ('active', 'trialing', 'past_due', 'cancelling')
              group by m.member_id) sm) as active_subscribers,  -- count(distinct): hashed, not sorted
      count(*) filter (where m.created_at > v_now - interval '30 days' and m.created_at <= v_now) as recent_signups,
      count(*) filter (where m.cancel_counted_at > v_now - interval '30 days' and m.cancel_counted_at <= v_now) as recent_cancels,
      count(*) filter (where m.status = 'past_due') as past_due,
      coalesce(sum(m.monthly_cents) filter (where m.from_day < v_first and m.currency = (select main.currency from main)), 0)
        - coalesce(sum(m.monthly_cents) filter (where m.until_day < v_first and m.currency = (select main.currency from main)), 0) as base_cents,
      count(*) filter (where m.from_day < v_first and m.currency = (select main.currency from main))
        - count(*) filter (where m.until_day < v_first and m.currency = (select main.currency from main)) as base_n
    from m),
  days as (
    select d::date as day from generate_series(v_first, v_today, interval '1 day') d
    where p_days is not null),
  per_day as (  -- the main currency's changes within the series, per day
    select c.day, sum(c.delta) as delta, sum(c.n) as n from (
      select m.from_day as day, m.monthly_cents as delta, 1 as n
      from m where p_days is not null and m.from_day >= v_first and m.currency = (select main.currency from main)
      union all
      select m.until_day, -m.monthly_cents, -1
      from m where p_days is not null and m.until_day >= v_first and m.currency = (select main.currency from main)) c
    group by c.day),
  past as (  -- a past day's MRR: what billed before the series, plus the running sum of its changes
    select d.day, (select f.base_cents from fig f) + coalesce(sum(pd.delta), 0) as cents,
      (select f.base_n from fig f) + coalesce(sum(pd.n), 0) as n
    from days d left join per_day pd on pd.day <= d.day
    where d.day < v_today group by d.day),
  act as (  -- analytics.daily_activity
    select a.day, sum(a.signups) as signups, sum(a.cancels) as cancels from (
      select m.created_day as day, 1 as signups, 0 as cancels from m where p_days is not null and m.created_day >= v_first
      union all
      select m.cancel_day, 0, 1 from m where p_days is not null and m.cancel_day >= v_first) a
    group by a.day)
  select jsonb_build_object(
    'summary', jsonb_build_object(
      'mrr_cents', coalesce((select main.mrr_cents from main), 0),
      'currency', (select main.currency from main),
      'active_subscribers', fig.active_subscribers,
      'recent_signups', fig.recent_signups,
      'recent_cancels', fig.recent_cancels,
      'window_start', billing.iso(v_now - interval '30 days'),
      'mrr_by_currency', coalesce((select jsonb_agg(jsonb_build_object('currency', cur.currency, 'mrr_cents', cur.mrr_cents)
        order by cur.currency) from cur), '[]')),
    'series', case when p_days is not null then jsonb_build_object(
      'currency', (select main.currency from main),
      'past_due', fig.past_due,
      'days', coalesce((select jsonb_agg(jsonb_build_object('day', d.day::text,
          'mrr_cents', case when d.day = v_today then coalesce((select main.mrr_cents from main where main.n > 0), 0)
                            else coalesce((select round(p.cents)::bigint from past p where p.day = d.day and p.n > 0), 0) end,
          'signups', coalesce(a.signups, 0)::bigint,
          'cancels', coalesce(a.cancels, 0)::bigint) order by d.day)
        from days d left join act a on a.day = d.day), '[]')) end)
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

-- The overview's series: per day of the last p_days (30 or 90) by the community's clock,
-- MRR (main currency), signups and cancels; plus the past_due count now.
create or replace function billing_api.analytics_series(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_days integer := coalesce((p_args->>'days')::integer, 30);
begin
  perform billing.require_scope('analytics:read');
  if v_days not in (30, 90) then
    perform billing.raise('BL422', 'days: 30 or 90.', 'days');
  end if;
  return billing_private.analytics_overview(v_days)->'series';
end
$$;

-- The dashboard's overview page: the summary and the series, in one read.
create or replace function billing_api.analytics_overview(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_days integer := coalesce((p_args->>'days')::integer, 30);
begin
  perform billing.require_scope('analytics:read');
  if v_days not in (30, 90) then
    perform billing.raise('BL422', 'days: 30 or 90.', 'days');
  end if;
  return billing_private.analytics_overview(v_days);
end
$$;

-- A member's entitlement history (the member page): the member.entitlement.* events
-- naming the member, newest first, keyset by id; one probe of events_member_entitlement.
create index if not exists events_member_entitlement on billing.events (community_id, (data->'member'->>'id'), id)
  where type in ('member.entitlement.granted', 'member.entitlement.updated', 'member.entitlement.revoked');

-- The ids of that page, found by the owner with the community fenced explicitly. Under
-- the tenant policy (billing_api, billing_writer) the planner may not use the index:
-- `data->'member'->>'id' = $1` is not leakproof (jsonb's -> is not), so it cannot be
-- evaluated before the policy's qual and never becomes an index condition; the page
-- then walked the community's whole outbox backwards by id (1.7 s at 1,000,000 events
-- for a member with none). SECURITY DEFINER like operator_users_page (15-operators.sql):
-- it reads only the current community's rows, and only their ids.
create or replace function billing_private.member_entitlement_event_ids(p_member text, p_cursor text, p_limit integer)
  returns text[] language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(array_agg(e.id order by e.id desc), '{}')
  from (select e.id from billing.events e
        where e.community_id = billing.current_community_id()
          and e.type in ('member.entitlement.granted', 'member.entitlement.updated', 'member.entitlement.revoked')
          and (e.data->'member'->>'id') = p_member
          and e.id < coalesce(p_cursor, chr(1114111))
        order by e.id desc limit p_limit) e
$$;

create or replace function billing_api.member_entitlement_history(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('events:read');
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

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

grant execute on function billing_api.analytics_series(jsonb) to billing_api;
grant execute on function billing_api.analytics_overview(jsonb) to billing_api;
grant execute on function billing_private.analytics_overview(integer) to billing_api;
grant execute on function billing_api.member_entitlement_history(jsonb) to billing_api;
grant execute on function billing_private.member_entitlement_event_ids(text, text, integer) to billing_api;
--! EndIncluded 96-dashboard.sql
--! Included 98-dispatch.sql
-- Operations run by name without dynamic SQL. billing.api_call, api_call_deferred and
-- api_call_leased (10-tenancy.sql) run billing_private.op_dispatch(op, args): a CASE
-- over every billing_api function taking (p_args jsonb) and returning jsonb, written by
-- the block below from the catalog when this file is applied. It is the last fixture,
-- so every operation exists then. A static call is planned once per session, where
-- EXECUTE parsed and planned 'select billing_api.x($1)' on every request: about 40 us
-- of the entitlement check's 220 us in the database (bench/RESULTS.md, issue 17).
--
-- An operation this CASE does not name yet (added or changed by a later migration
-- that did not include this file again) still runs, through op_dispatch_dynamic's
-- EXECUTE. test/db/op-dispatch.test.ts fails until this file is included again, so
-- a migration that adds an operation includes `--!include 98-dispatch.sql` too.
-- Invoker rights: the operation runs as the caller (billing_api), as before.

create or replace function billing_private.op_dispatch_dynamic(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_out jsonb;
begin
  execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
  return v_out;
end
$$;

do $do$
declare
  v_cases text;
begin
  select string_agg(format('    when %L then return billing_api.%I(p_args);', p.proname, p.proname), E'\n' order by p.proname)
  into v_cases
  from pg_proc p
  join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'billing_api' and p.prorettype = 'jsonb'::regtype
    and pg_get_function_identity_arguments(p.oid) = 'p_args jsonb';
  execute format($f$
create or replace function billing_private.op_dispatch(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $b$
begin
  case p_op
%s
    else
      return billing_private.op_dispatch_dynamic(p_op, p_args);
  end case;
end
$b$$f$, coalesce(v_cases, '    when null then return null;'));
end
$do$;

grant execute on function billing_private.op_dispatch_dynamic(text, jsonb) to billing_api;
grant execute on function billing_private.op_dispatch(text, jsonb) to billing_api;
--! EndIncluded 98-dispatch.sql
