--! Previous: sha1:715b703a3b5228e1f54dd89b202253a5576d9faf
--! Hash: sha1:684c98dbab4a12c600a0d7b1fbcc56afabce1ac1
--! Message: The rollup's figures of a change in one pass

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
  -- The discount of its next renewal, which is at its period end (billing.renewal_terms
  -- prices a renewal at current_period_end, even one the worker applies late): a
  -- function of the row alone, never of the time it is read, so the overview's rollup
  -- (analytics_facts below) keeps it exactly.
  cross join lateral (select case when s.discount_id is null then 0
    else billing.subscription_discount_cents(s, p.amount_cents, s.current_period_end) end as cents) d;

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

-- The last 30 days by the community's clock (billing.now()), as whole UTC days: today
-- and the 29 before (window_start is the first one's midnight), so the summary's recent
-- figures are the sums of the overview's 30-day series. Signups are subscriptions
-- created; cancels are subscriptions cancelled or set to cancel (the moment
-- analytics.subscription_mrr's cancel_counted_at names). Read once per community (a
-- lateral), not once per subscription row. The window's end is 720 hours on, not
-- '30 days': a day of interval follows the session's time zone (23 or 25 hours across
-- a daylight saving change).
create or replace view analytics.recent_activity with (security_invoker = true) as
  select c.id as community_id,
    w.window_start,
    n.now as window_end,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.created_at >= w.window_start
        and s.created_at < w.window_start + interval '720 hours')::bigint as recent_signups,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.status in ('cancelling', 'cancelled')
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) >= w.window_start
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) < w.window_start + interval '720 hours')::bigint as recent_cancels
  from billing.communities c
  cross join lateral (select billing.now() as now offset 0) n  -- offset 0: kept a subquery, read once
  cross join lateral (select (date_trunc('day', n.now at time zone 'UTC') - interval '29 days') at time zone 'UTC' as window_start) w;

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

-- ---- the overview's rollup: each subscription's figures, and their sums by day ----------
--
-- The dashboard's overview (billing_private.analytics_overview, 96-dashboard.sql) reads
-- sums, not the subscriptions: aggregating 200,000 subscriptions on every page load took
-- 0.7 s. Each figure above is a sum over subscriptions of something that depends on the
-- row alone (analytics.subscription_mrr): MRR added on the day it starts billing and
-- taken back on the day it stops, a signup on the day it was created, a cancel on the day
-- it counts as one, past_due now, and (per member) whether it gives access now. So:
--   analytics_facts: what each subscription adds, as last written (one row each);
--   analytics_deltas: what changed, appended by the statement that changed it: the new
--     facts' figures minus the old ones', by (community, day, currency; '' for counts).
-- Any figure is then a sum of deltas: MRR now is all of them (a subscription that
-- stopped billing added and took back the same amount), a past day's MRR those up to
-- that day, a day's signups that day's. Writers only append (nothing to contend on,
-- whatever the concurrency); the worker folds each community's deltas into one row per
-- key every minute (billing_private.analytics_compact), so a read sums a few hundred
-- rows. analytics_refresh is called by the triggers below with every subscription whose
-- facts may have changed: its own rows, a 'once' discount spent by an invoice, a plan or
-- discount code whose terms changed. test/dashboard/overview-figures.test.ts holds the
-- sums equal to the views above; test/reads/analytics-rollup.test.ts holds them equal to
-- a rebuild from scratch after concurrent writers.
create table if not exists billing_private.analytics_facts (
  community_id text collate "C" not null,
  subscription_id text collate "C" not null,
  member_id text collate "C" not null,
  currency text collate "C" not null,
  monthly_cents numeric not null,
  from_day date,    -- MRR starts counting at this day's end (null: it never bills)
  until_day date,   -- and stops at this day's end (null: still billing, or never did)
  created_day date not null,
  cancel_day date,
  past_due boolean not null,
  subscriber boolean not null,  -- gives access now (active, trialing, past_due, cancelling)
  primary key (community_id, subscription_id)
);
create index if not exists analytics_facts_subscriber on billing_private.analytics_facts (community_id, member_id) where subscriber;
alter table billing_private.analytics_facts enable row level security;
alter table billing_private.analytics_facts force row level security;
drop policy if exists owner_only on billing_private.analytics_facts;
create policy owner_only on billing_private.analytics_facts using (true);

create table if not exists billing_private.analytics_deltas (
  community_id text collate "C" not null,
  day date not null,
  currency text collate "C" not null,  -- '' for the rows that carry no money
  mrr_cents numeric not null default 0,
  billing integer not null default 0,   -- subscriptions billing
  signups integer not null default 0,
  cancels integer not null default 0,
  past_due integer not null default 0,
  subscribers integer not null default 0  -- members with access through a subscription
);
create index if not exists analytics_deltas_community on billing_private.analytics_deltas (community_id, day);
alter table billing_private.analytics_deltas enable row level security;
alter table billing_private.analytics_deltas force row level security;
drop policy if exists owner_only on billing_private.analytics_deltas;
create policy owner_only on billing_private.analytics_deltas using (true);

