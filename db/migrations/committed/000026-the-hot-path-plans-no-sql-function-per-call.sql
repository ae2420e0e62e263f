--! Previous: sha1:684c98dbab4a12c600a0d7b1fbcc56afabce1ac1
--! Hash: sha1:d9a9c565b4acc9dfab69422814e8434513da8f33
--! Message: The hot path plans no SQL function per call

--! split: 1-current.sql
-- The hot path plans no SQL function per call (issue 17; test/db/hot-path-plans.test.ts):
-- authenticate_key and take_token in plpgsql, page_json and encode_cursor stable so
-- they inline, member_portal_scopes stable.
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

-- Opaque list cursor: base64url of {"id": ...}; src/core/cursor.ts decodes it. Stable,
-- not immutable, like billing.iso: the body calls stable built-ins, and only a stable
-- declaration lets PostgreSQL inline it (test/db/hot-path-plans.test.ts).
create or replace function billing.encode_cursor(p_id text) returns text
  language sql stable parallel safe
as $$
  select translate(encode(convert_to(jsonb_build_object('id', p_id)::text, 'UTF8'), 'base64'), E'+/=\n', '-_')
$$;

-- One page of a keyset list from at most limit+1 rows, newest first: p_ids and p_items
-- are their ids and JSON, in the same order. Answers {data, next_cursor}; next_cursor
-- (continuing after the page's last id) is null on the last page.
create or replace function billing.page_json(p_ids text[], p_items jsonb[], p_limit integer) returns jsonb
  language sql stable parallel safe
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
-- plpgsql, not sql: a SQL function with a subquery is never inlined, so it was planned
-- again on every call (80 us; the ledger and the analytics views call it per row).
create or replace function billing.community_now(p_community_id text) returns timestamptz
  language plpgsql stable parallel safe
as $$
begin
  return now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = p_community_id), '0'::interval);
end
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
    v_out := billing_private.op_dispatch(p_op, p_args);  -- 98-dispatch.sql
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
        v_out := billing_private.op_dispatch(p_op, p_args);  -- 98-dispatch.sql
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
-- revocation holds from the next request on, leased tokens or not. plpgsql, not sql:
-- a SECURITY DEFINER SQL function is never inlined, so it was parsed and planned again
-- on every request (test/db/hot-path-plans.test.ts); plpgsql keeps its plan per session.
create or replace function billing_private.authenticate_key(p_key_hash text)
  returns jsonb language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_auth jsonb;
begin
  select jsonb_build_object('ok', true, 'community_id', k.community_id, 'key_id', k.id, 'scopes', to_jsonb(k.scopes))
    into v_auth
  from billing_private.api_keys k
  where k.key_hash = p_key_hash and k.revoked_at is null;
  return v_auth;
end
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
    v_out := billing_private.op_dispatch(p_op, p_args);  -- 98-dispatch.sql
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
--! Included 85-idempotency-and-limits.sql
-- Idempotency records and rate limits.

-- ---- idempotency ---------------------------------------------------------------------

-- Idempotency records: scoped per community and endpoint, kept 24 hours.
create table if not exists billing.idempotency_keys (
  community_id text collate "C" not null references billing.communities on delete cascade,
  endpoint text not null,
  key text not null,
  request_hash text not null,
  response_status integer not null,
  response_body jsonb,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  primary key (community_id, endpoint, key)
);
alter table billing.idempotency_keys enable row level security;
alter table billing.idempotency_keys force row level security;
drop policy if exists tenant on billing.idempotency_keys;
create policy tenant on billing.idempotency_keys
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.idempotency_keys;
create policy owner_access on billing.idempotency_keys to current_user using (true) with check (true);
grant select on billing.idempotency_keys to billing_api;
revoke insert, update, delete on billing.idempotency_keys from billing_api;
grant select, insert, update on billing.idempotency_keys to billing_writer;

-- Idempotency: a transaction-level advisory lock marks the key in flight; a
-- finished record replays. Returns null when the request should run.
create or replace function billing.idempotency_begin(p_endpoint text, p_key text, p_hash text)
  returns jsonb language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_rec billing.idempotency_keys;
