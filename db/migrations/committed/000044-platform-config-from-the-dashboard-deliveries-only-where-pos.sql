--! Previous: sha1:9382dd7a7f5059336e4cd123910a6fa1347b912d
--! Hash: sha1:568faee7d395a19c4d5c4075c992893cb88d6068
--! Message: platform config from the dashboard, deliveries only where possible

--! split: 1-current.sql
-- Enter migration here

--! split: 20-platform-config-dashboard.sql
-- Platform connections configured from the dashboard (issue 29 item 1):
-- docs/decisions/platform-config-dashboard.md.
grant select, insert, update on billing.platform_configs to billing_writer;

-- ---- connections from the dashboard (docs/decisions/platform-config-dashboard.md) ----------

-- The Platforms page's forms: each connection of the current community with its
-- settings and whether each secret is stored (never a secret, nor its ciphertext).
create or replace function billing_api.platform_configs_list(p_args jsonb) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('data', coalesce(jsonb_agg(jsonb_build_object(
      'id', pc.id, 'key', pc.key, 'platform', pc.platform, 'name', pc.name, 'settings', pc.settings,
      'bot_token_set', billing_private.platform_secret_ciphertext(pc.id, 'bot_token') is not null,
      'client_secret_set', billing_private.platform_secret_ciphertext(pc.id, 'client_secret') is not null)
    order by pc.key), '[]'))
  from billing.platform_configs pc
  where pc.community_id = billing.current_community_id()
$$;

