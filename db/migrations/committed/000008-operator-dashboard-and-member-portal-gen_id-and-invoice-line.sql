--! Previous: sha1:cfe1783fa5a1ee86d1baa563343ba6cf838af31a
--! Hash: sha1:b670e1dd87a72982619613276c07c2dea7052155
--! Message: operator dashboard and member portal; gen_id and invoice line checks in plpgsql

--! split: 1-current.sql
-- Operator users, sign-in links and sessions; a session authenticates like a key
-- (issue 16). The member portal: its sessions authenticate the same way, fenced to the
-- member; the switch proration written once (46) for the switch and its preview; a
-- discount code entered on the sandbox checkout page (80); the dashboard's own reads (96);
-- the purge keeps a key's last use and removes spent links and old sessions (90).
-- gen_id and the invoice line checks in plpgsql: planned once per session, not per call.
--! Included 00-foundation.sql
-- Foundation: schemas, the API role, default privileges, ids, per-request identity,
-- the error table and the small helpers every domain uses (iso timestamps, cursors).
-- Re-runnable: every statement is idempotent (see docs/development.md, Migrations).
--
-- SQLSTATE table (mapped once in src/core/errors.ts):
--   BL400 invalid_request (400)      BL422 invalid_request (422)
--   BL401 unauthorized               BL403 missing_scope
--   BL404 not_found                  BL409 conflict
--   BLPCI payment_config_inactive    BLNEL not_eligible
--   BLPRQ plan_required              BLPNC platform_not_connected
--   BLDSC discount_invalid           BLEPL endpoint_limit
--   BLIKR idempotency_key_reuse      BLRIF request_in_flight
--   BL429 rate_limited               BL503 service_unavailable
--
-- Privileges are opt-in: no function is executable by PUBLIC; each file grants
-- billing_api exactly the functions it calls, directly or with invoker rights from
-- its triggers, policies, defaults and JSON builders. Tables: RLS enabled and forced,
-- policies written out by name beside each table (tenant, owner_access; owner_only
-- on billing_private tables), then the table's grants.

create schema if not exists billing;
create schema if not exists billing_private;
create schema if not exists billing_api;
create schema if not exists analytics;

do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'billing_api') then
    create role billing_api nologin noinherit nobypassrls;
  end if;
end
$$;
-- The owner may switch to billing_api (tests, seeding as the API would).
grant billing_api to current_user;

-- The service's own logins (docs/operations.md, Roles): the API pool connects as
-- billing_app and switches to billing_api at connection start; the worker connects as
-- billing_worker. Neither is a member of the owner, a superuser, or able to create
-- roles or databases, so no SQL they run can become the owner. They are created
-- without LOGIN: src/db/logins.ts, as the owner, gives them LOGIN and a password
-- derived from DATABASE_URL's at start (or operators create URLs of their own).
-- Roles are cluster-wide: several databases of one server share them.
do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'billing_app') then
    create role billing_app nologin noinherit nocreatedb nocreaterole;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'billing_worker') then
    create role billing_worker nologin noinherit nocreatedb nocreaterole;
  end if;
  -- Created by someone else with more rights than these roles may hold: refuse.
  if exists (select 1 from pg_roles where rolname in ('billing_api', 'billing_app', 'billing_worker')
             and (rolsuper or rolbypassrls or rolreplication or rolcreaterole or rolcreatedb)) then
    raise exception 'billing_api, billing_app and billing_worker must not be superusers nor have BYPASSRLS, REPLICATION, CREATEROLE or CREATEDB';
  end if;
  if pg_has_role('billing_app', current_user, 'member') or pg_has_role('billing_worker', current_user, 'member')
     or pg_has_role('billing_api', current_user, 'member') then
    raise exception 'billing_app, billing_worker and billing_api must not be members of the owner role %', current_user;
  end if;
end
$$;
grant billing_api to billing_app;

-- billing_writer owns the API operations that write (SECURITY DEFINER): billing_api
-- itself only reads tables, so a request's SQL cannot forge a purchase, a subscription,
-- an entitlement or an event; it can only call the operations, which check their input.
-- billing_writer has no BYPASSRLS and no owner_access policy: the tenant policies bind
-- it to the transaction's community exactly as they bind billing_api. It inherits
-- billing_api's rights (reads, execute) and holds the writes each fixture grants it.
do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'billing_writer') then
    create role billing_writer nologin inherit nocreatedb nocreaterole;
  end if;
  if exists (select 1 from pg_roles where rolname = 'billing_writer'
             and (rolsuper or rolbypassrls or rolreplication or rolcreaterole or rolcreatedb or rolcanlogin)) then
    raise exception 'billing_writer must be a NOLOGIN role without SUPERUSER, BYPASSRLS, REPLICATION, CREATEROLE or CREATEDB';
  end if;
  if pg_has_role('billing_writer', current_user, 'member') then
    raise exception 'billing_writer must not be a member of the owner role %', current_user;
  end if;
end
$$;
grant billing_api to billing_writer;
-- The owner replaces (create or replace) the functions billing_writer owns.
grant billing_writer to current_user;
-- A runaway statement is cancelled (each login's default; docs/operations.md, Roles).
-- Role settings apply to the login role, so they are set on billing_app, not billing_api.
alter role billing_app set statement_timeout = '15s';
alter role billing_app set idle_in_transaction_session_timeout = '60s';
alter role billing_worker set statement_timeout = '5min';

revoke all on schema billing_private from public;
grant usage on schema billing, billing_api, analytics to billing_api;
-- Only for the SECURITY DEFINER doors the API may call (each granted by name).
grant usage on schema billing_private to billing_api;

-- Functions the owner creates from here on are not executable by PUBLIC.
alter default privileges revoke execute on functions from public;


-- Ids: prefix, then 12 hex digits of milliseconds, 6 of a sequence, 8 random.
-- They sort by creation time, so keyset pagination by id is newest first.
create sequence if not exists billing_private.id_seq cycle maxvalue 16777215;
grant usage on sequence billing_private.id_seq to billing_api;

-- plpgsql, not sql: a SQL function with a SET clause is never inlined and was planned
-- again in every statement that called it (0.3 ms per id under load; a renewal makes six).
create or replace function billing.gen_id(p_prefix text) returns text
  language plpgsql volatile parallel unsafe
  set search_path = pg_catalog, pg_temp
as $$
begin
  return p_prefix || '_'
    || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0')
    || lpad(to_hex(nextval('billing_private.id_seq')), 6, '0')
    || substr(md5(gen_random_uuid()::text), 1, 8);
end
$$;

-- Operator SQL roles (billing sql-access, src/domain/communities/sql-access.ts): one
-- login per community that wants direct SQL, member of billing_operator, named at
-- random (role names are visible to every role, so they must not reveal communities).
-- The community of such a login is looked up here, from the login itself (session_user,
-- which SET ROLE does not change), never from a setting.
do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'billing_operator') then
    create role billing_operator nologin noinherit nocreatedb nocreaterole;
  end if;
end
$$;

create table if not exists billing_private.operator_roles (
  role_name text collate "C" primary key,
  community_id text collate "C" not null,
  created_at timestamptz not null default now()
);
create index if not exists operator_roles_community on billing_private.operator_roles (community_id);
alter table billing_private.operator_roles enable row level security;
alter table billing_private.operator_roles force row level security;
drop policy if exists owner_only on billing_private.operator_roles;
create policy owner_only on billing_private.operator_roles using (true);

create or replace function billing_private.operator_community_id() returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$ select o.community_id::text from billing_private.operator_roles o where o.role_name = session_user $$;

-- A role granted to no login. PostgreSQL makes superusers members of every role, and
-- (16+) grants a role to the role that created it; so a login that is a member of this
-- one is a superuser or the owner that ran the migrations, never an operator login.
-- Never grant it to anyone.
do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'billing_owner_probe') then
    create role billing_owner_probe nologin noinherit nocreatedb nocreaterole;
  end if;
end
$$;

-- Per-request identity. For the API: app.community_id, set transaction-locally by
-- billing.api_auth(). For a login that is a member of billing_operator (and not a
-- superuser or the owner, which are members of every role they see): its own
-- community, whatever the settings or the current role say.
--
-- Inlinable on purpose (one expression of built-ins, no subquery): every policy and
-- most API statements call it, and a SQL function that cannot be inlined is planned
-- again in every statement that calls it (about 0.1 ms each; with an EXISTS probe of
-- pg_auth_members here the entitlement check ran 2.5x slower). pg_has_role reads
-- PostgreSQL's cached role memberships. test/cli/sql-access.test.ts holds both.
create or replace function billing.current_community_id() returns text
  language sql stable parallel safe
as $$
  select case
    when pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
         and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')
      then billing_private.operator_community_id()
    else nullif(pg_catalog.current_setting('app.community_id', true), '')
  end
$$;

create or replace function billing.current_scopes() returns text[]
  language sql stable parallel safe
as $$ select coalesce(string_to_array(nullif(current_setting('app.scopes', true), ''), ' '), '{}') $$;

create or replace function billing.raise(p_sqlstate text, p_message text, p_detail text default null)
  returns void language plpgsql
as $$
begin
  raise exception using errcode = p_sqlstate, message = p_message, detail = coalesce(p_detail, '');
end
$$;

create or replace function billing.require_scope(p_scope text) returns void
  language plpgsql stable
as $$
begin
  if not (p_scope = any (billing.current_scopes())) then
    raise exception using errcode = 'BL403', message = 'This key lacks the scope ' || p_scope || '.',
      detail = p_scope;
  end if;
end
$$;

create or replace function billing.api_version() returns text
  language sql immutable parallel safe as $$ select '2026-08' $$;

-- stable, not immutable: to_char is stable, and only a stable declaration lets
-- PostgreSQL inline the function (an immutable one is called per row, ~10x slower).
create or replace function billing.iso(p_ts timestamptz) returns text
  language sql stable parallel safe
