--! Previous: sha1:ffdc6d12e3d946d91d2e96669ceea73841e965b3
--! Hash: sha1:8da94e417421a73a85f4b88edeb5c7b0b33a5e08
--! Message: MRR history recorded

--! split: 1-current.sql
-- Enter migration here

--! split: 30-mrr-history.sql
-- Issue 26 item 5: MRR history that is true (docs/decisions/mrr-history-recorded.md).
-- The delta of 48-analytics.sql (billing.mrr_movements, the rollup that records them,
-- analytics.mrr_daily from them, analytics.mrr_movements_daily/_monthly), 95-graphql.sql
-- (their billing_graphql views) and 96-dashboard.sql (the overview's movements). The
-- last statement seeds the movements of every community written before.

-- ---- MRR movements: the recorded history of MRR ----------------------------------------
--
-- One row each time a subscription's MRR contribution changes (analytics.subscription_mrr:
-- monthly_cents while billing_now, nothing otherwise), written in the same transaction
-- by the rollup's triggers (billing_private.analytics_refresh below): what it added
-- before and after, in one currency, and the kind of movement:
--   new           it starts billing and its member never billed before;
--   reactivation  it starts billing again (a resume after a pause), or its member billed
--                 before through another subscription (a returning customer);
--   expansion / contraction  it bills before and after, more or less (an upgrade, a
--                 downgrade taking effect, a price change, a discount starting or ending);
--   churn         it stops billing (cancelled at period end, cancelled now, paused,
--                 ended by a refund or a lost dispute, deleted).
-- A refund or a dispute alone moves nothing: MRR is what subscriptions bill, not what was
-- collected (docs/decisions/mrr-history-recorded.md). Dated by the community's clock
-- (billing.now()) at the change, except a subscription's first movements (its insert, or
-- the first time it bills), which its own dates give: it starts billing at creation or
-- at its trial's end and, if it already stopped, stops when it was cancelled or paused
-- (never later than the clock). The subscriptions that existed before this table were
-- seeded so (analytics_rebuild). A day's MRR is the running sum of its movements up to
-- that day (analytics.mrr_daily); MRR now is all of them, which equals analytics.mrr
-- (test/analytics/mrr-history.test.ts recomputes both, day by day, in TypeScript).
create table if not exists billing.mrr_movements (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('mrm'),
  subscription_id text collate "C" not null,
  member_id text collate "C" not null,
  plan_id text collate "C",          -- the plan after the movement (before it, for a churn or a deletion)
  occurred_at timestamptz not null,  -- community clock
  day date not null,                 -- UTC day of occurred_at
  currency text not null,            -- the plan's (its collation: the views' currency columns stay as they were)
  kind text not null check (kind in ('new', 'expansion', 'contraction', 'churn', 'reactivation')),
  from_cents numeric not null,       -- the subscription's monthly amount in this currency before (0: not billing)
  to_cents numeric not null,         -- and after
  from_billing boolean not null,     -- whether it billed before (a plan of 0 bills 0)
  to_billing boolean not null,
  primary key (community_id, id)
);
create index if not exists mrr_movements_subscription on billing.mrr_movements (community_id, subscription_id);
create index if not exists mrr_movements_member on billing.mrr_movements (community_id, member_id);
create index if not exists mrr_movements_day on billing.mrr_movements (community_id, day);
alter table billing.mrr_movements enable row level security;
alter table billing.mrr_movements force row level security;
drop policy if exists tenant on billing.mrr_movements;
create policy tenant on billing.mrr_movements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.mrr_movements;
create policy owner_access on billing.mrr_movements to current_user using (true) with check (true);
grant select on billing.mrr_movements to billing_api, billing_operator;

