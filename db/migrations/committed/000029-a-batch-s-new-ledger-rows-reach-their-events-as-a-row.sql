--! Previous: sha1:0ffde6128075d301f4ec68033b172316eda2a3ae
--! Hash: sha1:05540d58af76807cf91d649cdd863072ee4e444b
--! Message: A batch's new ledger rows reach their events as a row

--! split: 1-current.sql
-- A batch's new ledger rows reach their events as a row, not through a JSON object built
-- and parsed back.
--! Included 50-ledger.sql
-- The entitlement ledger: one billing.member_entitlements row per (member,
-- entitlement), kept by the database whenever anything that feeds it changes.
--
-- Design: "recompute per member". billing.ledger_refresh_member computes, from the
-- current source rows, the desired (entitlement -> sources, benefits) of one member,
-- compares it with the stored ledger rows (including a snapshot of the member's
-- identities and external subjects) and updates every row whose status, sources,
-- benefits or identities changed: revision + 1, granted_at/revoked_at on the edges,
-- and one member.entitlement.* event per changed row, in the same transaction.
--
-- Which sources grant:
--   subscription: status active or trialing; past_due while one of its open invoices
--     still has a retry scheduled (46-invoices.sql); cancelling while
--     current_period_end > the community's now (or has no end), unless an open invoice
--     of it has no retry left; paused and cancelled never.
--   purchase: status completed, until access_expires_at (forever when null).
--   grant (47-grants.sql): not revoked, until expires_at (forever when null).
-- Sources reach entitlements through their plan's tier (billing.tier_entitlements).
-- An inactive row keeps sources [] and benefits [] (so a revoke's
-- changes.removed_benefits lists what to take away); its identities snapshot is
-- frozen until the next grant.
--
-- Time: purchases expiring and cancelling periods ending change no row, so
-- billing.ledger_sweep re-evaluates rows whose next_check_at has passed.
-- Every table that feeds the ledger refreshes it from its own trigger: subscriptions
-- (inserts and updates per statement, _500_outbox_and_ledger_insert and _update;
-- deletes per row, _500_ledger_delete; 40-subscriptions.sql) and purchases (inserts
-- per statement, _500_outbox_and_ledger_insert; updates and deletes per row,
-- _500_outbox_and_ledger; 45-purchases.sql), the statement-level ones through
-- billing.ledger_refresh_list, invoices of past_due subscriptions (46-invoices.sql),
-- member identities and external subjects (30-members.sql), and the catalog tables
-- (_500_ledger on tier_entitlements, entitlement_benefits, platform_configs and plans,
-- 20-catalog.sql).

create table if not exists billing.member_entitlements (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('ment'),
  member_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  status text not null check (status in ('active', 'inactive')),
  revision bigint not null default 1,
  sources jsonb not null default '[]',
  benefits jsonb not null default '[]',
  identities jsonb not null default '{}',
  granted_at timestamptz,
  revoked_at timestamptz,
  updated_at timestamptz not null default now(),
  next_check_at timestamptz,
  primary key (community_id, id),
  unique (community_id, member_id, entitlement_id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade
);
comment on column billing.member_entitlements.next_check_at is
  'Earliest valid_until among time-limited sources (cancelling subscriptions, expiring purchases); billing.ledger_sweep re-evaluates the row once billing.now() reaches it.';
comment on column billing.member_entitlements.identities is
  'Snapshot {identities, external_subjects} of the member when last active: a change of it is a visible change (revision + 1, member.entitlement.updated).';

create index if not exists member_entitlements_next_check on billing.member_entitlements (community_id, next_check_at)
  where status = 'active' and next_check_at is not null;
create index if not exists member_entitlements_entitlement on billing.member_entitlements (community_id, entitlement_id)
  where status = 'active';
alter table billing.member_entitlements enable row level security;
alter table billing.member_entitlements force row level security;
drop policy if exists tenant on billing.member_entitlements;
create policy tenant on billing.member_entitlements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.member_entitlements;
create policy owner_access on billing.member_entitlements to current_user using (true) with check (true);
grant select on billing.member_entitlements to billing_api;
revoke insert, update, delete on billing.member_entitlements from billing_api;
grant select, insert, update on billing.member_entitlements to billing_writer;

-- ---- the member entitlement object ---------------------------------------------------

-- Member entitlement: sources and benefits exactly as the ledger holds them. The
-- two-argument form is a plain expression (inlined) for queries that join the
-- entitlement themselves; the one-argument form looks it up.
create or replace function billing.member_entitlement_json(p_me billing.member_entitlements,
  p_ent billing.entitlements) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_me.id,
    'entitlement_id', p_me.entitlement_id,
    'key', p_ent.key,
    'name', p_ent.name,
    'revision', p_me.revision,
    'status', p_me.status,
    'granted_at', billing.iso(p_me.granted_at),
    'revoked_at', billing.iso(p_me.revoked_at),
    'sources', p_me.sources,
    'benefits', p_me.benefits)