-- Brings the facts of the given subscriptions (pairs of community and id) up to date and
-- appends what changed. One statement: every part reads the facts as they were before it
-- (a statement's snapshot), which is what the old figures are. A member's subscriber
-- count changes only with its subscriptions' statuses, whose writers hold the member's
-- row lock (the ledger's refresh, 50-ledger.sql) until they commit, so two writers never
-- both count the same member in or out. SECURITY DEFINER: the tables are the owner's; it
-- is called only by the triggers below (and by analytics_rebuild) with the rows of a
-- statement that passed its own tenancy checks.
create or replace function billing_private.analytics_refresh(p_communities text[], p_ids text[]) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
  -- One plan, kept: with custom plans (the default for its first calls, and after them
  -- while the generic one looks dearer) planning this statement took 1.5-3 ms a call,
  -- ten times running it, and halved single-row subscription changes.
  set plan_cache_mode = force_generic_plan
as $$
begin
  with keys as (
    select distinct k.c, k.id from unnest(p_communities, p_ids) k(c, id)
  ), nw as materialized (
    -- the facts as the views define them, one primary-key probe per subscription
    select k.c, k.id, x.member_id, x.currency, x.monthly_cents,
      case when x.billing_from < 'infinity' and (x.billing_until is null or x.billing_until > x.billing_from)
        then ((x.billing_from - interval '1 microsecond') at time zone 'UTC')::date end as from_day,
      case when x.billing_from < 'infinity' and x.billing_until > x.billing_from
        then ((x.billing_until - interval '1 microsecond') at time zone 'UTC')::date end as until_day,
      (x.created_at at time zone 'UTC')::date as created_day, (x.cancel_counted_at at time zone 'UTC')::date as cancel_day,
      x.status = 'past_due' as past_due,
      x.status in ('active', 'trialing', 'past_due', 'cancelling') as subscriber
    from keys k
    cross join lateral (select * from analytics.subscription_mrr m
                        where m.community_id = k.c and m.subscription_id = k.id offset 0) x
  ), od as materialized (
    select f.* from keys k
    join billing_private.analytics_facts f on f.community_id = k.c and f.subscription_id = k.id
  ), chg as materialized (
    select coalesce(n.c, o.community_id) as c, coalesce(n.id, o.subscription_id) as id,
      o.subscription_id is not null as had, n.id is not null as has,
      o.member_id as o_member, o.currency as o_currency, o.monthly_cents as o_cents, o.from_day as o_from,
      o.until_day as o_until, o.created_day as o_created, o.cancel_day as o_cancel, o.past_due as o_past_due,
      o.subscriber as o_subscriber,
      n.member_id as n_member, n.currency as n_currency, n.monthly_cents as n_cents, n.from_day as n_from,
      n.until_day as n_until, n.created_day as n_created, n.cancel_day as n_cancel, n.past_due as n_past_due,
      n.subscriber as n_subscriber
    from nw n
    full join od o on o.community_id = n.c and o.subscription_id = n.id
    where (o.member_id, o.currency, o.monthly_cents, o.from_day, o.until_day, o.created_day, o.cancel_day, o.past_due, o.subscriber)
      is distinct from (n.member_id, n.currency, n.monthly_cents, n.from_day, n.until_day, n.created_day, n.cancel_day, n.past_due, n.subscriber)
  ), gone as (
    delete from billing_private.analytics_facts f using chg
    where not chg.has and f.community_id = chg.c and f.subscription_id = chg.id
  ), kept as (
    insert into billing_private.analytics_facts (community_id, subscription_id, member_id, currency, monthly_cents,
      from_day, until_day, created_day, cancel_day, past_due, subscriber)
    select chg.c, chg.id, chg.n_member, chg.n_currency, chg.n_cents, chg.n_from, chg.n_until, chg.n_created,
      chg.n_cancel, chg.n_past_due, chg.n_subscriber
    from chg where chg.has
    on conflict (community_id, subscription_id) do update set member_id = excluded.member_id,
      currency = excluded.currency, monthly_cents = excluded.monthly_cents, from_day = excluded.from_day,
      until_day = excluded.until_day, created_day = excluded.created_day, cancel_day = excluded.cancel_day,
      past_due = excluded.past_due, subscriber = excluded.subscriber
  ), mem as (
    -- members whose count of access-giving subscriptions changes, and by how much
    select x.c, x.m, sum(x.d) as d
    from (select chg.c, chg.o_member as m, -1 as d from chg where chg.had and chg.o_subscriber
          union all
          select chg.c, chg.n_member, 1 from chg where chg.has and chg.n_subscriber) x
    group by x.c, x.m having sum(x.d) <> 0
  ), members as (
    select mem.c, (b.n + mem.d > 0)::int - (b.n > 0)::int as subscribers
    from mem
    cross join lateral (select count(*) as n from billing_private.analytics_facts f
                        where f.community_id = mem.c and f.member_id = mem.m and f.subscriber) b
  ), d as (
    -- the old facts' figures taken back, the new ones' added: one row per figure that has a day
    select chg.c, v.day, v.currency, v.mrr, v.billing, v.signups, v.cancels, v.past_due, 0 as subscribers
    from chg
    cross join lateral (values
      (chg.had, chg.o_from,    chg.o_currency, -chg.o_cents, -1, 0, 0, 0),
      (chg.had, chg.o_until,   chg.o_currency,  chg.o_cents,  1, 0, 0, 0),
      (chg.had, chg.o_created, '',              0,            0, -1, 0, 0),
      (chg.had, chg.o_cancel,  '',              0,            0, 0, -1, 0),
      (chg.had and chg.o_past_due, (now() at time zone 'UTC')::date, '', 0, 0, 0, 0, -1),
      (chg.has, chg.n_from,    chg.n_currency,  chg.n_cents,  1, 0, 0, 0),
      (chg.has, chg.n_until,   chg.n_currency, -chg.n_cents, -1, 0, 0, 0),
      (chg.has, chg.n_created, '',              0,            0, 1, 0, 0),
      (chg.has, chg.n_cancel,  '',              0,            0, 0, 1, 0),
      (chg.has and chg.n_past_due, (now() at time zone 'UTC')::date, '', 0, 0, 0, 0, 1)
    ) v(applies, day, currency, mrr, billing, signups, cancels, past_due)
    where v.applies and v.day is not null
    union all
    select members.c, (now() at time zone 'UTC')::date, '', 0, 0, 0, 0, 0, members.subscribers
    from members where members.subscribers <> 0
  )
  insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due, subscribers)
  select d.c, d.day, d.currency, sum(d.mrr), sum(d.billing), sum(d.signups), sum(d.cancels), sum(d.past_due), sum(d.subscribers)
  from d
  group by d.c, d.day, d.currency
  having sum(d.mrr) <> 0 or sum(d.billing) <> 0 or sum(d.signups) <> 0 or sum(d.cancels) <> 0
    or sum(d.past_due) <> 0 or sum(d.subscribers) <> 0;
end
$$;

-- Folds each community's deltas into one row per (day, currency). Concurrent writers only
-- append, and a delete never takes rows appended after it began, so nothing is lost;
-- two compactions at once fold disjoint rows. Run by the worker every minute
-- (worker/tasks/analytics__compact.ts) for the communities with more than p_min_rows
-- rows (p_community: that one only). Returns the rows folded.
create or replace function billing_private.analytics_compact(p_min_rows integer default 32, p_community text default null)
  returns integer
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community text;
  v_folded integer;
  v_total integer := 0;
begin
  for v_community in
    select d.community_id from billing_private.analytics_deltas d
    where p_community is null or d.community_id = p_community
    group by d.community_id having count(*) > p_min_rows
  loop
    with gone as (
      delete from billing_private.analytics_deltas d where d.community_id = v_community returning d.*
    ), folded as (
      insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due, subscribers)
      select g.community_id, g.day, g.currency, sum(g.mrr_cents), sum(g.billing), sum(g.signups), sum(g.cancels),
        sum(g.past_due), sum(g.subscribers)
      from gone g
      group by g.community_id, g.day, g.currency
      having sum(g.mrr_cents) <> 0 or sum(g.billing) <> 0 or sum(g.signups) <> 0 or sum(g.cancels) <> 0
        or sum(g.past_due) <> 0 or sum(g.subscribers) <> 0
    )
    select count(*) into v_folded from gone;
    v_total := v_total + v_folded;
  end loop;
  return v_total;