-- MRR by day and currency over the last 90 days, as it was at each day's end: the running
-- sum of the recorded movements (billing.mrr_movements) up to that day; today's row is
-- every movement, which is analytics.mrr. Nothing is recomputed from today's prices or
-- states: a past day keeps the price, plan and status its subscriptions had then.
-- Computed in one pass: the movements summed per day, then each day joined to the few
-- hundred day sums up to it. Days with no subscription billing have no row.
create or replace view analytics.mrr_daily with (security_invoker = true) as
  with dd as materialized (select community_id, day, today from analytics.days),
  per_day as materialized (
    select m.community_id, m.currency, m.day as bucket, sum(m.to_cents - m.from_cents) as delta,
      sum(m.to_billing::int - m.from_billing::int) as n
    from billing.mrr_movements m
    group by m.community_id, m.currency, m.day)
  select dy.community_id, dy.day, pd.currency, round(sum(pd.delta))::bigint as mrr_cents,
    sum(pd.n)::bigint as billing_subscriptions
  from dd dy
  join per_day pd on pd.community_id = dy.community_id and (pd.bucket <= dy.day or dy.today)
  group by dy.community_id, dy.day, pd.currency
  having sum(pd.n) > 0;

-- MRR movements per day (UTC, by the community's clock) and currency, every day with any:
-- the MRR each kind added (new, expansion, reactivation: positive; contraction, churn:
-- negative), their sum (net_cents: the day's change of analytics.mrr_daily), and how many
-- movements of each kind. Each figure is rounded once from its exact sum (annual plans
-- count amount/12), so net_cents may differ by a cent from the sum of the rounded kinds.
create or replace view analytics.mrr_movements_daily with (security_invoker = true) as
  select m.community_id, m.day, m.currency,
    round(coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'new'), 0))::bigint as new_cents,
    round(coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'expansion'), 0))::bigint as expansion_cents,
    round(coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'contraction'), 0))::bigint as contraction_cents,
    round(coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'churn'), 0))::bigint as churn_cents,
    round(coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'reactivation'), 0))::bigint as reactivation_cents,
    round(sum(m.to_cents - m.from_cents))::bigint as net_cents,
    count(*) filter (where m.kind = 'new')::bigint as new_count,
    count(*) filter (where m.kind = 'expansion')::bigint as expansion_count,
    count(*) filter (where m.kind = 'contraction')::bigint as contraction_count,
    count(*) filter (where m.kind = 'churn')::bigint as churn_count,
    count(*) filter (where m.kind = 'reactivation')::bigint as reactivation_count
  from billing.mrr_movements m
  group by m.community_id, m.day, m.currency;

-- The same per calendar month (UTC; month is its first day), every month with any, with
-- the MRR at the month's start (opening) and end (closing = opening + net).
create or replace view analytics.mrr_movements_monthly with (security_invoker = true) as
  select x.community_id, x.month, x.currency,
    round(sum(x.net) over w - x.net)::bigint as opening_mrr_cents,
    round(x.new)::bigint as new_cents, round(x.expansion)::bigint as expansion_cents,
    round(x.contraction)::bigint as contraction_cents, round(x.churn)::bigint as churn_cents,
    round(x.reactivation)::bigint as reactivation_cents, round(x.net)::bigint as net_cents,
    round(sum(x.net) over w)::bigint as closing_mrr_cents,
    x.new_count, x.expansion_count, x.contraction_count, x.churn_count, x.reactivation_count
  from (
    select m.community_id, date_trunc('month', m.day)::date as month, m.currency,
      coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'new'), 0) as new,
      coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'expansion'), 0) as expansion,
      coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'contraction'), 0) as contraction,
      coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'churn'), 0) as churn,
      coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'reactivation'), 0) as reactivation,
      sum(m.to_cents - m.from_cents) as net,
      count(*) filter (where m.kind = 'new')::bigint as new_count,
      count(*) filter (where m.kind = 'expansion')::bigint as expansion_count,
      count(*) filter (where m.kind = 'contraction')::bigint as contraction_count,
      count(*) filter (where m.kind = 'churn')::bigint as churn_count,
      count(*) filter (where m.kind = 'reactivation')::bigint as reactivation_count
    from billing.mrr_movements m
    group by m.community_id, date_trunc('month', m.day)::date, m.currency) x
  window w as (partition by x.community_id, x.currency order by x.month);

grant select on analytics.mrr_movements_daily, analytics.mrr_movements_monthly to billing_api, billing_operator;

-- MRR's days are the movements' now (billing.mrr_movements), no longer a fact of the row.
alter table billing_private.analytics_facts drop column if exists from_day;
alter table billing_private.analytics_facts drop column if exists until_day;

