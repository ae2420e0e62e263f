--! Previous: sha1:7f658e3d4ac13b59be52ff80d71c50ce2aed30d3
--! Hash: sha1:74edfbc67cef99c22ac58375e5ba6c7f4a7afbc6
--! Message: team

--! split: 1-current.sql
-- Enter migration here

--! split: 90-team.sql
-- Issue 31 item 6 (team): removing operators, the sessions list and sign-out
-- everywhere, a second factor (TOTP) an owner can require. Fixtures:
-- tables/15-operators.sql, functions/15-operators.sql.

alter table billing_private.operator_sessions add column if not exists last_seen_at timestamptz;
alter table billing_private.operator_sessions add column if not exists ip text;
alter table billing_private.operator_sessions add column if not exists user_agent text;
alter table billing_private.operator_sessions add column if not exists code_pending boolean not null default false;

-- ---- second factor (issue 31 item 6; docs/decisions/operator-second-factor.md) -----------

-- An operator's TOTP secret: 20 random bytes, AES-256-GCM under WEBHOOK_ENCRYPTION_KEY
-- (src/domain/operators/second-factor.ts), bound to the community and user; the key
-- never reaches the database, so the secret is never in clear here. Unconfirmed until a
-- code from it was accepted once (enrolment). last_step: the time step of the last code
-- accepted; a code of that step or an earlier one is refused (replay).
create table if not exists billing_private.operator_second_factors (
  community_id text collate "C" not null,
  user_id text collate "C" not null,
  secret_ciphertext text not null check (secret_ciphertext like 'v1:%'),
  created_at timestamptz not null default now(),
  confirmed_at timestamptz,
  last_step bigint,
  primary key (community_id, user_id),
  foreign key (community_id, user_id) references billing_private.operator_users on delete cascade
);
alter table billing_private.operator_second_factors enable row level security;
alter table billing_private.operator_second_factors force row level security;
drop policy if exists owner_only on billing_private.operator_second_factors;
create policy owner_only on billing_private.operator_second_factors using (true);
-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing_private.operator_second_factors;
create trigger _950_audit_insert after insert on billing_private.operator_second_factors
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('user_id', 'secret_ciphertext', 'last_step');
drop trigger if exists _950_audit_update on billing_private.operator_second_factors;
create trigger _950_audit_update after update on billing_private.operator_second_factors
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('user_id', 'secret_ciphertext', 'last_step');
drop trigger if exists _950_audit_delete on billing_private.operator_second_factors;
create trigger _950_audit_delete after delete on billing_private.operator_second_factors
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('user_id', 'secret_ciphertext', 'last_step');

-- Recovery codes: only their sha256 is kept; each signs in once (used_at).
create table if not exists billing_private.operator_recovery_codes (
  community_id text collate "C" not null,
  user_id text collate "C" not null,
  code_sha256 text not null,
  created_at timestamptz not null default now(),
  used_at timestamptz,
  primary key (community_id, user_id, code_sha256),
  foreign key (community_id, user_id) references billing_private.operator_users on delete cascade
);
alter table billing_private.operator_recovery_codes enable row level security;
alter table billing_private.operator_recovery_codes force row level security;
drop policy if exists owner_only on billing_private.operator_recovery_codes;
create policy owner_only on billing_private.operator_recovery_codes using (true);
-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing_private.operator_recovery_codes;
create trigger _950_audit_insert after insert on billing_private.operator_recovery_codes
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('user_id', 'code_sha256', 'used_at');
drop trigger if exists _950_audit_update on billing_private.operator_recovery_codes;
create trigger _950_audit_update after update on billing_private.operator_recovery_codes
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('user_id', 'code_sha256', 'used_at');
drop trigger if exists _950_audit_delete on billing_private.operator_recovery_codes;
create trigger _950_audit_delete after delete on billing_private.operator_recovery_codes
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('user_id', 'code_sha256', 'used_at');

