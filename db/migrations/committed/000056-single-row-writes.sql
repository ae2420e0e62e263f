--! Previous: sha1:d021dd48e228d628ac787cba9475ca25c166910d
--! Hash: sha1:a63d5e0ed782dc6df402a0716a3d5691ef2c8ef0
--! Message: single-row writes

--! split: 1-current.sql
-- Enter migration here

--! split: 2-single-row.sql
-- Single-row subscription changes (issue 28). The rollup records MRR movements in a
-- statement of its own, run only for subscriptions whose movements are not known to add
-- up to what they bill now (analytics_facts.recorded_billing). The update trigger dates
-- its events. The ledger updates its rows in one statement and queues platform
-- deliveries itself (the member_entitlements statement triggers fired on every ledger
-- write). The lifecycle tables' audit WHEN is one call (its written-out condition was
-- read back and compiled by every statement). The webhook trigger returns at once when
-- none of the statement's communities has an enabled endpoint.
alter table billing_private.analytics_facts add column if not exists recorded_billing boolean;

create or replace function billing_private.audit_wanted() returns boolean
  language plpgsql stable
as $$
begin
  return current_setting('app.key_id', true) <> '' or current_setting('app.actor', true) <> ''
    or (pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_has_role(session_user, 'billing_owner_probe', 'MEMBER'));
end
$$;

grant execute on function billing_private.audit_wanted() to billing_api, billing_worker, billing_operator;

drop trigger if exists _950_audit_insert on billing.members;
create trigger _950_audit_insert after insert on billing.members
  referencing new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');
drop trigger if exists _950_audit_update on billing.members;
create trigger _950_audit_update after update on billing.members
  referencing old table as old_rows new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');
drop trigger if exists _950_audit_delete on billing.members;
create trigger _950_audit_delete after delete on billing.members
  referencing old table as old_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');
drop trigger if exists _950_audit_insert on billing.subscriptions;
create trigger _950_audit_insert after insert on billing.subscriptions
  referencing new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.subscriptions;
create trigger _950_audit_update after update on billing.subscriptions
  referencing old table as old_rows new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.subscriptions;
create trigger _950_audit_delete after delete on billing.subscriptions
  referencing old table as old_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_insert on billing.invoices;
create trigger _950_audit_insert after insert on billing.invoices
  referencing new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');
drop trigger if exists _950_audit_update on billing.invoices;
create trigger _950_audit_update after update on billing.invoices
  referencing old table as old_rows new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');
drop trigger if exists _950_audit_delete on billing.invoices;
create trigger _950_audit_delete after delete on billing.invoices
  referencing old table as old_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');
drop trigger if exists _950_audit_insert on billing.refunds;
create trigger _950_audit_insert after insert on billing.refunds
  referencing new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.refunds;
create trigger _950_audit_update after update on billing.refunds
  referencing old table as old_rows new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.refunds;
create trigger _950_audit_delete after delete on billing.refunds
  referencing old table as old_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_insert on billing.grants;
create trigger _950_audit_insert after insert on billing.grants
  referencing new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'note');
drop trigger if exists _950_audit_update on billing.grants;
create trigger _950_audit_update after update on billing.grants
  referencing old table as old_rows new table as new_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'note');
drop trigger if exists _950_audit_delete on billing.grants;
create trigger _950_audit_delete after delete on billing.grants
  referencing old table as old_rows for each statement
  when (billing_private.audit_wanted())
  execute function billing_private.tg_audit('id', 'note');

drop trigger if exists _700_deliveries_insert on billing.member_entitlements;
drop trigger if exists _700_deliveries_update on billing.member_entitlements;

create or replace function billing_private.ledger_deliveries(p_communities text[], p_members text[], p_benefits jsonb[])
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text[];
  v_m text[];
  v_able text[];
begin
  select array_agg(pc.id) into v_able from billing.platform_configs pc
  where pc.community_id = any (p_communities)
    and (exists (select 1 from billing_private.platform_secrets s
                 where s.community_id = pc.community_id and s.platform_config_id = pc.id and s.name = 'bot_token')
         or exists (select 1 from billing_private.platform_defaults d where d.platform = pc.platform and d.has_bot_token));
  if v_able is null then
    return;
  end if;
  select array_agg(x.c), array_agg(x.m) into v_c, v_m
  from unnest(p_communities, p_members, p_benefits) x(c, m, b)
  where exists (select 1 from jsonb_array_elements(x.b) e where e->>'platform_config_id' = any (v_able));
  perform billing_private.enqueue_deliveries(v_c, v_m);
end
$$;