$$;

-- plpgsql, not sql: a SQL function reading a table is planned again on every call (70
-- us; every entitlement event builds one).
create or replace function billing.member_entitlement_json(p_me billing.member_entitlements) returns jsonb
  language plpgsql stable parallel safe
as $$
declare
  v_ent billing.entitlements;
begin
  select * into v_ent from billing.entitlements e where e.community_id = p_me.community_id and e.id = p_me.entitlement_id;
  return billing.member_entitlement_json(p_me, v_ent);
end
$$;

-- ---- computing the ledger --------------------------------------------------------------

-- Elements of array a that are not in array b, in a's order.
create or replace function billing.jsonb_array_minus(a jsonb, b jsonb) returns jsonb
  language plpgsql immutable parallel safe
as $$
declare
  v_x jsonb;
  v_out jsonb := '[]';
begin
  -- the common cases (benefits unchanged, first grant, revoke) without a query
  if b = '[]' or a = '[]' then
    return a;
  elsif a = b then
    return '[]';
  end if;
  for v_x in select jsonb_array_elements(a) loop
    if not (b @> jsonb_build_array(v_x)) then
      v_out := v_out || jsonb_build_array(v_x);
    end if;
  end loop;
  return v_out;
end
$$;

-- Desired ledger of one member: entitlement -> supporting sources, benefits and the
-- earliest time one of those sources lapses by itself.
create or replace function billing.ledger_desired(p_community_id text, p_member_id text, p_now timestamptz)
  returns table (entitlement_id text, sources jsonb, benefits jsonb, next_check_at timestamptz)
  language sql stable