-- The MRR movements' amounts by kind (mrr_cents is their sum).
alter table billing_private.analytics_deltas add column if not exists new_cents numeric not null default 0;
alter table billing_private.analytics_deltas add column if not exists expansion_cents numeric not null default 0;
alter table billing_private.analytics_deltas add column if not exists contraction_cents numeric not null default 0;
alter table billing_private.analytics_deltas add column if not exists churn_cents numeric not null default 0;
alter table billing_private.analytics_deltas add column if not exists reactivation_cents numeric not null default 0;

-- Brings the facts of the given subscriptions (pairs of community and id) up to date,
-- records their MRR movements and appends what changed. One statement: every part reads
-- the facts and the movements as they were before it (a statement's snapshot), which is
-- what the old figures are. A subscription's MRR before is what its recorded movements
-- add up to (not a fact of the row), so a rebuild that lost the facts records nothing
-- twice. A subscription with no movement yet gets its first ones from its own dates
-- (billing_from, billing_until of analytics.subscription_mrr, never after the clock):
-- a checkout's is now, a trial's end is the trial's end, a row written directly with a
-- past creation keeps it. A member's subscriber count changes only with its
-- subscriptions' statuses, whose writers hold the member's row lock (the ledger's
-- refresh, 50-ledger.sql) until they commit, so two writers never both count the same
-- member in or out; and a subscription's movements only with its row, whose lock its
-- writer holds. SECURITY DEFINER: the tables are the owner's; it is called only by the
-- triggers below (and by analytics_rebuild) with the rows of a statement that passed its
-- own tenancy checks.
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
  ), clock as materialized (
    -- each community's clock, read once: the movements' date (none for a community being
    -- deleted: its subscriptions go with it, and so do its movements)
    select x.c, billing.community_now(x.c) as at from (select distinct keys.c from keys) x
    where exists (select 1 from billing.communities c where c.id = x.c)
  ), nw as materialized (
    -- the facts as the views define them, one primary-key probe per subscription
    select k.c, k.id, x.member_id, x.plan_id, x.currency, x.monthly_cents, x.billing_now, x.billing_from, x.billing_until,
      (x.created_at at time zone 'UTC')::date as created_day, (x.cancel_counted_at at time zone 'UTC')::date as cancel_day,
      x.status = 'past_due' as past_due,
      x.status in ('active', 'trialing', 'past_due', 'cancelling') as subscriber
    from keys k
    cross join lateral (select * from analytics.subscription_mrr m
                        where m.community_id = k.c and m.subscription_id = k.id offset 0) x
  ), od as materialized (
    select f.* from keys k
    join billing_private.analytics_facts f on f.community_id = k.c and f.subscription_id = k.id
  ), rec as materialized (
    -- what each subscription's recorded movements add up to, per currency
    select k.c, k.id, r.currency, r.cents, r.billing, r.member_id, r.plan_id
    from keys k
    cross join lateral (select m.currency, sum(m.to_cents - m.from_cents) as cents,
        sum(m.to_billing::int - m.from_billing::int) > 0 as billing,
        max(m.member_id) as member_id, max(m.plan_id) as plan_id
      from billing.mrr_movements m where m.community_id = k.c and m.subscription_id = k.id
      group by m.currency) r
  ), states as (
    -- recorded (from) against now (to), per subscription and currency, where they differ
    select s.c, s.id, s.currency, sum(s.from_cents) as from_cents, bool_or(s.from_billing) as from_billing,
      sum(s.to_cents) as to_cents, bool_or(s.to_billing) as to_billing
    from (
      select rec.c, rec.id, rec.currency, rec.cents as from_cents, rec.billing as from_billing,
        0::numeric as to_cents, false as to_billing
      from rec
      union all
      select nw.c, nw.id, nw.currency, 0, false, case when nw.billing_now then nw.monthly_cents else 0 end, nw.billing_now
      from nw where exists (select 1 from rec where rec.c = nw.c and rec.id = nw.id)
    ) s
    group by s.c, s.id, s.currency
    having (bool_or(s.from_billing), sum(s.from_cents)) is distinct from (bool_or(s.to_billing), sum(s.to_cents))
  ), moves as (
    select st.c, st.id, coalesce(n.member_id, (select max(r.member_id) from rec r where r.c = st.c and r.id = st.id)) as member_id,
      coalesce(n.plan_id, (select max(r.plan_id) from rec r where r.c = st.c and r.id = st.id)) as plan_id,
      cl.at, st.currency, st.from_cents, st.to_cents, st.from_billing, st.to_billing
    from states st
    join clock cl on cl.c = st.c
    left join nw n on n.c = st.c and n.id = st.id
    union all
    -- no movement recorded yet: its first ones from its own dates
    select n.c, n.id, n.member_id, n.plan_id, v.at, n.currency, v.from_cents, v.to_cents, v.from_billing, v.to_billing
    from nw n
    join clock cl on cl.c = n.c
    cross join lateral (values
      (least(n.billing_from, cl.at), 0::numeric, n.monthly_cents, false, true,
       n.billing_from < 'infinity' and (n.billing_until is null or n.billing_until > n.billing_from)),
      (least(n.billing_until, cl.at), n.monthly_cents, 0::numeric, true, false,
       n.billing_from < 'infinity' and n.billing_until > n.billing_from)
    ) v(at, from_cents, to_cents, from_billing, to_billing, applies)
    where v.applies and not exists (select 1 from rec where rec.c = n.c and rec.id = n.id)
  ), mv as materialized (
    select mo.*, (mo.at at time zone 'UTC')::date as day,
      case when not mo.from_billing then
             case when exists (select 1 from billing.mrr_movements x
                               where x.community_id = mo.c and x.member_id = mo.member_id and x.occurred_at <= mo.at)
                  then 'reactivation' else 'new' end
           when not mo.to_billing then 'churn'
           when mo.to_cents > mo.from_cents then 'expansion'
           else 'contraction' end as kind
    from moves mo
  ), recorded as (
    insert into billing.mrr_movements (community_id, subscription_id, member_id, plan_id, occurred_at, day, currency, kind,
      from_cents, to_cents, from_billing, to_billing)
    select mv.c, mv.id, mv.member_id, mv.plan_id, mv.at, mv.day, mv.currency, mv.kind, mv.from_cents, mv.to_cents,
      mv.from_billing, mv.to_billing
    from mv
  ), chg as materialized (
    select coalesce(n.c, o.community_id) as c, coalesce(n.id, o.subscription_id) as id,
      o.subscription_id is not null as had, n.id is not null as has,
      o.member_id as o_member, o.created_day as o_created, o.cancel_day as o_cancel, o.past_due as o_past_due,
      o.subscriber as o_subscriber,
      n.member_id as n_member, n.currency as n_currency, n.monthly_cents as n_cents, n.created_day as n_created,
      n.cancel_day as n_cancel, n.past_due as n_past_due, n.subscriber as n_subscriber
    from nw n
    full join od o on o.community_id = n.c and o.subscription_id = n.id
    where (o.member_id, o.currency, o.monthly_cents, o.created_day, o.cancel_day, o.past_due, o.subscriber)
      is distinct from (n.member_id, n.currency, n.monthly_cents, n.created_day, n.cancel_day, n.past_due, n.subscriber)
  ), gone as (
    delete from billing_private.analytics_facts f using chg
    where not chg.has and f.community_id = chg.c and f.subscription_id = chg.id
  ), kept as (
    insert into billing_private.analytics_facts (community_id, subscription_id, member_id, currency, monthly_cents,
      created_day, cancel_day, past_due, subscriber)
    select chg.c, chg.id, chg.n_member, chg.n_currency, chg.n_cents, chg.n_created, chg.n_cancel, chg.n_past_due,
      chg.n_subscriber
    from chg where chg.has
    on conflict (community_id, subscription_id) do update set member_id = excluded.member_id,
      currency = excluded.currency, monthly_cents = excluded.monthly_cents, created_day = excluded.created_day,
      cancel_day = excluded.cancel_day, past_due = excluded.past_due, subscriber = excluded.subscriber
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
    -- the old facts' figures taken back, the new ones' added, and the movements recorded:
    -- one row per figure that has a day
    select chg.c, v.day, ''::text as currency, 0::numeric as mrr, 0 as billing, v.signups, v.cancels, v.past_due,
      0 as subscribers, 0::numeric as new, 0::numeric as expansion, 0::numeric as contraction, 0::numeric as churn,
      0::numeric as reactivation
    from chg
    cross join lateral (values
      (chg.had, chg.o_created, -1, 0, 0),
      (chg.had, chg.o_cancel,  0, -1, 0),
      (chg.had and chg.o_past_due, (now() at time zone 'UTC')::date, 0, 0, -1),
      (chg.has, chg.n_created, 1, 0, 0),
      (chg.has, chg.n_cancel,  0, 1, 0),
      (chg.has and chg.n_past_due, (now() at time zone 'UTC')::date, 0, 0, 1)
    ) v(applies, day, signups, cancels, past_due)
    where v.applies and v.day is not null
    union all
    select mv.c, mv.day, mv.currency, mv.to_cents - mv.from_cents, mv.to_billing::int - mv.from_billing::int, 0, 0, 0, 0,
      case when mv.kind = 'new' then mv.to_cents - mv.from_cents else 0 end,
      case when mv.kind = 'expansion' then mv.to_cents - mv.from_cents else 0 end,
      case when mv.kind = 'contraction' then mv.to_cents - mv.from_cents else 0 end,
      case when mv.kind = 'churn' then mv.to_cents - mv.from_cents else 0 end,
      case when mv.kind = 'reactivation' then mv.to_cents - mv.from_cents else 0 end
    from mv
    union all
    select members.c, (now() at time zone 'UTC')::date, '', 0, 0, 0, 0, 0, members.subscribers, 0, 0, 0, 0, 0
    from members where members.subscribers <> 0
  )
  insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due,
    subscribers, new_cents, expansion_cents, contraction_cents, churn_cents, reactivation_cents)
  select d.c, d.day, d.currency, sum(d.mrr), sum(d.billing), sum(d.signups), sum(d.cancels), sum(d.past_due), sum(d.subscribers),
    sum(d.new), sum(d.expansion), sum(d.contraction), sum(d.churn), sum(d.reactivation)
  from d
  group by d.c, d.day, d.currency
  having sum(d.mrr) <> 0 or sum(d.billing) <> 0 or sum(d.signups) <> 0 or sum(d.cancels) <> 0
    or sum(d.past_due) <> 0 or sum(d.subscribers) <> 0 or sum(d.new) <> 0 or sum(d.expansion) <> 0
    or sum(d.contraction) <> 0 or sum(d.churn) <> 0 or sum(d.reactivation) <> 0;
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
      insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due,
        subscribers, new_cents, expansion_cents, contraction_cents, churn_cents, reactivation_cents)
      select g.community_id, g.day, g.currency, sum(g.mrr_cents), sum(g.billing), sum(g.signups), sum(g.cancels),
        sum(g.past_due), sum(g.subscribers), sum(g.new_cents), sum(g.expansion_cents), sum(g.contraction_cents),
        sum(g.churn_cents), sum(g.reactivation_cents)
      from gone g
      group by g.community_id, g.day, g.currency
      having sum(g.mrr_cents) <> 0 or sum(g.billing) <> 0 or sum(g.signups) <> 0 or sum(g.cancels) <> 0
        or sum(g.past_due) <> 0 or sum(g.subscribers) <> 0 or sum(g.new_cents) <> 0 or sum(g.expansion_cents) <> 0
        or sum(g.contraction_cents) <> 0 or sum(g.churn_cents) <> 0 or sum(g.reactivation_cents) <> 0
    )
    select count(*) into v_folded from gone;
    v_total := v_total + v_folded;
  end loop;
  return v_total;