end
$$;

-- A community's rollup from scratch: for the migration that added it and for data
-- written with triggers off (the benchmarks seed theirs so). Not while the community's
-- subscriptions are being written: a writer that read the old facts could append to
-- what this replaces.
create or replace function billing_private.analytics_rebuild(p_community text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from billing_private.analytics_facts f where f.community_id = p_community;
  delete from billing_private.analytics_deltas d where d.community_id = p_community;
  perform billing_private.analytics_refresh(array_agg(s.community_id), array_agg(s.id))
  from billing.subscriptions s where s.community_id = p_community;
  perform billing_private.analytics_compact(0, p_community);
end
$$;

-- The triggers: subscriptions written (every row of the statement), invoices that may
-- spend a 'once' discount, plans and discount codes whose terms change. Named _600_ so
-- they run after the ledger's (_500_), which locks the members (see analytics_refresh).
create or replace function billing_private.tg_subscriptions__analytics() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if tg_op = 'DELETE' then
    perform billing_private.analytics_refresh(array_agg(o.community_id), array_agg(o.id)) from old_rows o;
  else
    perform billing_private.analytics_refresh(array_agg(n.community_id), array_agg(n.id)) from new_rows n;
  end if;
  return null;
end
$$;

-- Updates: only the rows where something the facts read changed (a renewal without a
-- discount moves the period, which no figure reads). The columns are those of
-- analytics.subscription_mrr: updated_at for a paused, cancelled or cancelling row (when
-- it stopped billing, or its cancel when nothing else dates it), the period end for a
-- discounted one (the next renewal's discount).
create or replace function billing_private.tg_subscriptions__analytics_update() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_communities text[];
  v_ids text[];
begin
  select array_agg(n.community_id), array_agg(n.id) into v_communities, v_ids
  from new_rows n
  join old_rows o on o.community_id = n.community_id and o.id = n.id
  where (n.status, n.plan_id, n.member_id, n.discount_id, n.created_at, n.trial_end, n.cancelled_at, n.cancel_requested_at)
        is distinct from (o.status, o.plan_id, o.member_id, o.discount_id, o.created_at, o.trial_end, o.cancelled_at, o.cancel_requested_at)
     or n.status in ('paused', 'cancelled', 'cancelling') and n.updated_at is distinct from o.updated_at
     or n.discount_id is not null and n.current_period_end is distinct from o.current_period_end;
  if v_ids is not null then
    perform billing_private.analytics_refresh(v_communities, v_ids);
  end if;
  return null;
end
$$;

drop trigger if exists _600_analytics_insert on billing.subscriptions;
create trigger _600_analytics_insert after insert on billing.subscriptions
  referencing new table as new_rows
  for each statement execute function billing_private.tg_subscriptions__analytics();
drop trigger if exists _600_analytics_update on billing.subscriptions;
create trigger _600_analytics_update after update on billing.subscriptions
  referencing old table as old_rows new table as new_rows
  for each statement execute function billing_private.tg_subscriptions__analytics_update();
drop trigger if exists _600_analytics_delete on billing.subscriptions;
create trigger _600_analytics_delete after delete on billing.subscriptions
  referencing old table as old_rows
  for each statement execute function billing_private.tg_subscriptions__analytics();

create or replace function billing_private.tg_invoices__analytics() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing_private.analytics_refresh(array_agg(n.community_id), array_agg(n.subscription_id))
  from new_rows n where n.subscription_id is not null and n.discount_cents > 0;
  return null;
end
$$;

drop trigger if exists _600_analytics_insert on billing.invoices;
create trigger _600_analytics_insert after insert on billing.invoices
  referencing new table as new_rows
  for each statement execute function billing_private.tg_invoices__analytics();

create or replace function billing_private.tg_plans__analytics() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing_private.analytics_refresh(array_agg(s.community_id), array_agg(s.id))
  from billing.subscriptions s where s.community_id = new.community_id and s.plan_id = new.id;
  return null;
end
$$;

drop trigger if exists _600_analytics on billing.plans;
create trigger _600_analytics after update of amount_cents, currency, interval on billing.plans
  for each row when ((old.amount_cents, old.currency, old.interval) is distinct from (new.amount_cents, new.currency, new.interval))
  execute function billing_private.tg_plans__analytics();

create or replace function billing_private.tg_discount_codes__analytics() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing_private.analytics_refresh(array_agg(s.community_id), array_agg(s.id))
  from billing.subscriptions s where s.community_id = new.community_id and s.discount_id = new.id;
  return null;
end
$$;

drop trigger if exists _600_analytics on billing.discount_codes;
create trigger _600_analytics after update on billing.discount_codes
  for each row when ((old.value_type, old.percent_off, old.amount_off_cents, old.duration, old.duration_months)
    is distinct from (new.value_type, new.percent_off, new.amount_off_cents, new.duration, new.duration_months))
  execute function billing_private.tg_discount_codes__analytics();

-- Subscriptions written before the rollup existed (a no-op once every community has facts).
do $$
declare
  v_community text;
begin
  for v_community in
    select c.id from billing.communities c
    where exists (select 1 from billing.subscriptions s where s.community_id = c.id)
      and not exists (select 1 from billing_private.analytics_facts f where f.community_id = c.id)
  loop
    perform billing_private.analytics_rebuild(v_community);
  end loop;
end
$$;

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
-- The worker folds the rollup's deltas (worker/tasks/analytics__compact.ts).
grant execute on function billing_private.analytics_compact(integer, text) to billing_worker;
--! EndIncluded 48-analytics.sql