-- What a community's owners require of its operators: a second factor (operators without
-- one can only enrol once their password is right).
create table if not exists billing_private.operator_policies (
  community_id text collate "C" primary key references billing.communities on delete cascade,
  second_factor_required boolean not null default false,
  updated_at timestamptz not null default now(),
  updated_by text collate "C"
);
alter table billing_private.operator_policies enable row level security;
alter table billing_private.operator_policies force row level security;
drop policy if exists owner_only on billing_private.operator_policies;
create policy owner_only on billing_private.operator_policies using (true);
-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing_private.operator_policies;
create trigger _950_audit_insert after insert on billing_private.operator_policies
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('community_id');
drop trigger if exists _950_audit_update on billing_private.operator_policies;
create trigger _950_audit_update after update on billing_private.operator_policies
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('community_id');
drop trigger if exists _950_audit_delete on billing_private.operator_policies;
create trigger _950_audit_delete after delete on billing_private.operator_policies
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('community_id');

create or replace function billing_private.operator_session_needs(p_community_id text, p_user_id text, p_code_pending boolean)
  returns text language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select case
    when p_code_pending then 'code'
    when exists (select 1 from billing_private.operator_policies p
                 where p.community_id = p_community_id and p.second_factor_required)
     and not exists (select 1 from billing_private.operator_second_factors f
                     where f.community_id = p_community_id and f.user_id = p_user_id and f.confirmed_at is not null)
      then 'enrolment'
  end
$$;


create or replace function billing_private.session_credential(p_token_sha256 text) returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_out jsonb;
begin
  select jsonb_build_object('key_id', s.id, 'community_id', s.community_id,
    'scopes', to_jsonb(billing_private.operator_role_scopes(u.role)), 'member_id', null)
  into v_out
  from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now()
    and u.disabled_at is null
    and billing_private.operator_session_needs(s.community_id, s.user_id, s.code_pending) is null;
  if v_out is null then
    select jsonb_build_object('key_id', m.id, 'community_id', m.community_id,
      'scopes', to_jsonb(billing_private.member_portal_scopes()), 'member_id', m.member_id)
    into v_out
    from billing_private.member_portal_sessions m
    where m.token_sha256 = p_token_sha256 and m.expires_at > now();
  end if;
  return v_out;
end
$$;


create or replace function billing_private.operator_user_json(u billing_private.operator_users) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', u.id, 'email', u.email, 'role', u.role, 'has_password', u.password_hash is not null,
    'second_factor', exists (select 1 from billing_private.operator_second_factors f
                             where f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null),
    'created_at', billing.iso(u.created_at), 'disabled_at', billing.iso(u.disabled_at))
$$;


create or replace function billing_private.operator_session_open(p_user_id text, p_token_sha256 text, p_ttl interval)
  returns jsonb language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_session billing_private.operator_sessions;
begin
  -- A user with a second factor gets a session that owes its code (10 minutes to give
  -- it: billing_private.operator_sign_in_code), which is no credential until then.
  insert into billing_private.operator_sessions (community_id, token_sha256, user_id, expires_at, code_pending)
  select u.community_id, p_token_sha256, u.id,
    now() + case when f.user_id is null then p_ttl else least(p_ttl, interval '10 minutes') end, f.user_id is not null
  from billing_private.operator_users u
  left join billing_private.operator_second_factors f
    on f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null
  where u.id = p_user_id and u.disabled_at is null
  returning * into v_session;
  if v_session.id is null then
    return null;
  end if;
  return jsonb_build_object('session_id', v_session.id, 'community_id', v_session.community_id,
    'expires_at', billing.iso(v_session.expires_at), 'code_pending', v_session.code_pending);
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
    insert into billing_private.operator_known_addresses as k (user_id, ip) values (v_user.id, p_ip)
    on conflict (user_id, ip) do update set last_seen_at = now();
  end if;
  delete from billing_private.operator_known_addresses k
  where k.user_id = v_user.id and k.last_seen_at < now() - interval '90 days';
  if p_email is not null and lower(trim(p_email)) = v_user.email then
    -- The address proved itself: its earlier typos are forgiven. The account's budget,
    -- shared with whoever else is guessing, only gets this attempt's token back.
    delete from billing_private.rate_buckets b where b.bucket = 'signin-fail:' || v_user.email || ' ' || p_ip;
    perform billing_private.take_tokens('signin-fail:' || v_user.email, 2, 30, 0, 1);
  end if;
