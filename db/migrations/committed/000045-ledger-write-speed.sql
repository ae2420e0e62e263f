--! Previous: sha1:568faee7d395a19c4d5c4075c992893cb88d6068
--! Hash: sha1:a57891d07278d50899483f6c9b8117f59a1ead4c
--! Message: ledger write speed

--! split: 60-ledger-speed.sql
-- analytics_refresh: whether a subscription has recorded movements is an index probe,
-- not a search of the statement's own list per row (quadratic under the kept plan).

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
      x.status in ('active', 'trialing', 'past_due', 'cancelling') as subscriber,
      -- whether it has recorded movements (rec below has rows for it): an index probe
      -- here, not a search of rec per row, which the kept generic plan, expecting ten
      -- keys, did as a nested loop (quadratic in the statement's rows)
      exists (select 1 from billing.mrr_movements r
              where r.community_id = k.c and r.subscription_id = k.id) as has_rec
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

-- Events: the ledger's refresh dates its events with the community clock it has read;
-- the per-row clock trigger runs only for inserts that name no created_at.
alter table billing.events alter column created_at drop default;
drop trigger if exists _010_community_clock on billing.events;
create trigger _010_community_clock before insert on billing.events
  for each row when (new.created_at is null) execute function billing.tg_events__community_clock();

-- An event's created_at (its envelope's timestamp) is the community's time, the clock
-- of the invoices, subscriptions, purchases and ledger rows it reports: in a sandbox
-- whose test clock was advanced, invoice.paid says when the invoice was paid
-- (docs/decisions/first-start-and-clocks.md). Within a community the clock only moves
-- forward, so timestamps still follow id order. The column has no default: an insert
-- that names no created_at gets this trigger (billing.community_now, inlined); one that
-- names it (the ledger's refresh, which has read the community's clock already) must
-- give the community's time, and skips a call per row.
create or replace function billing.tg_events__community_clock() returns trigger
  language plpgsql
as $$
begin
  new.created_at := now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = new.community_id), '0'::interval);
  return new;
end
$$;