as $$
  with src as (
    select 'subscription' as type, s.id, s.status, p.tier_id, s.plan_id, s.client_reference_id,
      s.current_period_end as valid_until, s.status = 'cancelling' as lapses
    from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and s.member_id = p_member_id
      and (s.status in ('active', 'trialing')
        or (s.status = 'past_due' and billing.subscription_retry_open(s.community_id, s.id))
        or (s.status = 'cancelling' and (s.current_period_end is null or s.current_period_end > p_now)
            and not billing.subscription_unpaid(s.community_id, s.id)))
    union all
    select 'grant', g.id, 'active', g.tier_id, null, null, g.expires_at, g.expires_at is not null
    from billing.grants g
    where g.community_id = p_community_id and g.member_id = p_member_id and g.revoked_at is null
      and (g.expires_at is null or g.expires_at > p_now)
    union all
    select 'purchase', u.id, u.status, p.tier_id, u.plan_id, u.client_reference_id,
      u.access_expires_at, u.access_expires_at is not null
    from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and u.member_id = p_member_id
      and u.status = 'completed' and (u.access_expires_at is null or u.access_expires_at > p_now)
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

-- Recomputes one member's ledger; returns how many rows changed visibly (one event
-- each). p_reason and p_trigger_event_id go into the events' data.
-- Index scans only (enable_seqscan off): every table it reads is read by the member's
-- or the catalog's keys, and its plans are kept for the session. A plan kept from a
-- moment when billing.purchases was empty (a new deployment's first purchases, or a
-- server without autovacuum) otherwise scanned every purchase once per member: a
-- sequential scan costs nothing on an empty table, and the plan outlived it. And a
-- sequential scan of a catalog table once per member asks the kernel for the table's
-- size each time.
create or replace function billing.ledger_refresh_member(p_community_id text, p_member_id text,
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
  set enable_seqscan = off
as $$
declare
  v_now timestamptz := billing.community_now(p_community_id);
  v_member jsonb;
  v_snapshot jsonb;
  v_rec record;
  v_row billing.member_entitlements;
  v_status text;
  v_identities jsonb;
  v_type text;
  v_types text[] := '{}';
  v_datas jsonb[] := '{}';
begin
  -- One refresh of a member at a time: a concurrent one waits for the first to
  -- commit, then reads what it wrote. A row lock on the member (not an advisory lock:
  -- one statement may refresh 100,000 members, more than the shared lock table holds);
  -- NO KEY UPDATE leaves inserts of rows that reference the member unblocked.
  perform 1 from billing.members m where m.community_id = p_community_id and m.id = p_member_id
    for no key update;
  if not found then
    return 0; -- the member is being deleted; its ledger rows go with it
  end if;
  v_member := billing.member_json(p_community_id, p_member_id);
  v_snapshot := jsonb_build_object('identities', v_member->'identities',
    'external_subjects', v_member->'external_subjects');

  for v_rec in
    select d.entitlement_id as d_ent, d.sources as d_sources, d.benefits as d_benefits,
      d.next_check_at as d_next, me.r as stored
    from billing.ledger_desired(p_community_id, p_member_id, v_now) d
    full join (select x as r, x.entitlement_id from billing.member_entitlements x
               where x.community_id = p_community_id and x.member_id = p_member_id) me
      on me.entitlement_id = d.entitlement_id
    order by coalesce(d.entitlement_id, me.entitlement_id)
  loop
    v_status := case when v_rec.d_ent is not null then 'active' else 'inactive' end;
    if (v_rec.stored).id is null then
      -- first grant of this entitlement to this member
      insert into billing.member_entitlements as x (community_id, member_id, entitlement_id, status,
        revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
      values (p_community_id, p_member_id, v_rec.d_ent, 'active', 1, v_rec.d_sources, v_rec.d_benefits,
        v_snapshot, v_now, v_rec.d_next, now())
      returning * into v_row;
      v_type := 'member.entitlement.granted';
    else
      v_row := v_rec.stored;
      v_identities := case when v_status = 'active' then v_snapshot else v_row.identities end;
      if v_row.status = v_status
         and v_row.sources = coalesce(v_rec.d_sources, '[]')
         and v_row.benefits = coalesce(v_rec.d_benefits, '[]')
         and v_row.identities = v_identities then
        if v_row.next_check_at is distinct from v_rec.d_next then
          update billing.member_entitlements x set next_check_at = v_rec.d_next
          where x.community_id = p_community_id and x.id = v_row.id;
        end if;
        continue;
      end if;
      v_type := case
        when v_row.status = v_status then 'member.entitlement.updated'
        when v_status = 'active' then 'member.entitlement.granted'
        else 'member.entitlement.revoked' end;
      update billing.member_entitlements x set
        status = v_status,
        revision = x.revision + 1,
        sources = coalesce(v_rec.d_sources, '[]'),
        benefits = coalesce(v_rec.d_benefits, '[]'),
        identities = v_identities,
        granted_at = case when v_type = 'member.entitlement.granted' then v_now else x.granted_at end,
        revoked_at = case when v_type = 'member.entitlement.granted' then null
                          when v_type = 'member.entitlement.revoked' then v_now else x.revoked_at end,
        next_check_at = v_rec.d_next,
        updated_at = now()
      where x.community_id = p_community_id and x.id = v_row.id
      returning * into v_row;
    end if;
    v_types := v_types || v_type;
    v_datas := v_datas || jsonb_build_object(
      'member', v_member,
      'entitlement', billing.member_entitlement_json(v_row),
      'changes', jsonb_build_object(
        'added_benefits', billing.jsonb_array_minus(v_row.benefits, coalesce((v_rec.stored).benefits, '[]')),
        'removed_benefits', billing.jsonb_array_minus(coalesce((v_rec.stored).benefits, '[]'), v_row.benefits)),
      'reason', p_reason,
      'trigger_event_id', p_trigger_event_id);
  end loop;
  -- One insert for the member's events (ids follow the entitlement order above).
  if cardinality(v_types) > 0 then
    insert into billing.events (community_id, type, data)
    select p_community_id, v_types[i], v_datas[i] from generate_subscripts(v_types, 1) i order by i;
  end if;
  return cardinality(v_types);
end
$$;

-- Time passing: re-evaluates every active row whose next_check_at has come (expired
-- purchases, cancelling subscriptions past their period end) in one community, or in
-- every community when p_community_id is null. Returns the number of rows changed.
create or replace function billing.ledger_sweep(p_community_id text) returns integer
  language plpgsql volatile
as $$
declare
  v_community text;
  v_member text;
  v_changed integer := 0;
begin
  for v_community in
    select c.id from billing.communities c
    where p_community_id is null or c.id = p_community_id
  loop
    for v_member in
      select distinct x.member_id from billing.member_entitlements x
      where x.community_id = v_community and x.status = 'active'
        and x.next_check_at <= billing.community_now(v_community)
      order by x.member_id
    loop
      v_changed := v_changed + billing.ledger_refresh_member(v_community, v_member, 'access_expired', null);
    end loop;
  end loop;
  return v_changed;
end
$$;

-- Refreshes a set of members (from a statement-level trigger) with one reason.
create or replace function billing.ledger_refresh_members(p_community_id text, p_member_ids text[],
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
as $$
declare
  v_member text;
  v_changed integer := 0;
begin
  for v_member in select distinct m from unnest(p_member_ids) m where m is not null order by 1 loop
    v_changed := v_changed + billing.ledger_refresh_member(p_community_id, v_member, p_reason, p_trigger_event_id);
  end loop;
  return v_changed;
end
$$;

-- billing.ledger_refresh_member for each (p_community_ids[i], p_member_ids[i]) in turn,
-- with its own reason and trigger event, in a few statements for the whole list (a
-- statement that changes many subscriptions, such as a batch of renewals, refreshes
-- its members at once). The same rows, revisions, timestamps and events, in the same
-- order, as the calls one by one: a member listed again is refreshed once, at its first
-- place (nothing between the calls changes its sources, so a second call finds nothing
-- to change). Returns how many rows changed visibly.
create or replace function billing.ledger_refresh_each(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns integer language plpgsql volatile
  set enable_seqscan = off -- see ledger_refresh_member
as $$
declare
  v_changed integer;
  v_present integer[];
begin
  -- One refresh of a member at a time (see ledger_refresh_member), taken in list order:
  -- each member's row locked by its key, one index probe per entry (the lateral runs
  -- per entry, in order; joined, the planner hashed every member of the community for
  -- each statement). The entries whose member exists (not being deleted) are kept.
  select array_agg(k order by k) into v_present
  from generate_subscripts(p_member_ids, 1) k
  cross join lateral (select 1 from billing.members mb
                      where mb.community_id = p_community_ids[k] and mb.id = p_member_ids[k]
                      for no key update) l;
  with req as (
    -- each member at its first place in the list; a member being deleted is skipped
    select distinct on (l.c, l.m) l.k, l.c, l.m, p_reasons[l.k] as reason, p_trigger_event_ids[l.k] as trigger_event_id
    from (select k, p_community_ids[k] as c, p_member_ids[k] as m from unnest(v_present) k) l
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
  ), act as materialized (
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
  select count(*)::integer into v_changed from ev;
  return v_changed;
end
$$;

-- The ledgers of a statement's rows, in list order (a member listed again is refreshed
-- once, at its first place): a few one member at a time (ledger_refresh_member), more
-- in a few statements for the whole list (ledger_refresh_each: the same outcome, and
-- its one big statement costs more than the per-member functions for a single row).
-- The statement-level triggers of subscriptions and purchases call it.
create or replace function billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns void language plpgsql volatile
as $$
begin
  if cardinality(p_member_ids) <= 8 then
    for i in 1 .. cardinality(p_member_ids) loop
      perform billing.ledger_refresh_member(p_community_ids[i], p_member_ids[i], p_reasons[i], p_trigger_event_ids[i]);
    end loop;
  elsif p_member_ids is not null then
    perform billing.ledger_refresh_each(p_community_ids, p_member_ids, p_reasons, p_trigger_event_ids);
  end if;
end
$$;

-- Members whose supporting sources (that could grant) sit on one of the tiers.
create or replace function billing.ledger_members_on_tiers(p_community_id text, p_tier_ids text[])
  returns text[] language sql stable
as $$
  select coalesce(array_agg(distinct member_id), '{}') from (
    select s.member_id from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and p.tier_id = any (p_tier_ids)
      and s.status in ('active', 'trialing', 'past_due', 'cancelling')
    union all
    select u.member_id from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and p.tier_id = any (p_tier_ids) and u.status = 'completed'
    union all
    select g.member_id from billing.grants g
    where g.community_id = p_community_id and g.tier_id = any (p_tier_ids) and g.revoked_at is null
  ) m
$$;

-- Entitlement benefits changed: refresh every member whose row for those
-- entitlements is active (inactive rows carry no benefits).
create or replace function billing.ledger_benefits_changed(p_community_id text, p_entitlement_ids text[])
  returns integer language sql volatile
as $$
  select billing.ledger_refresh_members(p_community_id, coalesce((
    select array_agg(distinct x.member_id) from billing.member_entitlements x
    where x.community_id = p_community_id and x.entitlement_id = any (p_entitlement_ids)
      and x.status = 'active'), '{}'), 'benefits_changed', null)
$$;

-- ---- API -------------------------------------------------------------------------------

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

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.jsonb_array_minus(jsonb,jsonb) to billing_api;
grant execute on function billing.ledger_desired(text,text,timestamptz) to billing_api;
grant execute on function billing.ledger_refresh_member(text,text,text,text) to billing_api;
grant execute on function billing.ledger_refresh_each(text[],text[],text[],text[]) to billing_api;
grant execute on function billing.ledger_refresh_list(text[],text[],text[],text[]) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements,billing.entitlements) to billing_api;
grant execute on function billing_api.member_entitlements_list(jsonb) to billing_api;
grant execute on function billing_api.entitlements_check(jsonb) to billing_api;
--! EndIncluded 50-ledger.sql