as $$ select to_char(p_ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;

-- Opaque list cursor: base64url of {"id": ...}; src/operations/registry.ts decodes it.
create or replace function billing.encode_cursor(p_id text) returns text
  language sql immutable parallel safe
as $$
  select translate(encode(convert_to(jsonb_build_object('id', p_id)::text, 'UTF8'), 'base64'), E'+/=\n', '-_')
$$;

-- One page of a keyset list from at most limit+1 rows, newest first: p_ids and p_items
-- are their ids and JSON, in the same order. Answers {data, next_cursor}; next_cursor
-- (continuing after the page's last id) is null on the last page.
create or replace function billing.page_json(p_ids text[], p_items jsonb[], p_limit integer) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object(
    'data', coalesce(to_jsonb(p_items[1:p_limit]), '[]'),
    'next_cursor', case when coalesce(cardinality(p_ids), 0) > p_limit
      then billing.encode_cursor(p_ids[p_limit]) end)
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.api_version() to billing_api;
grant execute on function billing.current_community_id() to billing_api;
-- Checked when current_community_id() starts, whichever branch runs: for the API's
-- login it answers null (no operator row names it).
grant execute on function billing_private.operator_community_id() to billing_api;
grant execute on function billing.current_scopes() to billing_api;
grant execute on function billing.encode_cursor(text) to billing_api;
grant execute on function billing.gen_id(text) to billing_api;
grant execute on function billing.iso(timestamptz) to billing_api;
grant execute on function billing.page_json(text[],jsonb[],integer) to billing_api;
grant execute on function billing.raise(text,text,text) to billing_api;
grant execute on function billing.require_scope(text) to billing_api;

-- What operator SQL roles (billing_operator) may do: read billing and analytics through
-- the tenant policies (grants in 10-tenancy.sql and 48-analytics.sql), and execute what
-- policies and the analytics views call. Nothing in billing_private but their community.
grant usage on schema billing, analytics, billing_private to billing_operator;
grant execute on function billing.current_community_id() to billing_operator;
grant execute on function billing_private.operator_community_id() to billing_operator;
grant execute on function billing.iso(timestamptz) to billing_operator;
--! EndIncluded 00-foundation.sql
--! Included 10-tenancy.sql
-- Tenancy: communities, their time, API keys, and the API's door into the database.
-- One call (billing.api_call) authenticates the key, takes a rate token, sets the
-- community and scopes transaction-locally and (for SQL operations) runs the
-- operation: one round trip per request. Rate buckets and idempotency records are in
-- 85-idempotency-and-limits.sql.

-- ---- communities ------------------------------------------------------------------

create table if not exists billing.communities (
  id text collate "C" primary key default billing.gen_id('com'),
  name text not null check (length(name) between 1 and 200),
  payment_provider text check (payment_provider in ('sandbox', 'stripe')),
  payment_config jsonb not null default '{}',
  clock_offset interval not null default '0',
  created_at timestamptz not null default now()
);
alter table billing.communities enable row level security;
alter table billing.communities force row level security;
drop policy if exists tenant on billing.communities;
create policy tenant on billing.communities
  using (id = (select billing.current_community_id()))
  with check (id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.communities;
create policy owner_access on billing.communities to current_user using (true) with check (true);
grant select on billing.communities to billing_api;
-- The test clock moves only through billing.sandbox_advance (owner): no API path writes here.
revoke update (clock_offset) on billing.communities from billing_api;

-- ---- dunning settings (per community) -----------------------------------------------

-- retry_days: days after the failed renewal (the invoice's due time) on which the
-- payment is retried, ascending, 1 to 28 (a retry never reaches the next period end
-- of a monthly plan); final_action: what happens when the last retry fails.
create or replace function billing.dunning_valid(p jsonb) returns boolean
  language sql immutable parallel safe
as $$
  select jsonb_typeof(p) = 'object'
    and p ?& array['retry_days', 'final_action']
    and (select array_agg(k order by k) from jsonb_object_keys(p) k) <@ array['final_action', 'retry_days']
    and p->>'final_action' in ('cancel')
    and jsonb_typeof(p->'retry_days') = 'array'
    and jsonb_array_length(p->'retry_days') between 1 and 8
    and not exists (
      select 1 from jsonb_array_elements(p->'retry_days') with ordinality e(v, i)
      where jsonb_typeof(e.v) <> 'number' or (e.v)::text !~ '^[0-9]+$'
        or (e.v)::integer not between 1 and 28
        or (i > 1 and (e.v)::integer <= (p->'retry_days'->>(i::integer - 2))::integer))
$$;

alter table billing.communities add column if not exists dunning jsonb not null
  default '{"retry_days": [1, 3, 5], "final_action": "cancel"}';
alter table billing.communities drop constraint if exists communities_dunning_valid;
alter table billing.communities add constraint communities_dunning_valid check (billing.dunning_valid(dunning));
-- Executed by whoever writes a community row's dunning (the check runs with its rights).
grant execute on function billing.dunning_valid(jsonb) to billing_api;

-- ---- payment provider secrets (per community) --------------------------------------

-- A community's own provider credentials (Stripe: secret_key, webhook_secret), stored
-- as AES-256-GCM ciphertext made by the service (the key never reaches the database;
-- src/domain/checkout/payment-secrets.ts). Owner only; the API role reads the
-- ciphertext of its own community through billing_private.payment_secret_ciphertext.
-- Clear secrets never go into communities.payment_config, which the API role can read.
create table if not exists billing_private.payment_secrets (
  community_id text collate "C" not null references billing.communities on delete cascade,
  provider text not null check (provider in ('stripe')),
  name text not null check (name in ('secret_key', 'webhook_secret')),
  ciphertext text not null check (ciphertext like 'v1:%'),
  updated_at timestamptz not null default now(),
  primary key (community_id, provider, name)
);
alter table billing_private.payment_secrets enable row level security;
alter table billing_private.payment_secrets force row level security;
drop policy if exists owner_only on billing_private.payment_secrets;
create policy owner_only on billing_private.payment_secrets using (true);

alter table billing.communities drop constraint if exists communities_payment_config_no_secrets;
alter table billing.communities add constraint communities_payment_config_no_secrets
  check (not (payment_config ?| array['secret_key', 'webhook_secret']));

-- The stored ciphertext of one secret of the current community, or null.
create or replace function billing_private.payment_secret_ciphertext(p_provider text, p_name text)
  returns text language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.ciphertext from billing_private.payment_secrets s
  where s.community_id = billing.current_community_id() and s.provider = p_provider and s.name = p_name
$$;
grant execute on function billing_private.payment_secret_ciphertext(text, text) to billing_api;


-- The time every rule reads: the community's sandbox test clock, or the real time.
-- plpgsql, so its one lookup is planned once per session: as a SQL function with a
-- subquery it could not be inlined and was planned again in every statement (~0.1 ms).
create or replace function billing.now() returns timestamptz
  language plpgsql stable parallel safe
as $$
declare
  v_offset interval;
begin
  select c.clock_offset into v_offset from billing.communities c where c.id = billing.current_community_id();
  return now() + coalesce(v_offset, '0'::interval);
end
$$;

-- A community's time (its sandbox clock) for code that runs outside that community's
-- request, such as triggers fired by the owner or a sweep over many communities.
create or replace function billing.community_now(p_community_id text) returns timestamptz
  language sql stable parallel safe
as $$
  select now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = p_community_id), '0'::interval)
$$;

-- ---- API keys (owner only) ----------------------------------------------------------

create table if not exists billing_private.api_keys (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('key'),
  name text,
  prefix text not null,
  key_hash text not null,
  scopes text[] not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  primary key (community_id, id)
);
-- When the key last made a request, as of the last purge of its idle rate bucket
-- (billing_private.purge_expired copies the bucket's time here before deleting it):
-- no write per request. billing_private.api_key_json adds the live bucket's time.
alter table billing_private.api_keys add column if not exists last_used_at timestamptz;
create unique index if not exists api_keys_hash on billing_private.api_keys (key_hash);
create unique index if not exists api_keys_id on billing_private.api_keys (id);
alter table billing_private.api_keys enable row level security;
alter table billing_private.api_keys force row level security;
drop policy if exists owner_only on billing_private.api_keys;
create policy owner_only on billing_private.api_keys using (true);

-- ---- authentication ------------------------------------------------------------------

-- Looks a key up by its hash (owner rights: keys are private) and takes a token
-- from the key's bucket, or from the client IP's bucket when the key is missing,
-- unknown or revoked.
create or replace function billing_private.authenticate(p_key_hash text, p_ip text, p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key_id text;
  v_community_id text;
  v_scopes text[];
  v_member_id text;
  v_rl jsonb;
begin
  if p_key_hash is not null then
    select k.id, k.community_id, k.scopes into v_key_id, v_community_id, v_scopes
    from billing_private.api_keys k
    where k.key_hash = p_key_hash and k.revoked_at is null;
    if v_key_id is null then
      -- An operator's dashboard session (15-operators.sql): its role's scopes.
      select c->>'key_id', c->>'community_id', array(select jsonb_array_elements_text(c->'scopes')), c->>'member_id', c->>'member_id'
        into v_key_id, v_community_id, v_scopes, v_member_id
      from billing_private.session_credential(p_key_hash) c where c is not null;
    end if;
  end if;
  if v_key_id is null then
    v_rl := billing_private.take_token('ip:' || coalesce(p_ip, '?'),
      coalesce((p_limits->>'ip_per_minute')::float8, 20), coalesce((p_limits->>'ip_burst')::float8, 10));
    return jsonb_build_object('ok', false,
      'error', case when (v_rl->>'allowed')::boolean then 'unauthorized' else 'rate_limited' end,
      'rl', v_rl);
  end if;
  v_rl := billing_private.take_token('key:' || v_key_id,
    coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
  if not (v_rl->>'allowed')::boolean then
    return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
  end if;
  return jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
    'scopes', to_jsonb(v_scopes), 'member_id', v_member_id, 'rl', v_rl);
end
$$;

create or replace function billing.api_auth(p_key_hash text, p_ip text, p_limits jsonb)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb := billing_private.authenticate(p_key_hash, p_ip, p_limits);
begin
  if (v_auth->>'ok')::boolean then
    perform set_config('app.community_id', v_auth->>'community_id', true);
    perform set_config('app.key_id', v_auth->>'key_id', true);
  -- A member portal session sees its own member only (82-member-portal.sql: member_fence policies).
  perform set_config('app.member_id', coalesce(v_auth->>'member_id', ''), true);
    perform set_config('app.scopes',
      array_to_string(array(select jsonb_array_elements_text(v_auth->'scopes')), ' '), true);
  end if;
  return v_auth;
end
$$;

-- Deferred token (read-API speed): for non-idempotent SQL operations billing.api_call
-- takes the key's token AFTER running the operation, so the bucket row is locked only
-- from that update to commit instead of for the whole operation (with the token first,
-- every request of one key queued behind the previous one's operation). A bucket that
-- is already empty still answers 429 before anything runs.
create or replace function billing_private.authenticate_deferred(p_key_hash text, p_ip text, p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key_id text;
  v_community_id text;
  v_scopes text[];
  v_member_id text;
  v_available boolean;
begin
  if p_key_hash is not null then
    -- A scalar subquery, so the bucket is always one primary-key probe (a join may
    -- be planned as a scan of the bucket table, whose pages fill with dead versions);
    -- key ids are collate "C", the bucket column is not: without the collate clause
    -- the primary key cannot be used.
    select k.id, k.community_id, k.scopes,
      (select least(coalesce((p_limits->>'key_burst')::float8, 60),
          b.tokens + extract(epoch from (clock_timestamp() - b.updated_at))
            * coalesce((p_limits->>'key_per_minute')::float8, 300) / 60.0) >= 1
       from billing_private.rate_buckets b where b.bucket = ('key:' || k.id) collate "default")
      into v_key_id, v_community_id, v_scopes, v_available
    from billing_private.api_keys k
    where k.key_hash = p_key_hash and k.revoked_at is null;
    if v_key_id is null then
      -- An operator's dashboard session (15-operators.sql); its bucket is keyed by the session id.
      select c->>'key_id', c->>'community_id', array(select jsonb_array_elements_text(c->'scopes')), c->>'member_id',
        (select least(coalesce((p_limits->>'key_burst')::float8, 60),
            b.tokens + extract(epoch from (clock_timestamp() - b.updated_at))
              * coalesce((p_limits->>'key_per_minute')::float8, 300) / 60.0) >= 1
         from billing_private.rate_buckets b where b.bucket = ('key:' || (c->>'key_id')) collate "default")
        into v_key_id, v_community_id, v_scopes, v_member_id, v_available
      from billing_private.session_credential(p_key_hash) c where c is not null;
    end if;
  end if;
  if v_key_id is null then
    return billing_private.authenticate(null, p_ip, p_limits);
  end if;
  return jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
    'scopes', to_jsonb(v_scopes), 'member_id', v_member_id, 'token_available', coalesce(v_available, true));
end
$$;

-- Takes a token from the bucket of the transaction's key (set by billing.api_call).
create or replace function billing_private.take_key_token(p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return billing_private.take_token('key:' || current_setting('app.key_id'),
    coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
end
$$;

create or replace function billing.api_call_deferred(p_key_hash text, p_ip text, p_limits jsonb,
  p_scope text, p_op text, p_args jsonb)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb := billing_private.authenticate_deferred(p_key_hash, p_ip, p_limits);
  v_rl jsonb;
  v_out jsonb;
  v_state text;
  v_msg text;
  v_detail text;
begin
  if not (v_auth->>'ok')::boolean then
    return v_auth;
  end if;
  perform set_config('app.community_id', v_auth->>'community_id', true);
  perform set_config('app.key_id', v_auth->>'key_id', true);
  -- A member portal session sees its own member only (82-member-portal.sql: member_fence policies).
  perform set_config('app.member_id', coalesce(v_auth->>'member_id', ''), true);
  perform set_config('app.scopes', array_to_string(array(select jsonb_array_elements_text(v_auth->'scopes')), ' '), true);
  if not (v_auth->>'token_available')::boolean then
    v_rl := billing_private.take_key_token(p_limits);
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
  end if;
  v_auth := v_auth - 'token_available';
  if p_scope is not null and not (p_scope = any (billing.current_scopes())) then
    v_rl := coalesce(v_rl, billing_private.take_key_token(p_limits));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  begin
    execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
    if v_rl is null then
      v_rl := billing_private.take_key_token(p_limits);
      if not (v_rl->>'allowed')::boolean then
        raise exception using errcode = 'BL429', message = 'rate limited';  -- undoes the operation's writes
      end if;
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'result', v_out);
  exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
    if v_state = 'BL429' and v_rl is not null and not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    if v_state not like 'BL%' then
      raise;
    end if;
    v_rl := coalesce(v_rl, billing_private.take_key_token(p_limits));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'error', jsonb_build_object('sqlstate', v_state,
      'message', v_msg, 'detail', nullif(v_detail, '')));
  end;
end
$$;

-- Lock order of a request (one order everywhere, so two requests never wait on each
-- other in a cycle): the domain's rows first (idempotency lock, subject, member, ...),
-- the key's rate bucket LAST, just before commit. A handler operation (src/operations/
-- executor.ts) authenticates with billing.api_auth_deferred and takes its token with
-- billing_private.take_key_token after its work; billing.api_call does the same for
-- SQL operations. With the token first, a handler held the bucket while waiting for a
-- member row that a SQL operation held while waiting for the bucket: a deadlock.
-- (A bucket already empty still answers 429 before anything runs.)
create or replace function billing.api_auth_deferred(p_key_hash text, p_ip text, p_limits jsonb)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb := billing_private.authenticate_deferred(p_key_hash, p_ip, p_limits);
begin
  if (v_auth->>'ok')::boolean then
    perform set_config('app.community_id', v_auth->>'community_id', true);
    perform set_config('app.key_id', v_auth->>'key_id', true);
  -- A member portal session sees its own member only (82-member-portal.sql: member_fence policies).
  perform set_config('app.member_id', coalesce(v_auth->>'member_id', ''), true);
    perform set_config('app.scopes',
      array_to_string(array(select jsonb_array_elements_text(v_auth->'scopes')), ' '), true);
  end if;
  return v_auth;
end
$$;

-- One round trip for SQL operations: authenticate, then run billing_api.<op>(args).
-- An error of the operation is returned as a value (its writes rolled back) so the
-- rate token stays taken and the idempotency record can keep the answer.
create or replace function billing.api_call(p_key_hash text, p_ip text, p_limits jsonb,
  p_scope text, p_op text, p_args jsonb, p_idem jsonb default null)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb;
  v_rl jsonb;
  v_out jsonb;
  v_replay jsonb;
  v_state text;
  v_msg text;
  v_detail text;
begin
  if p_op is not null and p_idem is null then
    return billing.api_call_deferred(p_key_hash, p_ip, p_limits, p_scope, p_op, p_args);
  end if;
  if p_op is null then
    -- Authentication alone (error answers): no row of the domain is touched.
    v_auth := billing.api_auth(p_key_hash, p_ip, p_limits);
    if not (v_auth->>'ok')::boolean then
      return v_auth;
    end if;
    if p_scope is not null and not (p_scope = any (billing.current_scopes())) then
      return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', 'BL403',
        'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
    end if;
    return v_auth;
  end if;
  -- An idempotent operation: the idempotency lock and the operation, then the token.
  v_auth := billing.api_auth_deferred(p_key_hash, p_ip, p_limits);
  if not (v_auth->>'ok')::boolean then
    return v_auth;
  end if;
  if not (v_auth->>'token_available')::boolean then
    v_rl := billing_private.take_key_token(p_limits);
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
  end if;
  v_auth := v_auth - 'token_available';
  if p_scope is not null and not (p_scope = any (billing.current_scopes())) then
    v_rl := coalesce(v_rl, billing_private.take_key_token(p_limits));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  begin
    v_replay := billing.idempotency_begin(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash');
    if v_replay is null then
      begin
        execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
        v_out := jsonb_build_object('result', v_out);
      exception when others then
        get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
        if v_state not like 'BL%' then
          raise;
        end if;
        v_out := jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
          'detail', nullif(v_detail, '')));
      end;
      perform billing.idempotency_finish(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash', 0, v_out);
    else
      v_out := jsonb_build_object('replayed', true) || (v_replay->'body');
    end if;
    v_rl := coalesce(v_rl, billing_private.take_key_token(p_limits));
    if not (v_rl->>'allowed')::boolean then
      raise exception using errcode = 'BL429', message = 'rate limited';  -- undoes the operation's writes
    end if;
  exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
    if v_state = 'BL429' and v_rl is not null and not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    if v_state not like 'BL%' then
      raise;
    end if;
    v_rl := coalesce(v_rl, billing_private.take_key_token(p_limits));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
    return v_auth || jsonb_build_object('rl', v_rl, 'error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
      'detail', nullif(v_detail, '')));
  end;
  return v_auth || jsonb_build_object('rl', v_rl) || v_out;
end
$$;

-- ---- leased tokens (src/operations/token-leases.ts) ------------------------------------

-- A process of the API takes a key's tokens a few at a time and spends them on
-- requests without touching the bucket again (a lease); p_return puts back what its
-- previous lease of the key left unspent. Answers {key: false} for a missing, unknown
-- or revoked key (the caller then goes through billing.api_call, which answers 401
-- from the IP's bucket), else the bucket's answer with granted.
create or replace function billing_private.lease_key_tokens(p_key_hash text, p_n integer, p_limits jsonb,
  p_return integer default 0)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key_id text;
begin
  select k.id into v_key_id from billing_private.api_keys k
  where k.key_hash = p_key_hash and k.revoked_at is null;
  if v_key_id is null then
    return jsonb_build_object('key', false);
  end if;
  return billing_private.take_tokens('key:' || v_key_id,
    coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60),
    greatest(1, least(p_n, 100)), greatest(0, least(p_return, 100))) || jsonb_build_object('key', true);
end
$$;

-- The key's community, id and scopes (owner rights: keys are private), or null for a
-- missing, unknown or revoked key. Read only: looked up on every request, so a
-- revocation holds from the next request on, leased tokens or not.
create or replace function billing_private.authenticate_key(p_key_hash text)
  returns jsonb language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('ok', true, 'community_id', k.community_id, 'key_id', k.id, 'scopes', to_jsonb(k.scopes))
  from billing_private.api_keys k
  where k.key_hash = p_key_hash and k.revoked_at is null
$$;

-- A SQL operation whose rate token the caller already holds (a leased one): the key
-- is checked again, the community and scopes set transaction-locally, the operation
-- run. The bucket row is not touched, so a read writes nothing. Same answers as
-- billing.api_call_deferred, without "rl" (the caller has it from its lease).
create or replace function billing.api_call_leased(p_key_hash text, p_scope text, p_op text, p_args jsonb)
  returns jsonb language plpgsql volatile
as $$
declare
  v_auth jsonb := billing_private.authenticate_key(p_key_hash);
  v_out jsonb;
  v_state text;
  v_msg text;
  v_detail text;
begin
  if v_auth is null then
    return jsonb_build_object('ok', false, 'error', 'unauthorized');
  end if;
  perform set_config('app.community_id', v_auth->>'community_id', true);
  perform set_config('app.key_id', v_auth->>'key_id', true);
  perform set_config('app.scopes', array_to_string(array(select jsonb_array_elements_text(v_auth->'scopes')), ' '), true);
  if p_scope is not null and not (p_scope = any (billing.current_scopes())) then
    return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  begin
    execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
    return v_auth || jsonb_build_object('result', v_out);
  exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
    if v_state not like 'BL%' then
      raise;
    end if;
    return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', v_state,
      'message', v_msg, 'detail', nullif(v_detail, '')));
  end;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.api_auth(text,text,jsonb) to billing_api;
grant execute on function billing.api_auth_deferred(text,text,jsonb) to billing_api;
grant execute on function billing.api_call(text,text,jsonb,text,text,jsonb,jsonb) to billing_api;
grant execute on function billing.api_call_deferred(text,text,jsonb,text,text,jsonb) to billing_api;
grant execute on function billing.api_call_leased(text,text,text,jsonb) to billing_api;
grant execute on function billing_private.lease_key_tokens(text,integer,jsonb,integer) to billing_api;
grant execute on function billing_private.authenticate_key(text) to billing_api;
grant execute on function billing.community_now(text) to billing_api;
grant execute on function billing.now() to billing_api;
grant execute on function billing_private.authenticate(text,text,jsonb) to billing_api;
grant execute on function billing_private.authenticate_deferred(text,text,jsonb) to billing_api;
grant execute on function billing_private.take_key_token(jsonb) to billing_api;

-- ---- operator SQL roles (billing_private.operator_roles, in 00-foundation.sql) ----------

alter table billing_private.operator_roles drop constraint if exists operator_roles_community_fk;
alter table billing_private.operator_roles add constraint operator_roles_community_fk
  foreign key (community_id) references billing.communities on delete cascade;

-- Operators read every table of billing, row by row through the tenant policies, which
-- give them their own community only (billing.current_community_id()).
grant select on all tables in schema billing to billing_operator;
alter default privileges in schema billing grant select on tables to billing_operator;
grant execute on function billing.now() to billing_operator;
grant execute on function billing.community_now(text) to billing_operator;
--! EndIncluded 10-tenancy.sql
--! Included 15-operators.sql
-- Operator users (the dashboard): people with a role in one community, their one-time
-- sign-in links and their sessions, all owner-only tables like API keys. A session is a
-- credential like a key: billing_private.authenticate (10-tenancy.sql) recognises its
-- hash and answers the session's community and the scopes of its user's role, so a
-- dashboard request runs the same operations, fenced by the same policies and scope
-- checks, as an API request. A viewer's scopes are read scopes only: the database
-- refuses its writes whatever the pages offer.

-- ---- roles and their scopes -----------------------------------------------------------

-- The API key scopes (src/core/scopes.ts; test/core/sql-agreement.test.ts keeps both equal).
create or replace function billing_private.api_key_scopes() returns text[]
  language sql immutable parallel safe
as $$
  select array['subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
    'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
    'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write']
$$;

-- What each operator role may do. keys:* (API key management) and operators:*
-- (dashboard users, owners only) are operator-only: no API key can hold them, so a
-- key never mints keys or operators.
create or replace function billing_private.operator_role_scopes(p_role text) returns text[]
  language sql immutable parallel safe
as $$
  select case p_role
    when 'viewer' then array(select s from unnest(billing_private.api_key_scopes()) s where s like '%:read')
      || array['keys:read']
    when 'admin' then billing_private.api_key_scopes() || array['keys:read', 'keys:write']
    when 'owner' then billing_private.api_key_scopes() || array['keys:read', 'keys:write', 'operators:read', 'operators:write']
  end
$$;

-- ---- operator users ---------------------------------------------------------------------

create table if not exists billing_private.operator_users (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('opu'),
  email text not null check (email = lower(email) and email ~ '^[^@\s]+@[^@\s]+$' and length(email) <= 254),
  role text not null check (role in ('owner', 'admin', 'viewer')),
  -- scrypt$N$r$p$salt$sha256(derived key), base64 (src/domain/operators/operator-accounts.ts); null until set.
  password_hash text check (password_hash like 'scrypt$%'),
  created_at timestamptz not null default now(),
  disabled_at timestamptz,
  primary key (community_id, id)
);
create unique index if not exists operator_users_id on billing_private.operator_users (id);
create unique index if not exists operator_users_email on billing_private.operator_users (community_id, email);
create index if not exists operator_users_by_email on billing_private.operator_users (email);
alter table billing_private.operator_users enable row level security;
alter table billing_private.operator_users force row level security;
drop policy if exists owner_only on billing_private.operator_users;
create policy owner_only on billing_private.operator_users using (true);

-- One-time sign-in links: only the sha256 of the token is kept.
create table if not exists billing_private.operator_links (
  community_id text collate "C" not null references billing.communities on delete cascade,
  token_sha256 text primary key,
  user_id text collate "C" not null,
  expires_at timestamptz not null,
  used_at timestamptz,
  created_at timestamptz not null default now(),
  foreign key (community_id, user_id) references billing_private.operator_users on delete cascade
);
alter table billing_private.operator_links enable row level security;
alter table billing_private.operator_links force row level security;
drop policy if exists owner_only on billing_private.operator_links;
create policy owner_only on billing_private.operator_links using (true);

-- Server-side sessions: the cookie holds the token, the table its sha256.
create table if not exists billing_private.operator_sessions (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('ops'),
  token_sha256 text not null,
  user_id text collate "C" not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  primary key (community_id, id),
  foreign key (community_id, user_id) references billing_private.operator_users on delete cascade
);
create unique index if not exists operator_sessions_token on billing_private.operator_sessions (token_sha256);
alter table billing_private.operator_sessions enable row level security;
alter table billing_private.operator_sessions force row level security;
drop policy if exists owner_only on billing_private.operator_sessions;
create policy owner_only on billing_private.operator_sessions using (true);

-- A live session as a credential: {key_id (the session id), community_id, scopes,
-- member_id}, or null. Read by billing_private.authenticate / authenticate_deferred.
-- Two kinds: an operator's dashboard session (member_id null), and a member's portal
-- session (billing_private.member_portal_sessions, 82-member-portal.sql), whose
-- member_id fences every member-owned row to that member.
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
    and u.disabled_at is null;
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

-- ---- invitations (owner: the CLI and npm start's first run) -----------------------------

-- Creates the user (or changes the role of the existing one with that email) and a
-- one-time link token (hashed by the caller) valid for p_ttl.
create or replace function billing_private.operator_invite(p_community_id text, p_email text, p_role text,
  p_token_sha256 text, p_ttl interval) returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user billing_private.operator_users;
  v_expires timestamptz := now() + p_ttl;
begin
  if not exists (select 1 from billing.communities c where c.id = p_community_id) then
    perform billing.raise('BL404', 'No community ' || p_community_id || '.');
  elsif coalesce(length(trim(p_email)), 0) not between 3 and 254 or trim(p_email) !~ '^[^@\s]+@[^@\s]+$' then
    perform billing.raise('BL422', 'email: expected an email address.', 'email');
  elsif p_role is null or p_role not in ('owner', 'admin', 'viewer') then
    perform billing.raise('BL422', 'role: expected owner, admin or viewer.', 'role');
  end if;
  insert into billing_private.operator_users as u (community_id, email, role)
  values (p_community_id, lower(trim(p_email)), p_role)
  on conflict (community_id, email) do update set role = excluded.role, disabled_at = null
  returning * into v_user;
  insert into billing_private.operator_links (community_id, token_sha256, user_id, expires_at)
  values (p_community_id, p_token_sha256, v_user.id, v_expires);
  return jsonb_build_object('user_id', v_user.id, 'community_id', v_user.community_id, 'email', v_user.email,
    'role', v_user.role, 'expires_at', billing.iso(v_expires));
end
$$;

-- ---- operators, managed by owners in the dashboard (operators:read / operators:write) ------

create or replace function billing_private.operator_user_json(u billing_private.operator_users) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', u.id, 'email', u.email, 'role', u.role, 'has_password', u.password_hash is not null,
    'created_at', billing.iso(u.created_at), 'disabled_at', billing.iso(u.disabled_at))
$$;

create or replace function billing_private.operator_users_page(p_cursor text, p_limit integer) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select billing.page_json(array_agg(u.id order by u.id desc),
    array_agg(billing_private.operator_user_json(u) order by u.id desc), p_limit)
  from (select * from billing_private.operator_users u
        where u.community_id = billing.current_community_id() and u.id < coalesce(p_cursor, chr(1114111))
        order by u.id desc limit p_limit + 1) u
$$;

-- An invitation into the current community (the token is hashed by the service).
create or replace function billing_private.operator_invite_here(p_email text, p_role text, p_token_sha256 text) returns jsonb
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  select billing_private.operator_invite(billing.current_community_id(), p_email, p_role, p_token_sha256, '24 hours')
$$;

-- Changes a user's role or disables / enables it; a community keeps at least one
-- enabled owner (409 otherwise). Disabling ends the user's sessions.
create or replace function billing_private.operator_user_update(p_id text, p_role text, p_disabled boolean) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user billing_private.operator_users;
begin
  if p_role is not null and p_role not in ('owner', 'admin', 'viewer') then
    perform billing.raise('BL422', 'role: expected owner, admin or viewer.', 'role');
  end if;
  perform pg_advisory_xact_lock(hashtext(billing.current_community_id() || ' operators'));
  update billing_private.operator_users u set role = coalesce(p_role, u.role),
    disabled_at = case when p_disabled is null then u.disabled_at when p_disabled then coalesce(u.disabled_at, now()) end
  where u.community_id = billing.current_community_id() and u.id = p_id
  returning * into v_user;
  if v_user.id is null then
    perform billing.raise('BL404', 'No operator ' || coalesce(p_id, '') || '.');
  end if;
  if not exists (select 1 from billing_private.operator_users u
                 where u.community_id = v_user.community_id and u.role = 'owner' and u.disabled_at is null) then
    perform billing.raise('BL409', 'A community keeps at least one enabled owner: make someone else owner first.');
  end if;
  if v_user.disabled_at is not null then
    update billing_private.operator_sessions s set revoked_at = coalesce(s.revoked_at, now())
    where s.community_id = v_user.community_id and s.user_id = v_user.id;
  end if;
  return billing_private.operator_user_json(v_user);
end
$$;

create or replace function billing_api.operators_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('operators:read');
  return billing_private.operator_users_page(p_args->>'cursor', coalesce((p_args->>'limit')::integer, 25));
end
$$;

create or replace function billing_api.operators_invite(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  perform billing.require_scope('operators:write');
  return billing_private.operator_invite_here(p_args->>'email', p_args->>'role', p_args->>'token_sha256');
end
$$;

create or replace function billing_api.operators_update(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  perform billing.require_scope('operators:write');
  return billing_private.operator_user_update(p_args->>'id', p_args->>'role', (p_args->>'disabled')::boolean);
end
$$;

-- ---- sign-in (billing_api: the app's pages, before any community is known) --------------

-- Sign-in attempts are rate limited per client IP (10 a minute) and per email (5 a
-- minute; links have none) with token buckets.
create or replace function billing_private.operator_sign_in_throttle(p_ip text, p_email text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ip jsonb := billing_private.take_token('signin-ip:' || coalesce(p_ip, '?'), 10, 10);
  v_email jsonb := case when p_email is not null
    then billing_private.take_token('signin-email:' || lower(p_email), 5, 5) end;
begin
  return jsonb_build_object('allowed', (v_ip->>'allowed')::boolean and coalesce((v_email->>'allowed')::boolean, true),
    'retry_after', greatest((v_ip->>'retry_after')::bigint, (v_email->>'retry_after')::bigint));
end
$$;

-- The scrypt parameters and salt ('scrypt$N$r$p$salt', without the hash) of the
-- enabled users with this email (one per community): the service derives the key from
-- the password with them. The stored hash never leaves the database.
create or replace function billing_private.operator_password_candidates(p_email text) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(jsonb_build_object('user_id', u.id,
      'params', regexp_replace(u.password_hash, '\$[^$]*$', '')) order by u.id), '[]')
  from billing_private.operator_users u
  where u.email = lower(trim(p_email)) and u.disabled_at is null and u.password_hash is not null
$$;

-- Opens a session (owner only: callers are the two proofs below).
create or replace function billing_private.operator_session_open(p_user_id text, p_token_sha256 text, p_ttl interval)
  returns jsonb language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_session billing_private.operator_sessions;
begin
  insert into billing_private.operator_sessions (community_id, token_sha256, user_id, expires_at)
  select u.community_id, p_token_sha256, u.id, now() + p_ttl
  from billing_private.operator_users u where u.id = p_user_id and u.disabled_at is null
  returning * into v_session;
  if v_session.id is null then
    return null;
  end if;
  return jsonb_build_object('session_id', v_session.id, 'community_id', v_session.community_id,
    'expires_at', billing.iso(v_session.expires_at));
end
$$;

-- Password sign-in: opens a session when the key the service derived from the password
-- (scrypt, base64) hashes to the stored one; null otherwise. The service cannot open a
-- session without the password.
create or replace function billing_private.operator_password_sign_in(p_user_id text, p_derived text, p_token_sha256 text, p_ttl interval)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_stored text;
begin
  select u.password_hash into v_stored from billing_private.operator_users u
  where u.id = p_user_id and u.disabled_at is null;
  if v_stored is null or p_derived is null
     or substring(v_stored from '[^$]*$') <> encode(sha256(decode(p_derived, 'base64')), 'base64') then
    return null;
  end if;
  return billing_private.operator_session_open(p_user_id, p_token_sha256, p_ttl);
end
$$;

-- Spends a one-time link (unused, unexpired) and opens a session with it; null when
-- the link is unknown, used or expired.
create or replace function billing_private.operator_link_redeem(p_link_sha256 text, p_token_sha256 text, p_ttl interval)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id text;
begin
  update billing_private.operator_links l set used_at = now()
  where l.token_sha256 = p_link_sha256 and l.used_at is null and l.expires_at > now()
  returning l.user_id into v_user_id;
  if v_user_id is null then
    return null;
  end if;
  return billing_private.operator_session_open(v_user_id, p_token_sha256, p_ttl);
end
$$;

-- Who a live session is (the pages' header), or null.
create or replace function billing_private.operator_session_info(p_token_sha256 text) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('session_id', s.id, 'community_id', s.community_id, 'community_name', c.name,
    'user_id', u.id, 'email', u.email, 'role', u.role, 'has_password', u.password_hash is not null,
    'scopes', to_jsonb(billing_private.operator_role_scopes(u.role)), 'expires_at', billing.iso(s.expires_at))
  from billing_private.operator_sessions s
  join billing_private.operator_users u on u.community_id = s.community_id and u.id = s.user_id
  join billing.communities c on c.id = s.community_id
  where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now()
    and u.disabled_at is null
$$;

create or replace function billing_private.operator_session_close(p_token_sha256 text) returns void
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  update billing_private.operator_sessions set revoked_at = coalesce(revoked_at, now())
  where token_sha256 = p_token_sha256
$$;

-- The signed-in user sets their own password (hashed by the service).
create or replace function billing_private.operator_set_password(p_token_sha256 text, p_password_hash text)
  returns boolean language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  with me as (
    select s.community_id, s.user_id from billing_private.operator_sessions s
    where s.token_sha256 = p_token_sha256 and s.revoked_at is null and s.expires_at > now())
  update billing_private.operator_users u set password_hash = p_password_hash
  from me where u.community_id = me.community_id and u.id = me.user_id
  returning true
$$;

-- ---- API keys, managed by operators (keys:read / keys:write) ---------------------------

create or replace function billing_private.api_key_json(k billing_private.api_keys) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  -- Last use: when the key last took a rate token (its live bucket), else what the
  -- purge of its idle bucket kept (api_keys.last_used_at). No write per request; the
  -- buckets are unlogged, so a crash may forget up to an hour of it.
  select jsonb_build_object('id', k.id, 'name', k.name, 'prefix', k.prefix, 'scopes', to_jsonb(k.scopes),
    'created_at', billing.iso(k.created_at), 'revoked_at', billing.iso(k.revoked_at),
    'last_used_at', billing.iso(greatest(k.last_used_at, (select b.updated_at from billing_private.rate_buckets b
                                  where b.bucket = ('key:' || k.id) collate "default"))))
$$;

create or replace function billing_private.api_keys_page(p_cursor text, p_limit integer) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select billing.page_json(array_agg(k.id order by k.id desc),
    array_agg(billing_private.api_key_json(k) order by k.id desc), p_limit)
  from (select * from billing_private.api_keys k
        where k.community_id = billing.current_community_id() and k.id < coalesce(p_cursor, chr(1114111))
        order by k.id desc limit p_limit + 1) k
$$;

create or replace function billing_private.api_key_insert(p_name text, p_prefix text, p_key_hash text, p_scopes text[])
  returns jsonb language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  insert into billing_private.api_keys as k (community_id, name, prefix, key_hash, scopes)
  values (billing.current_community_id(), p_name, p_prefix, p_key_hash, p_scopes)
  returning billing_private.api_key_json(k)
$$;

create or replace function billing_private.api_key_revoke(p_id text) returns jsonb
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  update billing_private.api_keys k set revoked_at = coalesce(k.revoked_at, now())
  where k.community_id = billing.current_community_id() and k.id = p_id
  returning billing_private.api_key_json(k)
$$;

create or replace function billing_api.api_keys_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('keys:read');
  return billing_private.api_keys_page(p_args->>'cursor', coalesce((p_args->>'limit')::integer, 25));
end
$$;

-- A new key's scopes: API scopes only (never keys:*), and only scopes the caller holds.
create or replace function billing_api.api_keys_create(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_scopes text[] := array(select distinct jsonb_array_elements_text(coalesce(p_args->'scopes', '[]')));
  v_bad text;
begin
  perform billing.require_scope('keys:write');
  if cardinality(v_scopes) = 0 then
    perform billing.raise('BL422', 'scopes: choose at least one scope.', 'scopes');
  end if;
  select s into v_bad from unnest(v_scopes) s
  where not (s = any (billing_private.api_key_scopes())) or not (s = any (billing.current_scopes())) limit 1;
  if v_bad is not null then
    perform billing.raise('BL422', 'scopes: "' || v_bad || '" is not a scope this operator can give to a key.', 'scopes');
  end if;
  if length(p_args->>'name') > 200 then
    perform billing.raise('BL422', 'name: at most 200 characters.', 'name');
  end if;
  return billing_private.api_key_insert(nullif(trim(p_args->>'name'), ''), p_args->>'prefix', p_args->>'key_hash', v_scopes);
end
$$;

create or replace function billing_api.api_keys_revoke(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_out jsonb;
begin
  perform billing.require_scope('keys:write');
  v_out := billing_private.api_key_revoke(p_args->>'id');
  if v_out is null then
    perform billing.raise('BL404', 'No API key ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

grant execute on function billing_private.session_credential(text) to billing_api;
grant execute on function billing_private.operator_sign_in_throttle(text, text) to billing_api;
grant execute on function billing_private.operator_password_candidates(text) to billing_api;
grant execute on function billing_private.operator_password_sign_in(text, text, text, interval) to billing_api;
revoke execute on function billing_private.operator_session_open(text, text, interval) from billing_api;
grant execute on function billing_private.operator_link_redeem(text, text, interval) to billing_api;
grant execute on function billing_private.operator_session_info(text) to billing_api;
grant execute on function billing_private.operator_session_close(text) to billing_api;
grant execute on function billing_private.operator_set_password(text, text) to billing_api;
grant execute on function billing_private.api_keys_page(text, integer) to billing_api;
grant execute on function billing_private.api_key_insert(text, text, text, text[]) to billing_api;
grant execute on function billing_private.api_key_revoke(text) to billing_api;
grant execute on function billing_private.api_key_scopes() to billing_api;
grant execute on function billing_private.operator_users_page(text, integer) to billing_api;
grant execute on function billing_private.operator_invite_here(text, text, text) to billing_api;
grant execute on function billing_private.operator_user_update(text, text, boolean) to billing_api;
grant execute on function billing_api.operators_list(jsonb) to billing_api;
grant execute on function billing_api.operators_invite(jsonb) to billing_api;
grant execute on function billing_api.operators_update(jsonb) to billing_api;
grant execute on function billing_api.api_keys_list(jsonb) to billing_api;
grant execute on function billing_api.api_keys_create(jsonb) to billing_api;
grant execute on function billing_api.api_keys_revoke(jsonb) to billing_api;
--! EndIncluded 15-operators.sql
--! Included 46-invoices.sql
-- Money: invoices and payment attempts (every charge is an invoice: checkout,
-- trial start, renewal, plan change, one-time purchase; every attempt to collect it
-- is a payment attempt), the sandbox's cards, renewals and dunning retries, immediate
-- plan changes paid before they apply, and Stripe invoices mirrored from invoice.*
-- events. The sums are CHECK constraints on the invoice row (its lines are a jsonb
-- array validated by billing.invoice_lines_valid), a finalized invoice is immutable,
-- and a unique index lets an invoice be paid once.
--
-- Access follows money (50-ledger.sql): a past_due subscription grants only while one
-- of its open invoices still has a retry scheduled (billing.subscription_retry_open);
-- the last failed retry ends the subscription (cancellation_reason payment_failed)
-- and the ledger revokes with reason payment_failed.

-- ---- invoices ---------------------------------------------------------------------------

-- Lines: [{type, description, amount_cents, period_start, period_end, plan_id?}].
-- plan lines charge (>= 0), discount lines credit (<= 0), proration lines either way.
-- plpgsql, not sql, here and below: these run in CHECK constraints on every invoice
-- row written, and a SQL function with a subquery cannot be inlined, so it was planned
-- again on every call (0.1 to 0.3 ms each); plpgsql keeps its plans for the session.
create or replace function billing.invoice_lines_valid(p_lines jsonb) returns boolean
  language plpgsql immutable parallel safe
as $$
begin
  if p_lines is null then
    return null;
  end if;
  if jsonb_typeof(p_lines) <> 'array' then
    return false;
  end if;
  return not exists (
    select 1 from jsonb_array_elements(p_lines) l
    where jsonb_typeof(l) <> 'object'
      or l->>'type' is null or l->>'type' not in ('plan', 'proration', 'discount')
      or jsonb_typeof(l->'description') <> 'string' or length(l->>'description') = 0
      or jsonb_typeof(l->'amount_cents') <> 'number' or (l->>'amount_cents') !~ '^-?[0-9]+$'
      or (l->>'type' = 'plan' and (l->>'amount_cents')::bigint < 0)
      or (l->>'type' = 'discount' and (l->>'amount_cents')::bigint > 0));
end
$$;

-- Sum of the lines of the given kinds (all when p_types is null).
create or replace function billing.invoice_lines_sum(p_lines jsonb, p_types text[]) returns bigint
  language plpgsql immutable parallel safe
as $$
begin
  return (select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
          from jsonb_array_elements(p_lines) l
          where p_types is null or l->>'type' = any (p_types));
end
$$;

create table if not exists billing.invoices (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('inv'),
  member_id text collate "C" not null,
  subscription_id text collate "C",
  purchase_id text collate "C",
  checkout_id text collate "C",
  status text not null check (status in ('draft', 'open', 'paid', 'void', 'uncollectible')),
  billing_reason text not null
    check (billing_reason in ('subscription_create', 'subscription_cycle', 'subscription_update', 'purchase')),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  lines jsonb not null default '[]' check (billing.invoice_lines_valid(lines)),
  subtotal_cents bigint not null,
  discount_cents bigint not null check (discount_cents >= 0),
  total_cents bigint not null check (total_cents >= 0),
  amount_paid_cents bigint not null default 0 check (amount_paid_cents >= 0),
  amount_refunded_cents bigint not null default 0 check (amount_refunded_cents >= 0),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  next_attempt_at timestamptz,
  period_start timestamptz,
  period_end timestamptz,
  paid_at timestamptz,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  provider_updated_at timestamptz,
  created_at timestamptz not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, subscription_id) references billing.subscriptions on delete cascade,
  foreign key (community_id, purchase_id) references billing.purchases on delete cascade,
  -- What it is for: one subscription or one purchase.
  constraint invoices_one_owner check (num_nonnulls(subscription_id, purchase_id) = 1),
  -- The sums: lines add up to the subtotal, the discount and the total.
  constraint invoices_subtotal_is_lines check (subtotal_cents = billing.invoice_lines_sum(lines, array['plan', 'proration'])),
  constraint invoices_discount_is_lines check (discount_cents = -billing.invoice_lines_sum(lines, array['discount'])),
  constraint invoices_total check (total_cents = subtotal_cents - discount_cents),
  -- Paid means paid in full, once, at a time; nothing else has money on it.
  constraint invoices_paid_in_full check ((status = 'paid') = (paid_at is not null)
    and (status = 'paid' or amount_paid_cents = 0)
    and (status <> 'paid' or amount_paid_cents = total_cents)),
  constraint invoices_refund_at_most_paid check (amount_refunded_cents <= amount_paid_cents),
  -- Only an open invoice is retried.
  constraint invoices_retry_only_open check (next_attempt_at is null or status = 'open'),
  constraint invoices_period check (period_end is null or period_start <= period_end)
);
create index if not exists invoices_member on billing.invoices (community_id, member_id, id);
create index if not exists invoices_subscription on billing.invoices (community_id, subscription_id, id);
create index if not exists invoices_status on billing.invoices (community_id, status, id);
create index if not exists invoices_retry on billing.invoices (community_id, next_attempt_at)
  where status = 'open' and next_attempt_at is not null;
create unique index if not exists invoices_provider_ref on billing.invoices (community_id, provider_ref)
  where provider_ref is not null;

alter table billing.invoices enable row level security;
alter table billing.invoices force row level security;
drop policy if exists tenant on billing.invoices;
create policy tenant on billing.invoices
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.invoices;
create policy owner_access on billing.invoices to current_user using (true) with check (true);
grant select on billing.invoices to billing_api;

-- A finalized invoice keeps its amounts and lines (Stripe: finalized invoices are
-- immutable); a paid, void or uncollectible one never returns to open.
create or replace function billing.tg_invoices__immutable() returns trigger
  language plpgsql
as $$
begin
  if old.status <> 'draft' and (new.lines is distinct from old.lines or new.subtotal_cents <> old.subtotal_cents
      or new.discount_cents <> old.discount_cents or new.total_cents <> old.total_cents
      or new.currency <> old.currency or new.member_id <> old.member_id
      or new.subscription_id is distinct from old.subscription_id or new.purchase_id is distinct from old.purchase_id) then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is finalized: its lines and amounts cannot change.';
  end if;
  if old.status in ('paid', 'void', 'uncollectible') and new.status <> old.status then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is ' || old.status || ' and cannot become ' || new.status || '.';
  end if;
  new.updated_at := now();
  return new;
end
$$;
drop trigger if exists _100_immutable on billing.invoices;
create trigger _100_immutable before update on billing.invoices
  for each row execute function billing.tg_invoices__immutable();

-- ---- payment attempts ------------------------------------------------------------------

create table if not exists billing.payment_attempts (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pay'),
  invoice_id text collate "C" not null,
  status text not null check (status in ('succeeded', 'failed')),
  amount_cents bigint not null check (amount_cents >= 0),
  failure_message text,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  attempted_at timestamptz not null,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade,
  constraint payment_attempts_failure_explained check ((status = 'failed') = (failure_message is not null))
);
-- Nothing is paid twice: one succeeded attempt per invoice.
create unique index if not exists payment_attempts_one_success on billing.payment_attempts (community_id, invoice_id)
  where status = 'succeeded';
create index if not exists payment_attempts_invoice on billing.payment_attempts (community_id, invoice_id, id);

alter table billing.payment_attempts enable row level security;
alter table billing.payment_attempts force row level security;
drop policy if exists tenant on billing.payment_attempts;
create policy tenant on billing.payment_attempts
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.payment_attempts;
create policy owner_access on billing.payment_attempts to current_user using (true) with check (true);
grant select on billing.payment_attempts to billing_api;

-- ---- the sandbox's cards -----------------------------------------------------------------

-- Whether a sandbox subscription's future charges decline (billing sandbox decline /
-- accept); no row: they succeed.
create table if not exists billing.sandbox_cards (
  community_id text collate "C" not null,
  subscription_id text collate "C" not null,
  declines boolean not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, subscription_id),
  foreign key (community_id, subscription_id) references billing.subscriptions on delete cascade
);
alter table billing.sandbox_cards enable row level security;
alter table billing.sandbox_cards force row level security;
drop policy if exists tenant on billing.sandbox_cards;
create policy tenant on billing.sandbox_cards
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.sandbox_cards;
create policy owner_access on billing.sandbox_cards to current_user using (true) with check (true);
grant select on billing.sandbox_cards to billing_api;

-- ---- JSON --------------------------------------------------------------------------------

create or replace function billing.invoice_json(p_inv billing.invoices) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_inv.id,
    'status', p_inv.status,
    'billing_reason', p_inv.billing_reason,
    'member_id', p_inv.member_id,
    'subscription_id', p_inv.subscription_id,
    'purchase_id', p_inv.purchase_id,
    'currency', p_inv.currency,
    'subtotal_cents', p_inv.subtotal_cents,
    'discount_cents', p_inv.discount_cents,
    'total_cents', p_inv.total_cents,
    'amount_paid_cents', p_inv.amount_paid_cents,
    'amount_refunded_cents', p_inv.amount_refunded_cents,
    'lines', p_inv.lines,
    'period_start', billing.iso(p_inv.period_start),
    'period_end', billing.iso(p_inv.period_end),
    'attempt_count', p_inv.attempt_count,
    'next_attempt_at', billing.iso(p_inv.next_attempt_at),
    'paid_at', billing.iso(p_inv.paid_at),
    'created_at', billing.iso(p_inv.created_at))
$$;

-- ---- events and the ledger ------------------------------------------------------------------

-- invoice.created when it is written; invoice.paid when it becomes paid;
-- invoice.payment_failed for each failed attempt. A change of a subscription's open
-- invoice (paid, retry scheduled or given up) can change its access: the member's
-- ledger is refreshed with the event as trigger.
create or replace function billing.tg_invoices__outbox_and_ledger() returns trigger
  language plpgsql
as $$
declare
  v_type text;
  v_event_id text;
  v_reason text;
begin
  if tg_op = 'INSERT' then
    v_type := 'invoice.created';
  elsif new.status = 'paid' and old.status <> 'paid' then
    v_type := 'invoice.paid';
  elsif new.attempt_count > old.attempt_count and new.status <> 'paid' then
    v_type := 'invoice.payment_failed';
  end if;
  if v_type is not null then
    v_event_id := billing.emit_event(new.community_id, v_type, jsonb_build_object(
      'invoice', billing.invoice_json(new),
      'previous_attributes', case when tg_op = 'UPDATE' then billing.jsonb_changed(
        billing.invoice_json(old) - 'lines', billing.invoice_json(new)) end));
  end if;
  -- Only a past_due subscription's access depends on its invoices (sandbox dunning
  -- changes the subscription itself first; this serves mirrored Stripe invoices).
  if new.subscription_id is not null and (tg_op = 'INSERT' or new.status <> old.status
      or new.next_attempt_at is distinct from old.next_attempt_at)
     and exists (select 1 from billing.subscriptions s where s.community_id = new.community_id
                 and s.id = new.subscription_id and s.status = 'past_due') then
    v_reason := case when new.status = 'paid' then 'invoice_paid'
                     when new.status = 'open' and new.next_attempt_at is not null then 'payment_retry_scheduled'
                     else 'payment_failed' end;
    perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;
drop trigger if exists _500_outbox_and_ledger on billing.invoices;
create trigger _500_outbox_and_ledger after insert or update on billing.invoices
  for each row execute function billing.tg_invoices__outbox_and_ledger();

-- Which sources grant (the rule of 50-ledger.sql, with money): a past_due subscription
-- only while one of its open invoices still has a retry scheduled.
create or replace function billing.subscription_retry_open(p_community_id text, p_subscription_id text) returns boolean
  language sql stable
as $$
  select exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is not null)
$$;

-- An open invoice of the subscription has no retry left (a cancelling subscription
-- whose renewal failed keeps access only while a retry is scheduled).
create or replace function billing.subscription_unpaid(p_community_id text, p_subscription_id text) returns boolean
  language sql stable
as $$
  select exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is null)
$$;

-- ---- writing and collecting invoices ------------------------------------------------------------

-- Periods keep the billing anchor: the end of the period after p_end is the first
-- anchor + n intervals later than p_end (31 Jan + 1 month = 28 Feb, + 2 months = 31 Mar).
-- Calendar arithmetic in UTC, whatever the session's TimeZone: 31 Jan + 1 month is
-- 28 Feb at the same UTC time of day on every server.
create or replace function billing.add_utc(p_ts timestamptz, p_interval interval) returns timestamptz
  language sql immutable parallel safe
as $$ select ((p_ts at time zone 'UTC') + p_interval) at time zone 'UTC' $$;

create or replace function billing.next_period_end(p_anchor timestamptz, p_interval text, p_end timestamptz)
  returns timestamptz language plpgsql stable
as $$
declare
  v_months integer := case p_interval when 'month' then 1 when 'year' then 12 end;
  v_n integer;
begin
  if v_months is null then
    return null;
  end if;
  v_n := greatest(1, ((extract(year from p_end at time zone 'UTC') - extract(year from p_anchor at time zone 'UTC')) * 12
    + extract(month from p_end at time zone 'UTC') - extract(month from p_anchor at time zone 'UTC'))::integer / v_months);
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) > p_end and v_n > 1 loop
    v_n := v_n - 1;
  end loop;
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) <= p_end loop
    v_n := v_n + 1;
  end loop;
  return billing.add_utc(p_anchor, make_interval(months => v_months * v_n));
