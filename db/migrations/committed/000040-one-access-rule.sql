--! Previous: sha1:1c59b98717f0e0948e657a9c6189195e835f00ba
--! Hash: sha1:37f212125bb7c08c74b1c0c6ce2524fb194f1e07
--! Message: one-access-rule

--! split: 1-current.sql
-- Enter migration here

--! split: 20-one-access-rule.sql
-- Issue 28 item 3, "Files that hold one idea" (changed functions restated whole; the
-- fixtures hold the same text).
-- The entitlement rule, once: billing.source_grants_access (fixtures/41-access-rule.sql,
-- with billing.subscription_retry_open and subscription_unpaid, moved there from
-- 46-invoices.sql unchanged), called by the ledger (ledger_desired,
-- ledger_members_on_tiers), grant_json and check_eligible.
-- The ledger's refresh, once: billing.ledger_refresh_each, which ledger_refresh_member,
-- _members, _list and ledger_sweep call (billing.ledger_change: its rows to write).
-- A plan switch validated once: billing.switch_validate, called by the switch, the
-- immediate switch and the portal's preview.

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

-- Members whose sources could grant (the rule with time set aside: an end that passed
-- but was not swept yet still counts) sit on one of the tiers.
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

-- One row of a refresh's comparison that has something to write (ledger_refresh_each):
-- the member's list place (k), community, member, clock, identities snapshot, member
-- object, reason and trigger event; the entitlement, desired (d_*) and stored (s_*)
-- state; what the row becomes (status, identities, new_id for a first grant) and its
-- event type (null: only next_check_at changes).
do $$
begin
  if not exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace
                 where n.nspname = 'billing' and t.typname = 'ledger_change') then
    create type billing.ledger_change as (k integer, c text collate "C", m text collate "C", now timestamptz,
      snapshot jsonb, member jsonb, reason text, trigger_event_id text, entitlement_id text collate "C",
      d_ent text collate "C", d_sources jsonb, d_benefits jsonb, d_next timestamptz, stored_id text collate "C",
      s_status text, s_sources jsonb, s_benefits jsonb, s_identities jsonb, s_next timestamptz, status text,
      identities jsonb, new_id text collate "C", type text);
  end if;
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
      returning a.k, a.type, a.entitlement_id, a.s_benefits, a.member, a.reason, a.trigger_event_id, x as me
    ), ins as (
      insert into billing.member_entitlements (community_id, id, member_id, entitlement_id, status,
        revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
      select a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now, a.d_next, now()
      from act a
      where a.stored_id is null
      order by a.k, a.entitlement_id
    ), changed as (
      select u.k, u.type, u.entitlement_id, u.s_benefits, u.member, u.reason, u.trigger_event_id, u.me from upd u
      union all
      -- the row ins writes, as it writes it: its columns in the table's order (a row of
      -- another length fails the cast; test/ledger/refresh-each.test.ts compares the events)
      select a.k, a.type, a.entitlement_id, null, a.member, a.reason, a.trigger_event_id,
        row(a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now,
          null, now(), a.d_next)::billing.member_entitlements
      from act a
      where a.stored_id is null
    ), ev as (
      -- One event per changed row, in list order, then entitlement order (the calls' order).
      insert into billing.events (community_id, type, data)
      select (r.me).community_id, r.type, jsonb_build_object(
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

-- Recomputes one member's ledger; returns how many rows changed visibly (one event
-- each). p_reason and p_trigger_event_id go into the events' data.
create or replace function billing.ledger_refresh_member(p_community_id text, p_member_id text,
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
as $$
begin
  return billing.ledger_refresh_each(array[p_community_id], array[p_member_id], array[p_reason],
    array[p_trigger_event_id]);
end
$$;

-- Time passing: re-evaluates every active row whose next_check_at has come (expired
-- purchases, cancelling subscriptions past their period end) in one community, or in
-- every community when p_community_id is null; each community's members at once, in
-- member order. Returns the number of rows changed.
create or replace function billing.ledger_sweep(p_community_id text) returns integer
  language plpgsql volatile
as $$
declare
  v_community text;
  v_members text[];
  v_changed integer := 0;
begin
  for v_community in
    select c.id from billing.communities c
    where p_community_id is null or c.id = p_community_id
  loop
    select array_agg(distinct x.member_id order by x.member_id) into v_members
    from billing.member_entitlements x
    where x.community_id = v_community and x.status = 'active'
      and x.next_check_at <= billing.community_now(v_community);
    if v_members is not null then
      v_changed := v_changed + billing.ledger_refresh_each(array_fill(v_community, array[cardinality(v_members)]),
        v_members, array_fill('access_expired'::text, array[cardinality(v_members)]),
        array_fill(null::text, array[cardinality(v_members)]));
    end if;
  end loop;
  return v_changed;
end
$$;

-- Refreshes a set of members (from a statement-level trigger) with one reason, in
-- member order.
create or replace function billing.ledger_refresh_members(p_community_id text, p_member_ids text[],
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
as $$
declare
  v_members text[];
begin
  select array_agg(distinct m order by m) into v_members from unnest(p_member_ids) m where m is not null;
  if v_members is null then
    return 0;
  end if;
  return billing.ledger_refresh_each(array_fill(p_community_id, array[cardinality(v_members)]), v_members,
    array_fill(p_reason, array[cardinality(v_members)]), array_fill(p_trigger_event_id, array[cardinality(v_members)]));
end
$$;

-- The ledgers of a statement's rows, in list order (a member listed again is refreshed
-- once, at its first place). The statement-level triggers of subscriptions and
-- purchases call it; the benchmark's no-ledger anchor replaces it (bench/ledger).
create or replace function billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns void language plpgsql volatile
as $$
begin
  if cardinality(p_member_ids) > 0 then
    perform billing.ledger_refresh_each(p_community_ids, p_member_ids, p_reasons, p_trigger_event_ids);
  end if;
end
$$;

-- The switch rule, checked in one place by every path that switches or shows a switch
-- (billing_api.subscription_switch, billing_private.subscription_switch_now, which the
-- API role may also call, and the portal's billing_api.subscription_switch_preview):
-- only an active or trialing subscription switches (409, billing.require_switchable),
-- to one of its switch options (billing.switch_options; 422 invalid_request on
-- plan_id), and with p_immediate only to one that applies now (same tier or upgrade).
-- Returns the option's group: same_tier, upgrades or downgrades.
create or replace function billing.switch_validate(p_sub billing.subscriptions, p_plan_id text,
  p_immediate boolean default false) returns text
  language plpgsql stable
as $$
declare
  v_grp text;
begin
  perform billing.require_switchable(p_sub);
  select e.g into v_grp from jsonb_each(billing.switch_options(p_sub)) e(g, arr), jsonb_array_elements(arr) o
  where o->>'plan_id' = p_plan_id and (not p_immediate or e.g in ('same_tier', 'upgrades'))
  limit 1;
  if v_grp is null then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_plan_id, '') || ' is not among this subscription''s '
      || case when p_immediate then 'immediate ' else '' end || 'switch options.', 'plan_id');
  end if;
  return v_grp;
end
$$;

grant execute on function billing.switch_validate(billing.subscriptions, text, boolean) to billing_api;

-- Same tier or upgrade: applies now; the period is kept and the proration recorded
-- (credit for the unused time of the old plan, charge for the same time on the new
-- one; nothing while trialing). Downgrade: scheduled for the period end.
-- A plan that is not among the switch options answers 422 invalid_request (plan_id).
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
  v_sub := billing.lock_subscription(p_args->>'id');
  v_grp := billing.switch_validate(v_sub, p_args->>'plan_id');
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

-- An immediate switch (same tier or upgrade) of the current community's subscription
-- to p_plan_id, validated again here (billing.switch_validate, 40-subscriptions.sql)
-- because the API role may call it. The
-- proration: credit for the unused time of the old plan, charge for the new plan over
-- the rest of the period; a change of interval starts a new period now (charge: the
-- whole new period). Credit beyond the charge is kept (credit_cents) for the next
-- renewals. A sandbox subscription's proration is invoiced and collected first, and
-- the switch applies only when that invoice is paid: a decline raises BLPAY
-- (payment_failed) and changes nothing. While trialing nothing is charged.
-- Stripe subscriptions: the plan changes here and Stripe invoices the proration (its
-- invoice.* events are mirrored), refused by the handler if Stripe cannot collect.
create or replace function billing_private.subscription_switch_now(p_subscription_id text, p_plan_id text)
  returns billing.subscriptions language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_now timestamptz := billing.now();
  v_new_period boolean;
  v_start timestamptz;
  v_end timestamptz;
  v_charge bigint;
  v_credit bigint;
  v_applied bigint;
  v_lines jsonb;
  v_inv billing.invoices;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id for update;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_subscription_id, '') || '.');
  end if;
  perform billing.switch_validate(v_sub, p_plan_id, p_immediate => true);
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_plan_id;
  select q.new_period, q.period_start, q.period_end, q.charge_cents, q.credit_cents, q.applied_cents
    into v_new_period, v_start, v_end, v_charge, v_credit, v_applied
  from billing.switch_proration(v_sub, v_old, v_new, v_now) q;
  if v_sub.provider = 'sandbox' and v_charge > 0 then
    v_lines := jsonb_build_array(jsonb_build_object('type', 'proration',
      'description', 'Remaining time on ' || coalesce(v_new.name, v_new.id), 'amount_cents', v_charge,
      'plan_id', v_new.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_end)));
    if v_applied > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'proration',
        'description', 'Unused time on ' || coalesce(v_old.name, v_old.id), 'amount_cents', -v_applied,
        'plan_id', v_old.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_sub.current_period_end));
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_update', v_new.currency, v_lines,
      v_now, v_end, 'sandbox', v_now);
    if not billing.sandbox_charge_succeeds(v_inv) then
      raise exception using errcode = 'BLPAY',
        message = 'The payment of ' || v_inv.total_cents || ' ' || v_inv.currency
          || ' for this plan change was declined; the subscription is unchanged.';
    end if;
    perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
  end if;
  update billing.subscriptions s set plan_id = v_new.id, scheduled_plan_id = null, scheduled_at = null,
    current_period_start = v_start, current_period_end = v_end,
    billing_anchor = case when v_new_period then v_start else s.billing_anchor end,
    credit_cents = s.credit_cents + case when s.provider = 'sandbox' then v_credit - v_applied else 0 end,
    proration_credit_cents = v_credit, proration_charge_cents = v_charge, prorated_at = v_now, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;

-- What switching a subscription to p_args.plan_id would do now: an immediate switch's
-- proration (billing.switch_proration, the rule the switch applies) or, for a
-- downgrade, the date it is scheduled for. 409 / 422 as the switch itself (billing.switch_validate).
create or replace function billing_api.subscription_switch_preview(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_group text;
  v_q record;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_args->>'id', '') || '.');
  end if;
  v_group := billing.switch_validate(v_sub, p_args->>'plan_id');
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_args->>'plan_id';
  if v_group = 'downgrades' then
    return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'period_end',
      'applies_at', billing.iso(v_sub.current_period_end), 'currency', v_new.currency,
      'charge_cents', 0, 'credit_cents', 0, 'due_now_cents', 0, 'period_end', billing.iso(v_sub.current_period_end));
  end if;
  select * into v_q from billing.switch_proration(v_sub, v_old, v_new, billing.now());
  return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'now',
    'applies_at', billing.iso(billing.now()), 'currency', v_new.currency,
    'charge_cents', v_q.charge_cents, 'credit_cents', v_q.applied_cents,
    'due_now_cents', v_q.charge_cents - v_q.applied_cents, 'period_end', billing.iso(v_q.period_end));
end
$$;