end
$$;

-- A community's rollup from scratch: for the migration that added it, for data written
-- with triggers off (the benchmarks seed theirs so) and for the migration that added the
-- MRR movements. The movements are history and stay: their deltas are summed again, and
-- the refresh records only what they lack (the first movements of a subscription that
-- has none, dated by its own dates: the seed of a community written before
-- billing.mrr_movements existed; a subscription whose state moved while the triggers were
-- off: a movement now; one deleted so: its churn now). Not while the community's
-- subscriptions are being written: a writer that read the old facts could append to
-- what this replaces.
create or replace function billing_private.analytics_rebuild(p_community text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from billing_private.analytics_facts f where f.community_id = p_community;
  delete from billing_private.analytics_deltas d where d.community_id = p_community;
  insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, new_cents, expansion_cents,
    contraction_cents, churn_cents, reactivation_cents)
  select m.community_id, m.day, m.currency, sum(m.to_cents - m.from_cents), sum(m.to_billing::int - m.from_billing::int),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'new'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'expansion'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'contraction'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'churn'), 0),
    coalesce(sum(m.to_cents - m.from_cents) filter (where m.kind = 'reactivation'), 0)
  from billing.mrr_movements m where m.community_id = p_community
  group by m.community_id, m.day, m.currency;
  perform billing_private.analytics_refresh(array_agg(x.community_id), array_agg(x.id))
  from (select s.community_id, s.id from billing.subscriptions s where s.community_id = p_community
        union
        select m.community_id, m.subscription_id from billing.mrr_movements m where m.community_id = p_community) x;
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