-- The core: refreshes each (p_community_ids[i], p_member_ids[i]) in turn, with its own
-- reason and trigger event, in a few statements for the whole list (a statement that
-- changes many subscriptions, such as a batch of renewals, refreshes its members at
-- once). For each member: the desired ledger (billing.ledger_desired) against its
-- stored rows (including a snapshot of its identities and external subjects); every row
-- whose status, sources, benefits or identities differ is granted (a new row, or an
-- inactive one again), updated or revoked (revision + 1, granted_at/revoked_at on the
-- edges) and gets one member.entitlement.* event, in list order, then entitlement
-- order; a row that differs only in next_check_at gets that, silently. A member listed
-- again is refreshed once, at its first place (nothing between two places changes its
-- sources). Returns how many rows changed visibly.
-- Index scans only (enable_seqscan off): every table it reads is read by the members'
-- or the catalog's keys, and its plans are kept for the session. A plan kept from a
-- moment when billing.purchases was empty (a new deployment's first purchases, or a
-- server without autovacuum) otherwise scanned every purchase once per member: a
-- sequential scan costs nothing on an empty table, and the plan outlived it. And a
-- sequential scan of a catalog table once per member asks the kernel for the table's
-- size each time.
-- One plan per statement, kept (force_generic_plan): with custom plans (plpgsql's
-- default while a generic one looks dearer, which it always did here) each call planned
-- its big statement again, about 6 ms, three times the whole single-member refresh.
create or replace function billing.ledger_refresh_each(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns integer language plpgsql volatile
  set enable_seqscan = off
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_changed integer := 0;
  v_n integer;
  v_present integer[];
  v_part integer[];
  v_changes billing.ledger_change[];
begin
  -- One refresh of a member at a time: a concurrent one waits for the first to commit,
  -- then reads what it wrote. A row lock on the member (not an advisory lock: one
  -- statement may refresh 100,000 members, more than the shared lock table holds); NO
  -- KEY UPDATE leaves inserts of rows that reference the member unblocked. Taken in
  -- list order: each member's row locked by its key, one index probe per entry (the
  -- lateral runs per entry, in order; joined, the planner hashed every member of the
  -- community for each statement). The entries whose member exists (not being deleted)
  -- are kept.
  select array_agg(k order by k) into v_present
  from generate_subscripts(p_member_ids, 1) k
  cross join lateral (select 1 from billing.members mb
                      where mb.community_id = p_community_ids[k] and mb.id = p_member_ids[k]
                      for no key update) l;
  -- In parts of 1,000 list places, in order: a part's rows to write are held in memory
  -- (v_changes), so a list of 100,000 members (a catalog change) never holds them all.
  -- A member listed again in a later part finds nothing left to change.
  for v_from in 1 .. coalesce(cardinality(v_present), 0) by 1000 loop
    v_part := v_present[v_from : v_from + 999];
    with req as (
      -- each member at its first place in the list; a member being deleted is skipped
      select distinct on (l.c, l.m) l.k, l.c, l.m, p_reasons[l.k] as reason, p_trigger_event_ids[l.k] as trigger_event_id
      from (select k, p_community_ids[k] as c, p_member_ids[k] as m from unnest(v_part) k) l
      order by l.c, l.m, l.k
    ), mem as materialized (
      -- billing.community_now and billing.member_json(text, text), joined rather than
      -- called: a plpgsql call per member starts an executor for each of its queries
      select r.*, now() + coalesce(co.clock_offset, '0'::interval) as now, t.member,
        jsonb_build_object('identities', t.member->'identities',
          'external_subjects', t.member->'external_subjects') as snapshot
      from req r
      left join billing.communities co on co.id = r.c
      cross join lateral (select o.member from billing.member_object(r.c, r.m) o(member) offset 0) t
    ), des as (
      select mem.k, d.entitlement_id, d.sources, d.benefits, d.next_check_at
      from mem cross join lateral billing.ledger_desired(mem.c, mem.m, mem.now) d
    ), sto as (
      select mem.k, x.id, x.entitlement_id, x.status, x.sources, x.benefits, x.identities, x.next_check_at
      from mem join billing.member_entitlements x on x.community_id = mem.c and x.member_id = mem.m
    ), cmp as materialized (
      select mem.k, mem.c, mem.m, mem.now, mem.snapshot, mem.member, mem.reason, mem.trigger_event_id,
        coalesce(des.entitlement_id, sto.entitlement_id) as entitlement_id,
        des.entitlement_id as d_ent, des.sources as d_sources, des.benefits as d_benefits, des.next_check_at as d_next,
        sto.id as stored_id, sto.status as s_status, sto.sources as s_sources, sto.benefits as s_benefits,
        sto.identities as s_identities, sto.next_check_at as s_next,
        case when des.entitlement_id is not null then 'active' else 'inactive' end as status
      from des full join sto on sto.k = des.k and sto.entitlement_id = des.entitlement_id
      join mem on mem.k = coalesce(des.k, sto.k)
    ), act as (
      -- A new row's id is drawn here rather than by the column default, so its event is
      -- built from this row: joining the inserted rows back to act (three keys, through
      -- the returned record) was a nested loop the planner chose on a one-row estimate,
      -- 1.5 s of a 1,000-switch statement.
      select cmp.*, case when cmp.status = 'active' then cmp.snapshot else cmp.s_identities end as identities,
        case when cmp.stored_id is null then billing.gen_id('ment') end as new_id,
        case
          when cmp.stored_id is null then 'member.entitlement.granted'
          when cmp.s_status = cmp.status and cmp.s_sources = coalesce(cmp.d_sources, '[]')
               and cmp.s_benefits = coalesce(cmp.d_benefits, '[]')
               and cmp.s_identities = case when cmp.status = 'active' then cmp.snapshot else cmp.s_identities end then null
          when cmp.s_status = cmp.status then 'member.entitlement.updated'
          when cmp.status = 'active' then 'member.entitlement.granted'
          else 'member.entitlement.revoked' end as type
      from cmp
    )
    -- What to write: the rows that change visibly (type) or only in next_check_at. None
    -- (a refresh that finds the ledger right, the usual single-row case): no statement
    -- writes, so no trigger of the ledger's or the events' tables fires.
    select array_agg(row(a.k, a.c, a.m, a.now, a.snapshot, a.member, a.reason, a.trigger_event_id, a.entitlement_id,
        a.d_ent, a.d_sources, a.d_benefits, a.d_next, a.stored_id, a.s_status, a.s_sources, a.s_benefits,
        a.s_identities, a.s_next, a.status, a.identities, a.new_id, a.type)::billing.ledger_change
      order by a.k, a.entitlement_id) into v_changes
    from act a
    where a.type is not null or a.s_next is distinct from a.d_next;
    continue when v_changes is null;
    with act as (
      select * from unnest(v_changes)
    ), nxt as (
      update billing.member_entitlements x set next_check_at = a.d_next
      from act a
      where a.type is null and a.s_next is distinct from a.d_next and x.community_id = a.c and x.id = a.stored_id
    ), upd as (
      -- returning what the row's event needs, so no join finds the row again
      update billing.member_entitlements x set
        status = a.status,
        revision = x.revision + 1,
        sources = coalesce(a.d_sources, '[]'),
        benefits = coalesce(a.d_benefits, '[]'),
        identities = a.identities,
        granted_at = case when a.type = 'member.entitlement.granted' then a.now else x.granted_at end,
        revoked_at = case when a.type = 'member.entitlement.granted' then null
                          when a.type = 'member.entitlement.revoked' then a.now else x.revoked_at end,
        next_check_at = a.d_next,
        updated_at = now()
      from act a
      where a.type is not null and a.stored_id is not null and x.community_id = a.c and x.id = a.stored_id
      returning a.k, a.type, a.entitlement_id, a.s_benefits, a.member, a.reason, a.trigger_event_id, a.now, x as me
    ), ins as (
      insert into billing.member_entitlements (community_id, id, member_id, entitlement_id, status,
        revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
      select a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now, a.d_next, now()
      from act a
      where a.stored_id is null
      order by a.k, a.entitlement_id
    ), changed as (
      select u.k, u.type, u.entitlement_id, u.s_benefits, u.member, u.reason, u.trigger_event_id, u.now, u.me from upd u
      union all
      -- the row ins writes, as it writes it: its columns in the table's order (a row of
      -- another length fails the cast; test/ledger/refresh-each.test.ts compares the events)
      select a.k, a.type, a.entitlement_id, null, a.member, a.reason, a.trigger_event_id, a.now,
        row(a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now,
          null, now(), a.d_next)::billing.member_entitlements
      from act a
      where a.stored_id is null
    ), ev as (
      -- One event per changed row, in list order, then entitlement order (the calls' order),
      -- dated by the community's clock read above (no _010_community_clock call per row).
      insert into billing.events (community_id, type, created_at, data)
      select (r.me).community_id, r.type, r.now, jsonb_build_object(
        'member', r.member,
        'entitlement', billing.member_entitlement_json(r.me, ent),
        'changes', jsonb_build_object(
          'added_benefits', billing.jsonb_array_minus((r.me).benefits, coalesce(r.s_benefits, '[]')),
          'removed_benefits', billing.jsonb_array_minus(coalesce(r.s_benefits, '[]'), (r.me).benefits)),
        'reason', r.reason,
        'trigger_event_id', r.trigger_event_id)
      from changed r
      join billing.entitlements ent on ent.community_id = (r.me).community_id and ent.id = (r.me).entitlement_id
      order by r.k, r.entitlement_id
      returning 1
    )
    select count(*)::integer into v_n from ev;
    v_changed := v_changed + v_n;
  end loop;
  return v_changed;
end
$$;

-- Platform deliveries: which connections can deliver, written out in the trigger.
-- Statement-level over the ledger's transition tables: members whose active benefits,
-- status or identities changed (rows without benefits, before or after, never reach a
-- platform).
create or replace function billing_private.tg_member_entitlements__deliveries() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text[];
  v_m text[];
  v_able text[];
begin
  -- The statement's communities' connections that can deliver (billing_private.
  -- platform_config_can_deliver, written out: a call per connection is a plpgsql
  -- executor start on every ledger write); none, and nothing is queued.
  select array_agg(pc.id) into v_able from billing.platform_configs pc
  where pc.community_id in (select distinct n.community_id from new_rows n)
    and (exists (select 1 from billing_private.platform_secrets s
                 where s.community_id = pc.community_id and s.platform_config_id = pc.id and s.name = 'bot_token')
         or exists (select 1 from billing_private.platform_defaults d where d.platform = pc.platform and d.has_bot_token));
  if v_able is null then
    return null;
  end if;
  if tg_op = 'INSERT' then
    select array_agg(n.community_id), array_agg(n.member_id) into v_c, v_m
    from new_rows n
    where exists (select 1 from jsonb_array_elements(n.benefits) b where b->>'platform_config_id' = any (v_able));
  else
    select array_agg(n.community_id), array_agg(n.member_id) into v_c, v_m
    from new_rows n join old_rows o on o.community_id = n.community_id and o.id = n.id
    where (n.status, n.benefits, n.identities) is distinct from (o.status, o.benefits, o.identities)
      and exists (select 1 from jsonb_array_elements(n.benefits || o.benefits) b where b->>'platform_config_id' = any (v_able));
  end if;
  perform billing_private.enqueue_deliveries(v_c, v_m);
  return null;
end
$$;
