--! Previous: sha1:520880ebc0a8320190ebe92d2f73264589c5eccd
--! Hash: sha1:52c6061dd47632ff7f992801437f7ebbfd24bdb5
--! Message: Operator logins see no credential

--! split: 1-current.sql
-- Enter migration here

--! split: 50-secrets.sql
-- Issue 26 item 9, issue 27 items 5, 6 and 8 (branch secrets): operator SQL logins read
-- no live credential and no other community's volumes, and write nothing whatever their
-- session settings; operator passwords checked and throttled without lock-out; portal
-- URLs open once. The definitions live in the fixtures named beside each part.

-- ---- 10-tenancy.sql: operator reads and the fence ------------------------------------
-- Operators read every table of billing, row by row through the tenant policies, which
-- give them their own community only (billing.current_community_id()), except the
-- columns that hold live credentials (issue 26): clear checkout and portal URLs and
-- provider refs that open them, pay-token columns, link codes, and idempotent
-- answers (which replay checkout URLs, portal URLs, link codes and whsec_ secrets).
-- Those tables get column grants without them. Called again once those tables exist
-- (end of 85-idempotency-and-limits.sql); new tables get SELECT by default privileges,
-- so a new credential column must be added here (test/cli/sql-access-secrets.test.ts
-- scans everything an operator login reads for every token a full flow issued).
create or replace function billing_private.operator_hidden_columns() returns jsonb
  language sql immutable
as $$
  select '{"idempotency_keys": ["response_body"],
           "link_codes": ["code"],
           "checkout_sessions": ["url", "access_token", "access_token_sha256", "provider_ref"],
           "portal_sessions": ["url", "access_token", "access_token_sha256"]}'::jsonb
$$;

create or replace function billing_private.operator_grant_reads() returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  r record;
  v_hidden text[];
  v_cols text;
begin
  for r in select c.oid, c.oid::regclass::text as rel, c.relname::text as name from pg_class c
           where c.relnamespace = 'billing'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f') loop
    v_hidden := array(select jsonb_array_elements_text(billing_private.operator_hidden_columns() -> r.name));
    if cardinality(v_hidden) = 0 then
      execute format('grant select on %s to billing_operator', r.rel);
      continue;
    end if;
    select string_agg(quote_ident(a.attname), ', ' order by a.attnum) into v_cols from pg_attribute a
    where a.attrelid = r.oid and a.attnum > 0 and not a.attisdropped and not (a.attname::text = any (v_hidden));
    execute format('revoke select on %s from billing_operator', r.rel);
    execute format('revoke select (%s) on %s from billing_operator',
      (select string_agg(quote_ident(a.attname), ', ') from pg_attribute a
       where a.attrelid = r.oid and a.attnum > 0 and not a.attisdropped), r.rel);
    execute format('grant select (%s) on %s to billing_operator', v_cols, r.rel);
  end loop;
end
$$;
revoke execute on function billing_private.operator_grant_reads() from public;

select billing_private.operator_grant_reads();
alter default privileges in schema billing grant select on tables to billing_operator;

-- ---- operator logins: what the catalog shows and what a session may write (issue 27) ----
--
-- PUBLIC may read the statistics views and call the functions behind them and the size
-- functions: they count every community's rows (pg_stat_user_tables.n_live_tup,
-- pg_class.reltuples, pg_relation_size, ...). PostgreSQL has no per-role deny, so the
-- fence takes them from PUBLIC in this database and gives them back to the roles that
-- use them: the service's roles, the owner and pg_read_all_stats (monitoring). Changing
-- pg_catalog's rights needs a superuser: the migration applies that part when it runs as
-- one, otherwise `billing sql-access grant` refuses until a superuser ran
-- `select billing_private.operator_fence()` (docs/security.md). pg_stats and
-- pg_stats_ext stay: they show no row of a table whose row security applies.
--
-- Read-only is the rights, not a setting: billing_operator holds no write right on any
-- table, sequence, schema or the database, TEMPORARY is taken from PUBLIC (the owner of
-- the database can) and large-object creation too (superuser), so a session that turns
-- default_transaction_read_only off still writes nothing. Database rights are not copied
-- from a template, so `billing sql-access grant` applies the fence again each time.
create or replace function billing_private.operator_fence() returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_owner text := (select n.nspowner::regrole::text from pg_namespace n where n.nspname = 'billing');
  v_super boolean := (select r.rolsuper from pg_roles r where r.rolname = current_user);
  v_db_owner boolean := v_super or pg_has_role((select d.datdba from pg_database d where d.datname = current_database()), 'USAGE');
  v_keep text;
  r record;
