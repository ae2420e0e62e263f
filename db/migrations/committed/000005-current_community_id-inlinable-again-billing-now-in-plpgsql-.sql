--! Previous: sha1:33ab5341a08b6710450aec2f842998e2f36b6cbe
--! Hash: sha1:139fa14de6c58d0d888a377e84ae6ac8eee0905a
--! Message: current_community_id inlinable again; billing.now in plpgsql; recurring plan rules in SQL

--! split: 1-current.sql
-- current_community_id() inlinable again (owner probe role), billing.now() in plpgsql,
-- and the recurring side of the tier/plan rules as a constraint trigger.
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

create or replace function billing.gen_id(p_prefix text) returns text
  language sql volatile parallel unsafe
  set search_path = pg_catalog, pg_temp
as $$
  select p_prefix || '_'
    || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0')
    || lpad(to_hex(nextval('billing_private.id_seq')), 6, '0')
    || substr(md5(gen_random_uuid()::text), 1, 8)
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
-- PostgreSQL's cached role memberships. test/edge/current-community.test.ts holds both.
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
  v_rl jsonb;
begin
  if p_key_hash is not null then
    select k.id, k.community_id, k.scopes into v_key_id, v_community_id, v_scopes
    from billing_private.api_keys k
    where k.key_hash = p_key_hash and k.revoked_at is null;
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
    'scopes', to_jsonb(v_scopes), 'rl', v_rl);
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
  end if;
  if v_key_id is null then
    return billing_private.authenticate(null, p_ip, p_limits);
  end if;
  return jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
    'scopes', to_jsonb(v_scopes), 'token_available', coalesce(v_available, true));
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

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.api_auth(text,text,jsonb) to billing_api;
grant execute on function billing.api_auth_deferred(text,text,jsonb) to billing_api;
grant execute on function billing.api_call(text,text,jsonb,text,text,jsonb,jsonb) to billing_api;
grant execute on function billing.api_call_deferred(text,text,jsonb,text,text,jsonb) to billing_api;
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
--! Included 20-catalog.sql
-- Catalog: platform configs, tiers with their plans, entitlements with their
-- benefits, tier -> entitlement links, and discount codes. Written by the operator
-- (owner: `billing catalog apply`, src/catalog.ts); the API only reads it. The rules
-- src/catalog.ts checks across fields are constraints here too, so every door into
-- these tables (SQL included) keeps them.
--
-- Each entitlement-feeding table carries a _500_ledger trigger: a change refreshes
-- the ledger of the members it reaches (functions in 50-ledger.sql).

-- ---- platform configs ---------------------------------------------------------------

create table if not exists billing.platform_configs (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('pcfg'),
  key text not null,
  platform text not null check (platform in ('discord', 'telegram')),
  name text,
  settings jsonb not null default '{}',
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key)
);
alter table billing.platform_configs enable row level security;
alter table billing.platform_configs force row level security;
drop policy if exists tenant on billing.platform_configs;
create policy tenant on billing.platform_configs
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.platform_configs;
create policy owner_access on billing.platform_configs to current_user using (true) with check (true);
grant select on billing.platform_configs to billing_api;

-- A platform config's platform is part of each benefit object.
create or replace function billing.tg_platform_configs__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(new.community_id, coalesce((
    select array_agg(distinct b.entitlement_id) from billing.entitlement_benefits b
    where b.community_id = new.community_id and b.platform_config_id = new.id), '{}'));
  return null;
end
$$;

drop trigger if exists _500_ledger on billing.platform_configs;
create trigger _500_ledger after update of platform on billing.platform_configs
  for each row when (old.platform is distinct from new.platform)
  execute function billing.tg_platform_configs__ledger();

-- ---- tiers ---------------------------------------------------------------------------

create table if not exists billing.tiers (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('tier'),
  key text not null,
  name text not null,
  description text,
  kind text not null default 'subscription' check (kind in ('subscription', 'one_time')),
  billing_mode text not null default 'recurring' check (billing_mode in ('recurring', 'one_time')),
  rank integer not null default 0,
  active boolean not null default true,
  features text[] not null default '{}',
  perks jsonb not null default '[]',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key),
  -- src/catalog.ts: a one_time tier is billed "one_time".
  constraint tiers_one_time_billed_one_time check (kind <> 'one_time' or billing_mode = 'one_time')
);
alter table billing.tiers enable row level security;
alter table billing.tiers force row level security;
drop policy if exists tenant on billing.tiers;
create policy tenant on billing.tiers
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.tiers;
create policy owner_access on billing.tiers to current_user using (true) with check (true);
grant select on billing.tiers to billing_api;