-- Updates: only the rows where something the facts or the MRR read changed (a renewal
-- without a discount moves the period, which no figure reads). The columns are those of
-- analytics.subscription_mrr: updated_at for a paused, cancelled or cancelling row (when
-- it stopped billing, or its cancel when nothing else dates it), the period end for a
-- discounted one (the next renewal's discount). A column added to that view's definition
-- (a subscription's own locked price) must be named here too:
-- test/analytics/mrr-history.test.ts fails until it is. (Naming the columns that do not
-- matter instead, by comparing to_jsonb(row) minus them, cost 9 times as much per row of
-- a renewal batch.)
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
  where (n.status, n.plan_id, n.member_id, n.discount_id, n.created_at, n.trial_end, n.cancelled_at, n.cancel_requested_at, n.price_cents)
        is distinct from (o.status, o.plan_id, o.member_id, o.discount_id, o.created_at, o.trial_end, o.cancelled_at, o.cancel_requested_at, o.price_cents)
     or n.status in ('paused', 'cancelled', 'cancelling') and n.updated_at is distinct from o.updated_at
     or n.discount_id is not null and n.current_period_end is distinct from o.current_period_end;
  if v_ids is not null then
    perform billing_private.analytics_refresh(v_communities, v_ids);
  end if;
  return null;
end
$$;

create or replace view billing_graphql.mrr_movements_daily with (security_invoker = true, security_barrier = false) as
  select m.day, m.currency, m.new_cents, m.expansion_cents, m.contraction_cents, m.churn_cents, m.reactivation_cents,
    m.net_cents, m.new_count, m.expansion_count, m.contraction_count, m.churn_count, m.reactivation_count
  from analytics.mrr_movements_daily m
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.mrr_movements_daily is E'@primaryKey day,currency\n@behavior -insert -update -delete\nMRR movements (new, expansion, contraction, churn, reactivation) per day and currency, as recorded when they happened. Needs analytics:read.';

create or replace view billing_graphql.mrr_movements_monthly with (security_invoker = true, security_barrier = false) as
  select m.month, m.currency, m.opening_mrr_cents, m.new_cents, m.expansion_cents, m.contraction_cents, m.churn_cents,
    m.reactivation_cents, m.net_cents, m.closing_mrr_cents, m.new_count, m.expansion_count, m.contraction_count,
    m.churn_count, m.reactivation_count
  from analytics.mrr_movements_monthly m
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.mrr_movements_monthly is E'@primaryKey month,currency\n@behavior -insert -update -delete\nMRR movements per calendar month and currency, with the MRR at the month''s start and end. Needs analytics:read.';

grant select on billing_graphql.mrr_movements_daily, billing_graphql.mrr_movements_monthly to billing_api;

comment on view billing_graphql.mrr_daily is E'@primaryKey day,currency\n@behavior -insert -update -delete\nMRR by day (last 90 days) and currency, as it was at each day''s end (the recorded MRR movements). Needs analytics:read.';

-- The overview's figures, the summary's and the series', from the rollup's sums
-- (billing_private.analytics_deltas, 48-analytics.sql): a few hundred rows for the
-- community, not its subscriptions (0.7 s at 200,000). Each figure as its view defines it:
--   MRR per currency now: analytics.mrr; active_subscribers: analytics.subscribers;
--   recent_signups and recent_cancels: analytics.recent_activity; a day's MRR:
--   analytics.mrr_daily; a day's signups and cancels: analytics.daily_activity; a day's
--   or a month's MRR movements: analytics.mrr_movements_daily and _monthly (main
--   currency), the summary's over its recent window (sums of the daily view's days).
-- test/dashboard/overview-figures.test.ts holds them equal to the views over a varied
-- history. Read by the owner with the community fenced explicitly (SECURITY DEFINER,
-- like member_entitlement_event_ids below). p_days null: the summary only (no series).
create or replace function billing_private.analytics_overview(p_days integer) returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
  set timezone = 'UTC'
