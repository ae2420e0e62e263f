--! Previous: sha1:ef969c863e4a83b93be0d4f965441cbc83644612
--! Hash: sha1:1c59b98717f0e0948e657a9c6189195e835f00ba
--! Message: platform-connections

--! split: 1-current.sql
-- Enter migration here

--! split: 40-platform-connections.sql
-- Issue 29 item 1: platform connections. A connection's settings are checked per
-- platform (billing.platform_settings_problem, the constraint
-- platform_configs_settings_valid); its bot token is encrypted in
-- billing_private.platform_secrets (owner only). Same text as 20-catalog.sql.
--
-- A bot token written into settings before this (in clear, readable by the API role
-- and operator logins) is removed from settings here: set it again with
-- `billing catalog apply` (it is then stored encrypted). The check is added NOT VALID:
-- rows written before it are not re-read (the deploy never fails on them, nor scans
-- the table under its lock); every insert and update is checked from now on, and
-- `billing catalog apply` always writes the whole settings.
update billing.platform_configs set settings = settings - 'bot_token' where settings ? 'bot_token';

-- What a connection's settings may hold, per platform (issue 29): Discord a server
-- (guild_id, a snowflake) and the application's public_key (64 hex digits, to verify
-- interactions); Telegram a chat (chat_id, an integer or @channelname). The bot token
-- is a secret: never here (the API role and operator logins read this table), but
-- encrypted in billing_private.platform_secrets. Returns the first problem, naming
-- the field, or null; `billing catalog apply` shows it as it is.
create or replace function billing.platform_settings_problem(p_platform text, p_settings jsonb) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed text[] := case p_platform when 'discord' then array['guild_id', 'public_key']
                                      when 'telegram' then array['chat_id'] else array[]::text[] end;
  v_key text;
  v_value jsonb;
begin
  if p_settings is null or jsonb_typeof(p_settings) <> 'object' then
    return 'settings: expected an object';
  end if;
  if p_settings ? 'bot_token' then
    return 'settings.bot_token: a bot token is stored encrypted (billing_private.platform_secrets), never in settings';
  end if;
  for v_key, v_value in select e.key, e.value from jsonb_each(p_settings) e order by e.key loop
    if not (v_key = any (v_allowed)) then
      return format('settings.%s: unknown setting for %s (expected %s, and bot_token)', v_key, p_platform,
        array_to_string(v_allowed, ', '));
    end if;
    if jsonb_typeof(v_value) <> 'string' then
      return format('settings.%s: expected a string', v_key);
    end if;
  end loop;
  if p_platform = 'discord' then
    if not p_settings ? 'guild_id' then
      return 'settings.guild_id: required (the Discord server id)';
    end if;
    if p_settings->>'guild_id' !~ '^[1-9][0-9]{0,19}$' then
      return 'settings.guild_id: expected a Discord snowflake (the server id: digits, e.g. "1234567890123456789")';
    end if;
    if p_settings ? 'public_key' and p_settings->>'public_key' !~ '^[0-9a-fA-F]{64}$' then
      return 'settings.public_key: expected the application''s public key (64 hexadecimal digits)';
    end if;
  elsif p_platform = 'telegram' then
    if not p_settings ? 'chat_id' then
      return 'settings.chat_id: required (the Telegram chat: its id or @channelname)';
    end if;
    if p_settings->>'chat_id' !~ '^(-?[1-9][0-9]{0,15}|@[A-Za-z][A-Za-z0-9_]{4,31})$' then
      return 'settings.chat_id: expected a Telegram chat id (an integer, e.g. "-1001234567890") or a public @channelname';
    end if;
  end if;
  return null;
end
$$;
grant execute on function billing.platform_settings_problem(text, jsonb) to billing_api;

alter table billing.platform_configs drop constraint if exists platform_configs_settings_valid;
alter table billing.platform_configs add constraint platform_configs_settings_valid
  check (billing.platform_settings_problem(platform, settings) is null) not valid;

-- A connection's bot token (AES-256-GCM under WEBHOOK_ENCRYPTION_KEY, bound to the
-- community and the connection: src/platforms/platform-secrets.ts). Owner only, as
-- billing_private.payment_secrets: no operator login, GraphQL or API answer reads it;
-- the service reads the ciphertext of its own community through
-- billing_private.platform_secret_ciphertext. Written by `billing catalog apply`.
create table if not exists billing_private.platform_secrets (
  community_id text collate "C" not null,
  platform_config_id text collate "C" not null,
  name text not null check (name in ('bot_token')),
  ciphertext text not null check (ciphertext like 'v1:%'),
  updated_at timestamptz not null default now(),
  primary key (community_id, platform_config_id, name),
  foreign key (community_id, platform_config_id) references billing.platform_configs on delete cascade
);
alter table billing_private.platform_secrets enable row level security;
alter table billing_private.platform_secrets force row level security;
drop policy if exists owner_only on billing_private.platform_secrets;
create policy owner_only on billing_private.platform_secrets using (true);

-- The stored ciphertext of one secret of a connection of the current community, or null.
create or replace function billing_private.platform_secret_ciphertext(p_platform_config_id text, p_name text)
  returns text language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.ciphertext from billing_private.platform_secrets s
  where s.community_id = billing.current_community_id() and s.platform_config_id = p_platform_config_id and s.name = p_name
$$;
revoke execute on function billing_private.platform_secret_ciphertext(text, text) from public;
grant execute on function billing_private.platform_secret_ciphertext(text, text) to billing_api;