begin
  v_keep := 'billing_api, billing_writer, billing_worker, billing_app, ' || v_owner;
  if v_db_owner then
    execute format('revoke temporary on database %I from public', current_database());
    execute format('grant temporary on database %I to %s', current_database(), v_keep);
  end if;
  if v_super then
    for r in select c.oid::regclass::text as rel from pg_class c
             where c.relnamespace = 'pg_catalog'::regnamespace and c.relkind = 'v'
               and (c.relname like 'pg\_stat\_%' or c.relname like 'pg\_statio\_%')
               and c.relname not in ('pg_stat_activity', 'pg_stat_ssl', 'pg_stat_gssapi') loop
      execute format('revoke select on %s from public', r.rel);
      execute format('grant select on %s to %s, pg_read_all_stats', r.rel, v_keep);
    end loop;
    for r in select p.oid::regprocedure::text as fn, p.proname::text as name from pg_proc p
             where p.pronamespace = 'pg_catalog'::regnamespace
               and ((p.proname like 'pg\_stat\_get\_%' and p.proname <> 'pg_stat_get_activity')
                 or p.proname in ('pg_stat_have_stats', 'pg_relation_size', 'pg_total_relation_size', 'pg_table_size',
                                  'pg_indexes_size', 'pg_database_size', 'pg_tablespace_size',
                                  'lo_create', 'lo_creat', 'lo_from_bytea', 'lo_import')) loop
      execute format('revoke execute on function %s from public', r.fn);
      if r.name not like 'lo\_%' then
        execute format('grant execute on function %s to %s, pg_read_all_stats', r.fn, v_keep);
      end if;
    end loop;
    revoke select on pg_catalog.pg_class from public;
    execute format('grant select (%s) on pg_catalog.pg_class to public',
      (select string_agg(quote_ident(a.attname), ', ' order by a.attnum) from pg_attribute a
       where a.attrelid = 'pg_catalog.pg_class'::regclass and a.attnum > 0 and not a.attisdropped
         and a.attname not in ('reltuples', 'relpages', 'relallvisible')));
    execute format('grant select on pg_catalog.pg_class to %s, pg_read_all_stats', v_keep);
  end if;
  return jsonb_build_object('gaps', to_jsonb(billing_private.operator_fence_gaps()));
end
$$;

-- What an operator login could still read or write that the fence takes away (empty
-- when it holds).
create or replace function billing_private.operator_fence_gaps() returns text[]
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select array(select g from (values
    ('pg_stat_user_tables', has_table_privilege('billing_operator', 'pg_catalog.pg_stat_user_tables', 'select')),
    ('pg_statio_user_tables', has_table_privilege('billing_operator', 'pg_catalog.pg_statio_user_tables', 'select')),
    ('pg_stat_database', has_table_privilege('billing_operator', 'pg_catalog.pg_stat_database', 'select')),
    ('pg_class.reltuples', has_column_privilege('billing_operator', 'pg_catalog.pg_class', 'reltuples', 'select')),
    ('pg_class.relpages', has_column_privilege('billing_operator', 'pg_catalog.pg_class', 'relpages', 'select')),
    ('pg_stat_get_live_tuples', has_function_privilege('billing_operator', 'pg_catalog.pg_stat_get_live_tuples(oid)', 'execute')),
    ('pg_relation_size', has_function_privilege('billing_operator', 'pg_catalog.pg_relation_size(regclass)', 'execute')),
    ('pg_total_relation_size', has_function_privilege('billing_operator', 'pg_catalog.pg_total_relation_size(regclass)', 'execute')),
    ('lo_create', has_function_privilege('billing_operator', 'pg_catalog.lo_create(oid)', 'execute')),
    ('temporary', has_database_privilege('billing_operator', current_database(), 'temporary'))) v(g, open)
  where open)