-- Adds a connection (p_args: key, platform, name, settings) or, with id, changes one
-- (name, settings: each replaced whole when given, kept when absent; its key and
-- platform stay, so its benefits stay ones it carries out). Settings are checked by
-- billing.platform_settings_problem, whose message names the field: the problem's param. Secrets never pass here: the
-- dashboard's handler (src/domain/catalog/platform-config-operations.ts) encrypts them
-- and stores them through billing_private.platform_secret_set.
create or replace function billing_api.platform_config_save(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_id text := nullif(p_args->>'id', '');
  v_name text := nullif(btrim(coalesce(p_args->>'name', '')), '');
  v_settings jsonb := coalesce(p_args->'settings', '{}'::jsonb);
  v_platform text := p_args->>'platform';
  v_problem text;
  v_row billing.platform_configs;
begin
  if length(v_name) > 200 then
    perform billing.raise('BL422', 'name: expected at most 200 characters.', 'name');
  end if;
  if v_id is null then
    if coalesce(p_args->>'key', '') !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' then
      perform billing.raise('BL422', 'key: expected a key: letters, digits, "_", ".", ":" or "-", at most 100 characters.', 'key');
    end if;
    if v_platform is null or v_platform not in ('discord', 'telegram') then
      perform billing.raise('BL422', 'platform: expected "discord" or "telegram".', 'platform');
    end if;
  else
    select * into v_row from billing.platform_configs pc where pc.community_id = v_cid and pc.id = v_id for update;
    if not found then
      perform billing.raise('BL404', 'No platform connection ' || v_id || '.');
    end if;
    v_platform := v_row.platform;
  end if;
  if v_id is not null and not p_args ? 'settings' then
    v_settings := v_row.settings;
  end if;
  v_problem := billing.platform_settings_problem(v_platform, v_settings);
  if v_problem is not null then
    perform billing.raise('BL422', v_problem, split_part(v_problem, ':', 1));
  end if;
  if v_id is null then
    if exists (select 1 from billing.platform_configs pc where pc.community_id = v_cid and pc.key = p_args->>'key') then
      perform billing.raise('BL409', format('A connection with the key %s exists already: edit it instead.', p_args->>'key'), 'key');
    end if;
    insert into billing.platform_configs (community_id, key, platform, name, settings)
    values (v_cid, p_args->>'key', v_platform, v_name, v_settings)
    returning * into v_row;
  else
    update billing.platform_configs pc
    set name = case when p_args ? 'name' then v_name else pc.name end,
        settings = case when p_args ? 'settings' then v_settings else pc.settings end
    where pc.community_id = v_cid and pc.id = v_id
    returning * into v_row;
  end if;
  return jsonb_build_object('id', v_row.id, 'key', v_row.key, 'platform', v_row.platform, 'name', v_row.name, 'settings', v_row.settings);
end
$$;

-- The dashboard's door into billing_private.platform_secrets (owner only): sets
-- (a ciphertext, 'v1:...', encrypted by the service) or removes (null) one secret of a
-- connection of the current community, and of no other. A client secret is Discord's
-- only. True when something changed.
create or replace function billing_private.platform_secret_set(p_platform_config_id text, p_name text, p_ciphertext text)
  returns boolean language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_platform text;
begin
  select pc.platform into v_platform from billing.platform_configs pc
  where pc.community_id = v_cid and pc.id = p_platform_config_id;
  if v_platform is null then
    perform billing.raise('BL404', 'No platform connection ' || coalesce(p_platform_config_id, 'null') || '.');
  end if;
  if p_name is null or p_name not in ('bot_token', 'client_secret') then
    perform billing.raise('BL422', 'Expected bot_token or client_secret.', 'name');
  end if;
  if p_name = 'client_secret' and v_platform <> 'discord' then
    perform billing.raise('BL422', 'client_secret: only a Discord connection has an OAuth2 client secret.', 'client_secret');
  end if;
  if p_ciphertext is null then
    delete from billing_private.platform_secrets s
    where s.community_id = v_cid and s.platform_config_id = p_platform_config_id and s.name = p_name;
    return found;
  end if;
  insert into billing_private.platform_secrets (community_id, platform_config_id, name, ciphertext)
  values (v_cid, p_platform_config_id, p_name, p_ciphertext)
  on conflict (community_id, platform_config_id, name) do update set ciphertext = excluded.ciphertext, updated_at = now();
  return true;
end
$$;
revoke execute on function billing_private.platform_secret_set(text, text, text) from public;
grant execute on function billing_private.platform_secret_set(text, text, text) to billing_api;
grant execute on function billing_api.platform_configs_list(jsonb) to billing_api;
grant execute on function billing_api.platform_config_save(jsonb) to billing_api;
grant create on schema billing_api to billing_writer;
alter function billing_api.platform_config_save(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;

--! Included 98-dispatch.sql
-- Operations run by name without dynamic SQL. billing.api_call (the request gate,
-- 10-tenancy.sql) runs billing_private.op_dispatch(op, args): a CASE
-- over every billing_api function taking (p_args jsonb) and returning jsonb, written by
-- the block below from the catalog when this file is applied. It is the last fixture,
-- so every operation exists then. A static call is planned once per session, where
-- EXECUTE parsed and planned 'select billing_api.x($1)' on every request: about 40 us
-- of the entitlement check's 220 us in the database (bench/RESULTS.md, issue 17).
--
-- An operation this CASE does not name yet (added or changed by a later migration
-- that did not include this file again) still runs, through op_dispatch_dynamic's
-- EXECUTE. test/db/op-dispatch.test.ts fails until this file is included again, so
-- a migration that adds an operation includes `--!include 98-dispatch.sql` too.
-- Invoker rights: the operation runs as the caller (billing_api), as before.
--
-- A list's input carries cursor_list and cursor_filters (src/operations/executor.ts
-- bindCursor): set for the transaction, billing.encode_cursor binds next_cursor to them.

create or replace function billing_private.op_dispatch_dynamic(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_out jsonb;
begin
  execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
  return v_out;
end
$$;

do $do$
declare
  v_cases text;
begin
  select string_agg(format('    when %L then return billing_api.%I(p_args);', p.proname, p.proname), E'\n' order by p.proname)
  into v_cases
  from pg_proc p
  join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'billing_api' and p.prorettype = 'jsonb'::regtype
    and pg_get_function_identity_arguments(p.oid) = 'p_args jsonb';
  execute format($f$
create or replace function billing_private.op_dispatch(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $b$
begin
  if p_args ? 'cursor_list' then
    perform set_config('app.cursor_list', p_args->>'cursor_list', true),
      set_config('app.cursor_filters', p_args->>'cursor_filters', true);
  end if;
  case p_op
%s
    else
      return billing_private.op_dispatch_dynamic(p_op, p_args);
  end case;
end
$b$$f$, coalesce(v_cases, '    when null then return null;'));
end
$do$;

grant execute on function billing_private.op_dispatch_dynamic(text, jsonb) to billing_api;
grant execute on function billing_private.op_dispatch(text, jsonb) to billing_api;
--! EndIncluded 98-dispatch.sql

--! split: 30-delivery-gating.sql
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