end
$$;

create or replace function billing.plan_line(p_plan billing.plans, p_amount bigint, p_start timestamptz,
  p_end timestamptz, p_description text default null) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('type', 'plan',
    'description', coalesce(p_description, coalesce(t.name, 'Plan') || coalesce(' (' || p_plan.name || ')', '')
      || case p_plan.interval when 'month' then ', 1 month' when 'year' then ', 1 year' else '' end),
    'amount_cents', p_amount, 'plan_id', p_plan.id,
    'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
  from (select 1) one
  left join billing.tiers t on t.community_id = p_plan.community_id and t.id = p_plan.tier_id
$$;

create or replace function billing.discount_line(p_code text, p_amount bigint, p_start timestamptz, p_end timestamptz)
  returns jsonb language sql immutable
as $$
  select jsonb_build_object('type', 'discount', 'description', 'Discount ' || coalesce(p_code, ''),
    'amount_cents', -p_amount, 'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
$$;

-- The discount a subscription's discount code gives on an invoice for a period
-- starting at p_start: once on the first invoice that charges, repeating while the
-- period starts within duration_months of the subscription's start, forever always.
create or replace function billing.subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint,
  p_start timestamptz) returns bigint
  language plpgsql stable
as $$
declare
  v_d billing.discount_codes;
begin
  if p_sub.discount_id is null or p_amount <= 0 then
    return 0;
  end if;
  select * into v_d from billing.discount_codes d where d.community_id = p_sub.community_id and d.id = p_sub.discount_id;
  if v_d.id is null then
    return 0;
  end if;
  if v_d.duration = 'once' and exists (select 1 from billing.invoices i
      where i.community_id = p_sub.community_id and i.subscription_id = p_sub.id and i.discount_cents > 0) then
    return 0;
  elsif v_d.duration = 'repeating'
      and p_start >= billing.add_utc(p_sub.created_at, make_interval(months => coalesce(v_d.duration_months, 1))) then
    return 0;
  end if;
  return least(p_amount, case v_d.value_type when 'percent' then round(p_amount * v_d.percent_off / 100)::bigint
                              else coalesce(v_d.amount_off_cents, 0) end);
end
$$;

-- Writes a finalized (open) invoice from its lines; the sums follow from the lines.
create or replace function billing.invoice_open(p_sub_id text, p_pur_id text, p_member_id text, p_reason text,
  p_currency text, p_lines jsonb, p_start timestamptz, p_end timestamptz, p_provider text, p_at timestamptz,
  p_checkout_id text default null, p_provider_ref text default null)
  returns billing.invoices language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_subtotal bigint := billing.invoice_lines_sum(p_lines, array['plan', 'proration']);
  v_discount bigint := -billing.invoice_lines_sum(p_lines, array['discount']);
begin
  insert into billing.invoices (community_id, member_id, subscription_id, purchase_id, checkout_id, status,
    billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, period_start, period_end,
    provider, provider_ref, created_at)
  values (billing.current_community_id(), p_member_id, p_sub_id, p_pur_id, p_checkout_id, 'open', p_reason,
    p_currency, p_lines, v_subtotal, v_discount, v_subtotal - v_discount, p_start, p_end, p_provider,
    p_provider_ref, p_at)
  returning * into v_inv;
  return v_inv;
end
$$;

-- Records a successful collection: the attempt, then the invoice paid in full.
create or replace function billing.invoice_mark_paid(p_inv billing.invoices, p_at timestamptz,
  p_provider_ref text default null) returns billing.invoices
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
begin
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, provider_ref, attempted_at)
  values (p_inv.community_id, p_inv.id, 'succeeded', p_inv.total_cents, p_inv.provider, p_provider_ref, p_at);
  update billing.invoices i set status = 'paid', amount_paid_cents = i.total_cents, paid_at = p_at,
    attempt_count = i.attempt_count + 1, next_attempt_at = null
  where i.community_id = p_inv.community_id and i.id = p_inv.id
  returning * into v_inv;
  return v_inv;
