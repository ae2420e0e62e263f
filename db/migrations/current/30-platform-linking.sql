-- Issue 29 item 3: members link their own identities through the platforms' bots
-- (src/platforms/linking-routes.ts; docs/decisions/platform-linking.md).

-- tables/20-catalog.sql
create index if not exists platform_configs_id on billing.platform_configs (id);

-- functions/20-catalog.sql
-- Which community a platform's inbound request is for (POST /platforms/<platform>/<id>/...,
-- src/platforms/linking-routes.ts): the connection its URL names, found across
-- communities before the request is authenticated, with what authenticates it (Discord's
-- public key; Telegram's secret is derived from the ids). Nothing else of the community.
create or replace function billing_private.platform_config_inbound(p_platform_config_id text, p_platform text)
  returns table (community_id text, public_key text)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select pc.community_id, pc.settings->>'public_key' from billing.platform_configs pc
  where pc.id = p_platform_config_id and pc.platform = p_platform
$$;
revoke execute on function billing_private.platform_config_inbound(text, text) from public;
grant execute on function billing_private.platform_config_inbound(text, text) to billing_api;

-- functions/80-checkout.sql
-- The redemption itself, once, for both doors: the API (link_code_redeem, which raises)
-- and the platforms' bots (platform_link_redeem, which answers why not). The identity
-- joins the code's member; its insert's trigger (30-members.sql) emits member.updated and
-- refreshes the ledger. Runs with its caller's rights (billing_writer, bound to the
-- transaction's community by the tenant policies). Answers {outcome, member_id?}:
-- linked, unknown, used (redeemed or replaced), expired, wrong_platform, identity_taken
-- (the identity is another member's), member_has_identity (the member has another).
create or replace function billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_owner text;
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
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_platform and i.platform_uid = p_platform_uid;
  if v_owner is not null and v_owner <> v_lc.member_id then
    return jsonb_build_object('outcome', 'identity_taken');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = v_lc.member_id and i.platform = p_platform) then
      return jsonb_build_object('outcome', 'member_has_identity', 'member_id', v_lc.member_id);
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (v_cid, v_lc.member_id, p_platform, p_platform_uid, p_username);
  end if;
  update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  return jsonb_build_object('outcome', 'linked', 'member_id', v_lc.member_id, 'new_identity', v_owner is null);
end
$$;

-- A platform bot finishes the link through the API (POST /v1/link-codes/redeem): one
-- answer (404) for an unknown, used, expired or other platform's code, so codes cannot
-- be probed.
create or replace function billing_api.link_code_redeem(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_r jsonb := billing.link_code_apply(p_args->>'code', p_args->>'platform', p_args->>'platform_uid', p_args->>'username');
begin
  case v_r->>'outcome'
    when 'linked' then
      return billing.member_json(billing.current_community_id(), v_r->>'member_id');
    when 'identity_taken' then
      perform billing.raise('BL409', 'This ' || (p_args->>'platform') || ' identity belongs to another member.');
    when 'member_has_identity' then
      perform billing.raise('BL409', 'Member ' || (v_r->>'member_id') || ' already has another ' || (p_args->>'platform') || ' identity.');
    else
      perform billing.raise('BL404', 'No usable link code ' || (p_args->>'code') || ' for ' || (p_args->>'platform') || '.');
  end case;
  return null;
end
$$;

-- A platform's bot redeems a code for the user who sent it (src/platforms/linking-routes.ts:
-- Discord's /link command, Telegram's /start deep link), authenticated by the platform's
-- signature or secret rather than an API key. The caller sets the transaction's community
-- to the one owning the connection (billing_private.platform_config_inbound); the
-- connection must be visible there (RLS) and of this platform, and only that community's
-- codes and identities are reached. Answers link_code_apply's {outcome, member_id?}, or
-- {outcome: 'no_connection'}.
create or replace function billing.platform_link_redeem(p_platform_config_id text, p_platform text, p_platform_uid text,
  p_code text, p_username text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = p_platform) then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  return billing.link_code_apply(p_code, p_platform, p_platform_uid, p_username);
end
$$;

grant execute on function billing.platform_link_redeem(text,text,text,text,text) to billing_api;
grant execute on function billing.link_code_apply(text,text,text,text) to billing_writer;
grant create on schema billing to billing_writer;
alter function billing.platform_link_redeem(text,text,text,text,text) owner to billing_writer;
revoke create on schema billing from billing_writer;
