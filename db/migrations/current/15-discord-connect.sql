-- Connect Discord (issue 29 item 3): a Discord connection's client_id setting and
-- its OAuth2 client secret, stored encrypted beside the bot token.
alter table billing_private.platform_secrets drop constraint if exists platform_secrets_name_check;
alter table billing_private.platform_secrets add constraint platform_secrets_name_check
  check (name in ('bot_token', 'client_secret'));

create or replace function billing.platform_settings_problem(p_platform text, p_settings jsonb) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed text[] := case p_platform when 'discord' then array['guild_id', 'public_key', 'client_id', 'kick_on_revoke']
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
  if p_settings ? 'client_secret' then
    return 'settings.client_secret: a client secret is stored encrypted (billing_private.platform_secrets), never in settings';
  end if;
  for v_key, v_value in select e.key, e.value from jsonb_each(p_settings) e order by e.key loop
    if not (v_key = any (v_allowed)) then
      return format('settings.%s: unknown setting for %s (expected %s, and bot_token%s)', v_key, p_platform,
        array_to_string(v_allowed, ', '), case p_platform when 'discord' then ', client_secret' else '' end);
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
    if p_settings ? 'client_id' and p_settings->>'client_id' !~ '^[1-9][0-9]{0,19}$' then
      return 'settings.client_id: expected the application''s id (its OAuth2 client id: digits)';
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

create or replace function billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_r jsonb;
begin
  select * into v_lc from billing.link_codes lc where lc.code = upper(p_code) for update;
  if v_lc.id is null then
    return jsonb_build_object('outcome', 'unknown');
  elsif v_lc.redeemed_at is not null or v_lc.invalidated_at is not null then
    return jsonb_build_object('outcome', 'used');
  elsif v_lc.expires_at <= billing.now() then
    return jsonb_build_object('outcome', 'expired');
  elsif v_lc.intended_platform <> p_platform then
    return jsonb_build_object('outcome', 'wrong_platform');
  end if;
  v_r := billing.member_identity_attach(v_lc.member_id, p_platform, p_platform_uid, p_username);
  if v_r->>'outcome' = 'linked' then
    update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  end if;
  return v_r;
end
$$;

create or replace function billing.member_identity_attach(p_member_id text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_owner text;
begin
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_platform and i.platform_uid = p_platform_uid;
  if v_owner is not null and v_owner <> p_member_id then
    return jsonb_build_object('outcome', 'identity_taken');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = p_member_id and i.platform = p_platform) then
      return jsonb_build_object('outcome', 'member_has_identity', 'member_id', p_member_id);
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (billing.current_community_id(), p_member_id, p_platform, p_platform_uid, p_username);
  end if;
  return jsonb_build_object('outcome', 'linked', 'member_id', p_member_id, 'new_identity', v_owner is null);
end
$$;

create or replace function billing.platform_checkout_connect(p_platform_config_id text, p_checkout_id text,
  p_token_sha256 bytea, p_platform_uid text, p_username text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_member text;
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = 'discord') then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  select cs.member_id into v_member from billing.checkout_sessions cs
  where cs.id = p_checkout_id and cs.access_token_sha256 = p_token_sha256;
  if v_member is null then
    return jsonb_build_object('outcome', 'no_checkout');
  end if;
  return billing.member_identity_attach(v_member, 'discord', p_platform_uid, p_username);
end
$$;

grant execute on function billing.platform_checkout_connect(text,text,bytea,text,text) to billing_api;
grant execute on function billing.member_identity_attach(text,text,text,text) to billing_writer;
grant create on schema billing to billing_writer;
alter function billing.platform_checkout_connect(text,text,bytea,text,text) owner to billing_writer;
revoke create on schema billing from billing_writer;
