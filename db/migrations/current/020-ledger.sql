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
--   subscription: status active, trialing or past_due; cancelling while
--     current_period_end > the community's now (or has no end); paused and
--     cancelled never.
--   purchase: status completed, until access_expires_at (forever when null).
-- Sources reach entitlements through their plan's tier (billing.tier_entitlements).
-- An inactive row keeps sources [] and benefits [] (so a revoke's
-- changes.removed_benefits lists what to take away); its identities snapshot is
-- frozen until the next grant.
--
-- Time: purchases expiring and cancelling periods ending change no row, so
-- billing.ledger_sweep re-evaluates rows whose next_check_at has passed.
--
-- The source tables' triggers (lifecycle events + refresh) live in 030-events.sql;
-- the catalog tables' triggers (tier links, benefits) are here.

alter table billing.member_entitlements
  add column next_check_at timestamptz;

comment on column billing.member_entitlements.next_check_at is
  'Earliest valid_until among time-limited sources (cancelling subscriptions, expiring purchases); billing.ledger_sweep re-evaluates the row once billing.now() reaches it.';
comment on column billing.member_entitlements.identities is
  'Snapshot {identities, external_subjects} of the member when last active: a change of it is a visible change (revision + 1, member.entitlement.updated).';

create index member_entitlements_next_check on billing.member_entitlements (community_id, next_check_at)
  where status = 'active' and next_check_at is not null;
create index member_entitlements_entitlement on billing.member_entitlements (community_id, entitlement_id)
  where status = 'active';
create index purchases_plan on billing.purchases (community_id, plan_id);

-- A community's time (its sandbox clock) for code that runs outside that community's
-- request, such as triggers fired by the owner or a sweep over many communities.
create or replace function billing.community_now(p_community_id text) returns timestamptz
  language sql stable parallel safe
as $$
  select now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = p_community_id), '0'::interval)
$$;

-- The outbox: writes one event row and returns its id.
create or replace function billing.emit_event(p_community_id text, p_type text, p_data jsonb)
  returns text language plpgsql volatile
as $$
declare
  v_id text;
begin
  insert into billing.events (community_id, type, data) values (p_community_id, p_type, p_data)
  returning id into v_id;
  return v_id;
end
$$;

-- The member and member-entitlement objects come from billing.member_json and
-- billing.member_entitlement_json (005-json.sql), shared with the read API.

-- Elements of array a that are not in array b, in a's order.
create or replace function billing.jsonb_array_minus(a jsonb, b jsonb) returns jsonb
  language plpgsql immutable parallel safe
as $$
declare
  v_x jsonb;
  v_out jsonb := '[]';
begin
  if b = '[]' then
    return a;
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
      and (s.status in ('active', 'trialing', 'past_due')
        or (s.status = 'cancelling' and (s.current_period_end is null or s.current_period_end > p_now)))
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
create or replace function billing.ledger_refresh_member(p_community_id text, p_member_id text,
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
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
  ) m
$$;

-- Tier entitlement links changed: refresh every member holding a source on the
-- tiers touched, once per statement (transition tables).
create or replace function billing.tg_tier_entitlements__ledger() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from (
      select community_id, tier_id from new_rows
      union all
      select community_id, tier_id from old_rows) t
    group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

-- Transition tables allow one event per trigger; an empty table stands in for the
-- missing side.
create or replace function billing.tg_tier_entitlements__ledger_insert() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from new_rows t group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

create or replace function billing.tg_tier_entitlements__ledger_delete() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from old_rows t group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

create trigger _500_ledger_insert after insert on billing.tier_entitlements
  referencing new table as new_rows
  for each statement execute function billing.tg_tier_entitlements__ledger_insert();
create trigger _500_ledger_update after update on billing.tier_entitlements
  referencing new table as new_rows old table as old_rows
  for each statement execute function billing.tg_tier_entitlements__ledger();
create trigger _500_ledger_delete after delete on billing.tier_entitlements
  referencing old table as old_rows
  for each statement execute function billing.tg_tier_entitlements__ledger_delete();

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

create or replace function billing.tg_entitlement_benefits__ledger_insert() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from new_rows t group by t.community_id;
  return null;
end
$$;

create or replace function billing.tg_entitlement_benefits__ledger_delete() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from old_rows t group by t.community_id;
  return null;
end
$$;

create or replace function billing.tg_entitlement_benefits__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from (select community_id, entitlement_id from new_rows
        union all select community_id, entitlement_id from old_rows) t
  group by t.community_id;
  return null;
end
$$;

create trigger _500_ledger_insert after insert on billing.entitlement_benefits
  referencing new table as new_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger_insert();
create trigger _500_ledger_update after update on billing.entitlement_benefits
  referencing new table as new_rows old table as old_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger();
create trigger _500_ledger_delete after delete on billing.entitlement_benefits
  referencing old table as old_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger_delete();

-- A platform config's platform is part of each benefit object.
create or replace function billing.tg_platform_configs__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(new.community_id, coalesce((
    select array_agg(distinct b.entitlement_id) from billing.entitlement_benefits b
    where b.community_id = new.community_id and b.platform_config_id = new.id), '{}'));
  return null;
end
$$;

create trigger _500_ledger after update of platform on billing.platform_configs
  for each row when (old.platform is distinct from new.platform)
  execute function billing.tg_platform_configs__ledger();

-- A plan moved to another tier: its subscribers' and buyers' sources now reach other
-- entitlements (reason tier_entitlements_changed, as for a link edit).
create or replace function billing.tg_plans__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_refresh_members(new.community_id, coalesce((
    select array_agg(distinct m.member_id) from (
      select s.member_id from billing.subscriptions s where s.community_id = new.community_id and s.plan_id = new.id
      union all
      select u.member_id from billing.purchases u where u.community_id = new.community_id and u.plan_id = new.id) m),
    '{}'), 'tier_entitlements_changed', null);
  return null;
end
$$;

create trigger _500_ledger after update of tier_id on billing.plans
  for each row when (old.tier_id is distinct from new.tier_id)
  execute function billing.tg_plans__ledger();