end
$$;


drop function if exists billing_private.operator_session_info(text);

create or replace function billing_private.operator_session_info(p_token_sha256 text, p_ip text default null,
  p_user_agent text default null) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now()
    and u.disabled_at is null;
  if v_s.id is null then
    return null;
  end if;
  if p_ip is not null and (v_s.last_seen_at is null or v_s.last_seen_at < now() - interval '1 minute'
                           or v_s.ip is distinct from p_ip) then
    update billing_private.operator_sessions s set last_seen_at = now(), ip = p_ip,
      user_agent = coalesce(left(p_user_agent, 256), s.user_agent)
    where s.community_id = v_s.community_id and s.id = v_s.id;
  end if;
  return (select jsonb_build_object('session_id', v_s.id, 'community_id', v_s.community_id, 'community_name', c.name,
    'user_id', u.id, 'email', u.email, 'role', u.role, 'has_password', u.password_hash is not null,
    'scopes', to_jsonb(billing_private.operator_role_scopes(u.role)), 'expires_at', billing.iso(v_s.expires_at),
    'second_factor', exists (select 1 from billing_private.operator_second_factors f
                             where f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null),
    'needs', billing_private.operator_session_needs(v_s.community_id, v_s.user_id, v_s.code_pending))
  from billing_private.operator_users u
  join billing.communities c on c.id = u.community_id
  where u.community_id = v_s.community_id and u.id = v_s.user_id);
end
$$;


-- ---- team: removing operators, their sessions, the second factor (issue 31 item 6) ------

-- The operator user of the current request's session (app.key_id is the session id for
-- a dashboard session), or null (an API key).
create or replace function billing_private.current_operator_user_id() returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.user_id from billing_private.operator_sessions s
  where s.community_id = billing.current_community_id() and s.id = nullif(current_setting('app.key_id', true), '')
$$;

-- Removes a user from the current community: the row goes, and with it (cascade) its
-- sessions (ended at once: the cookie is no credential any more), links, known
-- addresses and second factor. A community keeps at least one enabled owner (409).
create or replace function billing_private.operator_user_remove(p_id text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user billing_private.operator_users;
begin
  perform pg_advisory_xact_lock(hashtext(billing.current_community_id() || ' operators'));
  delete from billing_private.operator_users u
  where u.community_id = billing.current_community_id() and u.id = p_id
  returning * into v_user;
  if v_user.id is null then
    perform billing.raise('BL404', 'No operator ' || coalesce(p_id, '') || '.');
  end if;
  if not exists (select 1 from billing_private.operator_users u
                 where u.community_id = v_user.community_id and u.role = 'owner' and u.disabled_at is null) then
    perform billing.raise('BL409', 'A community keeps at least one enabled owner: make someone else owner before removing this one.');
  end if;
  return jsonb_build_object('id', v_user.id, 'email', v_user.email, 'role', v_user.role, 'removed', true);
end
$$;

-- How a session's address is shown: the operator's own in full (an IPv4-mapped IPv6
-- address as IPv4), anyone else's cut to its network (IPv4 /24 as 203.0.113.x, IPv6
-- /48). docs/decisions/operator-sessions-list.md.
create or replace function billing_private.operator_address_shown(p_ip text, p_full boolean) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v text := regexp_replace(p_ip, '^::ffff:(\d+\.\d+\.\d+\.\d+)$', '\1');
begin
  if p_ip is null then
    return null;
  elsif p_full then
    return v;
  elsif v ~ '^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$' then
    return regexp_replace(v, '\.\d+$', '.x');
  end if;
  return network(set_masklen(v::inet, 48))::text;