$$;

select billing_private.operator_fence();

-- ---- 85-idempotency-and-limits.sql ---------------------------------------------------
select billing_private.operator_grant_reads();

-- ---- 15-operators.sql: sign-in throttles, password change ----------------------------
-- Addresses (client IPs) an operator user signed in from, so that a correct password
-- from a known address still works while the account is under a guessing attack.
create table if not exists billing_private.operator_known_addresses (
  user_id text collate "C" not null references billing_private.operator_users (id) on delete cascade,
  ip text not null,
  last_seen_at timestamptz not null default now(),
  primary key (user_id, ip)
);
alter table billing_private.operator_known_addresses enable row level security;
alter table billing_private.operator_known_addresses force row level security;
drop policy if exists owner_only on billing_private.operator_known_addresses;
create policy owner_only on billing_private.operator_known_addresses using (true);

-- Sign-in throttles (token buckets), checked before anything is verified:
--   per address        10 attempts a minute (passwords and links);
--   per account and address  5 failures, then one more every 5 minutes: a guesser
--                      locks out only its own address;
--   per account        30 failures, then 2 a minute, from all addresses together: once
--                      spent, only a known address (one that signed in to this account
--                      in the last 90 days) may try a password; any other is told to
--                      use a one-time link (reason link_required), which makes it known.
-- A success gives its failure tokens back (billing_private.operator_sign_in_succeeded),
-- so a right password never spends the account's budget.
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
      join billing_private.operator_users u on u.id = k.user_id
      where u.email = v_email and k.ip = p_ip and k.last_seen_at > now() - interval '90 days') then
    perform billing_private.take_tokens('signin-fail:' || v_email || ' ' || coalesce(p_ip, '?'), 0.2, 5, 0, 1);
    return jsonb_build_object('allowed', false, 'reason', 'link_required', 'retry_after', (v_account->>'retry_after')::bigint);
  end if;
  return jsonb_build_object('allowed', true, 'retry_after', 0);
end
$$;