drop function if exists billing_private.tg_member_entitlements__deliveries();
grant execute on function billing_private.ledger_deliveries(text[], text[], jsonb[]) to billing_api;

create or replace function billing.ledger_row_delivers(p_type text, p_stored_id text, p_s_status text, p_status text,
  p_s_benefits jsonb, p_d_benefits jsonb, p_s_identities jsonb, p_identities jsonb) returns boolean
  language sql immutable
as $$
  select p_type is not null
    and jsonb_array_length(coalesce(p_d_benefits, '[]') || coalesce(p_s_benefits, '[]')) > 0
    and (p_stored_id is null
         or (p_s_status, p_s_benefits, p_s_identities) is distinct from (p_status, coalesce(p_d_benefits, '[]'), p_identities))
$$;
grant execute on function billing.ledger_row_delivers(text, text, text, text, jsonb, jsonb, jsonb, jsonb) to billing_api;

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
  v_dc text[];
  v_dm text[];
  v_db jsonb[];
  v_change billing.ledger_change;
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
    ), upd as (
      -- The stored rows: those that change visibly (type), and those whose next check only
      -- moves (their other columns are written as they are: one update of the table, not
      -- two, each a plan part to start on every refresh). Returning what a changed row's
      -- event needs, so no join finds the row again.
      update billing.member_entitlements x set
        status = a.status,
        revision = x.revision + case when a.type is null then 0 else 1 end,
        sources = coalesce(a.d_sources, '[]'),
        benefits = coalesce(a.d_benefits, '[]'),
        identities = a.identities,
        granted_at = case when a.type = 'member.entitlement.granted' then a.now else x.granted_at end,
        revoked_at = case when a.type = 'member.entitlement.granted' then null
                          when a.type = 'member.entitlement.revoked' then a.now else x.revoked_at end,
        next_check_at = a.d_next,
        updated_at = case when a.type is null then x.updated_at else now() end
      from act a
      where a.stored_id is not null and x.community_id = a.c and x.id = a.stored_id
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
      where u.type is not null
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
    -- The rows that changed what a platform may hold: their members' deliveries. (Picked
    -- here, row by row in memory: a statement for it cost more than this loop takes for
    -- a part of 1,000 rows.)
    v_dc := null;
    v_dm := null;
    v_db := null;
    foreach v_change in array v_changes loop
      if billing.ledger_row_delivers(v_change.type, v_change.stored_id, v_change.s_status, v_change.status,
           v_change.s_benefits, v_change.d_benefits, v_change.s_identities, v_change.identities) then
        v_dc := v_dc || v_change.c;
        v_dm := v_dm || v_change.m;
        v_db := v_db || (coalesce(v_change.d_benefits, '[]') || coalesce(v_change.s_benefits, '[]'));
      end if;
    end loop;
    if v_dm is not null then
      perform billing_private.ledger_deliveries(v_dc, v_dm, v_db);
    end if;
  end loop;
  return v_changed;
end
$$;

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
      -- in step: its movements add up to what it bills now (the facts say what they added
      -- up to after the last refresh, in its currency at its monthly cents)
      o.recorded_billing is not null
        and (o.currency, o.monthly_cents, o.recorded_billing) = (x.currency, x.monthly_cents, x.billing_now) as in_step,
      -- what its movements add up to after this refresh, when that is what it bills now:
      -- in step; or brought to now below (it has movements); or its first ones recorded
      -- below from its dates (a start and no end, or a start and an end)
      case when o.recorded_billing is not null
                and (o.currency, o.monthly_cents, o.recorded_billing) = (x.currency, x.monthly_cents, x.billing_now)
             or exists (select 1 from billing.mrr_movements r where r.community_id = k.c and r.subscription_id = k.id)
             or x.billing_from < 'infinity' and x.billing_until is null and x.billing_now
             or x.billing_from < 'infinity' and x.billing_until > x.billing_from and not x.billing_now
           then x.billing_now end as recorded_billing
    from keys k
    cross join lateral (select * from analytics.subscription_mrr m
                        where m.community_id = k.c and m.subscription_id = k.id offset 0) x
    left join od o on o.community_id = k.c and o.subscription_id = k.id
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

create or replace function billing.tg_subscriptions__outbox_and_ledger_update() returns trigger
  language plpgsql
as $$
declare
  v_communities text[];
  v_members text[];
  v_old_members text[];
  v_reasons text[];
  v_event_ids text[];
