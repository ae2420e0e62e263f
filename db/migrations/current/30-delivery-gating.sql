-- Deliveries only where they can happen (docs/decisions/platform-delivery.md): a
-- connection without a bot token of its own, in a deployment without one for its
-- platform, queues no job; a token given later queues its members.
create table if not exists billing_private.platform_defaults (
  platform text primary key check (platform in ('discord', 'telegram')),
  has_bot_token boolean not null,
  updated_at timestamptz not null default now()
);
alter table billing_private.platform_defaults enable row level security;
alter table billing_private.platform_defaults force row level security;
drop policy if exists owner_only on billing_private.platform_defaults;
create policy owner_only on billing_private.platform_defaults using (true);

create or replace function billing_private.platform_config_can_deliver(p_community_id text, p_platform_config_id text)
  returns boolean language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return exists (select 1 from billing_private.platform_secrets s
                 where s.community_id = p_community_id and s.platform_config_id = p_platform_config_id and s.name = 'bot_token')
    or exists (select 1 from billing.platform_configs pc join billing_private.platform_defaults d on d.platform = pc.platform
               where pc.community_id = p_community_id and pc.id = p_platform_config_id and d.has_bot_token);
end
$$;

create or replace function billing_private.enqueue_connection_deliveries(p_community_id text, p_platform_config_id text,
  p_platform text default null)
  returns integer language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text[];
  v_m text[];
begin
  select array_agg(x.community_id), array_agg(x.member_id) into v_c, v_m
  from (select distinct me.community_id, me.member_id
        from billing.member_entitlements me
        cross join lateral jsonb_array_elements(me.benefits) b
        join billing.platform_configs pc on pc.community_id = me.community_id and pc.id = b->>'platform_config_id'
        where me.status = 'active'
          and (p_platform_config_id is null or (me.community_id = p_community_id and pc.id = p_platform_config_id))
          and (p_platform is null or (pc.platform = p_platform and not exists (select 1 from billing_private.platform_secrets s
               where s.community_id = pc.community_id and s.platform_config_id = pc.id and s.name = 'bot_token')))) x;
  perform billing_private.enqueue_deliveries(v_c, v_m);
  return coalesce(cardinality(v_m), 0);
end
$$;

create or replace function billing_private.tg_platform_secrets__deliveries() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing_private.enqueue_connection_deliveries(new.community_id, new.platform_config_id);
  return null;
end
$$;

create or replace function billing_private.platform_defaults_set(p_discord boolean, p_telegram boolean)
  returns integer language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_platform text;
  v_has boolean;
  v_was boolean;
  v_queued integer := 0;
begin
  for v_platform, v_has in select * from (values ('discord', p_discord), ('telegram', p_telegram)) v(p, h) loop
    select d.has_bot_token into v_was from billing_private.platform_defaults d where d.platform = v_platform for update;
    if v_was is distinct from v_has then
      insert into billing_private.platform_defaults (platform, has_bot_token) values (v_platform, v_has)
      on conflict (platform) do update set has_bot_token = excluded.has_bot_token, updated_at = now();
      if v_has then
        v_queued := v_queued + billing_private.enqueue_connection_deliveries(null, null, v_platform);
      end if;
    end if;
  end loop;
  return v_queued;
end
$$;

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
  -- platform_config_can_deliver); none, and nothing is queued.
  select array_agg(pc.id) into v_able from billing.platform_configs pc
  where pc.community_id in (select distinct n.community_id from new_rows n)
    and billing_private.platform_config_can_deliver(pc.community_id, pc.id);
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

create or replace function billing.benefits_with_delivery(p_community_id text, p_member_id text, p_benefits jsonb)
  returns jsonb language plpgsql stable
as $$
begin
  if p_benefits = '[]' then
    return p_benefits;
  end if;
  return (
    select jsonb_agg(b || jsonb_build_object('delivery', case
        when d.member_id is not null and d.want = 'present'
          then jsonb_build_object('status', d.status, 'updated_at', billing.iso(d.updated_at), 'error', d.error)
        -- A connection without a bot token queues nothing: say what is missing.
        when not billing_private.platform_config_can_deliver(p_community_id, b->>'platform_config_id')
          then jsonb_build_object('status', 'action_required', 'updated_at', null, 'error', format(
            'No bot token for this %s connection: set settings.bot_token in the catalog (or %s).', b->>'platform',
            case b->>'platform' when 'discord' then 'DISCORD_BOT_TOKEN' else 'TELEGRAM_BOT_TOKEN' end))
        else jsonb_build_object('status', 'pending', 'updated_at', null, 'error', null) end)
      order by o)
    from jsonb_array_elements(p_benefits) with ordinality as x(b, o)
    left join billing.benefit_deliveries d
      on d.community_id = p_community_id and d.member_id = p_member_id
     and d.platform_config_id = b->>'platform_config_id' and d.type = b->>'type' and d.value = b->>'value');
end
$$;

drop trigger if exists _700_deliveries on billing_private.platform_secrets;
create trigger _700_deliveries after insert or update of ciphertext on billing_private.platform_secrets
  for each row when (new.name = 'bot_token')
  execute function billing_private.tg_platform_secrets__deliveries();

revoke execute on function billing_private.platform_config_can_deliver(text, text) from public;
grant execute on function billing_private.platform_config_can_deliver(text, text) to billing_api;
revoke execute on function billing_private.enqueue_connection_deliveries(text, text, text) from public;
revoke execute on function billing_private.platform_defaults_set(boolean, boolean) from public;
grant execute on function billing_private.platform_defaults_set(boolean, boolean) to billing_worker;