-- After a sign-in that opened p_session_id (in the last minute, from p_ip): the address
-- becomes known to its user, and a password sign-in (p_email) gets its failure tokens back.
create or replace function billing_private.operator_sign_in_succeeded(p_session_id text, p_ip text, p_email text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user billing_private.operator_users;
begin
  select u.* into v_user from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.id = p_session_id and s.revoked_at is null and s.created_at > now() - interval '1 minute';
  if v_user.id is null or p_ip is null then
    return;
  end if;
  insert into billing_private.operator_known_addresses as k (user_id, ip) values (v_user.id, p_ip)
  on conflict (user_id, ip) do update set last_seen_at = now();
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

-- The scrypt parameters ('scrypt$N$r$p$salt') of the session's user's password, so the
-- service can derive the key from the current password it was given; null without one.
create or replace function billing_private.operator_session_password_params(p_token_sha256 text) returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select regexp_replace(u.password_hash, '\$[^$]*$', '')
  from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now() and u.disabled_at is null
$$;

-- The signed-in user sets their password (hashed by the service). A user who has one
-- must prove it (p_current_derived: the key derived from the current password with its
-- parameters), throttled as sign-in failures of this account and address. Every other
-- session of the user ends. {ok, reason: signed_out | rate_limited | wrong_password, ended}.
drop function if exists billing_private.operator_set_password(text, text);
create or replace function billing_private.operator_change_password(p_token_sha256 text, p_current_derived text,
  p_password_hash text, p_ip text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_session billing_private.operator_sessions;
  v_user billing_private.operator_users;
  v_bucket text;
  v_ended integer;
begin
  select s.* into v_session from billing_private.operator_sessions s
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now();
  select u.* into v_user from billing_private.operator_users u
  where u.community_id = v_session.community_id and u.id = v_session.user_id and u.disabled_at is null
  for update;
  if v_user.id is null or p_password_hash is null or p_password_hash not like 'scrypt$%' then
    return jsonb_build_object('ok', false, 'reason', 'signed_out');
  end if;
  if v_user.password_hash is not null then
    v_bucket := 'signin-fail:' || v_user.email || ' ' || coalesce(p_ip, '?');
    if not (billing_private.take_token(v_bucket, 0.2, 5)->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'reason', 'rate_limited');
    elsif p_current_derived is null
       or substring(v_user.password_hash from '[^$]*$') <> encode(sha256(decode(p_current_derived, 'base64')), 'base64') then
      return jsonb_build_object('ok', false, 'reason', 'wrong_password');
    end if;
    perform billing_private.take_tokens(v_bucket, 0.2, 5, 0, 1);
  end if;
  update billing_private.operator_users u set password_hash = p_password_hash
  where u.community_id = v_user.community_id and u.id = v_user.id;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_user.community_id and s.user_id = v_user.id and s.id <> v_session.id and s.revoked_at is null;
  get diagnostics v_ended = row_count;
  return jsonb_build_object('ok', true, 'ended', v_ended);
end
$$;

grant execute on function billing_private.operator_change_password(text, text, text, text) to billing_api;
grant execute on function billing_private.operator_session_password_params(text) to billing_api;
grant execute on function billing_private.operator_sign_in_succeeded(text, text, text) to billing_api;

-- ---- 82-member-portal.sql: a portal URL opens once -----------------------------------
create index if not exists member_portal_sessions_portal on billing_private.member_portal_sessions (community_id, portal_session_id);
-- Opens a member portal session (one hour) from a portal URL's id and token, while the
-- URL is live by the community's clock, once: a URL that already opened a session is
-- spent (issue 27). {status: 'open', ...}, {status: 'expired'}, {status: 'used'}, or
-- null for an unknown id or token.
create or replace function billing_private.member_portal_open(p_portal_id text, p_access_sha256 bytea, p_token_sha256 text)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ps billing.portal_sessions;
begin
  select * into v_ps from billing.portal_sessions ps where ps.id = p_portal_id and ps.access_token_sha256 = p_access_sha256
  for update;
  if v_ps.id is null then
    return null;
  elsif exists (select 1 from billing_private.member_portal_sessions m
                where m.community_id = v_ps.community_id and m.portal_session_id = v_ps.id) then
    return jsonb_build_object('status', 'used');
  elsif v_ps.expires_at <= billing.community_now(v_ps.community_id) then
    return jsonb_build_object('status', 'expired');
  end if;
  insert into billing_private.member_portal_sessions (community_id, token_sha256, portal_session_id, member_id, expires_at)
  values (v_ps.community_id, p_token_sha256, v_ps.id, v_ps.member_id, now() + interval '1 hour');
  return jsonb_build_object('status', 'open', 'community_id', v_ps.community_id, 'member_id', v_ps.member_id);
end
$$;

-- Who a live member portal session is (the page's header), or null.
create or replace function billing_private.member_portal_info(p_token_sha256 text) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('community_id', m.community_id, 'community_name', c.name, 'member_id', m.member_id,
    'provider', c.payment_provider, 'return_url', ps.return_url, 'expires_at', billing.iso(m.expires_at),
    'portal_session_id', m.portal_session_id)
  from billing_private.member_portal_sessions m
  join billing.communities c on c.id = m.community_id
  join billing.portal_sessions ps on ps.community_id = m.community_id and ps.id = m.portal_session_id
  where m.token_sha256 = p_token_sha256 and m.expires_at > now()
$$;
