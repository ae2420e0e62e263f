--! Previous: sha1:10a7aad07b64dbb895cc8ccc9fb349ace1008550
--! Hash: sha1:216f78b8f214556b3a047a910662ae405000ac78
--! Message: tenant keys

--! split: 1-current.sql
-- Enter migration here

--! split: 2-citus-keys.sql
-- Issue 32 item 4: every tenant table's keys lead with community_id, so that Citus can
-- distribute it by community (docs/decisions/citus-key-rule.md, docs/scale.md;
-- test/db/citus-keys.test.ts holds the rule). Small owner-only tables, except
-- analytics_deltas (compacted every minute to a few hundred rows per community).

-- SQL logins: keyed by (community, login name); found by name through a plain index.
alter table billing_private.operator_roles drop constraint if exists operator_roles_pkey;
alter table billing_private.operator_roles add constraint operator_roles_pkey primary key (community_id, role_name);
drop index if exists billing_private.operator_roles_community;
create index if not exists operator_roles_role_name on billing_private.operator_roles (role_name);

-- Sign-in links: keyed by (community, token); the token stays unique (a global lookup).
alter table billing_private.operator_links drop constraint if exists operator_links_pkey;
alter table billing_private.operator_links add constraint operator_links_pkey primary key (community_id, token_sha256);
create unique index if not exists operator_links_token on billing_private.operator_links (token_sha256);

-- Known addresses: the user's community joins the key, and the foreign key names it.
alter table billing_private.operator_known_addresses add column if not exists community_id text collate "C";
update billing_private.operator_known_addresses k set community_id = u.community_id
from billing_private.operator_users u where u.id = k.user_id and k.community_id is null;
alter table billing_private.operator_known_addresses alter column community_id set not null;
alter table billing_private.operator_known_addresses drop constraint if exists operator_known_addresses_user_id_fkey;
alter table billing_private.operator_known_addresses drop constraint if exists operator_known_addresses_community_id_user_id_fkey;
alter table billing_private.operator_known_addresses drop constraint if exists operator_known_addresses_pkey;
alter table billing_private.operator_known_addresses add constraint operator_known_addresses_pkey
  primary key (community_id, user_id, ip);
alter table billing_private.operator_known_addresses add constraint operator_known_addresses_community_id_user_id_fkey
  foreign key (community_id, user_id) references billing_private.operator_users on delete cascade;
-- Users by id alone: that unique index served only the foreign key just dropped; the
-- sign-in steps still find a user by id, through a plain index.
drop index if exists billing_private.operator_users_id;
create index if not exists operator_users_id on billing_private.operator_users (id);

-- The rollup's deltas: a key of their own, which also serves the reads by (community, day).
alter table billing_private.analytics_deltas add column if not exists id bigint generated always as identity;
alter table billing_private.analytics_deltas drop constraint if exists analytics_deltas_pkey;
alter table billing_private.analytics_deltas add constraint analytics_deltas_pkey primary key (community_id, day, id);
drop index if exists billing_private.analytics_deltas_community;