end
$$;

-- Records a failed collection and schedules the next retry (null: none left).
create or replace function billing.invoice_mark_failed(p_inv billing.invoices, p_at timestamptz,
  p_message text, p_next_attempt_at timestamptz) returns billing.invoices
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
begin
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, failure_message, provider, attempted_at)
  values (p_inv.community_id, p_inv.id, 'failed', p_inv.total_cents, p_message, p_inv.provider, p_at);
  update billing.invoices i set attempt_count = i.attempt_count + 1, next_attempt_at = p_next_attempt_at
  where i.community_id = p_inv.community_id and i.id = p_inv.id
  returning * into v_inv;
  return v_inv;
end
$$;

-- The sandbox's card for a subscription: true when the charge goes through.
create or replace function billing.sandbox_charge_succeeds(p_inv billing.invoices) returns boolean
  language sql stable
as $$
  select p_inv.total_cents = 0 or not coalesce((select c.declines from billing.sandbox_cards c
    where c.community_id = p_inv.community_id and c.subscription_id = p_inv.subscription_id), false)
$$;

-- When the retry after failed attempt number p_attempt is due (null: no retry left).
create or replace function billing.dunning_next_attempt(p_community_id text, p_due timestamptz, p_attempt integer)
  returns timestamptz language sql stable
as $$
  select p_due + make_interval(days => (c.dunning->'retry_days'->>(p_attempt - 1))::integer)
  from billing.communities c where c.id = p_community_id
$$;

-- Collects an open sandbox invoice at p_at: paid, or failed with the next retry
-- scheduled by the community's dunning settings. Returns the invoice.
create or replace function billing.sandbox_collect(p_inv billing.invoices, p_at timestamptz) returns billing.invoices
  language plpgsql volatile
as $$
begin
  if billing.sandbox_charge_succeeds(p_inv) then
    return billing.invoice_mark_paid(p_inv, p_at, 'sandbox_ch_' || substr(md5(p_inv.id || p_at::text), 1, 16));
  end if;
  return billing.invoice_mark_failed(p_inv, p_at, 'Your card was declined (sandbox).',
    billing.dunning_next_attempt(p_inv.community_id, p_inv.created_at, p_inv.attempt_count + 1));
end
$$;

-- ---- sandbox time: renewals and retries -------------------------------------------------------

-- Moves one sandbox subscription through everything due at p_now, in time order:
-- a cancelling one ends at its period end; an active or trialing one renews (the
-- period keeps its anchor; a scheduled switch applies) with an invoice collected at
create or replace function billing.subscription_advance(p_sub_id text, p_now timestamptz) returns integer
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_plan billing.plans;
  v_inv billing.invoices;
  v_at timestamptz;
  v_end timestamptz;
  v_anchor timestamptz;
  v_discount bigint;
  v_code text;
  v_lines jsonb;
  v_credit bigint;
  v_steps integer := 0;
begin
  loop
    select * into v_sub from billing.subscriptions s
    where s.community_id = billing.current_community_id() and s.id = p_sub_id for update;
    exit when v_sub.id is null or v_steps >= 1000;
    -- A retry that is due comes first: past_due, or cancelling (cancelled at period
    -- end while a renewal was still unpaid; retries go on until the period ends).
    v_inv := null;
    if v_sub.status in ('past_due', 'cancelling') then
      select * into v_inv from billing.invoices i
      where i.community_id = v_sub.community_id and i.subscription_id = v_sub.id and i.status = 'open'
        and i.next_attempt_at is not null
      order by i.next_attempt_at limit 1 for update;
    end if;
    if v_inv.id is not null and v_inv.next_attempt_at <= p_now
       and (v_sub.status = 'past_due' or v_inv.next_attempt_at < v_sub.current_period_end) then
      v_at := v_inv.next_attempt_at;
      -- The subscription changes first, so access never flickers: a paid retry makes
      -- it active before its invoice stops being retried; a last failed retry ends it
      -- (the ledger revokes with reason payment_failed) before the invoice is given up.
      if billing.sandbox_charge_succeeds(v_inv) then
        update billing.subscriptions s set status = case when s.status = 'past_due' then 'active' else s.status end,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
        perform billing.sandbox_collect(v_inv, v_at);
      elsif billing.dunning_next_attempt(v_inv.community_id, v_inv.created_at, v_inv.attempt_count + 1) is not null then
        perform billing.sandbox_collect(v_inv, v_at);
      else
        -- The last retry failed: the community's final action (cancel).
        update billing.subscriptions s set status = 'cancelled', cancelled_at = v_at,
          cancellation_reason = 'payment_failed', cancel_at = null, scheduled_plan_id = null, scheduled_at = null,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
        v_inv := billing.sandbox_collect(v_inv, v_at);
        update billing.invoices i set status = 'uncollectible'
        where i.community_id = v_inv.community_id and i.id = v_inv.id;
      end if;
    elsif v_sub.status = 'past_due' then
      exit;
    elsif v_sub.status = 'paused' then
      -- Resumes by itself at paused_until (no invoices while paused).
      exit when v_sub.paused_until is null or v_sub.paused_until > p_now;
      perform billing.subscription_resume_at(v_sub.id, v_sub.paused_until);
    elsif v_sub.status in ('active', 'trialing', 'cancelling') and v_sub.current_period_end <= p_now then
      v_at := v_sub.current_period_end;
      if v_sub.status = 'cancelling' then
        update billing.subscriptions s set status = 'cancelled', cancelled_at = v_at, updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
      else
        select * into v_plan from billing.plans p
        where p.community_id = v_sub.community_id and p.id = coalesce(v_sub.scheduled_plan_id, v_sub.plan_id);
        -- A trial's end, or a scheduled switch to another interval, starts a new anchor.
        v_anchor := case when v_sub.status = 'trialing' or v_sub.billing_anchor is null
                           or v_plan.id <> v_sub.plan_id and v_plan.interval is distinct from
                             (select p.interval from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id)
                         then v_at else v_sub.billing_anchor end;
        v_end := billing.next_period_end(v_anchor, v_plan.interval, v_at);
        v_discount := billing.subscription_discount_cents(v_sub, v_plan.amount_cents, v_at);
        v_lines := jsonb_build_array(billing.plan_line(v_plan, v_plan.amount_cents, v_at, v_end));
        if v_discount > 0 then
          select d.code into v_code from billing.discount_codes d where d.community_id = v_sub.community_id and d.id = v_sub.discount_id;
          v_lines := v_lines || billing.discount_line(v_code, v_discount, v_at, v_end);
        end if;
        -- Credit left from a plan change pays what it can of this invoice.
        v_credit := least(v_sub.credit_cents, v_plan.amount_cents - v_discount);
        if v_credit > 0 then
          v_lines := v_lines || jsonb_build_object('type', 'proration', 'description', 'Credit from an earlier plan change',
            'amount_cents', -v_credit, 'period_start', billing.iso(v_at), 'period_end', billing.iso(v_end));
        end if;
        v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_cycle', v_plan.currency,
          v_lines, v_at, v_end, v_sub.provider, v_at);
        v_inv := billing.sandbox_collect(v_inv, v_at);
        update billing.subscriptions s set
          status = case when v_inv.status = 'paid' then 'active' else 'past_due' end,
          plan_id = v_plan.id, scheduled_plan_id = null, scheduled_at = null,
          current_period_start = v_at, current_period_end = v_end, billing_anchor = v_anchor,
          credit_cents = s.credit_cents - greatest(v_credit, 0),
          trial_end = case when s.status = 'trialing' then coalesce(s.trial_end, v_at) else s.trial_end end,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
      end if;
    else
      exit;
    end if;
    v_steps := v_steps + 1;
  end loop;
  return v_steps;