exception when others then
  return 'hidden';
end
$$;

-- A browser's name, major version and system from its User-Agent ("Firefox 128 on
-- Linux"): what the sessions list shows instead of the whole string.
create or replace function billing_private.user_agent_summary(p_ua text) returns text
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$
  select case when coalesce(p_ua, '') = '' then null else
    coalesce(
      case when p_ua ~ 'Edg/\d' then 'Edge ' || substring(p_ua from 'Edg/(\d+)')
           when p_ua ~ 'OPR/\d' then 'Opera ' || substring(p_ua from 'OPR/(\d+)')
           when p_ua ~ 'Firefox/\d' then 'Firefox ' || substring(p_ua from 'Firefox/(\d+)')
           when p_ua ~ 'Chrome/\d' then 'Chrome ' || substring(p_ua from 'Chrome/(\d+)')
           when p_ua ~ 'Version/\d+.*Safari/' then 'Safari ' || substring(p_ua from 'Version/(\d+)')
           when p_ua ~* '^curl/' then 'curl'
      end, 'Another browser')
    || coalesce(' on ' || case when p_ua ~ 'Windows' then 'Windows' when p_ua ~ 'Android' then 'Android'
         when p_ua ~ 'iPhone|iPad' then 'iOS' when p_ua ~ 'CrOS' then 'ChromeOS'
         when p_ua ~ 'Mac OS X|Macintosh' then 'macOS' when p_ua ~ 'Linux' then 'Linux' end, '')
  end
$$;

create or replace function billing_private.operator_session_json(s billing_private.operator_sessions, p_email text,
  p_full boolean, p_current_id text) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('id', s.id, 'user_id', s.user_id, 'email', p_email,
    'current', coalesce(s.id = p_current_id, false), 'code_pending', s.code_pending,
    'created_at', billing.iso(s.created_at), 'last_seen_at', billing.iso(coalesce(s.last_seen_at, s.created_at)),
    'expires_at', billing.iso(s.expires_at), 'address', billing_private.operator_address_shown(s.ip, p_full),
    'browser', billing_private.user_agent_summary(s.user_agent))
$$;

-- The live sessions of the current community (owners: operators:read), or of one user,
-- most recently seen first; others' addresses cut to their network.
create or replace function billing_private.operator_sessions_here(p_user_id text) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  with me as (
    select s.id, s.user_id from billing_private.operator_sessions s
    where s.community_id = billing.current_community_id() and s.id = nullif(current_setting('app.key_id', true), ''))
  select jsonb_build_object('data', coalesce(jsonb_agg(billing_private.operator_session_json(x.s, x.email,
      coalesce(x.user_id = (select me.user_id from me), false), (select me.id from me))
      order by x.seen desc, x.id), '[]'))
  from (select s, u.email, s.user_id, s.id, coalesce(s.last_seen_at, s.created_at) as seen
        from billing_private.operator_sessions s
        join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
        where s.community_id = billing.current_community_id() and s.revoked_at is null and s.expires_at > now()
          and (p_user_id is null or s.user_id = p_user_id)
        order by coalesce(s.last_seen_at, s.created_at) desc limit 500) x
$$;