-- ---- plans ---------------------------------------------------------------------------

create table if not exists billing.plans (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('plan'),
  tier_id text collate "C" not null,
  key text not null,
  name text,
  amount_cents integer not null check (amount_cents >= 0),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  interval text check (interval in ('month', 'year')),
  trial_days integer not null default 0 check (trial_days >= 0),
  access_days integer check (access_days > 0),
  active boolean not null default true,
  stripe_price_id text,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key),
  foreign key (community_id, tier_id) references billing.tiers on delete cascade
);
create index if not exists plans_tier on billing.plans (community_id, tier_id);
alter table billing.plans enable row level security;
alter table billing.plans force row level security;
drop policy if exists tenant on billing.plans;
create policy tenant on billing.plans
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.plans;
create policy owner_access on billing.plans to current_user using (true) with check (true);
grant select on billing.plans to billing_api;

-- The length of one billing period of a plan's interval.
create or replace function billing.plan_interval(p_interval text) returns interval
  language sql immutable parallel safe
as $$ select case p_interval when 'month' then interval '1 month' when 'year' then interval '1 year' end $$;

-- The catalog validator's plan rules (src/domain/catalog/catalog-file.ts), held here
-- for every door: the plans of a tier billed one_time have no interval and no trial;
-- those of a recurring tier have an interval and no access_days. The rule spans plans
-- and tiers, so constraint triggers on both tables check it, at commit (a catalog
-- apply may update a tier before its plans).
create or replace function billing.check_tier_plans(p_community_id text, p_tier_id text) returns void
  language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_mode text;
begin
  select t.billing_mode into v_mode from billing.tiers t where t.community_id = p_community_id and t.id = p_tier_id;
  select p.* into v_plan from billing.plans p
  where p.community_id = p_community_id and p.tier_id = p_tier_id
    and case v_mode
      when 'one_time' then p.interval is not null or p.trial_days <> 0
      else p.interval is null or p.access_days is not null end
  order by p.id
  limit 1;
  if v_plan.id is null then return; end if;
  if v_mode = 'one_time' then
    raise exception using errcode = 'check_violation',
      message = 'Plan ' || v_plan.key || ' belongs to a tier billed one_time: it has no interval and no trial.',
      detail = case when v_plan.interval is not null then 'interval' else 'trial_days' end;
  end if;
  raise exception using errcode = 'check_violation',
    message = 'Plan ' || v_plan.key || ' belongs to a recurring tier: it has an interval (month or year) and no access_days.',
    detail = case when v_plan.interval is null then 'interval' else 'access_days' end;
end
$$;

create or replace function billing.tg_plans__tier_plan_rules() returns trigger
  language plpgsql
as $$
begin
  perform billing.check_tier_plans(new.community_id, new.tier_id);
  return null;
end
$$;

drop trigger if exists _100_one_time_rules on billing.plans;
drop trigger if exists _100_tier_plan_rules on billing.plans;
create constraint trigger _100_tier_plan_rules after insert or update of tier_id, interval, trial_days, access_days
  on billing.plans deferrable initially deferred for each row execute function billing.tg_plans__tier_plan_rules();

create or replace function billing.tg_tiers__tier_plan_rules() returns trigger
  language plpgsql
as $$
begin
  perform billing.check_tier_plans(new.community_id, new.id);
  return null;
end
$$;

drop trigger if exists _100_one_time_rules on billing.tiers;
drop trigger if exists _100_tier_plan_rules on billing.tiers;
create constraint trigger _100_tier_plan_rules after update of billing_mode on billing.tiers
  deferrable initially deferred for each row when (new.billing_mode is distinct from old.billing_mode)
  execute function billing.tg_tiers__tier_plan_rules();

-- Replaced by the above (they checked the one_time side only).
drop function if exists billing.tg_plans__one_time_rules();
drop function if exists billing.tg_tiers__one_time_rules();
drop function if exists billing.check_one_time_plans(text, text);

-- A plan moved to another tier: its subscribers' and buyers' sources now reach other
-- entitlements (reason tier_entitlements_changed, as for a link edit).
create or replace function billing.tg_plans__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_refresh_members(new.community_id, coalesce((
    select array_agg(distinct m.member_id) from (
      select s.member_id from billing.subscriptions s where s.community_id = new.community_id and s.plan_id = new.id
      union all
      select u.member_id from billing.purchases u where u.community_id = new.community_id and u.plan_id = new.id) m),
    '{}'), 'tier_entitlements_changed', null);
  return null;
