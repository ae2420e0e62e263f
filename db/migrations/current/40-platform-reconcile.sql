-- Issue 29, platform delivery finished: benefit types a platform cannot carry out are
-- refused (docs/decisions/benefit-types.md).

-- The benefit types each platform carries out (src/platforms/delivery.ts BENEFIT_TYPES):
-- Discord a role or a channel, Telegram a chat. Returns the problem or null. Held by
-- the _100_benefit_type triggers beside billing.entitlement_benefits and
-- billing.platform_configs for every door; the value's format is checked by
-- `billing catalog apply` only (docs/decisions/benefit-types.md).
create or replace function billing.benefit_type_problem(p_platform text, p_type text) returns text
  language sql immutable parallel safe
  set search_path = pg_catalog, pg_temp
as $$
  select case
    when p_platform = 'discord' and p_type in ('role', 'channel') then null
    when p_platform = 'telegram' and p_type = 'chat' then null
    else format('A %s connection cannot carry out a benefit of type "%s" (it can: %s).', p_platform, p_type,
      case p_platform when 'discord' then '"role", "channel"' when 'telegram' then '"chat"' else 'none' end)
  end
$$;

-- New or changed benefits, and connections whose platform changed: the type must be one
-- the platform carries out. Rows already stored are not checked again.
create or replace function billing.tg_entitlement_benefits__type() returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_problem text;
begin
  select billing.benefit_type_problem(pc.platform, new.type) into v_problem
  from billing.platform_configs pc where pc.community_id = new.community_id and pc.id = new.platform_config_id;
  if v_problem is not null then
    raise exception using errcode = 'check_violation', message = v_problem, detail = 'type';
  end if;
  return null;
end
$$;

create or replace function billing.tg_platform_configs__benefit_types() returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_problem text;
begin
  select billing.benefit_type_problem(new.platform, b.type) into v_problem
  from billing.entitlement_benefits b
  where b.community_id = new.community_id and b.platform_config_id = new.id
    and billing.benefit_type_problem(new.platform, b.type) is not null
  limit 1;
  if v_problem is not null then
    raise exception using errcode = 'check_violation', message = v_problem, detail = 'platform';
  end if;
  return null;
end
$$;

drop trigger if exists _100_benefit_type on billing.platform_configs;
create constraint trigger _100_benefit_type after update of platform on billing.platform_configs
  for each row when (old.platform is distinct from new.platform)
  execute function billing.tg_platform_configs__benefit_types();
drop trigger if exists _100_benefit_type on billing.entitlement_benefits;
create constraint trigger _100_benefit_type after insert or update of type, platform_config_id
  on billing.entitlement_benefits for each row execute function billing.tg_entitlement_benefits__type();

-- kick_on_revoke: a Discord connection's setting (docs/decisions/platform-reconcile.md).
-- What a connection's settings may hold, per platform (issue 29): Discord a server
-- (guild_id, a snowflake) and the application's public_key (64 hex digits, to verify
-- interactions) and kick_on_revoke ("true": a member whose last benefit on the server is
-- revoked is removed from it); Telegram a chat (chat_id, an integer or @channelname). The bot token
-- is a secret: never here (the API role and operator logins read this table), but
-- encrypted in billing_private.platform_secrets. Returns the first problem, naming
-- the field, or null; `billing catalog apply` shows it as it is.
create or replace function billing.platform_settings_problem(p_platform text, p_settings jsonb) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed text[] := case p_platform when 'discord' then array['guild_id', 'public_key', 'kick_on_revoke']
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
    if p_settings ? 'kick_on_revoke' and p_settings->>'kick_on_revoke' not in ('true', 'false') then
      return 'settings.kick_on_revoke: expected "true" or "false" (remove the member from the server when their last benefit on it is revoked)';
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