-- Ends one live session (p_session_id) or every session of one user (p_user_id) of the
-- current community (owners: operators:write). {ended}.
create or replace function billing_private.operator_sessions_end_here(p_session_id text, p_user_id text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ended integer;
begin
  if p_user_id is not null and not exists (select 1 from billing_private.operator_users u
      where u.community_id = billing.current_community_id() and u.id = p_user_id) then
    perform billing.raise('BL404', 'No operator ' || p_user_id || '.');
  elsif p_session_id is null and p_user_id is null then
    perform billing.raise('BL422', 'session_id: name a session or an operator.', 'session_id');
  end if;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = billing.current_community_id() and s.revoked_at is null and s.expires_at > now()
    and (p_session_id is null or s.id = p_session_id) and (p_user_id is null or s.user_id = p_user_id);
  get diagnostics v_ended = row_count;
  if p_session_id is not null and v_ended = 0 then
    perform billing.raise('BL404', 'No live session ' || p_session_id || '.');
  end if;
  return jsonb_build_object('ended', v_ended);
end
$$;

-- The signed-in operator's own live sessions (any role: the account page), addresses in
-- full; null when the session is not live or still owes its code.
create or replace function billing_private.operator_own_sessions(p_token_sha256 text) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(billing_private.operator_session_json(o, null, true, me.id)
      order by coalesce(o.last_seen_at, o.created_at) desc, o.id), '[]')
  from billing_private.operator_sessions me
  join billing_private.operator_sessions o on o.community_id = me.community_id and o.user_id = me.user_id
    and o.revoked_at is null and o.expires_at > now()
  where me.token_sha256 = p_token_sha256 and me.revoked_at is null and me.expires_at > now() and not me.code_pending
$$;

-- Ends one of the signed-in operator's own sessions (p_session_id), or every one of
-- them, this one too (null: sign out everywhere). The number ended.
create or replace function billing_private.operator_end_own_sessions(p_token_sha256 text, p_session_id text) returns integer
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_me billing_private.operator_sessions;
  v_ended integer;
begin
  select s.* into v_me from billing_private.operator_sessions s
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending;
  if v_me.id is null then
    return 0;
  end if;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_me.community_id and s.user_id = v_me.user_id and s.revoked_at is null
    and (p_session_id is null or s.id = p_session_id);
  get diagnostics v_ended = row_count;
  return v_ended;
end
$$;

-- ---- the second factor (TOTP; docs/decisions/operator-second-factor.md) ----------------

-- Enrolment: keeps a new secret (encrypted by the service) for the signed-in user,
-- unconfirmed, in place of an unconfirmed one. {ok, reason: signed_out | already_on}.
create or replace function billing_private.operator_second_factor_start(p_token_sha256 text, p_ciphertext text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null;
  if v_s.id is null then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif exists (select 1 from billing_private.operator_second_factors f
                where f.community_id = v_s.community_id and f.user_id = v_s.user_id and f.confirmed_at is not null) then
    return jsonb_build_object('ok', false, 'reason', 'already_on');
  end if;
  insert into billing_private.operator_second_factors as f (community_id, user_id, secret_ciphertext)
  values (v_s.community_id, v_s.user_id, p_ciphertext)
  on conflict (community_id, user_id) do update set secret_ciphertext = excluded.secret_ciphertext, created_at = now(), last_step = null
  where f.confirmed_at is null;
  return jsonb_build_object('ok', true, 'community_id', v_s.community_id, 'user_id', v_s.user_id);
end
$$;

-- The signed-in user's unconfirmed secret (ciphertext) to show again during enrolment,
-- or null.
create or replace function billing_private.operator_second_factor_pending(p_token_sha256 text) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('community_id', s.community_id, 'user_id', s.user_id, 'ciphertext', f.secret_ciphertext,
    'email', u.email, 'community_name', c.name)
  from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  join billing.communities c on c.id = s.community_id
  join billing_private.operator_second_factors f on f.community_id = s.community_id and f.user_id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null and f.confirmed_at is null
$$;

-- Before a code is checked: the session, its user's secret (the ciphertext: the service
-- decrypts it) and the throttles, which take a failure token each (a success gives it
-- back, operator_code_succeeded):
--   per address                10 attempts a minute (shared with passwords and links);
--   per account and address    5 failures, then one every 5 minutes;
--   per account                10 failures, then one every 5 minutes, from all addresses
--                              together; once spent, only an address the account signed
--                              in from (the whole sign-in) in the last 90 days may try.
-- p_purpose: 'sign_in' (a session that owes its code), 'confirm' (enrolment: the
-- unconfirmed secret), 'manage' (a full session: the confirmed secret).
-- {allowed, reason: signed_out | no_factor | rate_limited, retry_after, community_id,
-- user_id, ciphertext, email, community_name}.
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
        where k.user_id = v_s.user_id and k.ip = p_ip and k.last_seen_at > now() - interval '90 days') then
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

