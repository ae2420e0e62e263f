-- Issue 29 item 5: deliveries shown to people. The retry operation (55-platform-delivery),
-- the dashboard's Platforms page reads (96-dashboard), deliveries in GraphQL (95-graphql),
-- the member's benefits in the portal (82-member-portal).

-- An operator's retry (POST /v1/members/{id}/deliveries/retry): queues the member's
-- delivery job now, as a change of the member would (same job key, so a job waiting out
-- its backoff runs at once). The job acts on every benefit not yet delivered; what is
-- delivered already is left alone, so a retry is harmless however often it is sent.
-- billing_private.enqueue_deliveries takes any community: this is billing_api's one door
-- to it, for a member of the current community only (false when there is none).
create or replace function billing_private.member_deliveries_enqueue(p_member_id text)
  returns boolean language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
begin
  if v_cid is null or not exists (select 1 from billing.members m where m.community_id = v_cid and m.id = p_member_id) then
    return false;
  end if;
  perform billing_private.enqueue_deliveries(array[v_cid], array[p_member_id]);
  return true;
end
$$;

-- The retry operation: queues the job and answers the member's entitlements with each
-- benefit's delivery as it stands now (the job runs after the commit).
create or replace function billing_api.member_deliveries_retry(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  if not billing_private.member_deliveries_enqueue(p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return billing_api.member_entitlements_list(p_args);
end
$$;

revoke execute on function billing_private.member_deliveries_enqueue(text) from public;
grant execute on function billing_private.member_deliveries_enqueue(text) to billing_api;
grant execute on function billing_api.member_deliveries_retry(jsonb) to billing_api;

-- The Platforms page (issue 29): each connection with its health. Whether a bot token
-- is stored, never the token (billing_private.platform_secret_ciphertext answers only
-- the current community's, and only whether it is null leaves here); the last call
-- that worked and the last that did not (billing.platform_actions); the benefits
-- waiting per status: the stored deliveries not delivered (a removal still to be made
-- counts too), and as pending the active ledger's benefits whose first job has not
-- recorded anything yet (billing.benefits_with_delivery shows them pending as well).
create or replace function billing_api.platform_connections_health(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_cid text := billing.current_community_id();
begin
  return jsonb_build_object('data', coalesce((
    with unrecorded as (
      select b->>'platform_config_id' as pcfg, count(*) as n
      from billing.member_entitlements me
      cross join lateral jsonb_array_elements(me.benefits) b
      where me.community_id = v_cid and me.status = 'active' and me.benefits <> '[]'
        and not exists (select 1 from billing.benefit_deliveries d
                        where d.community_id = me.community_id and d.member_id = me.member_id
                          and d.platform_config_id = b->>'platform_config_id' and d.type = b->>'type' and d.value = b->>'value')
      group by 1
    ), stored as (
      select d.platform_config_id as pcfg,
        count(*) filter (where d.status = 'pending') as pending,
        count(*) filter (where d.status = 'failed') as failed,
        count(*) filter (where d.status = 'action_required') as action_required
      from billing.benefit_deliveries d
      where d.community_id = v_cid
      group by 1
    )
    select jsonb_agg(jsonb_build_object(
      'id', pc.id, 'key', pc.key, 'name', pc.name, 'platform', pc.platform,
      'guild_id', pc.settings->>'guild_id', 'chat_id', pc.settings->>'chat_id',
      'bot_token_set', billing_private.platform_secret_ciphertext(pc.id, 'bot_token') is not null,
      'last_success', (select jsonb_build_object('at', billing.iso(a.created_at), 'action', a.action, 'target', a.target)
                       from billing.platform_actions a
                       where a.community_id = v_cid and a.platform_config_id = pc.id and a.outcome = 'ok'
                       order by a.id desc limit 1),
      'last_error', (select jsonb_build_object('at', billing.iso(a.created_at), 'action', a.action, 'target', a.target,
                       'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error)
                     from billing.platform_actions a
                     where a.community_id = v_cid and a.platform_config_id = pc.id and a.outcome <> 'ok'
                     order by a.id desc limit 1),
      'waiting', jsonb_build_object(
        'pending', coalesce(s.pending, 0) + coalesce(u.n, 0),
        'failed', coalesce(s.failed, 0),
        'action_required', coalesce(s.action_required, 0)))
      order by pc.key)
    from billing.platform_configs pc
    left join stored s on s.pcfg = pc.id
    left join unrecorded u on u.pcfg = pc.id
    where pc.community_id = v_cid), '[]'));
end
$$;

-- The Platforms page's log: the calls made to the platforms, newest first, optionally
-- of one connection (the indexes platform_actions_config and the primary key).
create or replace function billing_api.platform_actions_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_pcfg text := nullif(p_args->>'platform_config_id', '');
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(a.id order by a.id desc), array_agg(jsonb_build_object(
      'id', a.id, 'member_id', a.member_id, 'platform_config_id', a.platform_config_id, 'action', a.action,
      'target', a.target, 'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error,
      'created_at', billing.iso(a.created_at)) order by a.id desc)
    into v_ids, v_items
  from (select a.* from billing.platform_actions a
        where a.community_id = billing.current_community_id()
          and (v_pcfg is null or a.platform_config_id = v_pcfg)
          and a.id < coalesce(p_args->>'cursor', chr(1114111))
        order by a.id desc limit v_limit + 1) a;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

grant execute on function billing_api.platform_connections_health(jsonb) to billing_api;
grant execute on function billing_api.platform_actions_list(jsonb) to billing_api;

-- Benefit deliveries (members:read, as each benefit's delivery in GET
-- /v1/members/{id}/entitlements): what each platform was last made to hold, per member
-- and benefit (want absent: a removal not yet done). Not the job's state (a Telegram
-- invite link) nor the platform user it was applied to.
create or replace view billing_graphql.benefit_deliveries with (security_invoker = true, security_barrier = false) as
  select d.member_id, d.platform_config_id, d.type, d.value, d.want, d.status, d.error, d.updated_at
  from billing.benefit_deliveries d
  where (select billing.has_scope('members:read'));
comment on view billing_graphql.benefit_deliveries is E'@primaryKey member_id,platform_config_id,type,value\n@foreignKey (member_id) references billing_graphql.members (id)\n@scope members:read\n@behavior -insert -update -delete\nBenefit deliveries: what each platform (Discord, Telegram) was last made to hold for a member, with the status and the error an operator can act on. Needs members:read.';
comment on column billing_graphql.benefit_deliveries.member_id is E'@notNull';
comment on column billing_graphql.benefit_deliveries.platform_config_id is E'@notNull';
comment on column billing_graphql.benefit_deliveries.type is E'@notNull';
comment on column billing_graphql.benefit_deliveries.value is E'@notNull';
comment on column billing_graphql.benefit_deliveries.want is E'@notNull\n@enumValues present absent';
comment on column billing_graphql.benefit_deliveries.status is E'@notNull\n@enumValues pending delivered failed action_required';
comment on column billing_graphql.benefit_deliveries.updated_at is E'@notNull';

grant select on billing_graphql.benefit_deliveries to billing_api;

-- The member's own benefits in the portal (issue 29 item 2): each active entitlement's
-- benefits with their delivery (billing.benefits_with_delivery) and the connection's
-- name. The error only when it asks for an action (a failed call's reason is the
-- operator's business, retried anyway). A member portal session only: the member_fence
-- policies keep it to the member's rows, and without a member there is nothing of its own.
create or replace function billing_api.member_portal_benefits(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text := billing.current_member_id();
begin
  if v_member is null then
    perform billing.raise('BL404', 'Only a member portal session has benefits of its own.');
  end if;
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(jsonb_build_object('key', e.key, 'name', e.name, 'benefits', (
        select coalesce(jsonb_agg(jsonb_build_object('platform', b->>'platform', 'connection', coalesce(pc.name, pc.key),
            'type', b->>'type', 'value', b->>'value', 'delivery', jsonb_build_object(
              'status', b->'delivery'->>'status', 'updated_at', b->'delivery'->'updated_at',
              'error', case when b->'delivery'->>'status' = 'action_required' then b->'delivery'->'error' else 'null' end))
            order by x.o), '[]')
        from jsonb_array_elements(billing.benefits_with_delivery(me.community_id, me.member_id, me.benefits)) with ordinality as x(b, o)
        left join billing.platform_configs pc on pc.community_id = me.community_id and pc.id = x.b->>'platform_config_id'))
      order by me.id)
    from billing.member_entitlements me
    join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where me.community_id = billing.current_community_id() and me.member_id = v_member and me.status = 'active'), '[]'));
end
$$;

grant execute on function billing_api.member_portal_benefits(jsonb) to billing_api;

--!include 98-dispatch.sql