end
$$;
-- ---- the sandbox's decline switch (CLI: billing sandbox decline / accept) -------------------------

create or replace function billing.sandbox_set_card(p_subscription_id text, p_declines boolean) returns jsonb
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || p_subscription_id || '.');
  elsif v_sub.provider <> 'sandbox' then
    perform billing.raise('BL409', 'Subscription ' || p_subscription_id || ' is not a sandbox subscription.');
  end if;
  insert into billing.sandbox_cards (community_id, subscription_id, declines) values (v_sub.community_id, v_sub.id, p_declines)
  on conflict (community_id, subscription_id) do update set declines = excluded.declines, updated_at = now();
  return jsonb_build_object('subscription_id', v_sub.id, 'declines', p_declines);
end
$$;

-- ---- the read API ---------------------------------------------------------------------------------

-- GET /v1/invoices: newest first, keyset by id; filters member_id, subscription_id, status.
create or replace function billing_api.invoices_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('invoices:read');
  select array_agg(i.id order by i.id desc), array_agg(billing.invoice_json(i) order by i.id desc)
    into v_ids, v_items
  from (select * from billing.invoices i
        where i.community_id = billing.current_community_id()
          and i.id < coalesce(p_args->>'cursor', chr(1114111))
          and (p_args->>'member_id' is null or i.member_id = p_args->>'member_id')
          and (p_args->>'subscription_id' is null or i.subscription_id = p_args->>'subscription_id')
          and (p_args->>'status' is null or i.status = p_args->>'status')
        order by i.id desc limit v_limit + 1) i;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.invoices_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
begin
  perform billing.require_scope('invoices:read');
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  return billing.invoice_json(v_inv);
end
$$;
-- ---- Stripe: invoices mirrored from invoice.* events ------------------------------------------

-- Applies a Stripe invoice (already mapped to our terms by the adapter) to the
-- invoice with that provider_ref, creating it on first sight. p_state:
--   provider_ref, subscription_ref, status, billing_reason, currency, lines [{type,
--   description, amount_cents, period_start, period_end}], total_cents,
--   attempt_count, next_attempt_at, paid_at, created_at, period_start, period_end,
--   provider_updated_at, failed (true for invoice.payment_failed), payment_ref.
-- A finalized invoice keeps its lines; a paid, void or uncollectible one keeps its
-- status; a state older than the last one applied changes nothing. Returns the
-- invoice id, or null when no subscription has that subscription_ref yet.
create or replace function billing.apply_provider_invoice(p_state jsonb) returns text
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_inv billing.invoices;
  v_at timestamptz := (p_state->>'provider_updated_at')::timestamptz;
  v_status text := p_state->>'status';
  v_lines jsonb := coalesce(p_state->'lines', '[]');
  v_gap bigint;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_state->>'subscription_ref';
  if v_sub.id is null then
    return null;
  end if;
  select * into v_inv from billing.invoices i
  where i.community_id = v_sub.community_id and i.provider_ref = p_state->>'provider_ref' for update;
  if v_inv.id is null then
    -- What the lines do not explain (Stripe's discounts, or tax) becomes one line, so
    -- the lines always add up to Stripe's total.
    v_gap := (p_state->>'total_cents')::bigint - billing.invoice_lines_sum(v_lines, null);
    if v_gap < 0 then
      v_lines := v_lines || jsonb_build_object('type', 'discount', 'description', 'Discount', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    elsif v_gap > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'plan', 'description', 'Tax and other charges', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id,
      coalesce(nullif(p_state->>'billing_reason', ''), 'subscription_cycle'), p_state->>'currency', v_lines,
      (p_state->>'period_start')::timestamptz, (p_state->>'period_end')::timestamptz, 'stripe',
      coalesce((p_state->>'created_at')::timestamptz, v_at), null, p_state->>'provider_ref');
    update billing.invoices i set provider_updated_at = v_at where i.community_id = v_inv.community_id and i.id = v_inv.id
    returning * into v_inv;
  elsif v_inv.status in ('paid', 'void', 'uncollectible')
        or (v_inv.provider_updated_at is not null and v_at < v_inv.provider_updated_at) then
    return v_inv.id;
  end if;
  if v_status = 'paid' then
    perform billing.invoice_mark_paid(v_inv, coalesce((p_state->>'paid_at')::timestamptz, v_at), p_state->>'payment_ref');
  elsif coalesce((p_state->>'failed')::boolean, false) then
    perform billing.invoice_mark_failed(v_inv, v_at, 'The payment failed (Stripe).', (p_state->>'next_attempt_at')::timestamptz);
  elsif v_status in ('void', 'uncollectible') then
    update billing.invoices i set status = v_status, next_attempt_at = null
    where i.community_id = v_inv.community_id and i.id = v_inv.id;
  elsif p_state ? 'next_attempt_at' then
    update billing.invoices i set next_attempt_at = (p_state->>'next_attempt_at')::timestamptz
    where i.community_id = v_inv.community_id and i.id = v_inv.id
      and i.next_attempt_at is distinct from (p_state->>'next_attempt_at')::timestamptz;
  end if;
  update billing.invoices i set provider_updated_at = greatest(i.provider_updated_at, v_at)
  where i.community_id = v_inv.community_id and i.id = v_inv.id;
  return v_inv.id;
end
$$;

-- Stripe's unpaid: retries are over, so the subscription's open invoices have no
-- retry left (and a past_due subscription no access).
create or replace function billing.provider_retries_exhausted(p_subscription_ref text) returns void
  language sql volatile
as $$
  update billing.invoices i set next_attempt_at = null
  from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_subscription_ref
    and i.community_id = s.community_id and i.subscription_id = s.id and i.status = 'open'
    and i.next_attempt_at is not null
$$;

-- ---- plan changes paid before they apply ---------------------------------------------------------



-- What an immediate switch of p_sub from plan p_old to p_new at p_now charges (the
-- proration rule below, written once: subscription_switch_now applies it and the
-- portal's preview shows it). credit: the unused time of the old plan; charge: the new
-- plan over the rest of the period, or a whole new period when the interval changes;
-- applied: the part of the credit set against the charge. Trialing: nothing.
create or replace function billing.switch_proration(p_sub billing.subscriptions, p_old billing.plans, p_new billing.plans,
  p_now timestamptz, out new_period boolean, out period_start timestamptz, out period_end timestamptz,
  out charge_cents bigint, out credit_cents bigint, out applied_cents bigint)
  language plpgsql stable
as $$
declare
  v_frac numeric;
begin
  v_frac := case when p_sub.current_period_end is null or p_sub.current_period_end <= p_sub.current_period_start then 0
                 else greatest(0, least(1, extract(epoch from (p_sub.current_period_end - p_now))
                   / extract(epoch from (p_sub.current_period_end - p_sub.current_period_start)))) end;
  new_period := p_sub.status <> 'trialing' and p_new.interval is distinct from p_old.interval;
  period_start := case when new_period then p_now else p_sub.current_period_start end;
  period_end := case when new_period then billing.add_utc(p_now, billing.plan_interval(p_new.interval)) else p_sub.current_period_end end;
  if p_sub.status = 'trialing' then
    charge_cents := 0;
    credit_cents := 0;
  else
    charge_cents := case when new_period then p_new.amount_cents else round(p_new.amount_cents * v_frac)::bigint end;
    credit_cents := round(p_old.amount_cents * v_frac)::bigint;
  end if;
  applied_cents := least(credit_cents, charge_cents);
end
$$;

-- An immediate switch (same tier or upgrade) of the current community's subscription
-- to p_plan_id, validated again here because the API role may call it. The
-- proration: credit for the unused time of the old plan, charge for the new plan over
-- the rest of the period; a change of interval starts a new period now (charge: the
-- whole new period). Credit beyond the charge is kept (credit_cents) for the next
-- renewals. A sandbox subscription's proration is invoiced and collected first, and
-- the switch applies only when that invoice is paid: a decline raises BLPAY
-- (payment_failed) and changes nothing. While trialing nothing is charged.
-- Stripe subscriptions: the plan changes here and Stripe invoices the proration (its
-- invoice.* events are mirrored), refused by the handler if Stripe cannot collect.
create or replace function billing_private.subscription_switch_now(p_subscription_id text, p_plan_id text)
  returns billing.subscriptions language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_now timestamptz := billing.now();
  v_new_period boolean;
  v_start timestamptz;
  v_end timestamptz;
  v_charge bigint;
  v_credit bigint;
  v_applied bigint;
  v_lines jsonb;
  v_inv billing.invoices;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id for update;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_subscription_id, '') || '.');
  end if;
  perform billing.require_switchable(v_sub);
  if not exists (select 1 from jsonb_each(billing.switch_options(v_sub)) e(g, arr), jsonb_array_elements(arr) o
                 where g in ('same_tier', 'upgrades') and o->>'plan_id' = p_plan_id) then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_plan_id, '') || ' is not an immediate switch option of this subscription.', 'plan_id');
  end if;
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_plan_id;
  select q.new_period, q.period_start, q.period_end, q.charge_cents, q.credit_cents, q.applied_cents
    into v_new_period, v_start, v_end, v_charge, v_credit, v_applied
  from billing.switch_proration(v_sub, v_old, v_new, v_now) q;
  if v_sub.provider = 'sandbox' and v_charge > 0 then
    v_lines := jsonb_build_array(jsonb_build_object('type', 'proration',
      'description', 'Remaining time on ' || coalesce(v_new.name, v_new.id), 'amount_cents', v_charge,
      'plan_id', v_new.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_end)));
    if v_applied > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'proration',
        'description', 'Unused time on ' || coalesce(v_old.name, v_old.id), 'amount_cents', -v_applied,
        'plan_id', v_old.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_sub.current_period_end));
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_update', v_new.currency, v_lines,
      v_now, v_end, 'sandbox', v_now);
    if not billing.sandbox_charge_succeeds(v_inv) then
      raise exception using errcode = 'BLPAY',
        message = 'The payment of ' || v_inv.total_cents || ' ' || v_inv.currency
          || ' for this plan change was declined; the subscription is unchanged.';
    end if;
    perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
  end if;
  update billing.subscriptions s set plan_id = v_new.id, scheduled_plan_id = null, scheduled_at = null,
    current_period_start = v_start, current_period_end = v_end,
    billing_anchor = case when v_new_period then v_start else s.billing_anchor end,
    credit_cents = s.credit_cents + case when s.provider = 'sandbox' then v_credit - v_applied else 0 end,
    proration_credit_cents = v_credit, proration_charge_cents = v_charge, prorated_at = v_now, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;

-- ---- grants (execute is opt-in: 00-foundation.sql) --------------------------------------------------
-- The API role reads invoices, and its writes fire triggers and views that call these
-- with its rights; everything that writes money (invoice_open, the mark_* functions,
-- apply_due, apply_provider_invoice, sandbox_set_card) stays owner-only.
grant execute on function billing.invoice_lines_valid(jsonb) to billing_api;
grant execute on function billing.add_utc(timestamptz, interval) to billing_api;
grant execute on function billing.invoice_lines_sum(jsonb, text[]) to billing_api;
grant execute on function billing.invoice_json(billing.invoices) to billing_api;
grant execute on function billing.subscription_retry_open(text, text) to billing_api;
grant execute on function billing.subscription_unpaid(text, text) to billing_api;
grant execute on function billing.subscription_discount_cents(billing.subscriptions, bigint, timestamptz) to billing_api;
grant execute on function billing_api.invoices_list(jsonb) to billing_api;
grant execute on function billing_api.invoices_get(jsonb) to billing_api;
-- An immediate plan change: SECURITY DEFINER, it re-validates the option itself.
grant execute on function billing_private.subscription_switch_now(text, text) to billing_api;
grant execute on function billing.switch_proration(billing.subscriptions, billing.plans, billing.plans, timestamptz) to billing_api;

-- ---- refunds (POST /v1/invoices/{id}/refunds; Stripe charge.refunded) --------------------------

create table if not exists billing.refunds (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('re'),
  invoice_id text collate "C" not null,
  amount_cents bigint not null check (amount_cents > 0),
  revoke_access boolean not null default false,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  created_at timestamptz not null,
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade
);
create index if not exists refunds_invoice on billing.refunds (community_id, invoice_id, id);
-- A refund made in Stripe's dashboard arrives once, whatever the number of events.
create unique index if not exists refunds_provider_ref on billing.refunds (community_id, provider_ref) where provider_ref is not null;
alter table billing.refunds enable row level security;
alter table billing.refunds force row level security;
drop policy if exists tenant on billing.refunds;
create policy tenant on billing.refunds
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.refunds;
create policy owner_access on billing.refunds to current_user using (true) with check (true);
grant select on billing.refunds to billing_api;

-- ---- disputes (Stripe charge.dispute.*; billing sandbox dispute) ---------------------------------

create table if not exists billing.disputes (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('dp'),
  invoice_id text collate "C" not null,
  amount_cents bigint not null check (amount_cents >= 0),
  status text not null check (status in ('needs_response', 'under_review', 'won', 'lost')),
  reason text,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  created_at timestamptz not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade
);
create index if not exists disputes_invoice on billing.disputes (community_id, invoice_id);
create unique index if not exists disputes_provider_ref on billing.disputes (community_id, provider_ref) where provider_ref is not null;
alter table billing.disputes enable row level security;
alter table billing.disputes force row level security;
drop policy if exists tenant on billing.disputes;
create policy tenant on billing.disputes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.disputes;
create policy owner_access on billing.disputes to current_user using (true) with check (true);
grant select on billing.disputes to billing_api;

create or replace function billing.refund_json(p_re billing.refunds) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_re.id, 'invoice_id', p_re.invoice_id, 'amount_cents', p_re.amount_cents,
    'revoke_access', p_re.revoke_access, 'created_at', billing.iso(p_re.created_at))
$$;

create or replace function billing.dispute_json(p_dp billing.disputes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_dp.id, 'invoice_id', p_dp.invoice_id, 'amount_cents', p_dp.amount_cents,
    'status', p_dp.status, 'reason', p_dp.reason, 'created_at', billing.iso(p_dp.created_at))
$$;

-- Ends what an invoice paid for, at once: its subscription is cancelled now, its
-- purchase refunded or disputed. The ledger then revokes (reasons refunded /
-- disputed for subscriptions; purchase_refunded / purchase_updated for purchases).
create or replace function billing.invoice_end_access(p_inv billing.invoices, p_cause text) returns void
  language plpgsql volatile
as $$
begin
  if p_inv.subscription_id is not null then
    update billing.subscriptions s set status = 'cancelled', cancelled_at = billing.now(),
      cancellation_reason = case p_cause when 'disputed' then 'payment_disputed' else 'refunded' end,
      cancel_at = null, scheduled_plan_id = null, scheduled_at = null, updated_at = now()
    where s.community_id = p_inv.community_id and s.id = p_inv.subscription_id and s.status <> 'cancelled';
  else
    update billing.purchases pu set status = case p_cause when 'disputed' then 'disputed' else 'refunded' end
    where pu.community_id = p_inv.community_id and pu.id = p_inv.purchase_id and pu.status = 'completed';
  end if;
end
$$;

-- Records a refund of a paid invoice (all that is left to refund when p_amount is
-- null): amount_refunded_cents never exceeds amount_paid_cents (a constraint), and a
-- provider refund already recorded (same provider_ref) is not counted twice. With
-- p_revoke the covered subscription or purchase ends now. Returns {invoice, refund}.
create or replace function billing.invoice_record_refund(p_invoice_id text, p_amount bigint, p_revoke boolean,
  p_provider_ref text default null) returns jsonb
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_re billing.refunds;
  v_left bigint;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_invoice_id for update;
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || coalesce(p_invoice_id, '') || '.');
  end if;
  if p_provider_ref is not null then
    select * into v_re from billing.refunds r where r.community_id = v_inv.community_id and r.provider_ref = p_provider_ref;
    if v_re.id is not null then
      return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re), 'duplicate', true);
    end if;
  end if;
  if v_inv.status <> 'paid' then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is ' || v_inv.status || ': only a paid invoice can be refunded.');
  end if;
  v_left := v_inv.amount_paid_cents - v_inv.amount_refunded_cents;
  if v_left <= 0 then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is already fully refunded.');
  elsif p_amount is not null and (p_amount <= 0 or p_amount > v_left) then
    perform billing.raise('BL422', 'amount_cents must be between 1 and ' || v_left || ', what is left to refund on invoice '
      || v_inv.id || '.', 'amount_cents');
  end if;
  insert into billing.refunds (community_id, invoice_id, amount_cents, revoke_access, provider, provider_ref, created_at)
  values (v_inv.community_id, v_inv.id, coalesce(p_amount, v_left), coalesce(p_revoke, false), v_inv.provider, p_provider_ref, billing.now())
  returning * into v_re;
  update billing.invoices i set amount_refunded_cents = i.amount_refunded_cents + v_re.amount_cents
  where i.community_id = v_inv.community_id and i.id = v_inv.id returning * into v_inv;
  if coalesce(p_revoke, false) then
    perform billing.invoice_end_access(v_inv, 'refunded');
  end if;
  perform billing.emit_event(v_inv.community_id, 'invoice.refunded', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re), 'duplicate', false);