-- A right code (or recovery code) gives back the failure tokens operator_code_begin took.
create or replace function billing_private.operator_code_succeeded(p_user_id text, p_ip text) returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from billing_private.rate_buckets b where b.bucket = 'code-fail:' || p_user_id || ' ' || coalesce(p_ip, '?');
  perform billing_private.take_tokens('code-fail:' || p_user_id, 0.2, 10, 0, 1);
end
$$;

-- Accepts the time step of a code the service found right (it holds the key to the
-- secret) once: false when a code of that step or a later one was accepted before (a
-- replay, RFC 6238 section 5.2), or p_step is null.
create or replace function billing_private.operator_step_accept(p_community_id text, p_user_id text, p_step bigint,
  p_confirmed boolean) returns boolean
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  with accepted as (
    update billing_private.operator_second_factors f set last_step = p_step
    where f.community_id = p_community_id and f.user_id = p_user_id and (f.confirmed_at is not null) = p_confirmed
      and p_step is not null and (f.last_step is null or f.last_step < p_step)
    returning 1)
  select exists (select 1 from accepted)
$$;

-- Spends one of the user's recovery codes (by its sha256); false when unknown or used.
create or replace function billing_private.operator_recovery_spend(p_community_id text, p_user_id text, p_code_sha256 text)
  returns boolean
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  with spent as (
    update billing_private.operator_recovery_codes r set used_at = now()
    where r.community_id = p_community_id and r.user_id = p_user_id and r.code_sha256 = p_code_sha256 and r.used_at is null
    returning 1)
  select exists (select 1 from spent)
$$;

-- The second step of a sign-in: a session that owes its code gives the time step of a
-- right code (p_step) or a recovery code (p_recovery_sha256). The session becomes a full
-- one under a new token (p_new_token_sha256: the cookie changes) for p_ttl, and the
-- address becomes known. {ok, reason: signed_out | replayed | wrong, session_id,
-- community_id, expires_at, recovery_left}.
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
    insert into billing_private.operator_known_addresses as k (user_id, ip) values (v_s.user_id, p_ip)
    on conflict (user_id, ip) do update set last_seen_at = now();
  end if;
  return jsonb_build_object('ok', true, 'session_id', v_s.id, 'community_id', v_s.community_id,
    'expires_at', billing.iso(now() + p_ttl),
    'recovery_left', (select count(*) from billing_private.operator_recovery_codes r
                      where r.community_id = v_s.community_id and r.user_id = v_s.user_id and r.used_at is null));
end
$$;

-- Replaces the user's recovery codes with new ones (their sha256).
create or replace function billing_private.operator_recovery_replace(p_community_id text, p_user_id text, p_hashes text[])
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  if coalesce(cardinality(p_hashes), 0) not between 1 and 20 then
    perform billing.raise('BL422', 'recovery codes: expected 1 to 20.');
  end if;
  delete from billing_private.operator_recovery_codes r where r.community_id = p_community_id and r.user_id = p_user_id;
  insert into billing_private.operator_recovery_codes (community_id, user_id, code_sha256)
  select p_community_id, p_user_id, h from unnest(p_hashes) h on conflict do nothing;
end
$$;

