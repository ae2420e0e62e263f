--! Previous: sha1:ce60787f31bae5ba860c17d271d930c4ce3b45c9
--! Hash: sha1:10a7aad07b64dbb895cc8ccc9fb349ace1008550
--! Message: rollup in step once

--! split: 1-current.sql
-- Enter migration here

--! split: 2-rollup-in-step-once.sql
-- The rollup's in-step test written once (a refactor of 000056's analytics_refresh).
create or replace function billing_private.analytics_refresh(p_communities text[], p_ids text[]) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
  -- One plan per statement, kept: with custom plans (the default for its first calls, and
  -- after them while the generic one looks dearer) planning took 1.5-3 ms a call, ten
  -- times running it, and halved single-row subscription changes.
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_communities text[];
  v_ids text[];
begin
  -- The facts and the activity figures; the subscriptions whose movements are not known
  -- to be in step come out (v_ids).
  with keys as (
    select distinct k.c, k.id from unnest(p_communities, p_ids) k(c, id)
  ), od as materialized (
    select f.* from keys k
    join billing_private.analytics_facts f on f.community_id = k.c and f.subscription_id = k.id
  ), nw as materialized (
    -- the facts as the views define them, one primary-key probe per subscription
    select k.c, k.id, x.member_id, x.plan_id, x.currency, x.monthly_cents, x.billing_now, x.billing_from, x.billing_until,
      (x.created_at at time zone 'UTC')::date as created_day, (x.cancel_counted_at at time zone 'UTC')::date as cancel_day,
      x.status = 'past_due' as past_due,
      x.status in ('active', 'trialing', 'past_due', 'cancelling') as subscriber,
      st.in_step,
      -- what its movements add up to after this refresh, when that is what it bills now:
      -- in step; or brought to now below (it has movements); or its first ones recorded
      -- below from its dates (a start and no end, or a start and an end)
      case when st.in_step
             or exists (select 1 from billing.mrr_movements r where r.community_id = k.c and r.subscription_id = k.id)
             or x.billing_from < 'infinity' and x.billing_until is null and x.billing_now
             or x.billing_from < 'infinity' and x.billing_until > x.billing_from and not x.billing_now
           then x.billing_now end as recorded_billing
    from keys k
    cross join lateral (select * from analytics.subscription_mrr m
                        where m.community_id = k.c and m.subscription_id = k.id offset 0) x
    left join od o on o.community_id = k.c and o.subscription_id = k.id
    -- in step: its movements add up to what it bills now (the facts say what they added
    -- up to after the last refresh, in its currency at its monthly cents)
    cross join lateral (select o.recorded_billing is not null
        and (o.currency, o.monthly_cents, o.recorded_billing) = (x.currency, x.monthly_cents, x.billing_now) as in_step) st
  ), chg as materialized (
    select coalesce(n.c, o.community_id) as c, coalesce(n.id, o.subscription_id) as id,
      o.subscription_id is not null as had, n.id is not null as has,
      o.member_id as o_member, o.created_day as o_created, o.cancel_day as o_cancel, o.past_due as o_past_due,
      o.subscriber as o_subscriber,
      n.member_id as n_member, n.currency as n_currency, n.monthly_cents as n_cents, n.created_day as n_created,
      n.cancel_day as n_cancel, n.past_due as n_past_due, n.subscriber as n_subscriber, n.recorded_billing as n_recorded
    from nw n
    full join od o on o.community_id = n.c and o.subscription_id = n.id
    where (o.member_id, o.currency, o.monthly_cents, o.created_day, o.cancel_day, o.past_due, o.subscriber, o.recorded_billing)
      is distinct from (n.member_id, n.currency, n.monthly_cents, n.created_day, n.cancel_day, n.past_due, n.subscriber,
        n.recorded_billing)
  ), gone as (
    delete from billing_private.analytics_facts f using chg
    where not chg.has and f.community_id = chg.c and f.subscription_id = chg.id
  ), kept as (
    insert into billing_private.analytics_facts (community_id, subscription_id, member_id, currency, monthly_cents,
      created_day, cancel_day, past_due, subscriber, recorded_billing)
    select chg.c, chg.id, chg.n_member, chg.n_currency, chg.n_cents, chg.n_created, chg.n_cancel, chg.n_past_due,
      chg.n_subscriber, chg.n_recorded
    from chg where chg.has
    on conflict (community_id, subscription_id) do update set member_id = excluded.member_id,
      currency = excluded.currency, monthly_cents = excluded.monthly_cents, created_day = excluded.created_day,
      cancel_day = excluded.cancel_day, past_due = excluded.past_due, subscriber = excluded.subscriber,
      recorded_billing = excluded.recorded_billing
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
    select members.c, (now() at time zone 'UTC')::date, '', 0, 0, 0, 0, 0, members.subscribers, 0, 0, 0, 0, 0
    from members where members.subscribers <> 0
  ), added as (
    insert into billing_private.analytics_deltas (community_id, day, currency, mrr_cents, billing, signups, cancels, past_due,
      subscribers, new_cents, expansion_cents, contraction_cents, churn_cents, reactivation_cents)
    select d.c, d.day, d.currency, sum(d.mrr), sum(d.billing), sum(d.signups), sum(d.cancels), sum(d.past_due), sum(d.subscribers),
      sum(d.new), sum(d.expansion), sum(d.contraction), sum(d.churn), sum(d.reactivation)
    from d
    group by d.c, d.day, d.currency
    having sum(d.mrr) <> 0 or sum(d.billing) <> 0 or sum(d.signups) <> 0 or sum(d.cancels) <> 0
      or sum(d.past_due) <> 0 or sum(d.subscribers) <> 0 or sum(d.new) <> 0 or sum(d.expansion) <> 0
      or sum(d.contraction) <> 0 or sum(d.churn) <> 0 or sum(d.reactivation) <> 0
  )
  select array_agg(k.c), array_agg(k.id) into v_communities, v_ids
  from keys k
  left join nw n on n.c = k.c and n.id = k.id
  where n.in_step is not true;
  if v_ids is null then
    return;
  end if;

  -- The MRR movements of those subscriptions: what their recorded movements add up to
  -- against what they bill now, or their first ones (the same snapshot's facts are not
  -- read: only the movements and the subscriptions, which the first statement left).
  with keys as (
    select distinct k.c, k.id from unnest(v_communities, v_ids) k(c, id)
  ), clock as materialized (
    -- each community's clock, read once: the movements' date (none for a community being
    -- deleted: its subscriptions go with it, and so do its movements)
    select x.c, billing.community_now(x.c) as at from (select distinct keys.c from keys) x
    where exists (select 1 from billing.communities c where c.id = x.c)
  ), nw as materialized (
    select k.c, k.id, x.member_id, x.plan_id, x.currency, x.monthly_cents, x.billing_now, x.billing_from, x.billing_until,
      (x.created_at at time zone 'UTC')::date as created_day, (x.cancel_counted_at at time zone 'UTC')::date as cancel_day,
      x.status = 'past_due' as past_due,
      x.status in ('active', 'trialing', 'past_due', 'cancelling') as subscriber,
      -- whether it has recorded movements (rec below has rows for it): an index probe
      -- here, not a search of rec per row, which the kept generic plan, expecting ten
      -- keys, did as a nested loop (quadratic in the statement's rows)
      exists (select 1 from billing.mrr_movements r
              where r.community_id = k.c and r.subscription_id = k.id) as has_rec
    from keys k
    cross join lateral (select * from analytics.subscription_mrr m
                        where m.community_id = k.c and m.subscription_id = k.id offset 0) x
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
      from nw where nw.has_rec
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
    where v.applies and not n.has_rec
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
  ), d as (
    -- the movements recorded: one row per day and currency
    select mv.c, mv.day, mv.currency, mv.to_cents - mv.from_cents as mrr, mv.to_billing::int - mv.from_billing::int as billing,
      0 as signups, 0 as cancels, 0 as past_due, 0 as subscribers,
      case when mv.kind = 'new' then mv.to_cents - mv.from_cents else 0 end as new,
      case when mv.kind = 'expansion' then mv.to_cents - mv.from_cents else 0 end as expansion,
      case when mv.kind = 'contraction' then mv.to_cents - mv.from_cents else 0 end as contraction,
      case when mv.kind = 'churn' then mv.to_cents - mv.from_cents else 0 end as churn,
      case when mv.kind = 'reactivation' then mv.to_cents - mv.from_cents else 0 end as reactivation
    from mv
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