end
$$;

-- POST /v1/invoices/{id}/refunds, the API's door (SECURITY DEFINER: the API role
-- writes no money table itself). p_provider_ref: the provider's refund id, when the
-- handler has already refunded through Stripe.
create or replace function billing_private.invoice_refund(p_invoice_id text, p_amount bigint, p_revoke boolean,
  p_provider_ref text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('invoices:write');
  return billing.invoice_record_refund(p_invoice_id, p_amount, p_revoke, p_provider_ref);
end
$$;

-- What the refund handler needs before calling the provider: the invoice, what is
-- left to refund and the provider's payment reference.
create or replace function billing_api.invoice_refund_prepare(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
begin
  perform billing.require_scope('invoices:write');
  select * into v_inv from billing.invoices i where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  return jsonb_build_object('invoice_id', v_inv.id, 'provider', v_inv.provider, 'status', v_inv.status,
    'currency', v_inv.currency, 'left_cents', v_inv.amount_paid_cents - v_inv.amount_refunded_cents,
    'payment_ref', (select a.provider_ref from billing.payment_attempts a
      where a.community_id = v_inv.community_id and a.invoice_id = v_inv.id and a.status = 'succeeded'));
end
$$;

create or replace function billing_api.invoice_refund(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.invoice_refund(p_args->>'id', (p_args->>'amount_cents')::bigint,
    coalesce((p_args->>'revoke_access')::boolean, false), p_args->>'provider_ref');
end
$$;

-- A dispute opened against an invoice's payment (Stripe charge.dispute.created;
-- billing sandbox dispute): the covered access ends at once (reason disputed). A
-- dispute that is later won restores nothing by itself (see docs/decisions.md).
create or replace function billing.invoice_record_dispute(p_invoice_id text, p_amount bigint, p_status text,
  p_reason text, p_provider_ref text) returns jsonb
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_dp billing.disputes;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_invoice_id for update;
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || coalesce(p_invoice_id, '') || '.');
  elsif v_inv.status <> 'paid' then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is ' || v_inv.status || ': only a paid invoice can be disputed.');
  end if;
  if p_provider_ref is not null then
    select * into v_dp from billing.disputes d where d.community_id = v_inv.community_id and d.provider_ref = p_provider_ref for update;
  elsif exists (select 1 from billing.disputes d where d.community_id = v_inv.community_id and d.invoice_id = v_inv.id) then
    -- A payment is disputed once (the sandbox's disputes carry no provider id to tell them apart).
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is already disputed.');
  end if;
  if v_dp.id is not null then
    -- Later news of the same dispute: its status only.
    update billing.disputes d set status = coalesce(p_status, d.status), updated_at = now()
    where d.community_id = v_dp.community_id and d.id = v_dp.id returning * into v_dp;
    return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', true);
  end if;
  insert into billing.disputes (community_id, invoice_id, amount_cents, status, reason, provider, provider_ref, created_at)
  values (v_inv.community_id, v_inv.id, coalesce(p_amount, v_inv.amount_paid_cents), coalesce(p_status, 'needs_response'),
    p_reason, v_inv.provider, p_provider_ref, billing.now())
  returning * into v_dp;
  perform billing.invoice_end_access(v_inv, 'disputed');
  perform billing.emit_event(v_inv.community_id, 'invoice.disputed', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', false);
end
$$;

-- The invoice a Stripe charge or payment intent paid (refund and dispute events name those).
create or replace function billing.invoice_by_payment(p_payment_ref text) returns text
  language sql stable
as $$
  select coalesce(
    (select a.invoice_id from billing.payment_attempts a
     where a.community_id = billing.current_community_id() and a.provider_ref = p_payment_ref and a.status = 'succeeded' limit 1),
    (select i.id from billing.invoices i join billing.purchases pu on pu.community_id = i.community_id and pu.id = i.purchase_id
     where i.community_id = billing.current_community_id() and pu.provider_ref = p_payment_ref limit 1))
$$;

-- ---- pause and resume (sandbox money side) ------------------------------------------------------

-- A paused subscription resumes at p_at: the billing period restarts then (a new
-- anchor) with an invoice for the new period, collected at once; a decline leaves it
-- past_due with the community's retries.
create or replace function billing.subscription_resume_at(p_sub_id text, p_at timestamptz) returns billing.subscriptions
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_plan billing.plans;
  v_inv billing.invoices;
  v_end timestamptz;
  v_lines jsonb;
  v_discount bigint;
  v_code text;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_sub_id for update;
  if v_sub.status <> 'paused' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not paused: nothing to resume.');
  end if;
  select * into v_plan from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  v_end := billing.next_period_end(p_at, v_plan.interval, p_at);
  if v_sub.provider = 'sandbox' then
    v_discount := billing.subscription_discount_cents(v_sub, v_plan.amount_cents, p_at);
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_plan.amount_cents, p_at, v_end));
    if v_discount > 0 then
      select d.code into v_code from billing.discount_codes d where d.community_id = v_sub.community_id and d.id = v_sub.discount_id;
      v_lines := v_lines || billing.discount_line(v_code, v_discount, p_at, v_end);
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_cycle', v_plan.currency, v_lines,
      p_at, v_end, 'sandbox', p_at);
    v_inv := billing.sandbox_collect(v_inv, p_at);
  end if;
  update billing.subscriptions s set
    status = case when v_inv.id is null or v_inv.status = 'paid' then 'active' else 'past_due' end,
    paused_until = null, current_period_start = p_at, current_period_end = v_end, billing_anchor = p_at, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;

create or replace function billing_private.subscription_resume(p_subscription_id text) returns billing.subscriptions
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('subscriptions:write');
  return billing.subscription_resume_at(p_subscription_id, billing.now());
end
$$;

grant execute on function billing.refund_json(billing.refunds) to billing_api;
grant execute on function billing.dispute_json(billing.disputes) to billing_api;
grant execute on function billing_api.invoice_refund_prepare(jsonb) to billing_api;
grant execute on function billing_api.invoice_refund(jsonb) to billing_api;
grant execute on function billing_private.invoice_refund(text, bigint, boolean, text) to billing_api;
grant execute on function billing_private.subscription_resume(text) to billing_api;
--! EndIncluded 46-invoices.sql
--! Included 80-checkout.sql
-- Checkout: creating checkout links (every rule of the spec's request table and
-- eligibility list), discount codes at checkout, completing a paid checkout (the
-- sandbox page, `billing sandbox complete` and the Stripe webhook all end here),
-- portal sessions and link codes.
--
-- Lifetimes: a checkout is open 24 hours; a portal session and a link code 10 minutes.
-- Discount codes are catalog rows (20-catalog.sql); their redemptions, JSON object
-- (with redemption counts) and list operation are here. Inbound provider events
-- (applied exactly once) are recorded here too.

-- ---- tables ----------------------------------------------------------------------------

create table if not exists billing.checkout_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('cs'),
  member_id text collate "C" not null,
  tier_id text collate "C" not null,
  plan_id text collate "C" not null,
  discount_id uuid,
  amount_cents integer not null,
  discount_cents integer not null default 0,
  currency text not null,
  client_reference_id text,
  return_url text,
  subject_kind text not null check (subject_kind in ('member', 'external', 'platform')),
  status text not null default 'open' check (status in ('open', 'completed', 'expired')),
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  url text,
  expires_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz not null default now(),
  access_token text,
  subscription_id text collate "C",
  purchase_id text collate "C",
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict,
  foreign key (community_id, discount_id) references billing.discount_codes on delete restrict
);
-- The pay token is kept as its sha256 only (the url is built from the clear token once,
-- at creation; the page looks the session up by id and hash). access_token held it in
-- clear before; it is emptied here and no longer written.
alter table billing.checkout_sessions add column if not exists access_token_sha256 bytea;
update billing.checkout_sessions set access_token_sha256 = sha256(convert_to(access_token, 'UTF8')), access_token = null
where access_token is not null;
create index if not exists checkout_sessions_member on billing.checkout_sessions (community_id, member_id);
create index if not exists checkout_sessions_open on billing.checkout_sessions (community_id, expires_at) where status = 'open';
create index if not exists checkout_sessions_provider_ref on billing.checkout_sessions (community_id, provider_ref)
  where provider_ref is not null;
alter table billing.checkout_sessions enable row level security;
alter table billing.checkout_sessions force row level security;
drop policy if exists tenant on billing.checkout_sessions;
create policy tenant on billing.checkout_sessions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.checkout_sessions;
create policy owner_access on billing.checkout_sessions to current_user using (true) with check (true);
grant select on billing.checkout_sessions to billing_api;
revoke insert, update, delete on billing.checkout_sessions from billing_api;
grant select, insert, update on billing.checkout_sessions to billing_writer;

create table if not exists billing.discount_redemptions (
  community_id text collate "C" not null,
  discount_id uuid not null,
  checkout_id text collate "C" not null,
  member_id text collate "C" not null,
  status text not null check (status in ('pending', 'redeemed', 'released')),
  created_at timestamptz not null default now(),
  primary key (community_id, discount_id, checkout_id),
  foreign key (community_id, discount_id) references billing.discount_codes on delete cascade,
  foreign key (community_id, checkout_id) references billing.checkout_sessions on delete cascade
);
create index if not exists discount_redemptions_checkout on billing.discount_redemptions (community_id, checkout_id);
alter table billing.discount_redemptions enable row level security;
alter table billing.discount_redemptions force row level security;
drop policy if exists tenant on billing.discount_redemptions;
create policy tenant on billing.discount_redemptions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.discount_redemptions;
create policy owner_access on billing.discount_redemptions to current_user using (true) with check (true);
grant select on billing.discount_redemptions to billing_api;
revoke insert, update, delete on billing.discount_redemptions from billing_api;
grant select, insert, update on billing.discount_redemptions to billing_writer;

create table if not exists billing.portal_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('ps'),
  member_id text collate "C" not null,
  return_url text,
  url text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  access_token text,
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
-- As checkout_sessions: the portal token is kept as its sha256 only.
alter table billing.portal_sessions add column if not exists access_token_sha256 bytea;
update billing.portal_sessions set access_token_sha256 = sha256(convert_to(access_token, 'UTF8')), access_token = null
where access_token is not null;
alter table billing.portal_sessions enable row level security;
alter table billing.portal_sessions force row level security;
drop policy if exists tenant on billing.portal_sessions;
create policy tenant on billing.portal_sessions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.portal_sessions;
create policy owner_access on billing.portal_sessions to current_user using (true) with check (true);
grant select on billing.portal_sessions to billing_api;
revoke insert, update, delete on billing.portal_sessions from billing_api;
grant select, insert, update on billing.portal_sessions to billing_writer;

create table if not exists billing.link_codes (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('lc'),
  member_id text collate "C" not null,
  code text not null,
  intended_platform text not null check (intended_platform in ('discord', 'telegram')),
  expires_at timestamptz not null,
  redeemed_at timestamptz,
  invalidated_at timestamptz,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, code),
  foreign key (community_id, member_id) references billing.members on delete cascade
);

create index if not exists link_codes_member on billing.link_codes (community_id, member_id, intended_platform);
alter table billing.link_codes enable row level security;
alter table billing.link_codes force row level security;
drop policy if exists tenant on billing.link_codes;
create policy tenant on billing.link_codes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.link_codes;
create policy owner_access on billing.link_codes to current_user using (true) with check (true);
grant select on billing.link_codes to billing_api;
revoke insert, update, delete on billing.link_codes from billing_api;
grant select, insert, update on billing.link_codes to billing_writer;

-- Inbound provider events applied exactly once.
create table if not exists billing.provider_events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  provider text not null,
  event_id text not null,
  type text not null,
  received_at timestamptz not null default now(),
  primary key (community_id, provider, event_id)
);
alter table billing.provider_events enable row level security;
alter table billing.provider_events force row level security;
drop policy if exists tenant on billing.provider_events;
create policy tenant on billing.provider_events
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.provider_events;
create policy owner_access on billing.provider_events to current_user using (true) with check (true);
grant select on billing.provider_events to billing_api;
revoke insert, update, delete on billing.provider_events from billing_api;

-- One provider customer per member and community (Stripe: the cus_... that every later
-- Checkout Session of the member is given as `customer`). Recorded by complete_checkout
-- from the provider's completion; the first one recorded stays (a duplicate or late
-- event changes nothing). The API role only reads it (checkout, portal).
create table if not exists billing.member_provider_customers (
  community_id text collate "C" not null references billing.communities on delete cascade,
  member_id text collate "C" not null,
  provider text not null check (provider in ('stripe')),
  customer_ref text not null check (length(customer_ref) between 1 and 255),
  created_at timestamptz not null default now(),
  primary key (community_id, member_id, provider),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
alter table billing.member_provider_customers enable row level security;
alter table billing.member_provider_customers force row level security;
drop policy if exists tenant on billing.member_provider_customers;
create policy tenant on billing.member_provider_customers
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.member_provider_customers;
create policy owner_access on billing.member_provider_customers to current_user using (true) with check (true);
grant select on billing.member_provider_customers to billing_api;

-- ---- helpers ---------------------------------------------------------------------------

create or replace function billing.checkout_lifetime() returns interval
  language sql immutable parallel safe as $$ select interval '24 hours' $$;

create or replace function billing.random_token() returns text
  language sql volatile parallel safe
as $$ select replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '') $$;

-- ---- buyer -------------------------------------------------------------------------

-- Finds or creates the member named by a checkout subject. Serialised per subject with
-- an advisory lock so two parallel checkouts for a new buyer make one member.
create or replace function billing.checkout_member(p_subject jsonb) returns text
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_member text;
  v_ns text;
  v_uid text;
  v_platform text;
begin
  if p_subject ? 'member_id' then
    select m.id into v_member from billing.members m where m.id = p_subject->>'member_id';
    if v_member is null then
      perform billing.raise('BL404', 'No member ' || (p_subject->>'member_id') || '.');
    end if;
    return v_member;
  elsif p_subject ? 'external' then
    v_ns := p_subject->'external'->>'namespace';
    v_uid := p_subject->'external'->>'external_user_id';
    perform pg_advisory_xact_lock(hashtextextended(v_cid || ' ext ' || v_ns || ' ' || v_uid, 5));
    select x.member_id into v_member from billing.external_subjects x
    where x.namespace = v_ns and x.external_user_id = v_uid;
    if v_member is null then
      insert into billing.members (community_id) values (v_cid) returning id into v_member;
      insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
      values (v_cid, v_member, v_ns, v_uid);
    end if;
    return v_member;
  else
    v_platform := p_subject->>'platform';
    v_uid := p_subject->>'platform_uid';
    perform pg_advisory_xact_lock(hashtextextended(v_cid || ' pid ' || v_platform || ' ' || v_uid, 5));
    select i.member_id into v_member from billing.member_identities i
    where i.platform = v_platform and i.platform_uid = v_uid;
    if v_member is null then
      insert into billing.members (community_id) values (v_cid) returning id into v_member;
      insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
      values (v_cid, v_member, v_platform, v_uid, p_subject->>'username');
    end if;
    return v_member;
  end if;
end
$$;

-- not_eligible: the member already holds this tier (a non-cancelled subscription on
-- one of its plans, or an unexpired purchase of it), or is buying a recurring plan
-- while holding a non-cancelled subscription on another tier (that needs a switch,
-- not a second subscription).
create or replace function billing.check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans) returns void
  language plpgsql stable
as $$
declare
  v_other text;
begin
  if exists (select 1 from billing.purchases pu join billing.plans p on p.community_id = pu.community_id and p.id = pu.plan_id
             where pu.member_id = p_member_id and p.tier_id = p_tier.id and pu.status = 'completed'
               and (pu.access_expires_at is null or pu.access_expires_at > billing.now())) then
    raise exception using errcode = 'BLNEL', message = 'The buyer already purchased this tier and its access has not expired.';
  end if;
  select p.tier_id into v_other
  from billing.subscriptions s join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  where s.member_id = p_member_id and s.status <> 'cancelled'
  order by (p.tier_id = p_tier.id) desc
  limit 1;
  if v_other = p_tier.id then
    raise exception using errcode = 'BLNEL', message = 'The buyer is already subscribed to this tier.';
  elsif v_other is not null and p_plan.interval is not null then
    raise exception using errcode = 'BLNEL',
      message = 'The buyer is subscribed to another tier (' || v_other || '); switch the subscription instead.';
  end if;
end
$$;

-- ---- discounts ---------------------------------------------------------------------

-- Validates a code for this checkout and returns the discount and its amount. The
-- caller holds the discount's advisory lock, so the use limit holds under concurrency.
create or replace function billing.checkout_discount(p_code text, p_member_id text, p_tier_id text, p_plan billing.plans,
  out discount_id uuid, out discount_cents integer)
  language plpgsql volatile
as $$
declare
  v_d billing.discount_codes;
  v_now timestamptz := billing.now();
  v_used bigint;
begin
  -- The community named explicitly: the owner's callers (the sandbox page's discount
  -- field, billing.checkout_apply_discount) see every community's codes.
  select * into v_d from billing.discount_codes d
  where d.community_id = billing.current_community_id() and lower(d.code) = lower(p_code);
  if v_d.id is null then
    raise exception using errcode = 'BLDSC', message = 'Unknown discount code.', detail = 'discount_code';
  end if;
  perform pg_advisory_xact_lock(hashtextextended(v_d.community_id || ' discount ' || v_d.id::text, 6));
  if not v_d.is_active or v_d.archived_at is not null then
    raise exception using errcode = 'BLDSC', message = 'This discount code is not active.';
  elsif v_d.starts_at is not null and v_d.starts_at > v_now then
    raise exception using errcode = 'BLDSC', message = 'This discount code has not started yet.';
  elsif v_d.expires_at is not null and v_d.expires_at <= v_now then
    raise exception using errcode = 'BLDSC', message = 'This discount code has expired.';
  elsif cardinality(v_d.tier_ids) > 0 and not (p_tier_id = any (v_d.tier_ids)) then
    raise exception using errcode = 'BLDSC', message = 'This discount code does not apply to this tier.';
  elsif jsonb_array_length(v_d.members) > 0 and not exists (
      select 1 from billing.member_identities i, jsonb_array_elements(v_d.members) m
      where i.member_id = p_member_id and i.platform = m->>'platform' and i.platform_uid = m->>'platform_uid') then
    raise exception using errcode = 'BLDSC', message = 'This discount code is not available to this buyer.';
  elsif v_d.min_spend_cents is not null and p_plan.amount_cents < v_d.min_spend_cents then
    raise exception using errcode = 'BLDSC', message = 'The price is below this discount code''s minimum spend.';
  elsif v_d.max_spend_cents is not null and p_plan.amount_cents > v_d.max_spend_cents then
    raise exception using errcode = 'BLDSC', message = 'The price is above this discount code''s maximum spend.';
  elsif v_d.value_type = 'amount' and v_d.currency is not null and lower(v_d.currency) <> p_plan.currency then
    raise exception using errcode = 'BLDSC', message = 'This discount code is in another currency.';
  end if;
  if v_d.use_limit is not null then
    select count(*) into v_used
    from billing.discount_redemptions r
    join billing.checkout_sessions cs on cs.community_id = r.community_id and cs.id = r.checkout_id
    where r.discount_id = v_d.id
      and (r.status = 'redeemed' or (r.status = 'pending' and cs.status = 'open' and cs.expires_at > v_now));
    if v_used >= v_d.use_limit then
      raise exception using errcode = 'BLDSC', message = 'This discount code has reached its use limit.';
    end if;
  end if;
  discount_id := v_d.id;
  discount_cents := least(p_plan.amount_cents,
    case v_d.value_type when 'percent' then round(p_plan.amount_cents * v_d.percent_off / 100)::integer
                        else coalesce(v_d.amount_off_cents, 0) end);