begin
  with ch as (
    select n.community_id, n.id, n.member_id, o.member_id as old_member_id, j.new_json,
      -- the event's date, billing.community_now joined (the events' clock trigger then
      -- skips a call per row)
      now() + coalesce(co.clock_offset, '0'::interval) as at,
      billing.jsonb_changed(j.old_json - 'updated_at' - 'tier_name' - 'plan_name', j.new_json) as prev,
      case when n.status = 'cancelled' and o.status <> 'cancelled'
        then 'subscription.cancelled' else 'subscription.updated' end as type,
      case
        when n.status = 'cancelled' and n.cancellation_reason = 'payment_failed' then 'payment_failed'
        when n.status = 'cancelled' and n.cancellation_reason = 'refunded' then 'refunded'
        when n.status = 'cancelled' and n.cancellation_reason = 'payment_disputed' then 'disputed'
        when n.plan_id <> o.plan_id then 'plan_changed'
        when n.status = o.status then 'subscription_updated'
        when n.status = 'cancelled' then 'subscription_ended'
        when n.status = 'paused' then 'subscription_paused'
        when n.status = 'cancelling' then 'subscription_cancelling'
        when n.status = 'past_due' then 'payment_failed'
        when o.status in ('cancelled', 'paused') then 'subscription_activated'
        else 'subscription_updated' end as reason
    from new_rows n
    join old_rows o on o.community_id = n.community_id and o.id = n.id
    left join billing.communities co on co.id = n.community_id
    left join billing.plans np on np.community_id = n.community_id and np.id = n.plan_id
    left join billing.tiers nt on nt.community_id = np.community_id and nt.id = np.tier_id
    left join billing.plans op on op.community_id = o.community_id and op.id = o.plan_id
    left join billing.tiers ot on ot.community_id = op.community_id and ot.id = op.tier_id
    -- billing.subscription_event_json, with the plans and tiers joined once
    cross join lateral (select
      billing.subscription_json(n, np, nt) || jsonb_build_object('client_reference_id', n.client_reference_id) as new_json,
      billing.subscription_json(o, op, ot) || jsonb_build_object('client_reference_id', o.client_reference_id) as old_json) j
  ), ev as (
    insert into billing.events (community_id, type, created_at, data)
    select ch.community_id, ch.type, ch.at, jsonb_build_object('subscription', ch.new_json, 'previous_attributes', ch.prev)
    from ch
    where ch.prev <> '{}' -- nothing a consumer sees (nor a ledger source) changed
    order by ch.id
    returning id, data->'subscription'->>'id' as subscription_id
  )
  select array_agg(ch.community_id order by ch.id), array_agg(ch.member_id order by ch.id),
    array_agg(ch.old_member_id order by ch.id), array_agg(ch.reason order by ch.id), array_agg(ev.id order by ch.id)
  into v_communities, v_members, v_old_members, v_reasons, v_event_ids
  from ch join ev on ev.subscription_id = ch.id;
  -- The ledgers, row by row in id order (the member it left after the member it has).
  if v_event_ids is not null then
    perform billing.ledger_refresh_list(array_agg(v_communities[i] order by i, x.j), array_agg(x.m order by i, x.j),
      array_agg(v_reasons[i] order by i, x.j), array_agg(v_event_ids[i] order by i, x.j))
    from generate_subscripts(v_event_ids, 1) i
    cross join lateral (values (1, v_members[i]), (2, nullif(v_old_members[i], v_members[i]))) x(j, m)
    where x.m is not null;
  end if;
  return null;
end
$$;

create or replace function billing_private.tg_events__enqueue_deliveries() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
begin
  -- No endpoint of the statement's communities is enabled (a community that serves only
  -- its platforms): one probe, not the insert's plan started for no row.
  if not exists (select 1 from billing.webhook_endpoints w
                 where w.community_id in (select e.community_id from new_events e) and w.enabled) then
    return null;
  end if;
  with d as (
    insert into billing.webhook_deliveries (community_id, endpoint_id, event_id, event_type, next_attempt_at)
    select e.community_id, w.id, e.id, e.type, now()
    from new_events e
    join billing.webhook_endpoints w
      on w.community_id = e.community_id and w.enabled
     and (w.event_types = '{}' or e.type = any (w.event_types))
    order by e.community_id, e.id, w.id
    returning community_id, endpoint_id, id
  ), chunks as (
    select community_id, endpoint_id, id,
      (row_number() over (partition by community_id, endpoint_id order by id) - 1) / 50 as chunk
    from d
  )
  select array_agg(json_build_object('community_id', community_id, 'endpoint_id', endpoint_id, 'ids', ids, 'after', 0))
  into v_payloads
  from (select community_id, endpoint_id, array_agg(id order by id) as ids from chunks
        group by community_id, endpoint_id, chunk) c;
  perform billing_private.add_job('webhook_deliveries__send', v_payloads, p_flag_key => 'endpoint_id');
  return null;
end
$$;