-- Enrolment's end: a right code from the unconfirmed secret turns the second factor on,
-- with new recovery codes (their sha256); the user's other sessions end (they were
-- opened without it). {ok, reason: signed_out | replayed, ended}.
create or replace function billing_private.operator_second_factor_confirm(p_token_sha256 text, p_ip text, p_step bigint,
  p_recovery_hashes text[]) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s billing_private.operator_sessions;
  v_ended integer;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null;
  if v_s.id is null then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif not billing_private.operator_step_accept(v_s.community_id, v_s.user_id, p_step, false) then
    return jsonb_build_object('ok', false, 'reason', 'replayed');
  end if;
  update billing_private.operator_second_factors f set confirmed_at = now()
  where f.community_id = v_s.community_id and f.user_id = v_s.user_id;
  perform billing_private.operator_recovery_replace(v_s.community_id, v_s.user_id, p_recovery_hashes);
  perform billing_private.operator_code_succeeded(v_s.user_id, p_ip);
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_s.community_id and s.user_id = v_s.user_id and s.id <> v_s.id and s.revoked_at is null;
  get diagnostics v_ended = row_count;
  return jsonb_build_object('ok', true, 'ended', v_ended);
end
$$;

-- With a right code (p_step) or a recovery code: p_action 'off' removes the second
-- factor and its recovery codes (refused while the community requires one), 'recovery_codes'
-- replaces the recovery codes. {ok, reason: signed_out | required | replayed | wrong}.
create or replace function billing_private.operator_second_factor_manage(p_token_sha256 text, p_ip text, p_step bigint,
  p_recovery_sha256 text, p_action text, p_recovery_hashes text[]) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s billing_private.operator_sessions;
begin
  select s.* into v_s from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and not s.code_pending
    and u.disabled_at is null;
  if v_s.id is null or p_action not in ('off', 'recovery_codes') then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  elsif p_action = 'off' and exists (select 1 from billing_private.operator_policies p
      where p.community_id = v_s.community_id and p.second_factor_required) then
    return jsonb_build_object('ok', false, 'reason', 'required');
  elsif p_step is not null then
    if not billing_private.operator_step_accept(v_s.community_id, v_s.user_id, p_step, true) then
      return jsonb_build_object('ok', false, 'reason', 'replayed');
    end if;
  elsif p_recovery_sha256 is null
     or not billing_private.operator_recovery_spend(v_s.community_id, v_s.user_id, p_recovery_sha256) then
    return jsonb_build_object('ok', false, 'reason', 'wrong');
  end if;
  perform billing_private.operator_code_succeeded(v_s.user_id, p_ip);
  if p_action = 'off' then
    delete from billing_private.operator_second_factors f where f.community_id = v_s.community_id and f.user_id = v_s.user_id;
    delete from billing_private.operator_recovery_codes r where r.community_id = v_s.community_id and r.user_id = v_s.user_id;
  else
    perform billing_private.operator_recovery_replace(v_s.community_id, v_s.user_id, p_recovery_hashes);
  end if;
  return jsonb_build_object('ok', true);
end
$$;

-- An owner removes another operator's second factor (a lost phone and lost recovery
-- codes): its recovery codes go and its sessions end; if the community requires a
-- second factor, the operator enrols again after their password.
create or replace function billing_private.operator_second_factor_reset_here(p_id text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user billing_private.operator_users;
begin
  select u.* into v_user from billing_private.operator_users u
  where u.community_id = billing.current_community_id() and u.id = p_id;
  if v_user.id is null then
    perform billing.raise('BL404', 'No operator ' || coalesce(p_id, '') || '.');
  end if;
  delete from billing_private.operator_second_factors f where f.community_id = v_user.community_id and f.user_id = v_user.id;
  delete from billing_private.operator_recovery_codes r where r.community_id = v_user.community_id and r.user_id = v_user.id;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_user.community_id and s.user_id = v_user.id and s.revoked_at is null;
  return billing_private.operator_user_json(v_user);
end
$$;

-- What the community requires of its operators (owners: operators:read).
create or replace function billing_private.operator_policy_here() returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('second_factor_required', coalesce(p.second_factor_required, false),
    'updated_at', billing.iso(p.updated_at),
    'operators_without_second_factor', (select count(*) from billing_private.operator_users u
      where u.community_id = billing.current_community_id() and u.disabled_at is null
        and not exists (select 1 from billing_private.operator_second_factors f
                        where f.community_id = u.community_id and f.user_id = u.id and f.confirmed_at is not null)))
  from (select 1) one
  left join billing_private.operator_policies p on p.community_id = billing.current_community_id()
$$;

-- Requires (or stops requiring) a second factor of the community's operators (owners:
-- operators:write). The owner who requires it has one already (409 otherwise), so
-- turning the rule on never sends its own author to enrolment. Operators without one
-- can only enrol from their next request on (operator_session_needs).
create or replace function billing_private.operator_policy_set(p_second_factor_required boolean) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_me text := billing_private.current_operator_user_id();
begin
  if p_second_factor_required is null then
    perform billing.raise('BL422', 'second_factor_required: expected true or false.', 'second_factor_required');
  elsif p_second_factor_required and not exists (select 1 from billing_private.operator_second_factors f
      where f.community_id = billing.current_community_id() and f.user_id = v_me and f.confirmed_at is not null) then
    perform billing.raise('BL409', 'Turn on your own second factor first (Account page), then require one of every operator.');
  end if;
  insert into billing_private.operator_policies as p (community_id, second_factor_required, updated_at, updated_by)
  values (billing.current_community_id(), p_second_factor_required, now(), v_me)
  on conflict (community_id) do update set second_factor_required = excluded.second_factor_required,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by;
  return billing_private.operator_policy_here();