end
$$;

create or replace function billing.discount_json(p_d billing.discount_codes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_d.id, 'code', p_d.code, 'name', p_d.name, 'value_type', p_d.value_type,
    'percent_off', p_d.percent_off, 'amount_off_cents', p_d.amount_off_cents, 'currency', p_d.currency,
    'duration', p_d.duration, 'duration_months', p_d.duration_months, 'use_limit', p_d.use_limit,
    'min_spend_cents', p_d.min_spend_cents, 'max_spend_cents', p_d.max_spend_cents,
    'starts_at', billing.iso(p_d.starts_at), 'expires_at', billing.iso(p_d.expires_at),
    'is_active', p_d.is_active, 'tier_ids', to_jsonb(p_d.tier_ids),
    'members', coalesce((
      select jsonb_agg(jsonb_build_object('platform', m->>'platform', 'platform_uid', m->>'platform_uid',
        'username', m->>'username'))
      from jsonb_array_elements(p_d.members) m), '[]'),
    'redeemed_count', (select count(*) from billing.discount_redemptions r
      where r.community_id = p_d.community_id and r.discount_id = p_d.id and r.status = 'redeemed'),
    'pending_count', (select count(*) from billing.discount_redemptions r
      where r.community_id = p_d.community_id and r.discount_id = p_d.id and r.status = 'pending'),
    'created_at', billing.iso(p_d.created_at))
$$;

create or replace function billing_api.discounts_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('discounts:read');
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.discount_json(d) order by d.created_at desc, d.id)
    from billing.discount_codes d
    where d.community_id = billing.current_community_id() and d.archived_at is null), '[]'));
end
$$;

-- ---- create_checkout_link ----------------------------------------------------------

-- Input: tier_id, plan_id?, subject, client_reference_id?, return_url?, discount_code?,
-- and from the handler provider_ready (false for a stripe community without keys).
-- Records an open checkout; the handler then asks the provider for its url.
create or replace function billing_api.checkout_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_tier billing.tiers;
  v_plan billing.plans;
  v_provider text;
  v_subject jsonb := p_args->'subject';
  v_kind text;
  v_member text;
  v_disc record;
  v_cs billing.checkout_sessions;
  v_token text := billing.random_token();
  v_plans integer;
begin
  perform billing.require_scope('checkout:write');
  select * into v_tier from billing.tiers t where t.id = p_args->>'tier_id' and t.active;
  if v_tier.id is null then
    perform billing.raise('BL404', 'No active tier ' || (p_args->>'tier_id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  if v_provider is null or not coalesce((p_args->>'provider_ready')::boolean, true) then
    raise exception using errcode = 'BLPCI', message = 'This community has no active payment provider.';
  end if;
  select count(*) into v_plans from billing.plans p where p.tier_id = v_tier.id and p.active;
  if p_args->>'plan_id' is not null then
    select * into v_plan from billing.plans p where p.id = p_args->>'plan_id' and p.tier_id = v_tier.id and p.active;
    if v_plan.id is null then
      perform billing.raise('BL422', 'plan_id is not an active plan of tier ' || v_tier.id || '.', 'plan_id');
    end if;
  elsif v_plans > 1 then
    raise exception using errcode = 'BLPRQ', message = 'This tier has several active plans: send plan_id.', detail = 'plan_id';
  elsif v_plans = 0 then
    perform billing.raise('BL404', 'Tier ' || v_tier.id || ' has no active plan.');
  else
    select * into v_plan from billing.plans p where p.tier_id = v_tier.id and p.active;
  end if;

  v_kind := case when v_subject ? 'member_id' then 'member' when v_subject ? 'external' then 'external' else 'platform' end;
  if v_kind = 'platform' and not exists (select 1 from billing.platform_configs pc where pc.platform = v_subject->>'platform') then
    raise exception using errcode = 'BLPNC', message = 'No ' || (v_subject->>'platform') || ' platform is connected to this community.',
      detail = 'subject.platform';
  end if;
  if p_args->>'return_url' is not null and v_kind <> 'external' then
    perform billing.raise('BL422', 'return_url is only allowed for operator (external) subjects.', 'return_url');
  end if;

  v_member := billing.checkout_member(v_subject);
  perform billing.check_eligible(v_member, v_tier, v_plan);

  insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency,
    client_reference_id, return_url, subject_kind, provider, expires_at, access_token_sha256)
  values (v_cid, v_member, v_tier.id, v_plan.id, v_plan.amount_cents, v_plan.currency,
    p_args->>'client_reference_id', p_args->>'return_url', v_kind, v_provider,
    billing.now() + billing.checkout_lifetime(), sha256(convert_to(v_token, 'UTF8')))
  returning * into v_cs;

  if p_args->>'discount_code' is not null then
    select * into v_disc from billing.checkout_discount(p_args->>'discount_code', v_member, v_tier.id, v_plan);
    update billing.checkout_sessions set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cid, v_disc.discount_id, v_cs.id, v_member, 'pending');
  end if;

  -- The clear token leaves the database once, here, for the provider to build the url.
  return billing.checkout_json(v_cs) || jsonb_build_object('access_token', v_token);
end
$$;

-- The sandbox checkout page's discount field: applies a code to an open checkout by the
-- rules of checkout_create (billing.checkout_discount), replacing any earlier one; an
-- empty code removes it. Owner only: the page runs in the checkout's community.
create or replace function billing.checkout_apply_discount(p_checkout_id text, p_code text) returns jsonb
  language plpgsql volatile
as $$
declare
  v_cs billing.checkout_sessions;
  v_plan billing.plans;
  v_disc record;
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || coalesce(p_checkout_id, '') || '.');
  elsif v_cs.status <> 'open' or v_cs.expires_at <= billing.now() then
    perform billing.raise('BL409', 'This checkout is no longer open.');
  end if;
  delete from billing.discount_redemptions r
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id and r.status = 'pending';
  if nullif(btrim(coalesce(p_code, '')), '') is null then
    update billing.checkout_sessions cs set discount_id = null, discount_cents = 0
    where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
  else
    select * into v_plan from billing.plans p where p.community_id = v_cs.community_id and p.id = v_cs.plan_id;
    select * into v_disc from billing.checkout_discount(btrim(p_code), v_cs.member_id, v_cs.tier_id, v_plan);
    update billing.checkout_sessions cs set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cs.community_id, v_disc.discount_id, v_cs.id, v_cs.member_id, 'pending');
  end if;
  return billing.checkout_json(v_cs);
end
$$;

-- Everything a provider adapter needs to present or pay a checkout.
create or replace function billing.checkout_json(p_cs billing.checkout_sessions) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'checkout_id', p_cs.id, 'member_id', p_cs.member_id, 'status', p_cs.status,
    'provider', p_cs.provider, 'url', p_cs.url,
    'expires_at', billing.iso(p_cs.expires_at), 'expired', p_cs.status = 'expired' or (p_cs.status = 'open' and p_cs.expires_at <= billing.now()),
    'tier_id', t.id, 'tier_name', t.name, 'tier_kind', t.kind,
    'plan_id', p.id, 'plan_name', p.name, 'interval', p.interval, 'trial_days', p.trial_days,
    'access_days', p.access_days, 'stripe_price_id', p.stripe_price_id,
    'amount_cents', p_cs.amount_cents, 'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'discount_code', d.code, 'discount', case when d.id is null then null else jsonb_build_object(
      'id', d.id, 'value_type', d.value_type, 'percent_off', d.percent_off, 'amount_off_cents', d.amount_off_cents,
      'duration', d.duration, 'duration_months', d.duration_months) end,
    'client_reference_id', p_cs.client_reference_id, 'return_url', p_cs.return_url,
    'subscription_id', p_cs.subscription_id, 'purchase_id', p_cs.purchase_id)
  from billing.plans p
  join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
  left join billing.discount_codes d on d.community_id = p_cs.community_id and d.id = p_cs.discount_id
  where p.community_id = p_cs.community_id and p.id = p_cs.plan_id
$$;

-- The handler stores the provider's url and reference (and expiry, when reported).
create or replace function billing_api.checkout_set_provider(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cs billing.checkout_sessions;
begin
  perform billing.require_scope('checkout:write');
  update billing.checkout_sessions cs set url = p_args->>'url', provider_ref = coalesce(p_args->>'provider_ref', cs.provider_ref),
    expires_at = coalesce((p_args->>'expires_at')::timestamptz, cs.expires_at)
  where cs.id = p_args->>'checkout_id'
  returning * into v_cs;
  return billing.checkout_json(v_cs);
end
$$;

-- ---- the checkout object of events --------------------------------------------------
-- (billing.checkout_json above is the provider adapters' view of a checkout, with its
-- access token: never an API or event object.)

create or replace function billing.checkout_event_json(p_cs billing.checkout_sessions) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object(
    'id', p_cs.id, 'checkout_id', p_cs.id, 'status', p_cs.status, 'member_id', p_cs.member_id,
    'tier_id', p_cs.tier_id, 'plan_id', p_cs.plan_id, 'amount_cents', p_cs.amount_cents,
    'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'client_reference_id', p_cs.client_reference_id, 'subject_kind', p_cs.subject_kind,
    'expires_at', billing.iso(p_cs.expires_at), 'completed_at', billing.iso(p_cs.completed_at),
    'created_at', billing.iso(p_cs.created_at))
$$;

-- No ledger effect: a checkout grants nothing.
create or replace function billing.tg_checkout_sessions__outbox() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'INSERT' then
    perform billing.emit_event(new.community_id, 'checkout.created',
      jsonb_build_object('checkout', billing.checkout_event_json(new), 'previous_attributes', null));
    if new.status = 'open' then
      return null;
    end if;
  elsif new.status is not distinct from old.status then
    return null;
  end if;
  if new.status in ('completed', 'expired') then
    perform billing.emit_event(new.community_id, 'checkout.' || new.status,
      jsonb_build_object('checkout', billing.checkout_event_json(new), 'previous_attributes',
        case when tg_op = 'UPDATE' then jsonb_build_object('status', old.status) end));
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox on billing.checkout_sessions;
create trigger _500_outbox after insert or update of status on billing.checkout_sessions
  for each row execute function billing.tg_checkout_sessions__outbox();

-- ---- completing a paid checkout ------------------------------------------------------

-- Completes a checkout in the current community: creates the subscription (trialing
-- when the plan has trial days, else active; period from billing.now()) or the
-- purchase (access_expires_at from access_days), marks the checkout completed and
-- redeems its discount. Idempotent: a completed checkout returns the same result.
-- p_details (from a provider): provider_ref, customer_ref, status, period_start,
-- period_end, trial_end, cancel_at, provider_updated_at (ISO), paid (true when the
-- provider has taken the money: no expiry or eligibility check then).
create or replace function billing.complete_checkout(p_checkout_id text, p_details jsonb default '{}')
  returns jsonb language plpgsql volatile
as $$
declare
  v_cs billing.checkout_sessions;
  v_plan billing.plans;
  v_tier billing.tiers;
  v_now timestamptz := billing.now();
  v_paid boolean := coalesce((p_details->>'paid')::boolean, false);
  v_sub billing.subscriptions;
  v_sub_id text;
  v_pur_id text;
  v_trial_end timestamptz;
  v_lines jsonb;
  v_code text;
  v_inv billing.invoices;
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || p_checkout_id || '.');
  end if;
  if v_cs.status = 'completed' then
    return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
      'subscription_id', v_cs.subscription_id, 'purchase_id', v_cs.purchase_id, 'already_completed', true);
  end if;
  if not v_paid and (v_cs.status = 'expired' or v_cs.expires_at <= v_now) then
    perform billing.raise('BL409', 'Checkout ' || v_cs.id || ' has expired.');
  end if;
  select * into v_plan from billing.plans p where p.community_id = v_cs.community_id and p.id = v_cs.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_cs.community_id and t.id = v_plan.tier_id;
  if not v_paid then
    perform billing.check_eligible(v_cs.member_id, v_tier, v_plan);
  end if;
  select d.code into v_code from billing.discount_codes d where d.community_id = v_cs.community_id and d.id = v_cs.discount_id;

  if v_plan.interval is not null then
    if p_details->>'provider_ref' is not null then
      select s.id into v_sub_id from billing.subscriptions s
      where s.community_id = v_cs.community_id and s.provider_ref = p_details->>'provider_ref';
    end if;
    if v_sub_id is null then
      v_trial_end := coalesce((p_details->>'trial_end')::timestamptz,
        case when v_plan.trial_days > 0 and p_details->>'status' is null then v_now + make_interval(days => v_plan.trial_days) end);
      insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start,
        current_period_end, trial_end, cancel_at, client_reference_id, checkout_id, provider, provider_ref,
        provider_customer_ref, provider_updated_at, billing_anchor, discount_id, created_at)
      values (v_cs.community_id, v_cs.member_id, v_plan.id,
        coalesce(p_details->>'status', case when v_trial_end is not null then 'trialing' else 'active' end),
        coalesce((p_details->>'period_start')::timestamptz, v_now),
        coalesce((p_details->>'period_end')::timestamptz, v_trial_end, billing.add_utc(v_now, billing.plan_interval(v_plan.interval))),
        v_trial_end, (p_details->>'cancel_at')::timestamptz, v_cs.client_reference_id, v_cs.id, v_cs.provider,
        p_details->>'provider_ref', p_details->>'customer_ref', (p_details->>'provider_updated_at')::timestamptz,
        coalesce(v_trial_end, (p_details->>'period_start')::timestamptz, v_now), v_cs.discount_id, v_now)
      returning * into v_sub;
      v_sub_id := v_sub.id;
      if v_cs.provider = 'sandbox' then
        if v_trial_end is not null then
          v_lines := jsonb_build_array(billing.plan_line(v_plan, 0, v_sub.current_period_start, v_trial_end,
            'Trial period for ' || v_tier.name || coalesce(' (' || v_plan.name || ')', '')));
        else
          v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_sub.current_period_start,
            v_sub.current_period_end));
          if v_cs.discount_cents > 0 then
            v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_sub.current_period_start,
              v_sub.current_period_end);
          end if;
        end if;
        v_inv := billing.invoice_open(v_sub.id, null, v_cs.member_id, 'subscription_create', v_cs.currency, v_lines,
          v_sub.current_period_start, v_sub.current_period_end, v_cs.provider, v_now, v_cs.id);
        perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
      end if;
    else
      update billing.subscriptions s set checkout_id = v_cs.id,
        client_reference_id = coalesce(s.client_reference_id, v_cs.client_reference_id),
        provider_customer_ref = coalesce(s.provider_customer_ref, p_details->>'customer_ref'),
        discount_id = coalesce(s.discount_id, v_cs.discount_id)
      where s.community_id = v_cs.community_id and s.id = v_sub_id
        and (s.checkout_id is distinct from v_cs.id or s.client_reference_id is null and v_cs.client_reference_id is not null
          or s.discount_id is null and v_cs.discount_id is not null);
    end if;
  else
    insert into billing.purchases (community_id, member_id, plan_id, status, amount_cents, currency,
      access_expires_at, paid_at, client_reference_id, checkout_id, provider_ref, created_at)
    values (v_cs.community_id, v_cs.member_id, v_plan.id, 'completed', v_cs.amount_cents - v_cs.discount_cents,
      v_cs.currency, case when v_plan.access_days is not null then v_now + make_interval(days => v_plan.access_days) end,
      v_now, v_cs.client_reference_id, v_cs.id, p_details->>'provider_ref', v_now)
    returning id into v_pur_id;
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_now, null));
    if v_cs.discount_cents > 0 then
      v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_now, null);
    end if;
    v_inv := billing.invoice_open(null, v_pur_id, v_cs.member_id, 'purchase', v_cs.currency, v_lines, v_now, null,
      v_cs.provider, v_now, v_cs.id, case when v_cs.provider = 'stripe' then p_details->>'provider_ref' end);
    perform billing.invoice_mark_paid(v_inv, v_now, p_details->>'provider_ref');
  end if;

  if v_cs.provider = 'stripe' and p_details->>'customer_ref' is not null then
    insert into billing.member_provider_customers (community_id, member_id, provider, customer_ref)
    values (v_cs.community_id, v_cs.member_id, v_cs.provider, p_details->>'customer_ref')
    on conflict (community_id, member_id, provider) do nothing;
  end if;

  update billing.checkout_sessions cs set status = 'completed', completed_at = v_now,
    subscription_id = v_sub_id, purchase_id = v_pur_id
  where cs.community_id = v_cs.community_id and cs.id = v_cs.id;
  update billing.discount_redemptions r set status = 'redeemed'
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id;

  return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
    'subscription_id', v_sub_id, 'purchase_id', v_pur_id, 'already_completed', false);
end
$$;

-- Open checkouts past their expiry become expired and release their discount holds.
-- No entitlement changes and no granted event: a checkout never grants anything.
create or replace function billing.expire_checkouts() returns integer
  language plpgsql volatile
as $$
declare
  v_n integer;
begin
  with expired as (
    update billing.checkout_sessions cs set status = 'expired'
    where cs.community_id = billing.current_community_id() and cs.status = 'open' and cs.expires_at <= billing.now()
    returning cs.community_id, cs.id)
  , released as (
    update billing.discount_redemptions r set status = 'released'
    from expired e where r.community_id = e.community_id and r.checkout_id = e.id and r.status = 'pending'
    returning 1)
  select count(*) into v_n from expired;
  return v_n;
end
$$;

-- A provider reports a checkout it will never complete (Stripe: checkout.session.expired).
create or replace function billing.expire_checkout(p_checkout_id text) returns boolean
  language plpgsql volatile
as $$
declare
  v_id text;