as $$
declare
  v_community text := billing.current_community_id();
  -- Days are UTC days: the session's time zone is UTC in here, so a timestamptz's ::date
  -- is its UTC day.
  v_today date := billing.now()::date;
  v_recent date := billing.now()::date - 29;  -- the summary's window: today and the 29 days before
  v_first date := billing.now()::date - coalesce(p_days, 0) + 1;  -- the series' first day
  v_first_month date := (date_trunc('month', billing.now()::date) - interval '11 months')::date;  -- the series' months: this one and 11 before
  v_out jsonb;
  v_fallback text;
begin
  with d as materialized (
    -- the community's deltas summed per day and currency (the worker folds them to this)
    select x.day, x.currency, sum(x.mrr_cents) as mrr, sum(x.billing) as n, sum(x.signups) as signups,
      sum(x.cancels) as cancels, sum(x.past_due) as past_due, sum(x.subscribers) as subscribers,
      sum(x.new_cents) as new, sum(x.expansion_cents) as expansion, sum(x.contraction_cents) as contraction,
      sum(x.churn_cents) as churn, sum(x.reactivation_cents) as reactivation
    from billing_private.analytics_deltas x
    where x.community_id = v_community
    group by x.day, x.currency),
  cur as (  -- analytics.mrr: every delta of a currency (what stopped billing was added and taken back)
    select d.currency, round(sum(d.mrr))::bigint as mrr_cents, sum(d.n)::bigint as n
    from d where d.currency <> '' group by d.currency having sum(d.n) > 0),
  main as (
    select cur.* from cur order by cur.n desc, cur.mrr_cents desc, cur.currency limit 1),
  fig as (  -- analytics.subscribers, analytics.recent_activity, the past_due count; and the
            -- MRR (main currency) at the end of the day before the series' first day
    select coalesce(sum(d.subscribers), 0) as active_subscribers,
      coalesce(sum(d.signups) filter (where d.day between v_recent and v_today), 0) as recent_signups,
      coalesce(sum(d.cancels) filter (where d.day between v_recent and v_today), 0) as recent_cancels,
      coalesce(sum(d.past_due), 0) as past_due,
      coalesce(sum(d.mrr) filter (where d.day < v_first and d.currency = (select main.currency from main)), 0) as base_cents,
      coalesce(sum(d.n) filter (where d.day < v_first and d.currency = (select main.currency from main)), 0) as base_n
    from d),
  recent_mv as (  -- the main currency's MRR movements in the summary's window
    select jsonb_build_object(
      'new_cents', round(coalesce(sum(d.new), 0))::bigint,
      'expansion_cents', round(coalesce(sum(d.expansion), 0))::bigint,
      'contraction_cents', round(coalesce(sum(d.contraction), 0))::bigint,
      'churn_cents', round(coalesce(sum(d.churn), 0))::bigint,
      'reactivation_cents', round(coalesce(sum(d.reactivation), 0))::bigint,
      'net_cents', round(coalesce(sum(d.mrr), 0))::bigint) as j
    from d where d.day between v_recent and v_today and d.currency = (select main.currency from main)),
  months as (  -- analytics.mrr_movements_monthly, main currency, every month of the last 12
    select x::date as month from generate_series(v_first_month, date_trunc('month', v_today), interval '1 month') x
    where p_days is not null),
  per_month as (
    select m.month,
      coalesce((select sum(d.mrr) from d where d.currency = (select main.currency from main) and d.day < m.month), 0) as opening,
      coalesce(sum(d.new), 0) as new, coalesce(sum(d.expansion), 0) as expansion, coalesce(sum(d.contraction), 0) as contraction,
      coalesce(sum(d.churn), 0) as churn, coalesce(sum(d.reactivation), 0) as reactivation, coalesce(sum(d.mrr), 0) as net
    from months m
    left join d on d.currency = (select main.currency from main) and date_trunc('month', d.day)::date = m.month
    group by m.month),
  days as (
    select x::date as day from generate_series(v_first, v_today, interval '1 day') x
    where p_days is not null),
  per_day as (  -- the main currency's changes within the series, per day
    select d.day, d.mrr as delta, d.n
    from d where p_days is not null and d.day >= v_first and d.currency = (select main.currency from main)),
  past as (  -- a past day's MRR: what billed before the series, plus the running sum of its changes
    select x.day, (select f.base_cents from fig f) + coalesce(sum(pd.delta), 0) as cents,
      (select f.base_n from fig f) + coalesce(sum(pd.n), 0) as n
    from days x left join per_day pd on pd.day <= x.day
    where x.day < v_today group by x.day),
  act as (  -- analytics.daily_activity
    select d.day, d.signups, d.cancels from d where p_days is not null and d.currency = '' and d.day >= v_first),
  mvd as (  -- analytics.mrr_movements_daily, main currency
    select d.day, d.new, d.expansion, d.contraction, d.churn, d.reactivation from d
    where p_days is not null and d.day >= v_first and d.currency = (select main.currency from main))
  select jsonb_build_object(
    'summary', jsonb_build_object(
      'mrr_cents', coalesce((select main.mrr_cents from main), 0),
      'currency', (select main.currency from main),
      'active_subscribers', fig.active_subscribers,
      'recent_signups', fig.recent_signups,
      'recent_cancels', fig.recent_cancels,
      'window_start', billing.iso(v_recent::timestamp at time zone 'UTC'),
      'mrr_by_currency', coalesce((select jsonb_agg(jsonb_build_object('currency', cur.currency, 'mrr_cents', cur.mrr_cents)
        order by cur.currency) from cur), '[]'),
      'mrr_movements', (select recent_mv.j from recent_mv)),
    'series', case when p_days is not null then jsonb_build_object(
      'currency', (select main.currency from main),
      'past_due', fig.past_due,
      'days', coalesce((select jsonb_agg(jsonb_build_object('day', x.day::text,
          'mrr_cents', case when x.day = v_today then coalesce((select main.mrr_cents from main where main.n > 0), 0)
                            else coalesce((select round(p.cents)::bigint from past p where p.day = x.day and p.n > 0), 0) end,
          'signups', coalesce(a.signups, 0)::bigint,
          'cancels', coalesce(a.cancels, 0)::bigint,
          'new_cents', round(coalesce(v.new, 0))::bigint,
          'expansion_cents', round(coalesce(v.expansion, 0))::bigint,
          'contraction_cents', round(coalesce(v.contraction, 0))::bigint,
          'churn_cents', round(coalesce(v.churn, 0))::bigint,
          'reactivation_cents', round(coalesce(v.reactivation, 0))::bigint) order by x.day)
        from days x left join act a on a.day = x.day left join mvd v on v.day = x.day), '[]'),
      'months', coalesce((select jsonb_agg(jsonb_build_object('month', pm.month::text,
          'opening_mrr_cents', round(pm.opening)::bigint,
          'new_cents', round(pm.new)::bigint, 'expansion_cents', round(pm.expansion)::bigint,
          'contraction_cents', round(pm.contraction)::bigint, 'churn_cents', round(pm.churn)::bigint,
          'reactivation_cents', round(pm.reactivation)::bigint, 'net_cents', round(pm.net)::bigint,
          'closing_mrr_cents', round(pm.opening + pm.net)::bigint) order by pm.month)
        from per_month pm), '[]')) end)
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

-- Subscriptions written before the rollup, or before the MRR movements, existed: the
-- rebuild seeds their movements from their own dates (a no-op once every community with
-- subscriptions has facts and movements; docs/decisions/mrr-history-recorded.md).
do $$
declare
  v_community text;
begin
  for v_community in
    select c.id from billing.communities c
    where exists (select 1 from billing.subscriptions s where s.community_id = c.id)
      and (not exists (select 1 from billing_private.analytics_facts f where f.community_id = c.id)
        or not exists (select 1 from billing.mrr_movements m where m.community_id = c.id))
  loop
    perform billing_private.analytics_rebuild(v_community);
  end loop;
end
$$;