-- The known addresses' writers and readers, by the new key (functions/15-operators.sql).
create or replace function billing_private.operator_sign_in_throttle(p_ip text, p_email text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ip jsonb := billing_private.take_token('signin-ip:' || coalesce(p_ip, '?'), 10, 10);
  v_email text := lower(trim(p_email));
  v_pair jsonb;
  v_account jsonb;
begin
  if not (v_ip->>'allowed')::boolean then
    return jsonb_build_object('allowed', false, 'reason', 'rate_limited', 'retry_after', (v_ip->>'retry_after')::bigint);
  elsif v_email is null then
    return jsonb_build_object('allowed', true, 'retry_after', 0);
  end if;
  v_pair := billing_private.take_token('signin-fail:' || v_email || ' ' || coalesce(p_ip, '?'), 0.2, 5);
  if not (v_pair->>'allowed')::boolean then
    return jsonb_build_object('allowed', false, 'reason', 'rate_limited', 'retry_after', (v_pair->>'retry_after')::bigint);
  end if;
  v_account := billing_private.take_token('signin-fail:' || v_email, 2, 30);
  if not (v_account->>'allowed')::boolean and not exists (
      select 1 from billing_private.operator_known_addresses k
      join billing_private.operator_users u on u.community_id = k.community_id and u.id = k.user_id
      where u.email = v_email and k.ip = p_ip and k.last_seen_at > now() - interval '90 days') then
    perform billing_private.take_tokens('signin-fail:' || v_email || ' ' || coalesce(p_ip, '?'), 0.2, 5, 0, 1);
    return jsonb_build_object('allowed', false, 'reason', 'link_required', 'retry_after', (v_account->>'retry_after')::bigint);
  end if;
  return jsonb_build_object('allowed', true, 'retry_after', 0);
end
$$;

create or replace function billing_private.operator_sign_in_succeeded(p_session_id text, p_ip text, p_email text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user billing_private.operator_users;
  v_pending boolean;
begin
  select u.* into v_user from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.id = p_session_id and s.revoked_at is null and s.created_at > now() - interval '1 minute';
  select s.code_pending into v_pending from billing_private.operator_sessions s
  where s.community_id = v_user.community_id and s.id = p_session_id;
  if v_user.id is null or p_ip is null then
    return;
  end if;
  update billing_private.operator_sessions s set ip = p_ip
  where s.community_id = v_user.community_id and s.id = p_session_id;
  -- An address becomes known once the whole sign-in succeeded: with a second factor,
  -- when its code was right (operator_sign_in_code).
  if not v_pending then
    insert into billing_private.operator_known_addresses as k (community_id, user_id, ip)
    values (v_user.community_id, v_user.id, p_ip)
    on conflict (community_id, user_id, ip) do update set last_seen_at = now();
  end if;
  delete from billing_private.operator_known_addresses k
  where k.community_id = v_user.community_id and k.user_id = v_user.id and k.last_seen_at < now() - interval '90 days';
  if p_email is not null and lower(trim(p_email)) = v_user.email then
    -- The address proved itself: its earlier typos are forgiven. The account's budget,
    -- shared with whoever else is guessing, only gets this attempt's token back.
    delete from billing_private.rate_buckets b where b.bucket = 'signin-fail:' || v_user.email || ' ' || p_ip;
    perform billing_private.take_tokens('signin-fail:' || v_user.email, 2, 30, 0, 1);
  end if;
end
$$;

create or replace function billing_private.operator_code_begin(p_token_sha256 text, p_ip text, p_purpose text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s billing_private.operator_sessions;
  v_f billing_private.operator_second_factors;
  v_r jsonb;
  v_pair text;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and u.disabled_at is null;
  if v_s.id is null or v_s.code_pending <> (p_purpose = 'sign_in') then
    return jsonb_build_object('allowed', false, 'reason', 'signed_out');
  end if;
  select f.* into v_f from billing_private.operator_second_factors f
  where f.community_id = v_s.community_id and f.user_id = v_s.user_id and (f.confirmed_at is null) = (p_purpose = 'confirm');
  if v_f.user_id is null then
    return jsonb_build_object('allowed', false, 'reason', 'no_factor');
  end if;
  v_r := billing_private.take_token('signin-ip:' || coalesce(p_ip, '?'), 10, 10);
  if (v_r->>'allowed')::boolean then
    v_pair := 'code-fail:' || v_s.user_id || ' ' || coalesce(p_ip, '?');
    v_r := billing_private.take_token(v_pair, 0.2, 5);
  end if;
  if (v_r->>'allowed')::boolean then
    v_r := billing_private.take_token('code-fail:' || v_s.user_id, 0.2, 10);
    if not (v_r->>'allowed')::boolean and exists (select 1 from billing_private.operator_known_addresses k
        where k.community_id = v_s.community_id and k.user_id = v_s.user_id and k.ip = p_ip and k.last_seen_at > now() - interval '90 days') then
      v_r := jsonb_build_object('allowed', true);
    elsif not (v_r->>'allowed')::boolean then
      perform billing_private.take_tokens(v_pair, 0.2, 5, 0, 1);
    end if;
  end if;
  if not (v_r->>'allowed')::boolean then
    return jsonb_build_object('allowed', false, 'reason', 'rate_limited', 'retry_after', (v_r->>'retry_after')::bigint);
  end if;
  return (select jsonb_build_object('allowed', true, 'community_id', v_s.community_id, 'user_id', v_s.user_id,
    'ciphertext', v_f.secret_ciphertext, 'email', u.email, 'community_name', c.name)
  from billing_private.operator_users u join billing.communities c on c.id = u.community_id
  where u.community_id = v_s.community_id and u.id = v_s.user_id);
end
$$;

create or replace function billing_private.operator_sign_in_code(p_token_sha256 text, p_ip text, p_step bigint,
  p_recovery_sha256 text, p_new_token_sha256 text, p_ttl interval) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and s.code_pending
    and u.disabled_at is null
  for update of s;
  if v_s.id is null or p_new_token_sha256 is null then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif p_step is not null then
    if not billing_private.operator_step_accept(v_s.community_id, v_s.user_id, p_step, true) then
      return jsonb_build_object('ok', false, 'reason', 'replayed');
    end if;
  elsif p_recovery_sha256 is null
     or not billing_private.operator_recovery_spend(v_s.community_id, v_s.user_id, p_recovery_sha256) then
    return jsonb_build_object('ok', false, 'reason', 'wrong');
  end if;
  update billing_private.operator_sessions s set code_pending = false, token_sha256 = p_new_token_sha256,
    expires_at = now() + p_ttl, ip = coalesce(p_ip, s.ip), last_seen_at = now()
  where s.community_id = v_s.community_id and s.id = v_s.id;
  perform billing_private.operator_code_succeeded(v_s.user_id, p_ip);
  if p_ip is not null then
    insert into billing_private.operator_known_addresses as k (community_id, user_id, ip)
    values (v_s.community_id, v_s.user_id, p_ip)
    on conflict (community_id, user_id, ip) do update set last_seen_at = now();
  end if;
  return jsonb_build_object('ok', true, 'session_id', v_s.id, 'community_id', v_s.community_id,
    'expires_at', billing.iso(now() + p_ttl),
    'recovery_left', (select count(*) from billing_private.operator_recovery_codes r
                      where r.community_id = v_s.community_id and r.user_id = v_s.user_id and r.used_at is null));
end
$$;