end
$$;

create or replace function billing_api.operators_remove(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.operator_user_remove(p_args->>'id');
end
$$;

create or replace function billing_api.operators_reset_second_factor(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.operator_second_factor_reset_here(p_args->>'id');
end
$$;

create or replace function billing_api.operators_sign_out(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.operator_sessions_end_here(null, p_args->>'id');
end
$$;

create or replace function billing_api.operator_sessions_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  return billing_private.operator_sessions_here(p_args->>'user_id');
end
$$;

create or replace function billing_api.operator_sessions_end(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.operator_sessions_end_here(p_args->>'session_id', null);
end
$$;

create or replace function billing_api.operator_policy_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  return billing_private.operator_policy_here();
end
$$;

create or replace function billing_api.operator_policy_update(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.operator_policy_set((p_args->>'second_factor_required')::boolean);
end
$$;


grant execute on function billing_private.operator_session_info(text, text, text) to billing_api;
grant execute on function billing_private.operator_own_sessions(text) to billing_api;
grant execute on function billing_private.operator_end_own_sessions(text, text) to billing_api;
grant execute on function billing_private.operator_second_factor_start(text, text) to billing_api;
grant execute on function billing_private.operator_code_begin(text, text, text) to billing_api;
grant execute on function billing_private.operator_sign_in_code(text, text, bigint, text, text, interval) to billing_api;
grant execute on function billing_private.operator_second_factor_confirm(text, text, bigint, text[]) to billing_api;
grant execute on function billing_private.operator_second_factor_manage(text, text, bigint, text, text, text[]) to billing_api;
grant execute on function billing_private.operator_user_remove(text) to billing_api;
grant execute on function billing_private.operator_second_factor_reset_here(text) to billing_api;
grant execute on function billing_private.operator_sessions_here(text) to billing_api;
grant execute on function billing_private.operator_sessions_end_here(text, text) to billing_api;
grant execute on function billing_private.operator_policy_here() to billing_api;
grant execute on function billing_private.operator_policy_set(boolean) to billing_api;
grant execute on function billing_api.operators_remove(jsonb) to billing_api;
grant execute on function billing_api.operators_reset_second_factor(jsonb) to billing_api;
grant execute on function billing_api.operators_sign_out(jsonb) to billing_api;
grant execute on function billing_api.operator_sessions_list(jsonb) to billing_api;
grant execute on function billing_api.operator_sessions_end(jsonb) to billing_api;
grant execute on function billing_api.operator_policy_get(jsonb) to billing_api;
grant execute on function billing_api.operator_policy_update(jsonb) to billing_api;
grant execute on function billing_private.operator_second_factor_pending(text) to billing_api;

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