end
$$;

drop trigger if exists _500_ledger on billing.plans;
create trigger _500_ledger after update of tier_id on billing.plans
  for each row when (old.tier_id is distinct from new.tier_id)
  execute function billing.tg_plans__ledger();

-- ---- entitlements and their benefits ---------------------------------------------------

create table if not exists billing.entitlements (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('ent'),
  key text not null,
  name text not null,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, key)
);
alter table billing.entitlements enable row level security;
alter table billing.entitlements force row level security;
drop policy if exists tenant on billing.entitlements;
create policy tenant on billing.entitlements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.entitlements;
create policy owner_access on billing.entitlements to current_user using (true) with check (true);
grant select on billing.entitlements to billing_api;

create table if not exists billing.entitlement_benefits (
  community_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  platform_config_id text collate "C" not null,
  type text not null,
  value text not null,
  primary key (community_id, entitlement_id, platform_config_id, type, value),
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade,
  foreign key (community_id, platform_config_id) references billing.platform_configs on delete cascade
);
alter table billing.entitlement_benefits enable row level security;
alter table billing.entitlement_benefits force row level security;
drop policy if exists tenant on billing.entitlement_benefits;
create policy tenant on billing.entitlement_benefits
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.entitlement_benefits;
create policy owner_access on billing.entitlement_benefits to current_user using (true) with check (true);
grant select on billing.entitlement_benefits to billing_api;

-- Entitlement benefits changed: refresh every member whose row for those
-- entitlements is active (inactive rows carry no benefits).
create or replace function billing.tg_entitlement_benefits__ledger_insert() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from new_rows t group by t.community_id;
  return null;
end
$$;

create or replace function billing.tg_entitlement_benefits__ledger_delete() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from old_rows t group by t.community_id;
  return null;
end
$$;

create or replace function billing.tg_entitlement_benefits__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_benefits_changed(t.community_id, array_agg(distinct t.entitlement_id))
  from (select community_id, entitlement_id from new_rows
        union all select community_id, entitlement_id from old_rows) t
  group by t.community_id;
  return null;
end
$$;

drop trigger if exists _500_ledger_insert on billing.entitlement_benefits;
drop trigger if exists _500_ledger_update on billing.entitlement_benefits;
drop trigger if exists _500_ledger_delete on billing.entitlement_benefits;
create trigger _500_ledger_insert after insert on billing.entitlement_benefits
  referencing new table as new_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger_insert();
create trigger _500_ledger_update after update on billing.entitlement_benefits
  referencing new table as new_rows old table as old_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger();
create trigger _500_ledger_delete after delete on billing.entitlement_benefits
  referencing old table as old_rows
  for each statement execute function billing.tg_entitlement_benefits__ledger_delete();

-- ---- tier -> entitlement links ---------------------------------------------------------

create table if not exists billing.tier_entitlements (
  community_id text collate "C" not null,
  tier_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  primary key (community_id, tier_id, entitlement_id),
  foreign key (community_id, tier_id) references billing.tiers on delete cascade,
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade
);
create index if not exists tier_entitlements_ent on billing.tier_entitlements (community_id, entitlement_id);
alter table billing.tier_entitlements enable row level security;
alter table billing.tier_entitlements force row level security;
drop policy if exists tenant on billing.tier_entitlements;
create policy tenant on billing.tier_entitlements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.tier_entitlements;
create policy owner_access on billing.tier_entitlements to current_user using (true) with check (true);
grant select on billing.tier_entitlements to billing_api;

-- Tier entitlement links changed: refresh every member holding a source on the
-- tiers touched, once per statement (transition tables).
create or replace function billing.tg_tier_entitlements__ledger() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from (
      select community_id, tier_id from new_rows
      union all
      select community_id, tier_id from old_rows) t
    group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

-- Transition tables allow one event per trigger; an empty table stands in for the
-- missing side.
create or replace function billing.tg_tier_entitlements__ledger_insert() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from new_rows t group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

create or replace function billing.tg_tier_entitlements__ledger_delete() returns trigger
  language plpgsql
as $$
declare
  v_pair record;
begin
  for v_pair in
    select t.community_id, array_agg(distinct t.tier_id) as tiers from old_rows t group by t.community_id
  loop
    perform billing.ledger_refresh_members(v_pair.community_id,
      billing.ledger_members_on_tiers(v_pair.community_id, v_pair.tiers), 'tier_entitlements_changed', null);
  end loop;
  return null;
end
$$;

