--! Previous: sha1:ed21cd5e8618f2abe2151904962a8a22af124269
--! Hash: sha1:203b6d3c629f2a8d04e69e979329fc70c65efeac
--! Message: Member page: entitlement history ids found by the owner with the community fenced

--! split: 1-current.sql
-- Enter migration here
--! Included 96-dashboard.sql
-- Reads only the dashboard's pages make (src/operations/index.ts dashboardOperations):
-- the overview's daily series and a member's entitlement history. After every domain
-- fixture: they read analytics views and the outbox.

-- The overview's series: per day of the last p_days (30 or 90) by the community's clock,
-- MRR (main currency), signups and cancels; plus the past_due count now.
create or replace function billing_api.analytics_series(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_days integer := coalesce((p_args->>'days')::integer, 30);
  v_currency text;
  v_from date;
  v_mrr jsonb;
  v_activity jsonb;
begin
  perform billing.require_scope('analytics:read');
  if v_days not in (30, 90) then
    perform billing.raise('BL422', 'days: 30 or 90.', 'days');
  end if;
  select m.currency into v_currency from analytics.mrr m where m.community_id = v_community
  order by m.billing_subscriptions desc, m.mrr_cents desc, m.currency limit 1;
  v_from := (billing.now() at time zone 'UTC')::date - v_days;
  -- Each view read once, into a day -> figure map (joined per day, the planner could
  -- compute a view once per day: minutes at 200,000 subscriptions).
  select coalesce(jsonb_object_agg(md.day::text, md.mrr_cents), '{}') into v_mrr
  from analytics.mrr_daily md
  where md.community_id = v_community and md.currency = v_currency and md.day > v_from;
  select coalesce(jsonb_object_agg(a.day::text, jsonb_build_array(a.signups, a.cancels)), '{}') into v_activity
  from analytics.daily_activity a
  where a.community_id = v_community and a.day > v_from;
  return jsonb_build_object(
    'currency', v_currency,
    'past_due', (select count(*) from billing.subscriptions s where s.community_id = v_community and s.status = 'past_due'),
    'days', coalesce((
      select jsonb_agg(jsonb_build_object('day', d.day::text,
        'mrr_cents', coalesce((v_mrr->>(d.day::text))::bigint, 0),
        'signups', coalesce((v_activity->(d.day::text)->>0)::bigint, 0),
        'cancels', coalesce((v_activity->(d.day::text)->>1)::bigint, 0)) order by d.day)
      from analytics.days d
      where d.community_id = v_community and d.day > v_from), '[]'));
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
grant execute on function billing_api.member_entitlement_history(jsonb) to billing_api;
grant execute on function billing_private.member_entitlement_event_ids(text, text, integer) to billing_api;
--! EndIncluded 96-dashboard.sql