begin
  if not pg_try_advisory_xact_lock(hashtextextended(
       billing.current_community_id() || ' ' || p_endpoint || ' ' || p_key, 7)) then
    raise exception using errcode = 'BLRIF',
      message = 'A request with this Idempotency-Key is still being processed.';
  end if;
  select * into v_rec from billing.idempotency_keys i
  where i.community_id = billing.current_community_id() and i.endpoint = p_endpoint and i.key = p_key
    and i.expires_at > now();
  if v_rec.key is null then
    return null;
  end if;
  if v_rec.request_hash <> p_hash then
    raise exception using errcode = 'BLIKR',
      message = 'This Idempotency-Key was used with a different request body.';
  end if;
  return jsonb_build_object('status', v_rec.response_status, 'body', v_rec.response_body);
end
$$;

create or replace function billing.idempotency_finish(p_endpoint text, p_key text, p_hash text,
  p_status integer, p_body jsonb)
  returns void language sql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
  insert into billing.idempotency_keys (community_id, endpoint, key, request_hash, response_status,
    response_body, expires_at)
  values (billing.current_community_id(), p_endpoint, p_key, p_hash, p_status, p_body, now() + interval '24 hours')
  on conflict (community_id, endpoint, key) do update set
    request_hash = excluded.request_hash, response_status = excluded.response_status,
    response_body = excluded.response_body, created_at = now(), expires_at = excluded.expires_at
$$;

-- ---- rate limits -----------------------------------------------------------------------

-- Token buckets; losing them on a crash only refills them.
create unlogged table if not exists billing_private.rate_buckets (
  bucket text primary key,
  tokens double precision not null,
  allowed boolean not null default true,
  updated_at timestamptz not null
);
alter table billing_private.rate_buckets enable row level security;
alter table billing_private.rate_buckets force row level security;
drop policy if exists owner_only on billing_private.rate_buckets;
create policy owner_only on billing_private.rate_buckets using (true);

-- How many tokens the last take granted (billing_private.take_tokens returns it).
alter table billing_private.rate_buckets add column if not exists granted integer not null default 0;

-- Token bucket refilling continuously: takes up to p_n whole tokens at once (a lease of
-- src/operations/token-leases.ts, or one for a request), after putting back p_return
-- tokens an earlier lease took and left unspent. Returns allowed (at least one
-- granted), granted, limit, remaining, reset, retry_after.
create or replace function billing_private.take_tokens(p_bucket text, p_per_minute double precision,
  p_burst double precision, p_n integer, p_return integer default 0)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_now timestamptz := clock_timestamp();
  v_rate double precision := p_per_minute / 60.0;
  v_tokens double precision;
  v_granted integer;
begin
  insert into billing_private.rate_buckets as b (bucket, tokens, allowed, granted, updated_at)
  values (p_bucket, p_burst - least(p_n, floor(p_burst)), p_burst >= 1, least(p_n, floor(p_burst)), v_now)
  -- v_now was read before waiting for the row lock, so it may precede the stored
  -- updated_at of a concurrent request that got the lock first: never refill
  -- negatively, never move updated_at back. Tokens put back never exceed the burst.
  on conflict (bucket) do update set
    granted = least(p_n, floor(least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate))),
    allowed = least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= 1,
    tokens = least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate)
      - least(p_n, floor(least(p_burst, b.tokens + p_return + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate))),
    updated_at = greatest(b.updated_at, v_now)
  returning tokens, granted into v_tokens, v_granted;
  return jsonb_build_object(
    'allowed', v_granted > 0,
    'granted', v_granted,
    'limit', p_per_minute::bigint,
    'remaining', floor(greatest(v_tokens, 0))::bigint,
    'reset', ceil(greatest(p_burst - v_tokens, 0) / v_rate)::bigint,
    'retry_after', greatest(ceil((1 - v_tokens) / v_rate), 1)::bigint);
end
$$;

-- One token (a request). plpgsql: a SECURITY DEFINER SQL function is planned on every call.
create or replace function billing_private.take_token(p_bucket text, p_per_minute double precision, p_burst double precision)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return billing_private.take_tokens(p_bucket, p_per_minute, p_burst, 1, 0) - 'granted';
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.idempotency_begin(text,text,text) to billing_api;
grant execute on function billing.idempotency_finish(text,text,text,integer,jsonb) to billing_api;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing to billing_writer;
alter function billing.idempotency_begin(text,text,text) owner to billing_writer;
alter function billing.idempotency_finish(text,text,text,integer,jsonb) owner to billing_writer;
revoke create on schema billing from billing_writer;
--! EndIncluded 85-idempotency-and-limits.sql
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
-- purchases and invoices, and the plans to switch between. Stable, so it is inlined: an
-- immutable SQL function is run (and planned) whenever a statement calling it is planned.
create or replace function billing_private.member_portal_scopes() returns text[]
  language sql stable parallel safe
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