begin
  update billing.checkout_sessions cs set status = 'expired'
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id and cs.status = 'open'
  returning cs.id into v_id;
  if v_id is null then
    return false;
  end if;
  update billing.discount_redemptions r set status = 'released'
  where r.community_id = billing.current_community_id() and r.checkout_id = v_id and r.status = 'pending';
  return true;
end
$$;

-- ---- inbound provider events ----------------------------------------------------------

-- Inbound provider events are applied exactly once: true the first time an id is seen.
create or replace function billing.record_provider_event(p_provider text, p_event_id text, p_type text) returns boolean
  language sql volatile
as $$
  with ins as (
    insert into billing.provider_events (community_id, provider, event_id, type)
    values (billing.current_community_id(), p_provider, p_event_id, p_type)
    on conflict do nothing returning 1)
  select exists (select 1 from ins)
$$;

-- ---- portal sessions -----------------------------------------------------------------

create or replace function billing_api.portal_session_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_ps billing.portal_sessions;
  v_provider text;
  v_token text := billing.random_token();
begin
  perform billing.require_scope('members:write');
  if not exists (select 1 from billing.members m where m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  insert into billing.portal_sessions (community_id, member_id, return_url, url, expires_at, access_token_sha256)
  values (v_cid, p_args->>'id', p_args->>'return_url', '', billing.now() + interval '10 minutes',
    sha256(convert_to(v_token, 'UTF8')))
  returning * into v_ps;
  return jsonb_build_object('id', v_ps.id, 'member_id', v_ps.member_id, 'access_token', v_token,
    'expires_at', billing.iso(v_ps.expires_at), 'return_url', v_ps.return_url, 'provider', v_provider,
    'customer_ref', coalesce(
      (select c.customer_ref from billing.member_provider_customers c
       where c.member_id = v_ps.member_id and c.provider = 'stripe'),
      (select s.provider_customer_ref from billing.subscriptions s
       where s.member_id = v_ps.member_id and s.provider = 'stripe' and s.provider_customer_ref is not null
       order by s.id desc limit 1)));
end
$$;

create or replace function billing_api.portal_session_set_url(p_args jsonb) returns void
  language sql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
  update billing.portal_sessions set url = p_args->>'url' where id = p_args->>'id'
$$;

-- ---- link codes ----------------------------------------------------------------------

-- A new code for the same member and platform invalidates the earlier one. Expiry
-- changes nothing (the code simply stops being redeemable).
create or replace function billing_api.link_code_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
begin
  perform billing.require_scope('members:write');
  if not exists (select 1 from billing.members m where m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  update billing.link_codes lc set invalidated_at = billing.now()
  where lc.member_id = p_args->>'id' and lc.intended_platform = p_args->>'intended_platform'
    and lc.redeemed_at is null and lc.invalidated_at is null;
  insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at)
  values (v_cid, p_args->>'id', upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 10)),
    p_args->>'intended_platform', billing.now() + interval '10 minutes')
  returning * into v_lc;
  return jsonb_build_object('code', v_lc.code, 'member_id', v_lc.member_id,
    'intended_platform', v_lc.intended_platform, 'expires_at', billing.iso(v_lc.expires_at));
end
$$;

-- A platform bot finishes the link: the identity joins the code's member.
create or replace function billing_api.link_code_redeem(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_owner text;
begin
  perform billing.require_scope('members:write');
  select * into v_lc from billing.link_codes lc where lc.code = upper(p_args->>'code') for update;
  if v_lc.id is null or v_lc.redeemed_at is not null or v_lc.invalidated_at is not null
     or v_lc.expires_at <= billing.now() or v_lc.intended_platform <> p_args->>'platform' then
    perform billing.raise('BL404', 'No usable link code ' || (p_args->>'code') || ' for ' || (p_args->>'platform') || '.');
  end if;
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_args->>'platform' and i.platform_uid = p_args->>'platform_uid';
  if v_owner is not null and v_owner <> v_lc.member_id then
    perform billing.raise('BL409', 'This ' || (p_args->>'platform') || ' identity belongs to another member.');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = v_lc.member_id and i.platform = p_args->>'platform') then
      perform billing.raise('BL409', 'Member ' || v_lc.member_id || ' already has another ' || (p_args->>'platform') || ' identity.');
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (v_cid, v_lc.member_id, p_args->>'platform', p_args->>'platform_uid', p_args->>'username');
  end if;
  update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  return billing.member_json(v_cid, v_lc.member_id);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.check_eligible(text,billing.tiers,billing.plans) to billing_api;
grant execute on function billing.checkout_discount(text,text,text,billing.plans) to billing_api;
grant execute on function billing.checkout_event_json(billing.checkout_sessions) to billing_api;
grant execute on function billing.checkout_json(billing.checkout_sessions) to billing_api;
grant execute on function billing.checkout_lifetime() to billing_api;
grant execute on function billing.checkout_member(jsonb) to billing_api;
grant execute on function billing.discount_json(billing.discount_codes) to billing_api;
grant execute on function billing.random_token() to billing_api;
grant execute on function billing_api.discounts_list(jsonb) to billing_api;
grant execute on function billing_api.checkout_create(jsonb) to billing_api;
grant execute on function billing_api.checkout_set_provider(jsonb) to billing_api;
grant execute on function billing_api.portal_session_create(jsonb) to billing_api;
grant execute on function billing_api.portal_session_set_url(jsonb) to billing_api;
grant execute on function billing_api.link_code_create(jsonb) to billing_api;
grant execute on function billing_api.link_code_redeem(jsonb) to billing_api;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing_api to billing_writer;
alter function billing_api.checkout_create(jsonb) owner to billing_writer;
alter function billing_api.checkout_set_provider(jsonb) owner to billing_writer;
alter function billing_api.portal_session_create(jsonb) owner to billing_writer;
alter function billing_api.portal_session_set_url(jsonb) owner to billing_writer;
alter function billing_api.link_code_create(jsonb) owner to billing_writer;
alter function billing_api.link_code_redeem(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded 80-checkout.sql
--! Included 82-member-portal.sql
-- The member portal of the sandbox provider (issue 16). A portal session's URL
-- (80-checkout.sql, ten minutes) opened in time becomes a member portal session: a
-- credential like a key (billing_private.session_credential, 15-operators.sql) with the
-- portal's scopes and the member's id. billing.api_auth sets app.member_id from it, and
-- the restrictive member_fence policies below narrow every member-owned table to that
-- member for the API's roles, so the portal runs the API's own operations (cancel,
-- reactivate, switch) and the database keeps it to the member's own rows.

-- The member a portal request acts for; null for keys and operators.
create or replace function billing.current_member_id() returns text
  language sql stable parallel safe
as $$ select nullif(pg_catalog.current_setting('app.member_id', true), '') $$;

-- What a member may do in the portal: read and manage their subscriptions, read their
-- purchases and invoices, and the plans to switch between.
create or replace function billing_private.member_portal_scopes() returns text[]
  language sql immutable parallel safe
as $$ select array['subscriptions:read', 'subscriptions:write', 'purchases:read', 'invoices:read', 'plans:read'] $$;

-- ---- member portal sessions ---------------------------------------------------------------

create table if not exists billing_private.member_portal_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('mps'),
  token_sha256 text not null,
  portal_session_id text collate "C" not null,
  member_id text collate "C" not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, portal_session_id) references billing.portal_sessions on delete cascade
);
create unique index if not exists member_portal_sessions_token on billing_private.member_portal_sessions (token_sha256);
alter table billing_private.member_portal_sessions enable row level security;
alter table billing_private.member_portal_sessions force row level security;
drop policy if exists owner_only on billing_private.member_portal_sessions;
create policy owner_only on billing_private.member_portal_sessions using (true);

-- Opens a member portal session (one hour) from a portal URL's id and token, while the
-- URL is live by the community's clock. {status: 'open', ...}, {status: 'expired'}, or
-- null for an unknown id or token.
create or replace function billing_private.member_portal_open(p_portal_id text, p_access_sha256 bytea, p_token_sha256 text)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ps billing.portal_sessions;
begin
  select * into v_ps from billing.portal_sessions ps where ps.id = p_portal_id and ps.access_token_sha256 = p_access_sha256;
  if v_ps.id is null then
    return null;
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
    'provider', c.payment_provider, 'return_url', ps.return_url, 'expires_at', billing.iso(m.expires_at))
  from billing_private.member_portal_sessions m
  join billing.communities c on c.id = m.community_id
  join billing.portal_sessions ps on ps.community_id = m.community_id and ps.id = m.portal_session_id
  where m.token_sha256 = p_token_sha256 and m.expires_at > now()
$$;

-- ---- the fence: a portal request sees its member's rows only ------------------------------

-- Restrictive: ANDed with the tenant policies. For the API's roles only (billing_api and
-- billing_writer, which runs the API's writes); the owner's functions and triggers see
-- what the tenant policies give them.
drop policy if exists member_fence on billing.members;
create policy member_fence on billing.members as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.member_identities;
create policy member_fence on billing.member_identities as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.external_subjects;
create policy member_fence on billing.external_subjects as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.subscriptions;
create policy member_fence on billing.subscriptions as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.purchases;
create policy member_fence on billing.purchases as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.invoices;
create policy member_fence on billing.invoices as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.grants;
create policy member_fence on billing.grants as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.member_entitlements;
create policy member_fence on billing.member_entitlements as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.checkout_sessions;
create policy member_fence on billing.checkout_sessions as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.portal_sessions;
create policy member_fence on billing.portal_sessions as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
drop policy if exists member_fence on billing.link_codes;
create policy member_fence on billing.link_codes as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));

-- ---- portal operations ---------------------------------------------------------------------

-- What switching a subscription to p_args.plan_id would do now: an immediate switch's
-- proration (billing.switch_proration, the rule the switch applies) or, for a
-- downgrade, the date it is scheduled for. 409 / 422 as the switch itself.
create or replace function billing_api.subscription_switch_preview(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_group text;
  v_q record;
begin
  perform billing.require_scope('subscriptions:read');
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_args->>'id', '') || '.');
  end if;
  perform billing.require_switchable(v_sub);
  select e.g into v_group from jsonb_each(billing.switch_options(v_sub)) e(g, arr), jsonb_array_elements(arr) o
  where o->>'plan_id' = p_args->>'plan_id' limit 1;
  if v_group is null then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_args->>'plan_id', '') || ' is not a switch option of this subscription.', 'plan_id');
  end if;
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_args->>'plan_id';
  if v_group = 'downgrades' then
    return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'period_end',
      'applies_at', billing.iso(v_sub.current_period_end), 'currency', v_new.currency,
      'charge_cents', 0, 'credit_cents', 0, 'due_now_cents', 0, 'period_end', billing.iso(v_sub.current_period_end));
  end if;
  select * into v_q from billing.switch_proration(v_sub, v_old, v_new, billing.now());
  return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'now',
    'applies_at', billing.iso(billing.now()), 'currency', v_new.currency,
    'charge_cents', v_q.charge_cents, 'credit_cents', v_q.applied_cents,
    'due_now_cents', v_q.charge_cents - v_q.applied_cents, 'period_end', billing.iso(v_q.period_end));
end
$$;

-- The portal's simulated card (sandbox subscriptions): "a card that pays" or "a card
-- that declines" for the subscription's future charges (billing.sandbox_set_card). The
-- subscription is looked up with the caller's rights first, so the member fence holds.
create or replace function billing_private.portal_set_card(p_subscription_id text, p_declines boolean) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return billing.sandbox_set_card(p_subscription_id, p_declines);
end
$$;

create or replace function billing_api.subscription_card_set(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  perform billing.require_scope('subscriptions:write');
  if not exists (select 1 from billing.subscriptions s
                 where s.community_id = billing.current_community_id() and s.id = p_args->>'id') then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_args->>'id', '') || '.');
  end if;
  return billing_private.portal_set_card(p_args->>'id', p_args->>'card' = 'declines');
end
$$;

-- Which card a sandbox subscription pays with now ('pays' or 'declines').
create or replace function billing_api.subscription_card_get(p_args jsonb) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('subscription_id', s.id, 'card',
    case when coalesce(c.declines, false) then 'declines' else 'pays' end)
  from billing.subscriptions s
  left join billing.sandbox_cards c on c.community_id = s.community_id and c.subscription_id = s.id
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id'
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

grant execute on function billing.current_member_id() to billing_api, billing_writer;
grant execute on function billing_private.member_portal_scopes() to billing_api;
grant execute on function billing_private.member_portal_open(text, bytea, text) to billing_api;
grant execute on function billing_private.member_portal_info(text) to billing_api;
grant execute on function billing_private.portal_set_card(text, boolean) to billing_api;
grant execute on function billing.plan_interval(text) to billing_api;
grant execute on function billing_api.subscription_switch_preview(jsonb) to billing_api;
grant execute on function billing_api.subscription_card_set(jsonb) to billing_api;
grant execute on function billing_api.subscription_card_get(jsonb) to billing_api;
--! EndIncluded 82-member-portal.sql
--! Included 90-retention.sql
-- Retention: the worker purges what has outlived its use (hourly, billing__purge_expired).
--   idempotency records      after expires_at (24 hours)
--   link codes, portal URLs  a day after they expired (by the community's clock)
--   webhook attempts         after p_delivery_retention (30 days); finished deliveries too
--   rate buckets             idle for an hour (a purged bucket is simply full again)
create or replace function billing_private.purge_expired(p_delivery_retention interval default '30 days')
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_idempotency integer;
  v_link_codes integer;
  v_portal integer;
  v_attempts integer;
  v_deliveries integer;
  v_buckets integer;
  v_links integer;
  v_sessions integer;
  v_member_sessions integer;
begin
  delete from billing.idempotency_keys where expires_at <= now();
  get diagnostics v_idempotency = row_count;
  delete from billing.link_codes l
  where l.expires_at <= billing.community_now(l.community_id) - interval '1 day';
  get diagnostics v_link_codes = row_count;
  delete from billing.portal_sessions p
  where p.expires_at <= billing.community_now(p.community_id) - interval '1 day';
  get diagnostics v_portal = row_count;
  delete from billing.webhook_attempts a
  where a.started_at < now() - p_delivery_retention;
  get diagnostics v_attempts = row_count;
  delete from billing.webhook_deliveries d
  where d.status <> 'pending' and d.updated_at < now() - p_delivery_retention;
  get diagnostics v_deliveries = row_count;
  -- A key's last use outlives its idle bucket (shown in the dashboard).
  update billing_private.api_keys k set last_used_at = greatest(k.last_used_at, b.updated_at)
  from billing_private.rate_buckets b
  where b.bucket = ('key:' || k.id) collate "default" and b.updated_at < now() - interval '1 hour';
  delete from billing_private.rate_buckets b where b.updated_at < now() - interval '1 hour';
  get diagnostics v_buckets = row_count;
  -- Dashboard sign-in links, operator sessions and member portal sessions (15, 82) a
  -- day after they were spent, revoked or expired.
  delete from billing_private.operator_links l
  where coalesce(least(l.used_at, l.expires_at), l.expires_at) < now() - interval '1 day';
  get diagnostics v_links = row_count;
  delete from billing_private.operator_sessions s
  where coalesce(least(s.revoked_at, s.expires_at), s.expires_at) < now() - interval '1 day';
  get diagnostics v_sessions = row_count;
  delete from billing_private.member_portal_sessions m where m.expires_at < now() - interval '1 day';
  get diagnostics v_member_sessions = row_count;
  return jsonb_build_object('idempotency_keys', v_idempotency, 'link_codes', v_link_codes,
    'portal_sessions', v_portal, 'webhook_attempts', v_attempts, 'webhook_deliveries', v_deliveries,
    'rate_buckets', v_buckets, 'operator_links', v_links, 'operator_sessions', v_sessions,
    'member_portal_sessions', v_member_sessions);
end
$$;

-- What billing_worker calls (worker/tasks/billing__purge_expired.ts).
grant execute on function billing_private.purge_expired(interval) to billing_worker;
--! EndIncluded 90-retention.sql
--! Included 96-dashboard.sql
-- Reads only the dashboard's pages make (src/operations/index.ts dashboardOperations):
-- the overview's daily series and a member's entitlement history. After every domain
-- fixture: they read analytics views and the outbox.

-- The overview's series: per day of the last p_days (30 or 90) by the community's clock,
-- MRR (main currency), signups and cancels; plus the past_due count now.
create or replace function billing_api.analytics_series(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_days integer := coalesce((p_args->>'days')::integer, 30);
  v_currency text;
begin
  perform billing.require_scope('analytics:read');
  if v_days not in (30, 90) then
    perform billing.raise('BL422', 'days: 30 or 90.', 'days');
  end if;
  select m.currency into v_currency from analytics.mrr m where m.community_id = v_community
  order by m.billing_subscriptions desc, m.mrr_cents desc, m.currency limit 1;
  return jsonb_build_object(
    'currency', v_currency,
    'past_due', (select count(*) from billing.subscriptions s where s.community_id = v_community and s.status = 'past_due'),
    'days', coalesce((
      select jsonb_agg(jsonb_build_object('day', d.day::text,
        'mrr_cents', coalesce((select md.mrr_cents from analytics.mrr_daily md
          where md.community_id = v_community and md.day = d.day and md.currency = v_currency), 0),
        'signups', coalesce(a.signups, 0), 'cancels', coalesce(a.cancels, 0)) order by d.day)
      from analytics.days d
      left join analytics.daily_activity a on a.community_id = d.community_id and a.day = d.day
      where d.community_id = v_community and d.day > (billing.now() at time zone 'UTC')::date - v_days), '[]'));
end
$$;

-- A member's entitlement history (the member page): the member.entitlement.* events
-- naming the member, newest first, keyset by id; one probe of events_member_entitlement.
create index if not exists events_member_entitlement on billing.events (community_id, (data->'member'->>'id'), id)
  where type in ('member.entitlement.granted', 'member.entitlement.updated', 'member.entitlement.revoked');

create or replace function billing_api.member_entitlement_history(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('events:read');
  if not exists (select 1 from billing.members m where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || coalesce(p_args->>'id', '') || '.');
  end if;
  select array_agg(e.id order by e.id desc), array_agg(billing.event_json(e) order by e.id desc) into v_ids, v_items
  from (select * from billing.events e
        where e.community_id = billing.current_community_id()
          and e.type in ('member.entitlement.granted', 'member.entitlement.updated', 'member.entitlement.revoked')
          and (e.data->'member'->>'id') = p_args->>'id'
          and e.id < coalesce(p_args->>'cursor', chr(1114111))
        order by e.id desc limit v_limit + 1) e;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

grant execute on function billing_api.analytics_series(jsonb) to billing_api;
grant execute on function billing_api.member_entitlement_history(jsonb) to billing_api;
--! EndIncluded 96-dashboard.sql