drop trigger if exists _500_ledger_insert on billing.tier_entitlements;
drop trigger if exists _500_ledger_update on billing.tier_entitlements;
drop trigger if exists _500_ledger_delete on billing.tier_entitlements;
create trigger _500_ledger_insert after insert on billing.tier_entitlements
  referencing new table as new_rows
  for each statement execute function billing.tg_tier_entitlements__ledger_insert();
create trigger _500_ledger_update after update on billing.tier_entitlements
  referencing new table as new_rows old table as old_rows
  for each statement execute function billing.tg_tier_entitlements__ledger();
create trigger _500_ledger_delete after delete on billing.tier_entitlements
  referencing old table as old_rows
  for each statement execute function billing.tg_tier_entitlements__ledger_delete();

-- ---- discount codes ----------------------------------------------------------------------

create table if not exists billing.discount_codes (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id uuid not null default gen_random_uuid(),
  code text not null,
  name text,
  value_type text not null check (value_type in ('percent', 'amount')),
  percent_off numeric check (percent_off > 0 and percent_off <= 100),
  amount_off_cents integer check (amount_off_cents > 0),
  currency text,
  duration text not null default 'once' check (duration in ('once', 'repeating', 'forever')),
  duration_months integer check (duration_months > 0),
  use_limit integer check (use_limit > 0),
  min_spend_cents integer check (min_spend_cents >= 0),
  max_spend_cents integer check (max_spend_cents >= 0),
  starts_at timestamptz,
  expires_at timestamptz,
  is_active boolean not null default true,
  archived_at timestamptz,
  tier_ids text[] not null default '{}',
  members jsonb not null default '[]',
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  -- The rules of src/catalog.ts (checkRules), for every door into the table:
  -- percent_off xor amount_off_cents, by value_type; an amount names its currency.
  constraint discount_codes_percent_value check (value_type <> 'percent' or (percent_off is not null and amount_off_cents is null)),
  constraint discount_codes_amount_value check (value_type <> 'amount' or (amount_off_cents is not null and currency is not null and percent_off is null)),
  -- duration_months exactly when the duration is repeating.
  constraint discount_codes_duration_months check ((duration = 'repeating') = (duration_months is not null)),
  constraint discount_codes_spend_range check (min_spend_cents <= max_spend_cents),
  constraint discount_codes_window check (starts_at < expires_at)
);
create unique index if not exists discount_codes_code on billing.discount_codes (community_id, lower(code));
alter table billing.discount_codes enable row level security;
alter table billing.discount_codes force row level security;
drop policy if exists tenant on billing.discount_codes;
create policy tenant on billing.discount_codes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.discount_codes;
create policy owner_access on billing.discount_codes to current_user using (true) with check (true);
grant select on billing.discount_codes to billing_api;
-- Its JSON (with redemption counts) and the list operation are in 80-checkout.sql,
-- beside billing.discount_redemptions.

-- ---- plans API -----------------------------------------------------------------------------

-- Plans: tiers with their nested billing plans.

create or replace function billing.tier_json(p_tier billing.tiers) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'id', p_tier.id, 'name', p_tier.name, 'description', p_tier.description,
    'kind', p_tier.kind, 'billing_mode', p_tier.billing_mode, 'rank', p_tier.rank,
    'features', to_jsonb(p_tier.features), 'perks', p_tier.perks,
    'plans', coalesce((
      select jsonb_agg(jsonb_build_object('id', p.id, 'name', p.name, 'amount_cents', p.amount_cents,
        'currency', p.currency, 'interval', p.interval, 'trial_days', p.trial_days,
        'access_days', p.access_days) order by p.amount_cents, p.id)
      from billing.plans p
      where p.community_id = p_tier.community_id and p.tier_id = p_tier.id and p.active), '[]'))
$$;

create or replace function billing_api.plans_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('plans:read');
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.tier_json(t) order by t.rank, t.id)
    from billing.tiers t where t.active), '[]'));
end
$$;

create or replace function billing_api.plans_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_tier billing.tiers;
begin
  perform billing.require_scope('plans:read');
  select * into v_tier from billing.tiers t where t.id = p_args->>'tierId';
  if v_tier.id is null then
    perform billing.raise('BL404', 'No tier ' || (p_args->>'tierId') || '.');
  end if;
  return billing.tier_json(v_tier);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.tier_json(billing.tiers) to billing_api;
grant execute on function billing_api.plans_list(jsonb) to billing_api;
grant execute on function billing_api.plans_get(jsonb) to billing_api;
--! EndIncluded 20-catalog.sql
