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

--!include 98-dispatch.sql
