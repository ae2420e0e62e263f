--! Previous: sha1:bbbe424b3aec378da066e2da1a77139c901e8729
--! Hash: sha1:1138fd58e2e87edffa44a70a54e0fad6a48efd7e
--! Message: edge, roles, graphql, money continued, stripe for production

--! split: 1-current.sql
-- One change, every domain it touches included again in fixture order (fixtures are
-- idempotent; docs/development.md): HTTP edge hardening (tokens stored hashed, the rate
-- token taken last), database roles (billing_writer owns the writing operations,
-- operator SQL logins), GraphQL views and analytics, money continued (refunds,
-- disputes, grants, pause, calendar arithmetic in UTC), Stripe for production
-- (per-community secrets, one customer per member).
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

-- Per-request identity. For the API: app.community_id, set transaction-locally by
-- billing.api_auth(). For a login that is a member of billing_operator: its own
-- community, whatever the settings or the current role say. The membership probe is
-- one catalog index lookup, once per statement (policies call this as an initplan).
create or replace function billing.current_community_id() returns text
  language sql stable parallel safe
as $$
  select case
    when exists (select 1 from pg_catalog.pg_auth_members m
                 where m.member = pg_catalog.to_regrole(pg_catalog.quote_ident(session_user))
                   and m.roleid = 'billing_operator'::pg_catalog.regrole)
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
--! Included 05-worker.sql
-- graphile-worker: the one door through which SQL enqueues jobs, and the heartbeats
-- of the dead-worker reaper. Owner only: billing_api reaches add_job solely through
-- SECURITY DEFINER functions that pin their search_path.

-- Rows the dead-worker reaper reads: every live worker of startWorker() beats here.
create table if not exists billing_private.worker_heartbeats (
  worker_id text primary key,
  seen_at timestamptz not null default now()
);
alter table billing_private.worker_heartbeats enable row level security;
alter table billing_private.worker_heartbeats force row level security;
drop policy if exists owner_only on billing_private.worker_heartbeats;
create policy owner_only on billing_private.worker_heartbeats using (true);

-- Adds one job per payload (all for one task, one run_at), in the caller's
-- transaction. graphile_worker.add_jobs needs the owner's rights, hence SECURITY
-- DEFINER; every enqueue in this schema goes through here.
create or replace function billing_private.add_job(p_identifier text, p_payloads json[],
  p_run_at timestamptz default null, p_max_attempts integer default null)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if coalesce(cardinality(p_payloads), 0) = 0 then
    return;
  end if;
  perform graphile_worker.add_jobs(array(
    select row(p_identifier, p.payload, null, p_run_at, p_max_attempts, null, null, null)::graphile_worker.job_spec
    from unnest(p_payloads) as p(payload)));
end
$$;

-- Dead-worker reaper: live workers beat every few seconds; the jobs of workers silent
-- for longer than p_stale go back to the queue at once (graphile-worker alone would
-- wait 4 hours). Returns the reaped worker ids.
create or replace function billing_private.worker_heartbeat(p_worker_ids text[], p_stale interval)
  returns text[] language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_dead text[];
begin
  insert into billing_private.worker_heartbeats (worker_id, seen_at)
  select w, now() from unnest(p_worker_ids) w
  on conflict (worker_id) do update set seen_at = excluded.seen_at;
  with dead as (
    delete from billing_private.worker_heartbeats h where h.seen_at < now() - p_stale returning h.worker_id
  )
  select array_agg(worker_id) into v_dead from dead;
  if v_dead is not null then
    perform graphile_worker.force_unlock_workers(v_dead);
  end if;
  return coalesce(v_dead, '{}');
end
$$;

-- Stops heartbeats of this process's workers (a clean shutdown).
create or replace function billing_private.worker_heartbeat_stop(p_worker_ids text[])
  returns void language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  delete from billing_private.worker_heartbeats where worker_id = any (p_worker_ids)
$$;

-- ---- the worker's role ------------------------------------------------------------------
-- billing_worker (a login created in 00-foundation.sql) runs graphile-worker and the
-- tasks. It owns nothing and holds no table of ours: it runs graphile-worker's own
-- queries (its schema is installed and migrated by the owner before our migrations)
-- and calls exactly the SECURITY DEFINER functions below and in 40-subscriptions,
-- 70-webhooks and 90-retention.
grant usage on schema billing_private to billing_worker;
do $$
begin
  if exists (select 1 from pg_namespace where nspname = 'graphile_worker') then
    grant usage on schema graphile_worker to billing_worker;
    grant select, insert, update, delete on all tables in schema graphile_worker to billing_worker;
    grant usage, select, update on all sequences in schema graphile_worker to billing_worker;
    grant execute on all functions in schema graphile_worker to billing_worker;
    -- graphile-worker leaves its functions executable by PUBLIC (behind a schema only its
    -- owner could use): opt-in here too, as everywhere (00-foundation.sql).
    revoke execute on all functions in schema graphile_worker from public;
    -- Tables of graphile-worker upgrades (migrated by the owner at start) too.
    alter default privileges in schema graphile_worker grant select, insert, update, delete on tables to billing_worker;
    alter default privileges in schema graphile_worker grant usage, select, update on sequences to billing_worker;
    alter default privileges in schema graphile_worker grant execute on functions to billing_worker;
    -- graphile-worker enables RLS on its private tables without policies (only their
    -- owner reads them): a policy for billing_worker on each (graphile-worker 0.18's).
    drop policy if exists billing_worker on graphile_worker._private_jobs;
    create policy billing_worker on graphile_worker._private_jobs to billing_worker using (true) with check (true);
    drop policy if exists billing_worker on graphile_worker._private_job_queues;
    create policy billing_worker on graphile_worker._private_job_queues to billing_worker using (true) with check (true);
    drop policy if exists billing_worker on graphile_worker._private_tasks;
    create policy billing_worker on graphile_worker._private_tasks to billing_worker using (true) with check (true);
    drop policy if exists billing_worker on graphile_worker._private_known_crontabs;
    create policy billing_worker on graphile_worker._private_known_crontabs to billing_worker using (true) with check (true);
  end if;
end
$$;
grant execute on function billing_private.worker_heartbeat(text[], interval) to billing_worker;
grant execute on function billing_private.worker_heartbeat_stop(text[]) to billing_worker;
--! EndIncluded 05-worker.sql
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
create or replace function billing.now() returns timestamptz
  language sql stable parallel safe
as $$
  select now() + coalesce(
    (select c.clock_offset from billing.communities c where c.id = billing.current_community_id()),
    '0'::interval)
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

-- src/catalog.ts: the plans of a tier billed one_time have no interval and no trial.
-- The rule spans plans and tiers, so constraint triggers on both tables check it,
-- at commit (a catalog apply may update a tier before its plans).
-- (The recurring side, "an interval and no access_days", is left to the catalog
-- validator: rows written by hand, e.g. test seeds, use interval-less plans there.)
create or replace function billing.check_one_time_plans(p_community_id text, p_tier_id text) returns void
  language plpgsql stable
as $$
declare
  v_plan billing.plans;
begin
  select p.* into v_plan from billing.plans p
  join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
  where p.community_id = p_community_id and p.tier_id = p_tier_id and t.billing_mode = 'one_time'
    and (p.interval is not null or p.trial_days <> 0)
  order by p.id
  limit 1;
  if v_plan.id is not null then
    raise exception using errcode = 'check_violation',
      message = 'Plan ' || v_plan.key || ' belongs to a tier billed one_time: it has no interval and no trial.',
      detail = case when v_plan.interval is not null then 'interval' else 'trial_days' end;
  end if;
end
$$;

create or replace function billing.tg_plans__one_time_rules() returns trigger
  language plpgsql
as $$
begin
  perform billing.check_one_time_plans(new.community_id, new.tier_id);
  return null;
end
$$;

drop trigger if exists _100_one_time_rules on billing.plans;
create constraint trigger _100_one_time_rules after insert or update of tier_id, interval, trial_days
  on billing.plans deferrable initially deferred for each row execute function billing.tg_plans__one_time_rules();

create or replace function billing.tg_tiers__one_time_rules() returns trigger
  language plpgsql
as $$
begin
  perform billing.check_one_time_plans(new.community_id, new.id);
  return null;
end
$$;

drop trigger if exists _100_one_time_rules on billing.tiers;
create constraint trigger _100_one_time_rules after update of billing_mode on billing.tiers
  deferrable initially deferred for each row when (new.billing_mode = 'one_time')
  execute function billing.tg_tiers__one_time_rules();

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
--! Included 30-members.sql
-- Members: a community's buyers, their platform identities and external subjects;
-- the member JSON object; the members API (list, get, lookup, attach an external
-- subject). A member's rows write member.created / member.updated events (the outbox,
-- 60-events.sql); identity changes also refresh the member's ledger (50-ledger.sql),
-- since entitlement events carry an identities snapshot.

-- ---- tables --------------------------------------------------------------------------

create table if not exists billing.members (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('mem'),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id)
);
alter table billing.members enable row level security;
alter table billing.members force row level security;
drop policy if exists tenant on billing.members;
create policy tenant on billing.members
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.members;
create policy owner_access on billing.members to current_user using (true) with check (true);
grant select on billing.members to billing_api;
revoke insert, update, delete on billing.members from billing_api;
-- update: the ledger locks the member row (for no key update) while it refreshes.
grant select, insert, update on billing.members to billing_writer;

create table if not exists billing.member_identities (
  community_id text collate "C" not null,
  member_id text collate "C" not null,
  platform text not null check (platform in ('discord', 'telegram')),
  platform_uid text not null,
  username text,
  created_at timestamptz not null default now(),
  primary key (community_id, platform, platform_uid),
  unique (community_id, member_id, platform),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
alter table billing.member_identities enable row level security;
alter table billing.member_identities force row level security;
drop policy if exists tenant on billing.member_identities;
create policy tenant on billing.member_identities
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.member_identities;
create policy owner_access on billing.member_identities to current_user using (true) with check (true);
grant select on billing.member_identities to billing_api;
revoke insert, update, delete on billing.member_identities from billing_api;
grant select, insert, update on billing.member_identities to billing_writer;

create table if not exists billing.external_subjects (
  community_id text collate "C" not null,
  member_id text collate "C" not null,
  namespace text not null check (length(namespace) between 1 and 200),
  external_user_id text not null check (length(external_user_id) between 1 and 200),
  created_at timestamptz not null default now(),
  primary key (community_id, namespace, external_user_id),
  unique (community_id, member_id, namespace),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
alter table billing.external_subjects enable row level security;
alter table billing.external_subjects force row level security;
drop policy if exists tenant on billing.external_subjects;
create policy tenant on billing.external_subjects
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.external_subjects;
create policy owner_access on billing.external_subjects to current_user using (true) with check (true);
grant select on billing.external_subjects to billing_api;
revoke insert, update, delete on billing.external_subjects from billing_api;
grant select, insert on billing.external_subjects to billing_writer;

-- ---- the member object ---------------------------------------------------------------

-- The one definition of the spec's member object, shared by the read API, checkout
-- and every event that carries a member.
create or replace function billing.member_json(p_community_id text, p_member_id text) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', m.id,
    'created_at', billing.iso(m.created_at),
    'identities', coalesce((
      select jsonb_agg(jsonb_build_object('platform', i.platform, 'platform_uid', i.platform_uid,
        'username', i.username) order by i.platform, i.platform_uid)
      from billing.member_identities i
      where i.community_id = m.community_id and i.member_id = m.id), '[]'),
    'external_subjects', coalesce((
      select jsonb_agg(jsonb_build_object('namespace', x.namespace, 'external_user_id', x.external_user_id)
        order by x.namespace, x.external_user_id)
      from billing.external_subjects x
      where x.community_id = m.community_id and x.member_id = m.id), '[]'))
  from billing.members m
  where m.community_id = p_community_id and m.id = p_member_id
$$;

-- ---- events and ledger -----------------------------------------------------------------

create or replace function billing.tg_members__outbox() returns trigger
  language plpgsql
as $$
begin
  perform billing.emit_event(new.community_id, 'member.created', jsonb_build_object(
    'member', billing.member_json(new.community_id, new.id), 'change', null));
  return null;
end
$$;

drop trigger if exists _500_outbox on billing.members;
create trigger _500_outbox after insert on billing.members
  for each row execute function billing.tg_members__outbox();

-- member.updated, then the ledger refresh (the identities snapshot changed).
create or replace function billing.member_changed(p_community_id text, p_member_id text, p_change jsonb)
  returns void language plpgsql volatile
as $$
declare
  v_member jsonb := billing.member_json(p_community_id, p_member_id);
  v_event_id text;
begin
  if v_member is null then
    return; -- the member itself is being deleted
  end if;
  v_event_id := billing.emit_event(p_community_id, 'member.updated',
    jsonb_build_object('member', v_member, 'change', p_change));
  perform billing.ledger_refresh_member(p_community_id, p_member_id, p_change->>'kind', v_event_id);
end
$$;

create or replace function billing.tg_member_identities__outbox_and_ledger() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'UPDATE' and old.member_id = new.member_id and old.platform = new.platform
     and old.platform_uid = new.platform_uid and old.username is not distinct from new.username then
    return null;
  end if;
  if tg_op in ('DELETE', 'UPDATE') then
    perform billing.member_changed(old.community_id, old.member_id, jsonb_build_object(
      'kind', case when tg_op = 'DELETE' or old.member_id <> new.member_id then 'identity_unlinked'
        else 'identity_updated' end,
      'platform', old.platform, 'platform_uid', old.platform_uid));
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.member_id <> new.member_id) then
    perform billing.member_changed(new.community_id, new.member_id, jsonb_build_object(
      'kind', 'identity_linked', 'platform', new.platform, 'platform_uid', new.platform_uid));
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.member_identities;
create trigger _500_outbox_and_ledger after insert or update or delete on billing.member_identities
  for each row execute function billing.tg_member_identities__outbox_and_ledger();

create or replace function billing.tg_external_subjects__outbox_and_ledger() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'UPDATE' and old.member_id = new.member_id and old.namespace = new.namespace
     and old.external_user_id = new.external_user_id then
    return null;
  end if;
  if tg_op in ('DELETE', 'UPDATE') then
    perform billing.member_changed(old.community_id, old.member_id, jsonb_build_object(
      'kind', 'external_subject_removed', 'namespace', old.namespace,
      'external_user_id', old.external_user_id));
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    perform billing.member_changed(new.community_id, new.member_id, jsonb_build_object(
      'kind', 'external_subject_attached', 'namespace', new.namespace,
      'external_user_id', new.external_user_id));
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.external_subjects;
create trigger _500_outbox_and_ledger after insert or update or delete on billing.external_subjects
  for each row execute function billing.tg_external_subjects__outbox_and_ledger();

-- ---- API -------------------------------------------------------------------------------

-- The member one identity pair names, or null when no member has it. Exactly one pair
-- is required: platform + platform_uid, or namespace + external_user_id (400 naming the
-- missing or extra parameter otherwise); an unknown platform answers 422.
create or replace function billing.resolve_identity(p_args jsonb) returns text
  language plpgsql stable
as $$
declare
  v_platform text := nullif(p_args->>'platform', '');
  v_uid text := nullif(p_args->>'platform_uid', '');
  v_ns text := nullif(p_args->>'namespace', '');
  v_ext text := nullif(p_args->>'external_user_id', '');
  v_platform_pair boolean := v_platform is not null or v_uid is not null;
  v_subject_pair boolean := v_ns is not null or v_ext is not null;
  v_member text;
begin
  if v_platform_pair and v_subject_pair then
    perform billing.raise('BL400', 'Send exactly one identity pair: platform with platform_uid, '
      || 'or namespace with external_user_id, not both.', case when v_ns is not null then 'namespace' else 'external_user_id' end);
  elsif not v_platform_pair and not v_subject_pair then
    perform billing.raise('BL400', 'Missing query parameter "platform" (with "platform_uid") or "namespace" '
      || '(with "external_user_id"): send exactly one identity pair.', 'platform');
  elsif v_platform_pair and v_platform is null then
    perform billing.raise('BL400', 'Missing query parameter "platform": platform_uid needs its platform.', 'platform');
  elsif v_platform_pair and v_uid is null then
    perform billing.raise('BL400', 'Missing query parameter "platform_uid": platform needs its platform_uid.', 'platform_uid');
  elsif v_subject_pair and v_ns is null then
    perform billing.raise('BL400', 'Missing query parameter "namespace": external_user_id needs its namespace.', 'namespace');
  elsif v_subject_pair and v_ext is null then
    perform billing.raise('BL400', 'Missing query parameter "external_user_id": namespace needs its external_user_id.', 'external_user_id');
  end if;
  if v_platform_pair then
    if v_platform not in ('discord', 'telegram') then
      perform billing.raise('BL422', 'Unknown platform "' || v_platform || '"; known: discord, telegram.', 'platform');
    end if;
    select i.member_id into v_member from billing.member_identities i
    where i.community_id = billing.current_community_id() and i.platform = v_platform and i.platform_uid = v_uid;
  else
    select x.member_id into v_member from billing.external_subjects x
    where x.community_id = billing.current_community_id() and x.namespace = v_ns and x.external_user_id = v_ext;
  end if;
  return v_member;
end
$$;

create or replace function billing_api.members_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('members:read');
  select array_agg(m.id order by m.id desc), array_agg(billing.member_json(m.community_id, m.id) order by m.id desc)
    into v_ids, v_items
  from (select m.community_id, m.id from billing.members m
        where m.community_id = billing.current_community_id()
          and m.id < coalesce(p_args->>'cursor', chr(1114111))
        order by m.id desc limit v_limit + 1) m;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.members_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_out jsonb;
begin
  perform billing.require_scope('members:read');
  v_out := billing.member_json(billing.current_community_id(), p_args->>'id');
  if v_out is null then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;

create or replace function billing_api.members_lookup(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text;
begin
  perform billing.require_scope('members:read');
  v_member := billing.resolve_identity(p_args);
  if v_member is null then
    perform billing.raise('BL404', 'No member has this identity.');
  end if;
  return billing.member_json(billing.current_community_id(), v_member);
end
$$;

-- POST /v1/members/{id}/external-subjects
-- Maps {namespace, external_user_id} onto the member. The identical mapping again is
-- a no-op; a subject of another member, or a different subject of this member in the
-- namespace, is a conflict. The insert's trigger republishes active entitlements.
create or replace function billing_api.external_subjects_attach(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community text := billing.current_community_id();
  v_member_id text := p_args->>'id';
  v_namespace text := p_args->>'namespace';
  v_external text := p_args->>'external_user_id';
  v_owner text;
  v_current text;
begin
  perform billing.require_scope('members:write');
  perform 1 from billing.members m where m.community_id = v_community and m.id = v_member_id for update;
  if not found then
    perform billing.raise('BL404', 'No member ' || v_member_id || '.');
  end if;
  select x.member_id into v_owner from billing.external_subjects x
  where x.community_id = v_community and x.namespace = v_namespace and x.external_user_id = v_external;
  if v_owner = v_member_id then
    return billing.member_json(v_community, v_member_id);
  elsif v_owner is not null then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' is already mapped to another member.');
  end if;
  select x.external_user_id into v_current from billing.external_subjects x
  where x.community_id = v_community and x.member_id = v_member_id and x.namespace = v_namespace;
  if v_current is not null then
    perform billing.raise('BL409', 'Member ' || v_member_id || ' already has the external subject '
      || v_namespace || '/' || v_current || ' in namespace ' || v_namespace || '.');
  end if;
  begin
    insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
    values (v_community, v_member_id, v_namespace, v_external);
  exception when unique_violation then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' was mapped concurrently.');
  end;
  return billing.member_json(v_community, v_member_id);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.member_changed(text,text,jsonb) to billing_api;
grant execute on function billing.member_json(text,text) to billing_api;
grant execute on function billing.resolve_identity(jsonb) to billing_api;
grant execute on function billing_api.members_list(jsonb) to billing_api;
grant execute on function billing_api.members_get(jsonb) to billing_api;
grant execute on function billing_api.members_lookup(jsonb) to billing_api;
grant execute on function billing_api.external_subjects_attach(jsonb) to billing_api;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing_api to billing_writer;
alter function billing_api.external_subjects_attach(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded 30-members.sql
--! Included 40-subscriptions.sql
-- Subscriptions: the table, the subscription JSON object (API and events), its
-- outbox-and-ledger trigger, the read API, the lifecycle (the spec's states table:
-- cancel at period end, reactivate, switch options, switch, cancel a scheduled
-- switch), time (period ends, the sandbox test clock) and Stripe subscription state.
--
-- The lifecycle billing_api functions return the subscription's JSON plus "_provider"
-- facts (provider, provider_ref, ...) that the handler uses for the provider call and
-- strips.

create table if not exists billing.subscriptions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('sub'),
  member_id text collate "C" not null,
  plan_id text collate "C" not null,
  status text not null check (status in ('active', 'trialing', 'past_due', 'cancelling', 'cancelled', 'paused')),
  current_period_start timestamptz,
  current_period_end timestamptz,
  trial_end timestamptz,
  cancel_at timestamptz,
  cancelled_at timestamptz,
  paused_until timestamptz,
  scheduled_plan_id text collate "C",
  scheduled_at timestamptz,
  client_reference_id text,
  checkout_id text collate "C",
  provider text not null default 'sandbox' check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  provider_updated_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  provider_customer_ref text,
  provider_schedule_ref text,
  -- Proration of the last immediate switch: credit for the unused time of the old plan
  -- and charge for the rest of the period on the new one (minor units).
  proration_credit_cents integer,
  proration_charge_cents integer,
  prorated_at timestamptz,
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict,
  foreign key (community_id, scheduled_plan_id) references billing.plans on delete set null (scheduled_plan_id)
);
-- Money (46-invoices.sql): the billing anchor every period end counts from, the
-- discount the subscription keeps, why it ended, when a cancel was asked for (by the
-- community's clock) and credit from plan changes that pays later renewals.
alter table billing.subscriptions add column if not exists billing_anchor timestamptz;
alter table billing.subscriptions add column if not exists discount_id uuid;
alter table billing.subscriptions add column if not exists cancellation_reason text;
alter table billing.subscriptions add column if not exists cancel_requested_at timestamptz;
alter table billing.subscriptions add column if not exists credit_cents bigint not null default 0;
alter table billing.subscriptions drop constraint if exists subscriptions_cancellation_reason_check;
alter table billing.subscriptions add constraint subscriptions_cancellation_reason_check
  check (cancellation_reason in ('cancellation_requested', 'payment_failed', 'refunded', 'payment_disputed'));
alter table billing.subscriptions drop constraint if exists subscriptions_credit_cents_check;
alter table billing.subscriptions add constraint subscriptions_credit_cents_check check (credit_cents >= 0);
comment on column billing.subscriptions.billing_anchor is
  'Start of the first paid period; every period end is billing_anchor + n intervals (31 Jan -> 28 Feb -> 31 Mar), as Stripe keeps its billing cycle anchor.'
;
create index if not exists subscriptions_member on billing.subscriptions (community_id, member_id);
create index if not exists subscriptions_status on billing.subscriptions (community_id, status, id);
create index if not exists subscriptions_plan on billing.subscriptions (community_id, plan_id, id);
create index if not exists subscriptions_period_end on billing.subscriptions (current_period_end) where status in ('active', 'trialing', 'past_due', 'cancelling');
create unique index if not exists subscriptions_provider_ref on billing.subscriptions (community_id, provider_ref) where provider_ref is not null;
alter table billing.subscriptions enable row level security;
alter table billing.subscriptions force row level security;
drop policy if exists tenant on billing.subscriptions;
create policy tenant on billing.subscriptions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.subscriptions;
create policy owner_access on billing.subscriptions to current_user using (true) with check (true);
grant select on billing.subscriptions to billing_api;
revoke insert, update, delete on billing.subscriptions from billing_api;
grant select, update on billing.subscriptions to billing_writer;

-- ---- the subscription object ---------------------------------------------------------

-- Subscription: amount, currency and interval come from the CURRENT plan.
-- The three-argument form is a plain expression (PostgreSQL inlines it), for lists
-- that join plans and tiers once; the one-argument form looks them up.
create or replace function billing.subscription_json(p_sub billing.subscriptions, p_plan billing.plans,
  p_tier billing.tiers) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_sub.id,
    'status', p_sub.status,
    'plan_id', p_sub.plan_id,
    'plan_name', p_plan.name,
    'tier_id', p_plan.tier_id,
    'tier_name', p_tier.name,
    'member_id', p_sub.member_id,
    'amount_cents', p_plan.amount_cents,
    'currency', p_plan.currency,
    'interval', p_plan.interval,
    'current_period_end', billing.iso(p_sub.current_period_end),
    'cancel_at', billing.iso(p_sub.cancel_at),
    'paused_until', billing.iso(p_sub.paused_until),
    'scheduled_plan_id', p_sub.scheduled_plan_id,
    'scheduled_at', billing.iso(p_sub.scheduled_at),
    'created_at', billing.iso(p_sub.created_at),
    'updated_at', billing.iso(p_sub.updated_at))
$$;

create or replace function billing.subscription_json(p_sub billing.subscriptions) returns jsonb
  language sql stable parallel safe
as $$
  select billing.subscription_json(p_sub, p, t)
  from (select 1) one
  left join billing.plans p on p.community_id = p_sub.community_id and p.id = p_sub.plan_id
  left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
$$;

-- The subscription of events: the API object plus client_reference_id.
-- plpgsql (not sql) so its plans are cached: it runs twice per subscription change.
create or replace function billing.subscription_event_json(p_sub billing.subscriptions) returns jsonb
  language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_tier billing.tiers;
begin
  select * into v_plan from billing.plans p where p.community_id = p_sub.community_id and p.id = p_sub.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_plan.community_id and t.id = v_plan.tier_id;
  return billing.subscription_json(p_sub, v_plan, v_tier)
    || jsonb_build_object('client_reference_id', p_sub.client_reference_id);
end
$$;

-- ---- outbox and ledger -----------------------------------------------------------------

-- Writes the subscription's lifecycle event (60-events.sql), then refreshes the
-- member's ledger (50-ledger.sql) with that event's id as trigger_event_id, in the
-- statement's transaction.
create or replace function billing.tg_subscriptions__outbox_and_ledger() returns trigger
  language plpgsql
as $$
declare
  v_new jsonb;
  v_prev jsonb;
  v_type text;
  v_reason text;
  v_event_id text;
begin
  if tg_op = 'DELETE' then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, 'subscription_deleted', null);
    return null;
  end if;
  v_new := billing.subscription_event_json(new);
  if tg_op = 'INSERT' then
    v_type := 'subscription.created';
    v_reason := 'subscription_created';
    v_prev := null;
  else
    v_prev := billing.jsonb_changed(billing.subscription_event_json(old) - 'updated_at' - 'tier_name' - 'plan_name',
      v_new);
    if v_prev = '{}' then
      return null; -- nothing a consumer sees (nor a ledger source) changed
    end if;
    v_type := case when new.status = 'cancelled' and old.status <> 'cancelled'
      then 'subscription.cancelled' else 'subscription.updated' end;
    v_reason := case
      when new.status = 'cancelled' and new.cancellation_reason = 'payment_failed' then 'payment_failed'
      when new.status = 'cancelled' and new.cancellation_reason = 'refunded' then 'refunded'
      when new.status = 'cancelled' and new.cancellation_reason = 'payment_disputed' then 'disputed'
      when new.plan_id <> old.plan_id then 'plan_changed'
      when new.status = old.status then 'subscription_updated'
      when new.status = 'cancelled' then 'subscription_ended'
      when new.status = 'paused' then 'subscription_paused'
      when new.status = 'cancelling' then 'subscription_cancelling'
      when new.status = 'past_due' then 'payment_failed'
      when old.status in ('cancelled', 'paused') then 'subscription_activated'
      else 'subscription_updated' end;
  end if;
  v_event_id := billing.emit_event(new.community_id, v_type,
    jsonb_build_object('subscription', v_new, 'previous_attributes', v_prev));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  if tg_op = 'UPDATE' and old.member_id <> new.member_id then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.subscriptions;
create trigger _500_outbox_and_ledger after insert or update or delete on billing.subscriptions
  for each row execute function billing.tg_subscriptions__outbox_and_ledger();

-- ---- read API ----------------------------------------------------------------------------

-- Filters are added from fixed fragments (values always bound), so each call is planned
-- for the filters it has and uses the matching index.
create or replace function billing_api.subscriptions_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_where text := '';
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('subscriptions:read');
  if p_args->>'cursor' is not null then v_where := v_where || ' and s.id < $1->>''cursor'''; end if;
  if p_args->>'status' is not null then v_where := v_where || ' and s.status = $1->>''status'''; end if;
  if p_args->>'plan_id' is not null then v_where := v_where || ' and s.plan_id = $1->>''plan_id'''; end if;
  if p_args->>'member_id' is not null then v_where := v_where || ' and s.member_id = $1->>''member_id'''; end if;
  if p_args->>'tier_id' is not null then
    v_where := v_where || ' and s.plan_id in (select p.id from billing.plans p'
      || ' where p.community_id = s.community_id and p.tier_id = $1->>''tier_id'')';
  end if;
  execute 'select array_agg(s.id order by s.id desc), array_agg(billing.subscription_json(s, p, t) order by s.id desc)
    from (select * from billing.subscriptions s
          where s.community_id = billing.current_community_id()' || v_where || '
          order by s.id desc limit $2) s
    left join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id'
    into v_ids, v_items using p_args, v_limit + 1;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.subscriptions_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:read');
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || (p_args->>'id') || '.');
  end if;
  return billing.subscription_json(v_sub);
end
$$;

-- ---- lifecycle ---------------------------------------------------------------------------

create or replace function billing.lock_subscription(p_id text) returns billing.subscriptions
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
begin
  -- FOR UPDATE needs UPDATE rights, which billing_api has on subscriptions.
  select * into v_sub from billing.subscriptions s where s.id = p_id for update;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_id, '') || '.');
  end if;
  return v_sub;
end
$$;

create or replace function billing.subscription_provider(p_sub billing.subscriptions) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('provider', p_sub.provider, 'provider_ref', p_sub.provider_ref,
    'plan_id', p_sub.plan_id, 'stripe_price_id', (select p.stripe_price_id from billing.plans p
      where p.community_id = p_sub.community_id and p.id = p_sub.plan_id),
    'current_period_end', billing.iso(p_sub.current_period_end))
$$;

-- Cancel at period end. Allowed from active, trialing, past_due and paused; a repeat
-- on a cancelling subscription changes nothing ("changed": false: no provider call).
-- A scheduled switch is dropped: a cancelling subscription renews into nothing.
create or replace function billing_api.subscription_cancel(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_prov jsonb;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  v_prov := billing.subscription_provider(v_sub);
  if p_args->>'at' = 'now' then
    -- An operator's immediate cancel (additive option): it ends now and access with it.
    if v_sub.status = 'cancelled' then
      return jsonb_build_object('status', 'cancelled', '_changed', false, '_provider', v_prov || '{"at": "now"}');
    end if;
    perform billing_private.subscription_cancel_now(v_sub.id);
    return jsonb_build_object('status', 'cancelled', '_changed', true, '_provider', v_prov || '{"at": "now"}');
  end if;
  if v_sub.status = 'cancelling' then
    return jsonb_build_object('status', 'cancelling', '_changed', false, '_provider', v_prov);
  elsif v_sub.status = 'cancelled' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is already cancelled.');
  end if;
  update billing.subscriptions s set status = 'cancelling', cancel_at = s.current_period_end,
    scheduled_plan_id = null, scheduled_at = null, cancel_requested_at = billing.now(),
    cancellation_reason = 'cancellation_requested', updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id
  returning * into v_sub;
  return jsonb_build_object('status', 'cancelling', '_changed', true, '_provider', billing.subscription_provider(v_sub));
end
$$;

-- Ends a subscription of the current community now (SECURITY DEFINER: the API role
-- does not write cancelled_at and cancellation_reason itself).
create or replace function billing_private.subscription_cancel_now(p_subscription_id text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('subscriptions:write');
  update billing.subscriptions s set status = 'cancelled', cancelled_at = billing.now(),
    cancel_requested_at = coalesce(s.cancel_requested_at, billing.now()), cancellation_reason = 'cancellation_requested',
    cancel_at = null, scheduled_plan_id = null, scheduled_at = null, paused_until = null, updated_at = now()
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id and s.status <> 'cancelled';
end
$$;

-- POST /v1/subscriptions/{id}/pause {resumes_at?}: from active or trialing; no
-- invoices while paused, no access (the ledger revokes); it resumes by itself at
-- resumes_at (billing.apply_due) or on request.
create or replace function billing_api.subscription_pause(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_until timestamptz := (p_args->>'resumes_at')::timestamptz;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status = 'paused' and v_sub.paused_until is not distinct from v_until then
    return billing.subscription_json(v_sub) || jsonb_build_object('_changed', false, '_provider', billing.subscription_provider(v_sub));
  elsif v_sub.status not in ('active', 'trialing', 'paused') then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status
      || ': only an active or trialing subscription can be paused.');
  end if;
  if v_until is not null and v_until <= billing.now() then
    perform billing.raise('BL422', 'resumes_at must be in the future.', 'resumes_at');
  end if;
  v_sub := billing_private.subscription_pause(v_sub.id, v_until);
  return billing.subscription_json(v_sub) || jsonb_build_object('_changed', true, '_provider',
    billing.subscription_provider(v_sub) || jsonb_build_object('resumes_at', billing.iso(v_until)));
end
$$;

create or replace function billing_private.subscription_pause(p_subscription_id text, p_until timestamptz)
  returns billing.subscriptions language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  update billing.subscriptions s set status = 'paused', paused_until = p_until, scheduled_plan_id = null,
    scheduled_at = null, updated_at = now()
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id
    and s.status in ('active', 'trialing', 'paused')
  returning * into v_sub;
  return v_sub;
end
$$;

-- POST /v1/subscriptions/{id}/resume: a paused subscription resumes now, its billing
-- period restarting (46-invoices.sql, billing.subscription_resume_at).
create or replace function billing_api.subscription_resume(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status <> 'paused' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not paused: nothing to resume.');
  end if;
  v_sub := billing_private.subscription_resume(v_sub.id);
  return billing.subscription_json(v_sub) || jsonb_build_object('_changed', true, '_provider', billing.subscription_provider(v_sub));
end
$$;

create or replace function billing_api.subscription_reactivate(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.status <> 'cancelling' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not cancelling: nothing to reactivate.');
  end if;
  update billing.subscriptions s set
    -- Back to what it was: past_due while a renewal is still being retried.
    status = case when billing.subscription_retry_open(s.community_id, s.id) then 'past_due'
                  when s.trial_end is not null and s.trial_end > billing.now() then 'trialing' else 'active' end,
    cancel_at = null, cancel_requested_at = null, cancellation_reason = null, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id
  returning * into v_sub;
  return billing.subscription_json(v_sub) || jsonb_build_object('_provider', billing.subscription_provider(v_sub));
end
$$;

-- Options by tier rank: other active plans of the same tier, and active recurring
-- plans of other active subscription tiers (higher rank: upgrades; lower: downgrades;
-- equal rank: listed with upgrades, applied immediately).
create or replace function billing.switch_options(p_sub billing.subscriptions) returns jsonb
  language sql stable
as $$
  with cur as (
    select t.id as tier_id, t.rank, p.currency from billing.plans p
    join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    where p.community_id = p_sub.community_id and p.id = p_sub.plan_id),
  opts as (
    select jsonb_build_object('plan_id', p.id, 'plan_name', p.name, 'tier_id', p.tier_id,
             'amount_cents', p.amount_cents, 'currency', p.currency, 'interval', p.interval,
             'trial_days', p.trial_days) as j,
           case when t.id = cur.tier_id then 'same_tier' when t.rank >= cur.rank then 'upgrades' else 'downgrades' end as grp,
           t.rank, p.amount_cents, p.id
    from billing.plans p
    join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    cross join cur
    where p.community_id = p_sub.community_id and p.active and t.active and t.kind = 'subscription'
      and p.interval is not null and p.id <> p_sub.plan_id and p.currency = cur.currency)
  select jsonb_build_object(
    'same_tier', coalesce((select jsonb_agg(j order by amount_cents, id) from opts where grp = 'same_tier'), '[]'),
    'upgrades', coalesce((select jsonb_agg(j order by rank, amount_cents, id) from opts where grp = 'upgrades'), '[]'),
    'downgrades', coalesce((select jsonb_agg(j order by rank desc, amount_cents, id) from opts where grp = 'downgrades'), '[]'))
$$;

create or replace function billing.require_switchable(p_sub billing.subscriptions) returns void
  language plpgsql stable
as $$
begin
  if p_sub.status not in ('active', 'trialing') then
    perform billing.raise('BL409', 'Subscription ' || p_sub.id || ' is ' || p_sub.status
      || ': only active or trialing subscriptions can switch plans.');
  end if;
end
$$;

create or replace function billing_api.subscription_switch_options(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:read');
  select * into v_sub from billing.subscriptions s where s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || (p_args->>'id') || '.');
  end if;
  perform billing.require_switchable(v_sub);
  return billing.switch_options(v_sub);
end
$$;

-- Same tier or upgrade: applies now; the period is kept and the proration recorded
-- (credit for the unused time of the old plan, charge for the same time on the new
-- one; nothing while trialing). Downgrade: scheduled for the period end.
-- A plan that is not among the switch options answers 422 invalid_request (plan_id).
create or replace function billing_api.subscription_switch(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_grp text;
  v_old billing.plans;
  v_new billing.plans;
  v_prov jsonb;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  perform billing.require_switchable(v_sub);
  select g into v_grp from jsonb_each(billing.switch_options(v_sub)) e(g, arr), jsonb_array_elements(arr) o
  where o->>'plan_id' = p_args->>'plan_id';
  if v_grp is null then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_args->>'plan_id', '') || ' is not among this subscription''s switch options.', 'plan_id');
  end if;
  v_prov := billing.subscription_provider(v_sub);
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_args->>'plan_id';
  if v_grp = 'downgrades' then
    update billing.subscriptions s set scheduled_plan_id = v_new.id, scheduled_at = s.current_period_end, updated_at = now()
    where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  else
    v_sub := billing_private.subscription_switch_now(v_sub.id, v_new.id);
  end if;
  return billing.subscription_json(v_sub) || jsonb_build_object('_provider', v_prov || jsonb_build_object(
    'kind', case when v_grp = 'downgrades' then 'scheduled' else 'immediate' end,
    'new_plan_id', v_new.id, 'new_stripe_price_id', v_new.stripe_price_id, 'old_stripe_price_id', v_old.stripe_price_id));
end
$$;

create or replace function billing_api.subscription_cancel_scheduled_switch(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
begin
  perform billing.require_scope('subscriptions:write');
  v_sub := billing.lock_subscription(p_args->>'id');
  if v_sub.scheduled_plan_id is null then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' has no scheduled switch.');
  end if;
  update billing.subscriptions s set scheduled_plan_id = null, scheduled_at = null, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return billing.subscription_json(v_sub) || jsonb_build_object('_provider', billing.subscription_provider(v_sub));
end
$$;

-- ---- time ------------------------------------------------------------------------------

-- Applies everything due in one community at billing.now(): open checkouts expire;
-- sandbox subscriptions whose period ended move on (cancelling -> cancelled; trialing
-- -> active at trial end; active renews for a new period, first taking a scheduled
-- switch), repeatedly until their period end is in the future; then the ledger sweep
-- re-evaluates access that lapsed by time (purchase expiry). Stripe subscriptions are
-- moved by Stripe's webhooks, not here. Owner only: it sets the community itself.
create or replace function billing.apply_due(p_community_id text) returns jsonb
  language plpgsql volatile
as $$
declare
  v_now timestamptz;
  v_id text;
  v_n integer := 0;
  v_expired integer;
begin
  perform set_config('app.community_id', p_community_id, true);
  v_now := billing.now();
  v_expired := billing.expire_checkouts();
  for v_id in
    select s.id from billing.subscriptions s
    where s.community_id = p_community_id and s.provider = 'sandbox'
      and (s.status in ('active', 'trialing', 'cancelling') and s.current_period_end <= v_now
        or s.status = 'paused' and s.paused_until <= v_now)
    union
    select i.subscription_id from billing.invoices i
    where i.community_id = p_community_id and i.provider = 'sandbox' and i.status = 'open'
      and i.next_attempt_at <= v_now and i.subscription_id is not null
    order by 1
  loop
    v_n := v_n + billing.subscription_advance(v_id, v_now);
  end loop;
  perform billing.ledger_sweep(p_community_id);
  return jsonb_build_object('now', billing.iso(v_now), 'period_changes', v_n, 'expired_checkouts', v_expired);
end
$$;

-- The worker's periodic job: every community, one after the other.
create or replace function billing.apply_due_all() returns integer
  language plpgsql volatile
as $$
declare
  v_id text;
  v_n integer := 0;
begin
  for v_id in select c.id from billing.communities c order by c.id loop
    perform billing.apply_due(v_id);
    v_n := v_n + 1;
  end loop;
  perform set_config('app.community_id', '', true);
  return v_n;
end
$$;


-- The worker's doors (billing_worker holds no table): the communities to sweep, and
-- apply_due with the owner's rights, one community per call (and transaction).
create or replace function billing_private.worker_community_ids(p_only text) returns setof text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$ select c.id::text from billing.communities c where p_only is null or c.id = p_only order by c.id $$;

create or replace function billing_private.worker_apply_due(p_community_id text) returns jsonb
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$ select billing.apply_due(p_community_id) $$;

grant execute on function billing_private.worker_community_ids(text) to billing_worker;
grant execute on function billing_private.worker_apply_due(text) to billing_worker;

-- The sandbox test clock: moves a sandbox community's time forward and applies
-- everything that became due before returning.
create or replace function billing.sandbox_advance(p_community_id text, p_days numeric) returns jsonb
  language plpgsql volatile
as $$
declare
  v_provider text;
begin
  if p_days is null or p_days <= 0 then
    perform billing.raise('BL422', 'The number of days must be positive.', 'days');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = p_community_id for update;
  if not found then
    perform billing.raise('BL404', 'No community ' || p_community_id || '.');
  end if;
  if v_provider is distinct from 'sandbox' then
    perform billing.raise('BL409', 'The test clock only runs for sandbox communities.');
  end if;
  update billing.communities c set clock_offset = c.clock_offset + make_interval(secs => p_days * 86400)
  where c.id = p_community_id;
  return billing.apply_due(p_community_id);
end
$$;

-- ---- Stripe subscription state ----------------------------------------------------------

-- Applies a Stripe subscription object (already mapped to our terms by the adapter)
-- to the subscription it names. Older state never overwrites newer: a change whose
-- provider time is before provider_updated_at is ignored. Returns the subscription id,
-- or null when no subscription has that provider_ref yet.
create or replace function billing.apply_provider_subscription(p_state jsonb) returns text
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_at timestamptz := (p_state->>'provider_updated_at')::timestamptz;
  v_plan text;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_state->>'provider_ref' for update;
  if v_sub.id is null then
    return null;
  end if;
  if v_sub.provider_updated_at is not null and v_at < v_sub.provider_updated_at then
    return v_sub.id;
  end if;
  if p_state->>'stripe_price_id' is not null then
    select p.id into v_plan from billing.plans p
    where p.community_id = v_sub.community_id and p.stripe_price_id = p_state->>'stripe_price_id' order by p.active desc, p.id limit 1;
  end if;
  update billing.subscriptions s set
    status = coalesce(p_state->>'status', s.status),
    plan_id = coalesce(v_plan, s.plan_id),
    current_period_start = coalesce((p_state->>'period_start')::timestamptz, s.current_period_start),
    current_period_end = coalesce((p_state->>'period_end')::timestamptz, s.current_period_end),
    trial_end = case when p_state ? 'trial_end' then (p_state->>'trial_end')::timestamptz else s.trial_end end,
    cancel_at = case when p_state ? 'cancel_at' then (p_state->>'cancel_at')::timestamptz else s.cancel_at end,
    cancelled_at = case when p_state->>'status' = 'cancelled' then coalesce(s.cancelled_at, (p_state->>'ended_at')::timestamptz, v_at) else s.cancelled_at end,
    paused_until = case when p_state ? 'paused_until' then (p_state->>'paused_until')::timestamptz else s.paused_until end,
    -- A scheduled switch is done once Stripe reports the new plan (its schedule moved on).
    scheduled_plan_id = case when v_plan is not null and v_plan = s.scheduled_plan_id then null else s.scheduled_plan_id end,
    scheduled_at = case when v_plan is not null and v_plan = s.scheduled_plan_id then null else s.scheduled_at end,
    provider_customer_ref = coalesce(p_state->>'customer_ref', s.provider_customer_ref),
    provider_updated_at = greatest(v_at, s.provider_updated_at),
    updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id;
  return v_sub.id;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.lock_subscription(text) to billing_api;
grant execute on function billing.require_switchable(billing.subscriptions) to billing_api;
grant execute on function billing.subscription_event_json(billing.subscriptions) to billing_api;
grant execute on function billing.subscription_json(billing.subscriptions) to billing_api;
grant execute on function billing.subscription_json(billing.subscriptions,billing.plans,billing.tiers) to billing_api;
grant execute on function billing.subscription_provider(billing.subscriptions) to billing_api;
grant execute on function billing.switch_options(billing.subscriptions) to billing_api;
grant execute on function billing_api.subscriptions_list(jsonb) to billing_api;
grant execute on function billing_api.subscriptions_get(jsonb) to billing_api;
grant execute on function billing_api.subscription_cancel(jsonb) to billing_api;
grant execute on function billing_api.subscription_reactivate(jsonb) to billing_api;
grant execute on function billing_api.subscription_switch_options(jsonb) to billing_api;
grant execute on function billing_api.subscription_switch(jsonb) to billing_api;
grant execute on function billing_api.subscription_cancel_scheduled_switch(jsonb) to billing_api;
grant execute on function billing_private.subscription_cancel_now(text) to billing_api;
grant execute on function billing_private.subscription_pause(text, timestamptz) to billing_api;
grant execute on function billing_api.subscription_pause(jsonb) to billing_api;
grant execute on function billing_api.subscription_resume(jsonb) to billing_api;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing_api to billing_writer;
alter function billing_api.subscription_cancel(jsonb) owner to billing_writer;
alter function billing_api.subscription_reactivate(jsonb) owner to billing_writer;
alter function billing_api.subscription_switch(jsonb) owner to billing_writer;
alter function billing_api.subscription_cancel_scheduled_switch(jsonb) owner to billing_writer;
alter function billing_api.subscription_pause(jsonb) owner to billing_writer;
alter function billing_api.subscription_resume(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded 40-subscriptions.sql
--! Included 45-purchases.sql
-- Purchases (one-time payments): the table, the purchase JSON object (API and
-- events), its outbox-and-ledger trigger, the read API and refunds.

create table if not exists billing.purchases (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pur'),
  member_id text collate "C" not null,
  plan_id text collate "C" not null,
  status text not null default 'completed' check (status in ('completed', 'refunded', 'disputed')),
  amount_cents integer not null,
  currency text not null,
  access_expires_at timestamptz,
  paid_at timestamptz not null default now(),
  client_reference_id text,
  checkout_id text collate "C",
  provider_ref text,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict
);
-- 'disputed' (issue 12) joined the list after the table was first created.
alter table billing.purchases drop constraint if exists purchases_status_check;
alter table billing.purchases add constraint purchases_status_check check (status in ('completed', 'refunded', 'disputed'));
create index if not exists purchases_member on billing.purchases (community_id, member_id);
create index if not exists purchases_expiry on billing.purchases (access_expires_at) where access_expires_at is not null;
create index if not exists purchases_plan on billing.purchases (community_id, plan_id);
alter table billing.purchases enable row level security;
alter table billing.purchases force row level security;
drop policy if exists tenant on billing.purchases;
create policy tenant on billing.purchases
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.purchases;
create policy owner_access on billing.purchases to current_user using (true) with check (true);
grant select on billing.purchases to billing_api;
revoke insert, update, delete on billing.purchases from billing_api;

-- ---- the purchase object -------------------------------------------------------------

-- As for subscriptions: the three-argument form is a plain expression (inlined) for
-- queries that join the plan and tier themselves; the one-argument form looks them up.
create or replace function billing.purchase_json(p_pur billing.purchases, p_plan billing.plans,
  p_tier billing.tiers) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_pur.id,
    'status', p_pur.status,
    'plan_id', p_pur.plan_id,
    'plan_name', p_plan.name,
    'tier_id', p_plan.tier_id,
    'tier_name', p_tier.name,
    'member_id', p_pur.member_id,
    'amount_cents', p_pur.amount_cents,
    'currency', p_pur.currency,
    'access_expires_at', billing.iso(p_pur.access_expires_at),
    'paid_at', billing.iso(p_pur.paid_at),
    'created_at', billing.iso(p_pur.created_at))
$$;

create or replace function billing.purchase_json(p_pur billing.purchases) returns jsonb
  language sql stable parallel safe
as $$
  select billing.purchase_json(p_pur, p, t)
  from (select 1) one
  left join billing.plans p on p.community_id = p_pur.community_id and p.id = p_pur.plan_id
  left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
$$;

-- The purchase of events: the API object plus client_reference_id (plpgsql: cached plans).
create or replace function billing.purchase_event_json(p_pur billing.purchases) returns jsonb
  language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_tier billing.tiers;
begin
  select * into v_plan from billing.plans p where p.community_id = p_pur.community_id and p.id = p_pur.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_plan.community_id and t.id = v_plan.tier_id;
  return billing.purchase_json(p_pur, v_plan, v_tier)
    || jsonb_build_object('client_reference_id', p_pur.client_reference_id);
end
$$;

-- ---- outbox and ledger -----------------------------------------------------------------

-- Writes the purchase's lifecycle event (60-events.sql), then refreshes the member's
-- ledger (50-ledger.sql) with that event's id as trigger_event_id.
create or replace function billing.tg_purchases__outbox_and_ledger() returns trigger
  language plpgsql
as $$
declare
  v_new jsonb;
  v_prev jsonb;
  v_type text;
  v_reason text;
  v_event_id text;
begin
  if tg_op = 'DELETE' then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, 'purchase_deleted', null);
    return null;
  end if;
  v_new := billing.purchase_event_json(new);
  if tg_op = 'INSERT' then
    v_type := 'purchase.created';
    v_reason := case when new.status = 'completed' then 'purchase_completed' else 'purchase_updated' end;
    v_prev := null;
  else
    v_prev := billing.jsonb_changed(billing.purchase_event_json(old) - 'tier_name' - 'plan_name', v_new);
    if v_prev = '{}' then
      return null;
    end if;
    v_type := case when new.status = 'refunded' and old.status <> 'refunded'
      then 'purchase.refunded' else 'purchase.updated' end;
    v_reason := case when v_type = 'purchase.refunded' then 'purchase_refunded' else 'purchase_updated' end;
  end if;
  v_event_id := billing.emit_event(new.community_id, v_type,
    jsonb_build_object('purchase', v_new, 'previous_attributes', v_prev));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  if tg_op = 'UPDATE' and old.member_id <> new.member_id then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.purchases;
create trigger _500_outbox_and_ledger after insert or update or delete on billing.purchases
  for each row execute function billing.tg_purchases__outbox_and_ledger();

-- ---- read API ----------------------------------------------------------------------------

create or replace function billing_api.purchases_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('purchases:read');
  select array_agg(p.id order by p.id desc), array_agg(billing.purchase_json(p) order by p.id desc)
    into v_ids, v_items
  from (select * from billing.purchases p
        where p.community_id = billing.current_community_id()
          and p.id < coalesce(p_args->>'cursor', chr(1114111))
        order by p.id desc limit v_limit + 1) p;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.purchases_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_pur billing.purchases;
begin
  perform billing.require_scope('purchases:read');
  select * into v_pur from billing.purchases p
  where p.community_id = billing.current_community_id() and p.id = p_args->>'id';
  if v_pur.id is null then
    perform billing.raise('BL404', 'No purchase ' || (p_args->>'id') || '.');
  end if;
  return billing.purchase_json(v_pur);
end
$$;

-- ---- refunds -------------------------------------------------------------------------------

-- A fully refunded one-time payment (Stripe: charge.refunded) ends the purchase's access.
create or replace function billing.refund_purchase(p_provider_ref text) returns text
  language sql volatile
as $$
  update billing.purchases pu set status = 'refunded'
  where pu.community_id = billing.current_community_id() and pu.provider_ref = p_provider_ref and pu.status = 'completed'
  returning pu.id
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.purchase_event_json(billing.purchases) to billing_api;
grant execute on function billing.purchase_json(billing.purchases) to billing_api;
grant execute on function billing.purchase_json(billing.purchases,billing.plans,billing.tiers) to billing_api;
grant execute on function billing_api.purchases_list(jsonb) to billing_api;
grant execute on function billing_api.purchases_get(jsonb) to billing_api;
--! EndIncluded 45-purchases.sql
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
create or replace function billing.invoice_lines_valid(p_lines jsonb) returns boolean
  language sql immutable parallel safe
as $$
  select jsonb_typeof(p_lines) = 'array'
    and not exists (
      select 1 from jsonb_array_elements(p_lines) l
      where jsonb_typeof(l) <> 'object'
        or l->>'type' is null or l->>'type' not in ('plan', 'proration', 'discount')
        or jsonb_typeof(l->'description') <> 'string' or length(l->>'description') = 0
        or jsonb_typeof(l->'amount_cents') <> 'number' or (l->>'amount_cents') !~ '^-?[0-9]+$'
        or (l->>'type' = 'plan' and (l->>'amount_cents')::bigint < 0)
        or (l->>'type' = 'discount' and (l->>'amount_cents')::bigint > 0))
$$;

-- Sum of the lines of the given kinds (all when p_types is null).
create or replace function billing.invoice_lines_sum(p_lines jsonb, p_types text[]) returns bigint
  language sql immutable parallel safe
as $$
  select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
  from jsonb_array_elements(p_lines) l
  where p_types is null or l->>'type' = any (p_types)
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
  v_frac numeric;
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
  v_frac := case when v_sub.current_period_end is null or v_sub.current_period_end <= v_sub.current_period_start then 0
                 else greatest(0, least(1, extract(epoch from (v_sub.current_period_end - v_now))
                   / extract(epoch from (v_sub.current_period_end - v_sub.current_period_start)))) end;
  v_new_period := v_sub.status <> 'trialing' and v_new.interval is distinct from v_old.interval;
  v_start := case when v_new_period then v_now else v_sub.current_period_start end;
  v_end := case when v_new_period then billing.add_utc(v_now, billing.plan_interval(v_new.interval)) else v_sub.current_period_end end;
  if v_sub.status = 'trialing' then
    v_charge := 0;
    v_credit := 0;
  else
    v_charge := case when v_new_period then v_new.amount_cents else round(v_new.amount_cents * v_frac)::bigint end;
    v_credit := round(v_old.amount_cents * v_frac)::bigint;
  end if;
  v_applied := least(v_credit, v_charge);
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
--! Included 47-grants.sql
-- Grants (comps): access an operator hands out by hand. A grant is a ledger source
-- of type grant (50-ledger.sql), on a tier like a subscription or purchase, so it
-- produces member.entitlement.granted / updated / revoked at the edges exactly like
-- them, and it lapses by the community's clock at expires_at (the ledger sweep).
-- POST/GET/DELETE /v1/members/{id}/grants.

create table if not exists billing.grants (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('grt'),
  member_id text collate "C" not null,
  tier_id text collate "C" not null,
  note text check (length(note) <= 500),
  expires_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz not null,
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, tier_id) references billing.tiers on delete cascade
);
create index if not exists grants_member on billing.grants (community_id, member_id, id);
create index if not exists grants_tier on billing.grants (community_id, tier_id) where revoked_at is null;
alter table billing.grants enable row level security;
alter table billing.grants force row level security;
drop policy if exists tenant on billing.grants;
create policy tenant on billing.grants
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.grants;
create policy owner_access on billing.grants to current_user using (true) with check (true);
grant select on billing.grants to billing_api;

create or replace function billing.grant_json(p_g billing.grants) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_g.id, 'member_id', p_g.member_id, 'tier_id', p_g.tier_id, 'note', p_g.note,
    'expires_at', billing.iso(p_g.expires_at), 'revoked_at', billing.iso(p_g.revoked_at),
    'status', case when p_g.revoked_at is not null then 'revoked'
                   when p_g.expires_at is not null and p_g.expires_at <= billing.community_now(p_g.community_id) then 'expired'
                   else 'active' end,
    'created_at', billing.iso(p_g.created_at))
$$;

-- The ledger follows a grant's changes (reasons grant_created, grant_updated, grant_revoked).
create or replace function billing.tg_grants__ledger() returns trigger
  language plpgsql
as $$
begin
  perform billing.ledger_refresh_member(new.community_id, new.member_id,
    case when tg_op = 'INSERT' then 'grant_created' when new.revoked_at is not null and old.revoked_at is null
         then 'grant_revoked' else 'grant_updated' end, null);
  return null;
end
$$;
drop trigger if exists _500_ledger on billing.grants;
create trigger _500_ledger after insert or update on billing.grants
  for each row execute function billing.tg_grants__ledger();

-- POST /v1/members/{id}/grants {tier_id, expires_at?, note?}.
create or replace function billing_private.grant_create(p_member_id text, p_tier_id text, p_expires_at timestamptz, p_note text)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_g billing.grants;
begin
  perform billing.require_scope('members:write');
  perform 1 from billing.members m where m.community_id = billing.current_community_id() and m.id = p_member_id for update;
  if not found then
    perform billing.raise('BL404', 'No member ' || coalesce(p_member_id, '') || '.');
  end if;
  if not exists (select 1 from billing.tiers t where t.community_id = billing.current_community_id() and t.id = p_tier_id) then
    perform billing.raise('BL422', 'tier_id ' || coalesce(p_tier_id, '') || ' is not a tier of this community.', 'tier_id');
  end if;
  if p_expires_at is not null and p_expires_at <= billing.now() then
    perform billing.raise('BL422', 'expires_at must be in the future.', 'expires_at');
  end if;
  insert into billing.grants (community_id, member_id, tier_id, note, expires_at, created_at)
  values (billing.current_community_id(), p_member_id, p_tier_id, p_note, p_expires_at, billing.now())
  returning * into v_g;
  return billing.grant_json(v_g);
end
$$;

-- DELETE /v1/members/{id}/grants/{grant_id}: revoked now (again: no change).
create or replace function billing_private.grant_revoke(p_member_id text, p_grant_id text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_g billing.grants;
begin
  perform billing.require_scope('members:write');
  update billing.grants g set revoked_at = coalesce(g.revoked_at, billing.now())
  where g.community_id = billing.current_community_id() and g.member_id = p_member_id and g.id = p_grant_id
  returning * into v_g;
  if v_g.id is null then
    perform billing.raise('BL404', 'No grant ' || coalesce(p_grant_id, '') || ' for member ' || coalesce(p_member_id, '') || '.');
  end if;
  return billing.grant_json(v_g);
end
$$;

create or replace function billing_api.grants_create(p_args jsonb) returns jsonb
  language sql volatile
as $$
  select billing_private.grant_create(p_args->>'id', p_args->>'tier_id', (p_args->>'expires_at')::timestamptz, p_args->>'note')
$$;

create or replace function billing_api.grants_revoke(p_args jsonb) returns jsonb
  language sql volatile
as $$ select billing_private.grant_revoke(p_args->>'id', p_args->>'grant_id') $$;

-- GET /v1/members/{id}/grants: newest first, keyset by id.
create or replace function billing_api.grants_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('members:read');
  if not exists (select 1 from billing.members m where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  select array_agg(g.id order by g.id desc), array_agg(billing.grant_json(g) order by g.id desc) into v_ids, v_items
  from (select * from billing.grants g
        where g.community_id = billing.current_community_id() and g.member_id = p_args->>'id'
          and g.id < coalesce(p_args->>'cursor', chr(1114111))
        order by g.id desc limit v_limit + 1) g;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

grant execute on function billing.grant_json(billing.grants) to billing_api;
grant execute on function billing_private.grant_create(text, text, timestamptz, text) to billing_api;
grant execute on function billing_private.grant_revoke(text, text) to billing_api;
grant execute on function billing_api.grants_create(jsonb) to billing_api;
grant execute on function billing_api.grants_revoke(jsonb) to billing_api;
grant execute on function billing_api.grants_list(jsonb) to billing_api;
--! EndIncluded 47-grants.sql
--! Included 48-analytics.sql
-- Analytics over subscriptions and plans.
-- security_invoker views: an operator's own SQL session sees its community's figures
-- under the same RLS policies as the API.

-- One row per subscription: what it bills per month, net of its discount as it stands
-- at its next renewal (billing.subscription_discount_cents, 46-invoices.sql), and the
-- interval in which it billed. Every MRR figure below (analytics.mrr, mrr_by_tier,
-- mrr_daily) sums this one definition, so they agree by construction.
--   billing_now: active, past_due or cancelling (paid until period end). Trialing
--     subscriptions do not bill yet; paused and cancelled do not bill.
--   billing_from / billing_until: for past days. A subscription bills from its creation
--     or the end of its trial (never while it is still trialing) until it was cancelled
--     (cancelled_at, else the last update of a cancelled row); a paused one stopped
--     billing at its last update. Plan changes are not kept as history: past days
--     count today's plan.
--   monthly_cents: annual plans count amount/12 (unrounded; sums round once).
create or replace view analytics.subscription_mrr with (security_invoker = true) as
  select s.community_id, s.id as subscription_id, s.member_id, s.status, p.id as plan_id, p.tier_id,
    p.currency,
    case when p.interval = 'year' then (p.amount_cents - d.cents) / 12.0
         else (p.amount_cents - d.cents)::numeric end as monthly_cents,
    s.status in ('active', 'past_due', 'cancelling') as billing_now,
    case when s.status = 'trialing' then 'infinity'::timestamptz
         else greatest(s.created_at, coalesce(s.trial_end, s.created_at)) end as billing_from,
    case when s.status = 'cancelled' then coalesce(s.cancelled_at, s.updated_at)
         when s.status = 'paused' then s.updated_at end as billing_until
  from billing.subscriptions s
  join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  cross join lateral (select billing.subscription_discount_cents(s, p.amount_cents,
    greatest(s.current_period_end, billing.community_now(s.community_id))) as cents) d;

-- Monthly recurring revenue per currency, now: the subscriptions that bill now.
-- The sum per currency is rounded to a whole minor unit.
create or replace view analytics.mrr with (security_invoker = true) as
  select m.community_id, m.currency,
    round(sum(m.monthly_cents))::bigint as mrr_cents,
    count(*)::bigint as billing_subscriptions
  from analytics.subscription_mrr m
  where m.billing_now
  group by m.community_id, m.currency;

-- MRR now per tier and currency (same subscriptions as analytics.mrr).
create or replace view analytics.mrr_by_tier with (security_invoker = true) as
  select m.community_id, m.tier_id, t.name as tier_name, m.currency,
    round(sum(m.monthly_cents))::bigint as mrr_cents,
    count(*)::bigint as billing_subscriptions
  from analytics.subscription_mrr m
  join billing.tiers t on t.community_id = m.community_id and t.id = m.tier_id
  where m.billing_now
  group by m.community_id, m.tier_id, t.name, m.currency;

-- The days (UTC) of the last 90 by each community's clock, today last; as_of is the
-- end of the day, or now for today.
create or replace view analytics.days with (security_invoker = true) as
  select c.id as community_id, d::date as day,
    least(d + interval '1 day', billing.community_now(c.id)) as as_of,
    d::date = (billing.community_now(c.id) at time zone 'UTC')::date as today
  from billing.communities c
  cross join lateral generate_series(
    date_trunc('day', billing.community_now(c.id) at time zone 'UTC') - interval '89 days',
    date_trunc('day', billing.community_now(c.id) at time zone 'UTC'), interval '1 day') d;

-- MRR by day and currency over the last 90 days: for each day, the subscriptions that
-- billed at its end (today: those that bill now, so today's row is analytics.mrr).
create or replace view analytics.mrr_daily with (security_invoker = true) as
  select dy.community_id, dy.day, m.currency,
    round(sum(m.monthly_cents))::bigint as mrr_cents,
    count(*)::bigint as billing_subscriptions
  from analytics.days dy
  join analytics.subscription_mrr m on m.community_id = dy.community_id
  where case when dy.today then m.billing_now
             else m.billing_from <= dy.as_of and (m.billing_until is null or m.billing_until > dy.as_of) end
  group by dy.community_id, dy.day, m.currency;

-- Members with access through a subscription now: active, trialing, past_due or
-- cancelling (a member with two such subscriptions counts once).
create or replace view analytics.subscribers with (security_invoker = true) as
  select s.community_id, count(distinct s.member_id)::bigint as active_subscribers
  from billing.subscriptions s
  where s.status in ('active', 'trialing', 'past_due', 'cancelling')
  group by s.community_id;

-- The last 30 days by billing.now() (the community's clock): subscriptions created
-- (signups), and subscriptions cancelled or set to cancel (cancelled_at, or the last
-- update when a cancelling/cancelled row has no cancelled_at).
create or replace view analytics.recent_activity with (security_invoker = true) as
  select c.id as community_id,
    billing.now() - interval '30 days' as window_start,
    billing.now() as window_end,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.created_at > billing.now() - interval '30 days'
        and s.created_at <= billing.now())::bigint as recent_signups,
    (select count(*) from billing.subscriptions s
      where s.community_id = c.id and s.status in ('cancelling', 'cancelled')
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) > billing.now() - interval '30 days'
        and coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) <= billing.now())::bigint as recent_cancels
  from billing.communities c;

-- Signups and cancels per day (UTC), every day with any: signups are subscriptions
-- created; cancels are cancellations requested or, without a request, cancelled
-- (the moment analytics.recent_activity counts); ended are subscriptions that stopped
-- (cancelled_at).
create or replace view analytics.daily_activity with (security_invoker = true) as
  select community_id, day, sum(signups)::bigint as signups, sum(cancels)::bigint as cancels,
    sum(ended)::bigint as ended
  from (
    select s.community_id, (s.created_at at time zone 'UTC')::date as day, 1 as signups, 0 as cancels, 0 as ended
    from billing.subscriptions s
    union all
    select s.community_id, (coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) at time zone 'UTC')::date, 0, 1, 0
    from billing.subscriptions s where s.status in ('cancelling', 'cancelled')
    union all
    select s.community_id, (s.cancelled_at at time zone 'UTC')::date, 0, 0, 1
    from billing.subscriptions s where s.cancelled_at is not null
  ) a
  group by community_id, day;

-- Churn over the last 30 days by the community's clock: of the subscriptions that
-- billed at the window's start (analytics.subscription_mrr), how many stopped billing
-- (cancelled or paused) within it. churn_rate is null when none billed at the start.
create or replace view analytics.churn with (security_invoker = true) as
  select c.id as community_id, w.window_start, w.window_end,
    count(m.subscription_id)::bigint as billing_at_start,
    count(m.subscription_id) filter (where m.billing_until <= w.window_end)::bigint as churned,
    round(count(m.subscription_id) filter (where m.billing_until <= w.window_end)::numeric
      / nullif(count(m.subscription_id), 0), 4) as churn_rate
  from billing.communities c
  cross join lateral (select billing.community_now(c.id) - interval '30 days' as window_start,
    billing.community_now(c.id) as window_end) w
  left join analytics.subscription_mrr m on m.community_id = c.id
    and m.billing_from <= w.window_start and (m.billing_until is null or m.billing_until > w.window_start)
  group by c.id, w.window_start, w.window_end;

-- Trials: subscriptions that had a trial (trial_end set); ended: the trial is over by
-- the community's clock; converted: an ended trial that went on to bill (it bills now,
-- or one of its invoices was paid after the trial).
create or replace view analytics.trial_conversion with (security_invoker = true) as
  select s.community_id,
    count(*)::bigint as trials,
    count(*) filter (where s.trial_end <= billing.community_now(s.community_id))::bigint as trials_ended,
    count(*) filter (where s.trial_end <= billing.community_now(s.community_id) and (
      s.status in ('active', 'past_due', 'cancelling')
      or exists (select 1 from billing.invoices i where i.community_id = s.community_id
        and i.subscription_id = s.id and i.status = 'paid' and i.total_cents > 0 and i.paid_at >= s.trial_end)))::bigint as converted,
    round(count(*) filter (where s.trial_end <= billing.community_now(s.community_id) and (
      s.status in ('active', 'past_due', 'cancelling')
      or exists (select 1 from billing.invoices i where i.community_id = s.community_id
        and i.subscription_id = s.id and i.status = 'paid' and i.total_cents > 0 and i.paid_at >= s.trial_end)))::numeric
      / nullif(count(*) filter (where s.trial_end <= billing.community_now(s.community_id)), 0), 4) as conversion_rate
  from billing.subscriptions s
  where s.trial_end is not null
  group by s.community_id;

-- Paid invoices by day (UTC of paid_at) and currency: what was collected, and what of
-- it has since been refunded.
create or replace view analytics.paid_invoices_daily with (security_invoker = true) as
  select i.community_id, (i.paid_at at time zone 'UTC')::date as day, i.currency,
    count(*)::bigint as invoices, sum(i.amount_paid_cents)::bigint as paid_cents,
    sum(i.amount_refunded_cents)::bigint as refunded_cents
  from billing.invoices i
  where i.status = 'paid'
  group by i.community_id, (i.paid_at at time zone 'UTC')::date, i.currency;

-- Revenue by day and currency: subscriptions from their paid invoices, one-time
-- purchases from the purchases (their own invoices are not counted twice), gross of
-- refunds.
create or replace view analytics.revenue_daily with (security_invoker = true) as
  select community_id, day, currency, sum(subscription_cents)::bigint as subscription_cents,
    sum(purchase_cents)::bigint as purchase_cents, sum(subscription_cents + purchase_cents)::bigint as total_cents
  from (
    select i.community_id, (i.paid_at at time zone 'UTC')::date as day, i.currency,
      i.amount_paid_cents as subscription_cents, 0::bigint as purchase_cents
    from billing.invoices i where i.status = 'paid' and i.subscription_id is not null
    union all
    select p.community_id, (p.paid_at at time zone 'UTC')::date, p.currency, 0, p.amount_cents
    from billing.purchases p
  ) r
  group by community_id, day, currency;

-- Entitlement grants and revokes per day (UTC), from the ledger's edge events.
create or replace view analytics.entitlement_activity_daily with (security_invoker = true) as
  select e.community_id, (e.created_at at time zone 'UTC')::date as day,
    count(*) filter (where e.type = 'member.entitlement.granted')::bigint as grants,
    count(*) filter (where e.type = 'member.entitlement.revoked')::bigint as revokes
  from billing.events e
  where e.type in ('member.entitlement.granted', 'member.entitlement.revoked')
  group by e.community_id, (e.created_at at time zone 'UTC')::date;

grant select on analytics.subscription_mrr, analytics.mrr, analytics.mrr_by_tier, analytics.days,
  analytics.mrr_daily, analytics.subscribers, analytics.recent_activity, analytics.daily_activity,
  analytics.churn, analytics.trial_conversion, analytics.paid_invoices_daily, analytics.revenue_daily,
  analytics.entitlement_activity_daily to billing_api;
grant select on analytics.subscription_mrr, analytics.mrr, analytics.mrr_by_tier, analytics.days,
  analytics.mrr_daily, analytics.subscribers, analytics.recent_activity, analytics.daily_activity,
  analytics.churn, analytics.trial_conversion, analytics.paid_invoices_daily, analytics.revenue_daily,
  analytics.entitlement_activity_daily to billing_operator;
grant execute on function billing.subscription_discount_cents(billing.subscriptions, bigint, timestamptz) to billing_operator;

-- The summary's currency is the one most billing subscriptions use (ties: the larger
-- MRR, then alphabetical); mrr_cents is the MRR in that currency only. Every
-- currency's figure is in mrr_by_currency. With nothing billing, the currency of the
-- community's active plans (most common), else null.
create or replace function billing_api.analytics_summary(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_main analytics.mrr;
  v_currency text;
  v_out jsonb;
begin
  perform billing.require_scope('analytics:read');
  select * into v_main from analytics.mrr m where m.community_id = v_community
  order by m.billing_subscriptions desc, m.mrr_cents desc, m.currency limit 1;
  v_currency := v_main.currency;
  if v_currency is null then
    select p.currency into v_currency from billing.plans p
    where p.community_id = v_community and p.active
    group by p.currency order by count(*) desc, p.currency limit 1;
  end if;
  select jsonb_build_object(
    'mrr_cents', coalesce(v_main.mrr_cents, 0),
    'currency', v_currency,
    'active_subscribers', coalesce((select sb.active_subscribers from analytics.subscribers sb
      where sb.community_id = v_community), 0),
    'recent_signups', ra.recent_signups,
    'recent_cancels', ra.recent_cancels,
    'window_start', billing.iso(ra.window_start),
    'mrr_by_currency', coalesce((select jsonb_agg(jsonb_build_object('currency', m.currency,
      'mrr_cents', m.mrr_cents) order by m.currency) from analytics.mrr m where m.community_id = v_community), '[]'))
  into v_out
  from analytics.recent_activity ra where ra.community_id = v_community;
  return v_out;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing_api.analytics_summary(jsonb) to billing_api;
--! EndIncluded 48-analytics.sql
--! Included 50-ledger.sql
-- The entitlement ledger: one billing.member_entitlements row per (member,
-- entitlement), kept by the database whenever anything that feeds it changes.
--
-- Design: "recompute per member". billing.ledger_refresh_member computes, from the
-- current source rows, the desired (entitlement -> sources, benefits) of one member,
-- compares it with the stored ledger rows (including a snapshot of the member's
-- identities and external subjects) and updates every row whose status, sources,
-- benefits or identities changed: revision + 1, granted_at/revoked_at on the edges,
-- and one member.entitlement.* event per changed row, in the same transaction.
--
-- Which sources grant:
--   subscription: status active or trialing; past_due while one of its open invoices
--     still has a retry scheduled (46-invoices.sql); cancelling while
--     current_period_end > the community's now (or has no end), unless an open invoice
--     of it has no retry left; paused and cancelled never.
--   purchase: status completed, until access_expires_at (forever when null).
--   grant (47-grants.sql): not revoked, until expires_at (forever when null).
-- Sources reach entitlements through their plan's tier (billing.tier_entitlements).
-- An inactive row keeps sources [] and benefits [] (so a revoke's
-- changes.removed_benefits lists what to take away); its identities snapshot is
-- frozen until the next grant.
--
-- Time: purchases expiring and cancelling periods ending change no row, so
-- billing.ledger_sweep re-evaluates rows whose next_check_at has passed.
-- Every table that feeds the ledger refreshes it from its own trigger: subscriptions
-- and purchases (_500_outbox_and_ledger, 40-subscriptions.sql / 45-purchases.sql),
-- member identities and external subjects (30-members.sql), and the catalog tables
-- (_500_ledger on tier_entitlements, entitlement_benefits, platform_configs and plans,
-- 20-catalog.sql).

create table if not exists billing.member_entitlements (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('ment'),
  member_id text collate "C" not null,
  entitlement_id text collate "C" not null,
  status text not null check (status in ('active', 'inactive')),
  revision bigint not null default 1,
  sources jsonb not null default '[]',
  benefits jsonb not null default '[]',
  identities jsonb not null default '{}',
  granted_at timestamptz,
  revoked_at timestamptz,
  updated_at timestamptz not null default now(),
  next_check_at timestamptz,
  primary key (community_id, id),
  unique (community_id, member_id, entitlement_id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, entitlement_id) references billing.entitlements on delete cascade
);
comment on column billing.member_entitlements.next_check_at is
  'Earliest valid_until among time-limited sources (cancelling subscriptions, expiring purchases); billing.ledger_sweep re-evaluates the row once billing.now() reaches it.';
comment on column billing.member_entitlements.identities is
  'Snapshot {identities, external_subjects} of the member when last active: a change of it is a visible change (revision + 1, member.entitlement.updated).';

create index if not exists member_entitlements_next_check on billing.member_entitlements (community_id, next_check_at)
  where status = 'active' and next_check_at is not null;
create index if not exists member_entitlements_entitlement on billing.member_entitlements (community_id, entitlement_id)
  where status = 'active';
alter table billing.member_entitlements enable row level security;
alter table billing.member_entitlements force row level security;
drop policy if exists tenant on billing.member_entitlements;
create policy tenant on billing.member_entitlements
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.member_entitlements;
create policy owner_access on billing.member_entitlements to current_user using (true) with check (true);
grant select on billing.member_entitlements to billing_api;
revoke insert, update, delete on billing.member_entitlements from billing_api;
grant select, insert, update on billing.member_entitlements to billing_writer;

-- ---- the member entitlement object ---------------------------------------------------

-- Member entitlement: sources and benefits exactly as the ledger holds them. The
-- two-argument form is a plain expression (inlined) for queries that join the
-- entitlement themselves; the one-argument form looks it up.
create or replace function billing.member_entitlement_json(p_me billing.member_entitlements,
  p_ent billing.entitlements) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_me.id,
    'entitlement_id', p_me.entitlement_id,
    'key', p_ent.key,
    'name', p_ent.name,
    'revision', p_me.revision,
    'status', p_me.status,
    'granted_at', billing.iso(p_me.granted_at),
    'revoked_at', billing.iso(p_me.revoked_at),
    'sources', p_me.sources,
    'benefits', p_me.benefits)
$$;

create or replace function billing.member_entitlement_json(p_me billing.member_entitlements) returns jsonb
  language sql stable parallel safe
as $$
  select billing.member_entitlement_json(p_me, e)
  from (select 1) one
  left join billing.entitlements e on e.community_id = p_me.community_id and e.id = p_me.entitlement_id
$$;

-- ---- computing the ledger --------------------------------------------------------------

-- Elements of array a that are not in array b, in a's order.
create or replace function billing.jsonb_array_minus(a jsonb, b jsonb) returns jsonb
  language plpgsql immutable parallel safe
as $$
declare
  v_x jsonb;
  v_out jsonb := '[]';
begin
  if b = '[]' then
    return a;
  end if;
  for v_x in select jsonb_array_elements(a) loop
    if not (b @> jsonb_build_array(v_x)) then
      v_out := v_out || jsonb_build_array(v_x);
    end if;
  end loop;
  return v_out;
end
$$;

-- Desired ledger of one member: entitlement -> supporting sources, benefits and the
-- earliest time one of those sources lapses by itself.
create or replace function billing.ledger_desired(p_community_id text, p_member_id text, p_now timestamptz)
  returns table (entitlement_id text, sources jsonb, benefits jsonb, next_check_at timestamptz)
  language sql stable
as $$
  with src as (
    select 'subscription' as type, s.id, s.status, p.tier_id, s.plan_id, s.client_reference_id,
      s.current_period_end as valid_until, s.status = 'cancelling' as lapses
    from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and s.member_id = p_member_id
      and (s.status in ('active', 'trialing')
        or (s.status = 'past_due' and billing.subscription_retry_open(s.community_id, s.id))
        or (s.status = 'cancelling' and (s.current_period_end is null or s.current_period_end > p_now)
            and not billing.subscription_unpaid(s.community_id, s.id)))
    union all
    select 'grant', g.id, 'active', g.tier_id, null, null, g.expires_at, g.expires_at is not null
    from billing.grants g
    where g.community_id = p_community_id and g.member_id = p_member_id and g.revoked_at is null
      and (g.expires_at is null or g.expires_at > p_now)
    union all
    select 'purchase', u.id, u.status, p.tier_id, u.plan_id, u.client_reference_id,
      u.access_expires_at, u.access_expires_at is not null
    from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and u.member_id = p_member_id
      and u.status = 'completed' and (u.access_expires_at is null or u.access_expires_at > p_now)
  ), per_ent as (
    select te.entitlement_id,
      jsonb_agg(jsonb_build_object('type', src.type, 'id', src.id, 'status', src.status,
        'tier_id', src.tier_id, 'plan_id', src.plan_id, 'client_reference_id', src.client_reference_id,
        'valid_until', billing.iso(src.valid_until)) order by src.id) as sources,
      min(src.valid_until) filter (where src.lapses) as next_check_at
    from src
    join billing.tier_entitlements te on te.community_id = p_community_id and te.tier_id = src.tier_id
    group by te.entitlement_id
  )
  select pe.entitlement_id, pe.sources,
    coalesce((
      select jsonb_agg(jsonb_build_object('platform', pc.platform, 'platform_config_id', b.platform_config_id,
        'type', b.type, 'value', b.value) order by b.platform_config_id, b.type, b.value)
      from billing.entitlement_benefits b
      join billing.platform_configs pc on pc.community_id = b.community_id and pc.id = b.platform_config_id
      where b.community_id = p_community_id and b.entitlement_id = pe.entitlement_id), '[]'),
    pe.next_check_at
  from per_ent pe
$$;

-- Recomputes one member's ledger; returns how many rows changed visibly (one event
-- each). p_reason and p_trigger_event_id go into the events' data.
create or replace function billing.ledger_refresh_member(p_community_id text, p_member_id text,
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
as $$
declare
  v_now timestamptz := billing.community_now(p_community_id);
  v_member jsonb;
  v_snapshot jsonb;
  v_rec record;
  v_row billing.member_entitlements;
  v_status text;
  v_identities jsonb;
  v_type text;
  v_types text[] := '{}';
  v_datas jsonb[] := '{}';
begin
  -- One refresh of a member at a time: a concurrent one waits for the first to
  -- commit, then reads what it wrote. A row lock on the member (not an advisory lock:
  -- one statement may refresh 100,000 members, more than the shared lock table holds);
  -- NO KEY UPDATE leaves inserts of rows that reference the member unblocked.
  perform 1 from billing.members m where m.community_id = p_community_id and m.id = p_member_id
    for no key update;
  if not found then
    return 0; -- the member is being deleted; its ledger rows go with it
  end if;
  v_member := billing.member_json(p_community_id, p_member_id);
  v_snapshot := jsonb_build_object('identities', v_member->'identities',
    'external_subjects', v_member->'external_subjects');

  for v_rec in
    select d.entitlement_id as d_ent, d.sources as d_sources, d.benefits as d_benefits,
      d.next_check_at as d_next, me.r as stored
    from billing.ledger_desired(p_community_id, p_member_id, v_now) d
    full join (select x as r, x.entitlement_id from billing.member_entitlements x
               where x.community_id = p_community_id and x.member_id = p_member_id) me
      on me.entitlement_id = d.entitlement_id
    order by coalesce(d.entitlement_id, me.entitlement_id)
  loop
    v_status := case when v_rec.d_ent is not null then 'active' else 'inactive' end;
    if (v_rec.stored).id is null then
      -- first grant of this entitlement to this member
      insert into billing.member_entitlements as x (community_id, member_id, entitlement_id, status,
        revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
      values (p_community_id, p_member_id, v_rec.d_ent, 'active', 1, v_rec.d_sources, v_rec.d_benefits,
        v_snapshot, v_now, v_rec.d_next, now())
      returning * into v_row;
      v_type := 'member.entitlement.granted';
    else
      v_row := v_rec.stored;
      v_identities := case when v_status = 'active' then v_snapshot else v_row.identities end;
      if v_row.status = v_status
         and v_row.sources = coalesce(v_rec.d_sources, '[]')
         and v_row.benefits = coalesce(v_rec.d_benefits, '[]')
         and v_row.identities = v_identities then
        if v_row.next_check_at is distinct from v_rec.d_next then
          update billing.member_entitlements x set next_check_at = v_rec.d_next
          where x.community_id = p_community_id and x.id = v_row.id;
        end if;
        continue;
      end if;
      v_type := case
        when v_row.status = v_status then 'member.entitlement.updated'
        when v_status = 'active' then 'member.entitlement.granted'
        else 'member.entitlement.revoked' end;
      update billing.member_entitlements x set
        status = v_status,
        revision = x.revision + 1,
        sources = coalesce(v_rec.d_sources, '[]'),
        benefits = coalesce(v_rec.d_benefits, '[]'),
        identities = v_identities,
        granted_at = case when v_type = 'member.entitlement.granted' then v_now else x.granted_at end,
        revoked_at = case when v_type = 'member.entitlement.granted' then null
                          when v_type = 'member.entitlement.revoked' then v_now else x.revoked_at end,
        next_check_at = v_rec.d_next,
        updated_at = now()
      where x.community_id = p_community_id and x.id = v_row.id
      returning * into v_row;
    end if;
    v_types := v_types || v_type;
    v_datas := v_datas || jsonb_build_object(
      'member', v_member,
      'entitlement', billing.member_entitlement_json(v_row),
      'changes', jsonb_build_object(
        'added_benefits', billing.jsonb_array_minus(v_row.benefits, coalesce((v_rec.stored).benefits, '[]')),
        'removed_benefits', billing.jsonb_array_minus(coalesce((v_rec.stored).benefits, '[]'), v_row.benefits)),
      'reason', p_reason,
      'trigger_event_id', p_trigger_event_id);
  end loop;
  -- One insert for the member's events (ids follow the entitlement order above).
  if cardinality(v_types) > 0 then
    insert into billing.events (community_id, type, data)
    select p_community_id, v_types[i], v_datas[i] from generate_subscripts(v_types, 1) i order by i;
  end if;
  return cardinality(v_types);
end
$$;

-- Time passing: re-evaluates every active row whose next_check_at has come (expired
-- purchases, cancelling subscriptions past their period end) in one community, or in
-- every community when p_community_id is null. Returns the number of rows changed.
create or replace function billing.ledger_sweep(p_community_id text) returns integer
  language plpgsql volatile
as $$
declare
  v_community text;
  v_member text;
  v_changed integer := 0;
begin
  for v_community in
    select c.id from billing.communities c
    where p_community_id is null or c.id = p_community_id
  loop
    for v_member in
      select distinct x.member_id from billing.member_entitlements x
      where x.community_id = v_community and x.status = 'active'
        and x.next_check_at <= billing.community_now(v_community)
      order by x.member_id
    loop
      v_changed := v_changed + billing.ledger_refresh_member(v_community, v_member, 'access_expired', null);
    end loop;
  end loop;
  return v_changed;
end
$$;

-- Refreshes a set of members (from a statement-level trigger) with one reason.
create or replace function billing.ledger_refresh_members(p_community_id text, p_member_ids text[],
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
as $$
declare
  v_member text;
  v_changed integer := 0;
begin
  for v_member in select distinct m from unnest(p_member_ids) m where m is not null order by 1 loop
    v_changed := v_changed + billing.ledger_refresh_member(p_community_id, v_member, p_reason, p_trigger_event_id);
  end loop;
  return v_changed;
end
$$;

-- Members whose supporting sources (that could grant) sit on one of the tiers.
create or replace function billing.ledger_members_on_tiers(p_community_id text, p_tier_ids text[])
  returns text[] language sql stable
as $$
  select coalesce(array_agg(distinct member_id), '{}') from (
    select s.member_id from billing.subscriptions s
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    where s.community_id = p_community_id and p.tier_id = any (p_tier_ids)
      and s.status in ('active', 'trialing', 'past_due', 'cancelling')
    union all
    select u.member_id from billing.purchases u
    join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
    where u.community_id = p_community_id and p.tier_id = any (p_tier_ids) and u.status = 'completed'
    union all
    select g.member_id from billing.grants g
    where g.community_id = p_community_id and g.tier_id = any (p_tier_ids) and g.revoked_at is null
  ) m
$$;

-- Entitlement benefits changed: refresh every member whose row for those
-- entitlements is active (inactive rows carry no benefits).
create or replace function billing.ledger_benefits_changed(p_community_id text, p_entitlement_ids text[])
  returns integer language sql volatile
as $$
  select billing.ledger_refresh_members(p_community_id, coalesce((
    select array_agg(distinct x.member_id) from billing.member_entitlements x
    where x.community_id = p_community_id and x.entitlement_id = any (p_entitlement_ids)
      and x.status = 'active'), '{}'), 'benefits_changed', null)
$$;

-- ---- API -------------------------------------------------------------------------------

create or replace function billing_api.member_entitlements_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('members:read');
  if not exists (select 1 from billing.members m
                 where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.member_entitlement_json(me, e) order by me.id)
    from billing.member_entitlements me
    join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where me.community_id = billing.current_community_id() and me.member_id = p_args->>'id'
      and me.status = 'active'), '[]'));
end
$$;

-- Entitled when the identity's member holds an active entitlement; with tier_id, only
-- an active entitlement one of whose sources carries that tier_id counts, and only
-- those entitlements are listed. An unknown identity is simply not entitled.
create or replace function billing_api.entitlements_check(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text;
  v_tier text := nullif(p_args->>'tier_id', '');
  v_list jsonb;
begin
  perform billing.require_scope('members:read');
  v_member := billing.resolve_identity(p_args);
  if v_member is null then
    return jsonb_build_object('entitled', false, 'entitlements', '[]'::jsonb);
  end if;
  select coalesce(jsonb_agg(billing.member_entitlement_json(me, e) order by me.id), '[]') into v_list
  from billing.member_entitlements me
  join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
  where me.community_id = billing.current_community_id() and me.member_id = v_member
    and me.status = 'active'
    and (v_tier is null or me.sources @> jsonb_build_array(jsonb_build_object('tier_id', v_tier)));
  return jsonb_build_object('entitled', jsonb_array_length(v_list) > 0, 'entitlements', v_list);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.jsonb_array_minus(jsonb,jsonb) to billing_api;
grant execute on function billing.ledger_desired(text,text,timestamptz) to billing_api;
grant execute on function billing.ledger_refresh_member(text,text,text,text) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements,billing.entitlements) to billing_api;
grant execute on function billing_api.member_entitlements_list(jsonb) to billing_api;
grant execute on function billing_api.entitlements_check(jsonb) to billing_api;
--! EndIncluded 50-ledger.sql
--! Included 60-events.sql
-- Events: the outbox table, the catalog of event types, the envelope JSON and the
-- events feed.
--
-- Every lifecycle event is written by the trigger of its source table, in the
-- statement's transaction: subscriptions and purchases (_500_outbox_and_ledger),
-- checkout sessions and members (_500_outbox), member identities and external
-- subjects (_500_outbox_and_ledger); entitlement events come from the ledger
-- (billing.ledger_refresh_member, 50-ledger.sql) and webhook_endpoint.disabled from
-- the delivery worker (70-webhooks.sql). Other code only changes rows; it never
-- writes billing.events itself.
--
-- Lifecycle event types (data holds the object under its resource name, plus
-- previous_attributes: the visible fields that changed and their old values):
--   subscription.created, subscription.updated, subscription.cancelled
--   purchase.created, purchase.updated, purchase.refunded
--   checkout.created, checkout.completed, checkout.expired
--   member.created, member.updated (identities or external subjects changed)
-- Entitlement events (the ones that decide access) come from the ledger:
--   member.entitlement.granted, member.entitlement.updated, member.entitlement.revoked
-- billing_private.event_types lists them all; test/db/event-types.test.ts keeps it
-- equal to EVENT_TYPES of src/domain/events/event-types.ts.

-- ---- the outbox ----------------------------------------------------------------------

-- The outbox: every event envelope, written in the transaction of its change.
create table if not exists billing.events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('evt'),
  type text not null,
  created_at timestamptz not null default now(),
  api_version text not null default billing.api_version(),
  data jsonb not null,
  primary key (community_id, id)
);
create index if not exists events_type on billing.events (community_id, type, id);
alter table billing.events enable row level security;
alter table billing.events force row level security;
drop policy if exists tenant on billing.events;
create policy tenant on billing.events
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.events;
create policy owner_access on billing.events to current_user using (true) with check (true);
grant select on billing.events to billing_api;
revoke insert, update, delete on billing.events from billing_api;
grant select, insert on billing.events to billing_writer;

-- Statement-level, over the transition table: one insert for all the statement's
-- deliveries (one per enabled endpoint of 70-webhooks.sql whose event_types match;
-- empty = all) and one add_jobs call for all its jobs, whatever the number of rows.
create or replace function billing_private.tg_events__enqueue_deliveries() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
begin
  with d as (
    insert into billing.webhook_deliveries (community_id, endpoint_id, event_id, event_type, next_attempt_at)
    select e.community_id, w.id, e.id, e.type, now()
    from new_events e
    join billing.webhook_endpoints w
      on w.community_id = e.community_id and w.enabled
     and (w.event_types = '{}' or e.type = any (w.event_types))
    order by e.community_id, e.id, w.id
    returning community_id, id
  ), chunks as (
    select community_id, id, (row_number() over (partition by community_id order by id) - 1) / 50 as chunk
    from d
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids, 'after', 0))
  into v_payloads
  from (select community_id, array_agg(id order by id) as ids from chunks group by community_id, chunk) c;
  perform billing_private.add_job('webhook_deliveries__send', v_payloads);
  return null;
end
$$;

drop trigger if exists _900_enqueue_deliveries on billing.events;
create trigger _900_enqueue_deliveries after insert on billing.events
  referencing new table as new_events
  for each statement execute function billing_private.tg_events__enqueue_deliveries();

-- The outbox: writes one event row and returns its id.
create or replace function billing.emit_event(p_community_id text, p_type text, p_data jsonb)
  returns text language plpgsql volatile
as $$
declare
  v_id text;
begin
  insert into billing.events (community_id, type, data) values (p_community_id, p_type, p_data)
  returning id into v_id;
  return v_id;
end
$$;

-- The envelope, exactly as the feed returns it and webhooks deliver it.
create or replace function billing.event_json(p_event billing.events) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object('id', p_event.id, 'type', p_event.type,
    'timestamp', billing.iso(p_event.created_at), 'api_version', p_event.api_version,
    'data', p_event.data)
$$;

-- Old values of the keys whose values differ between two objects.
create or replace function billing.jsonb_changed(p_old jsonb, p_new jsonb) returns jsonb
  language plpgsql immutable parallel safe
as $$
declare
  v_key text;
  v_out jsonb := '{}';
begin
  for v_key in select jsonb_object_keys(p_old) loop
    if (p_old->v_key) is distinct from (p_new->v_key) then
      v_out := v_out || jsonb_build_object(v_key, p_old->v_key);
    end if;
  end loop;
  return v_out;
end
$$;

-- ---- the event type catalog --------------------------------------------------------------

-- Every event type the service emits: what webhook endpoints may subscribe to.
-- Owner only; billing_api reaches it through the endpoint trigger of 70-webhooks.sql.
create table if not exists billing_private.event_types (
  type text collate "C" primary key,
  description text not null
);
alter table billing_private.event_types enable row level security;
alter table billing_private.event_types force row level security;
drop policy if exists owner_only on billing_private.event_types;
create policy owner_only on billing_private.event_types using (true);

insert into billing_private.event_types (type, description) values
  ('member.entitlement.granted', 'An entitlement became active for a member.'),
  ('member.entitlement.updated', 'Sources, benefits or linked identities of an active entitlement changed.'),
  ('member.entitlement.revoked', 'An entitlement became inactive for a member.'),
  ('subscription.created', 'A subscription was created.'),
  ('subscription.updated', 'A subscription changed.'),
  ('subscription.cancelled', 'A subscription ended.'),
  ('purchase.created', 'A one-time purchase was recorded.'),
  ('purchase.updated', 'A purchase changed.'),
  ('purchase.refunded', 'A purchase was refunded.'),
  ('checkout.created', 'A checkout session was created.'),
  ('checkout.completed', 'A checkout session was paid.'),
  ('checkout.expired', 'A checkout session expired unpaid.'),
  ('member.created', 'A member was created.'),
  ('member.updated', 'A member''s platform identities or external subjects changed.'),
  ('invoice.created', 'An invoice was written.'),
  ('invoice.paid', 'An invoice was paid in full.'),
  ('invoice.payment_failed', 'An attempt to collect an invoice failed.'),
  ('invoice.refunded', 'An invoice was refunded, in full or in part.'),
  ('invoice.disputed', 'A payment of an invoice was disputed; the access it paid for ended.'),
  ('webhook_endpoint.disabled', 'A webhook endpoint was disabled because its deliveries kept failing.')
on conflict (type) do update set description = excluded.description;

-- ---- the events feed ----------------------------------------------------------------

-- GET /v1/events: newest first, keyset by id. type: array of event types (any of);
-- after_id: only events newer than that id (id > after_id); cursor: the id to
-- continue after (id < cursor).
create or replace function billing_api.events_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_types text[];
  -- Bounds instead of "is null or": the (generic, cached) plan keeps both as index
  -- range conditions. Ids are [a-z0-9_] in the "C" collation: '' and '~' bound them.
  v_after text := coalesce(p_args->>'after_id', '');
  v_cursor text := coalesce(p_args->>'cursor', '~');
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.events[];
begin
  perform billing.require_scope('events:read');
  if jsonb_typeof(p_args->'type') = 'array' then
    v_types := array(select distinct jsonb_array_elements_text(p_args->'type'));
  elsif jsonb_typeof(p_args->'type') = 'string' then
    v_types := array(select distinct btrim(t) from unnest(string_to_array(p_args->>'type', ',')) t where btrim(t) <> '');
  end if;
  if v_types is not null and cardinality(v_types) = 0 then
    v_types := null;
  end if;
  if v_types is null then
    v_rows := array(
      select e from billing.events e
      where e.community_id = v_community
        and e.id > v_after and e.id < v_cursor
      order by e.id desc
      limit v_limit + 1);
  else
    -- One keyset scan of events_type (community_id, type, id) per type, each limited,
    -- then merged: the page costs the same however rare or common the types are.
    v_rows := array(
      select e from unnest(v_types) t(type)
      cross join lateral (
        select x from billing.events x
        where x.community_id = v_community and x.type = t.type
          and x.id > v_after and x.id < v_cursor
        order by x.id desc
        limit v_limit + 1) l(e)
      order by (e).id desc
      limit v_limit + 1);
  end if;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.event_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit
                        then billing.encode_cursor((v_rows[v_limit]).id) end);
end
$$;

create or replace function billing_api.events_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_event billing.events;
begin
  perform billing.require_scope('events:read');
  select * into v_event from billing.events e
  where e.community_id = billing.current_community_id() and e.id = p_args->>'id';
  if v_event.id is null then
    perform billing.raise('BL404', 'No event ' || (p_args->>'id') || '.');
  end if;
  return billing.event_json(v_event);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.emit_event(text,text,jsonb) to billing_api;
grant execute on function billing.event_json(billing.events) to billing_api;
grant execute on function billing.jsonb_changed(jsonb,jsonb) to billing_api;
grant execute on function billing_api.events_list(jsonb) to billing_api;
grant execute on function billing_api.events_get(jsonb) to billing_api;
--! EndIncluded 60-events.sql
--! Included 70-webhooks.sql
-- Outbound webhooks: endpoints, encrypted signing secrets, the delivery queue and the
-- delivery log.
--
-- Flow: an event row (billing.events, the outbox) fans out, in the statement and
-- transaction that inserted it, into one webhook_deliveries row per enabled endpoint
-- whose event_types match (empty = all), and into graphile-worker jobs
-- 'webhook_deliveries__send' (one job per up to 50 deliveries of one community). The
-- worker (worker/tasks/webhook_deliveries__send.ts) signs and POSTs each delivery and
-- records the outcome through billing_private.webhook_record_attempts, which also
-- schedules the retry job, so nothing is sent before the event commits and nothing
-- committed is lost.
--
-- Secrets are AES-256-GCM ciphertexts made in Node (src/webhooks/crypto.ts); the key
-- never reaches the database. billing_api reaches billing_private only through the
-- SECURITY DEFINER functions below.

-- ---- endpoints ---------------------------------------------------------------------------

create table if not exists billing.webhook_endpoints (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('we'),
  url text not null,
  description text,
  event_types text[] not null default '{}',
  enabled boolean not null default true,
  disabled_reason text,
  failing_since timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  constraint webhook_endpoints_url_length check (length(url) between 1 and 2048),
  constraint webhook_endpoints_description_length check (length(description) <= 500),
  constraint webhook_endpoints_disabled_reason check (disabled_reason in ('manual', 'failing'))
);
alter table billing.webhook_endpoints enable row level security;
alter table billing.webhook_endpoints force row level security;
drop policy if exists tenant on billing.webhook_endpoints;
create policy tenant on billing.webhook_endpoints
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.webhook_endpoints;
create policy owner_access on billing.webhook_endpoints to current_user using (true) with check (true);
grant select on billing.webhook_endpoints to billing_api;
revoke insert, update, delete on billing.webhook_endpoints from billing_api;
grant select, insert, update, delete on billing.webhook_endpoints to billing_writer;

-- Event types an endpoint subscribes to must be in the catalog
-- (billing_private.event_types, 60-events.sql), whatever door the write comes
-- through; 422 naming the offending element (event_types.N, as the API's own check).
create or replace function billing_private.tg_webhook_endpoints__check_event_types() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_i integer;
begin
  for v_i in 1 .. coalesce(cardinality(new.event_types), 0) loop
    if not exists (select 1 from billing_private.event_types t where t.type = new.event_types[v_i]) then
      raise exception using errcode = 'BL422',
        message = 'Unknown event type "' || coalesce(new.event_types[v_i], 'null')
          || '"; GET /v1/webhooks/event-types lists them.',
        detail = 'event_types.' || (v_i - 1);
    end if;
  end loop;
  return new;
end
$$;

drop trigger if exists _100_check_event_types on billing.webhook_endpoints;
create trigger _100_check_event_types before insert or update of event_types on billing.webhook_endpoints
  for each row execute function billing_private.tg_webhook_endpoints__check_event_types();

-- At most 5 endpoints per community, whatever door the insert comes through: a
-- transaction-level lock per community serialises concurrent creates, and the count
-- (a fresh snapshot in READ COMMITTED) sees every committed one.
create or replace function billing_private.tg_webhook_endpoints__limit() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform pg_advisory_xact_lock(hashtextextended('webhook_endpoints ' || new.community_id, 70));
  if (select count(*) from billing.webhook_endpoints w where w.community_id = new.community_id) >= 5 then
    raise exception using errcode = 'BLEPL',
      message = 'This community already has 5 webhook endpoints; delete one first.';
  end if;
  return new;
end
$$;

drop trigger if exists _200_endpoint_limit on billing.webhook_endpoints;
create trigger _200_endpoint_limit before insert on billing.webhook_endpoints
  for each row execute function billing_private.tg_webhook_endpoints__limit();

-- Encrypted signing secrets: owner only; the worker and API reach them through
-- SECURITY DEFINER functions.
create table if not exists billing_private.webhook_secrets (
  community_id text collate "C" not null,
  endpoint_id text collate "C" not null,
  secret_ciphertext text not null,
  previous_ciphertext text,
  previous_expires_at timestamptz,
  primary key (community_id, endpoint_id),
  foreign key (community_id, endpoint_id) references billing.webhook_endpoints on delete cascade
);
alter table billing_private.webhook_secrets enable row level security;
alter table billing_private.webhook_secrets force row level security;
drop policy if exists owner_only on billing_private.webhook_secrets;
create policy owner_only on billing_private.webhook_secrets using (true);

-- ---- deliveries and their attempts -------------------------------------------------------

-- Deliveries are updated once per attempt (usually once): half of each page is left
-- free so those updates are HOT (no new index entries in its three indexes).
create table if not exists billing.webhook_deliveries (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('wd'),
  endpoint_id text collate "C" not null,
  event_id text collate "C" not null,
  event_type text not null,
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempt_count integer not null default 0,
  next_attempt_at timestamptz,
  last_status_code integer,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, endpoint_id, event_id),
  foreign key (community_id, endpoint_id) references billing.webhook_endpoints on delete cascade,
  foreign key (community_id, event_id) references billing.events on delete cascade
) with (fillfactor = 50);
create index if not exists webhook_deliveries_endpoint on billing.webhook_deliveries (community_id, endpoint_id, id);
alter table billing.webhook_deliveries enable row level security;
alter table billing.webhook_deliveries force row level security;
drop policy if exists tenant on billing.webhook_deliveries;
create policy tenant on billing.webhook_deliveries
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.webhook_deliveries;
create policy owner_access on billing.webhook_deliveries to current_user using (true) with check (true);
grant select on billing.webhook_deliveries to billing_api;
revoke insert, update, delete on billing.webhook_deliveries from billing_api;
grant select, update on billing.webhook_deliveries to billing_writer;

create table if not exists billing.webhook_attempts (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('wa'),
  delivery_id text collate "C" not null,
  endpoint_id text collate "C" not null,
  attempt integer not null,
  status_code integer,
  duration_ms integer,
  error text,
  response_excerpt text,
  started_at timestamptz not null,
  finished_at timestamptz,
  -- The retry scheduled after an attempt (null when none), for the delivery log.
  next_attempt_at timestamptz,
  primary key (community_id, id),
  foreign key (community_id, delivery_id) references billing.webhook_deliveries on delete cascade
);
-- The log is read per delivery (and cascades from deliveries): index it that way.
create index if not exists webhook_attempts_delivery on billing.webhook_attempts (community_id, delivery_id, attempt);
alter table billing.webhook_attempts enable row level security;
alter table billing.webhook_attempts force row level security;
drop policy if exists tenant on billing.webhook_attempts;
create policy tenant on billing.webhook_attempts
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.webhook_attempts;
create policy owner_access on billing.webhook_attempts to current_user using (true) with check (true);
grant select on billing.webhook_attempts to billing_api;
revoke insert, update, delete on billing.webhook_attempts from billing_api;

-- ---- JSON shapes --------------------------------------------------------------------------

create or replace function billing.webhook_endpoint_json(p_endpoint billing.webhook_endpoints) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', p_endpoint.id, 'url', p_endpoint.url, 'description', p_endpoint.description,
    'event_types', to_jsonb(p_endpoint.event_types), 'enabled', p_endpoint.enabled,
    'disabled_reason', p_endpoint.disabled_reason,
    'created_at', billing.iso(p_endpoint.created_at), 'updated_at', billing.iso(p_endpoint.updated_at))
$$;

create or replace function billing.webhook_delivery_json(p_delivery billing.webhook_deliveries) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', p_delivery.id, 'endpoint_id', p_delivery.endpoint_id,
    'event_id', p_delivery.event_id, 'event_type', p_delivery.event_type, 'status', p_delivery.status,
    'attempt_count', p_delivery.attempt_count, 'next_attempt_at', billing.iso(p_delivery.next_attempt_at),
    'last_status_code', p_delivery.last_status_code, 'last_error', p_delivery.last_error,
    'created_at', billing.iso(p_delivery.created_at), 'updated_at', billing.iso(p_delivery.updated_at),
    'attempts', coalesce((
      select jsonb_agg(jsonb_build_object('id', a.id, 'event_id', p_delivery.event_id,
        'event_type', p_delivery.event_type, 'attempt', a.attempt, 'status_code', a.status_code,
        'duration_ms', a.duration_ms, 'error', a.error, 'response_excerpt', a.response_excerpt,
        'started_at', billing.iso(a.started_at), 'finished_at', billing.iso(a.finished_at),
        'next_attempt_at', billing.iso(a.next_attempt_at)) order by a.attempt, a.id)
      from billing.webhook_attempts a
      where a.community_id = p_delivery.community_id and a.delivery_id = p_delivery.id), '[]'))
$$;

-- ---- secrets (SECURITY DEFINER: billing_api has no rights on billing_private) -------------

-- Stores a new secret for an endpoint of the current community. With p_rotate the old
-- one keeps signing until p_grace from now (a second v1 token).
create or replace function billing_private.webhook_secret_store(p_endpoint_id text, p_ciphertext text,
  p_rotate boolean, p_grace interval default '24 hours')
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community_id text := billing.current_community_id();
begin
  if v_community_id is null or not exists (select 1 from billing.webhook_endpoints w
      where w.community_id = v_community_id and w.id = p_endpoint_id) then
    perform billing.raise('BL404', 'No webhook endpoint ' || p_endpoint_id || '.');
  end if;
  if p_rotate then
    update billing_private.webhook_secrets s set
      previous_ciphertext = s.secret_ciphertext, previous_expires_at = now() + p_grace,
      secret_ciphertext = p_ciphertext
    where s.community_id = v_community_id and s.endpoint_id = p_endpoint_id;
    if not found then
      insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext)
      values (v_community_id, p_endpoint_id, p_ciphertext);
    end if;
  else
    insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext)
    values (v_community_id, p_endpoint_id, p_ciphertext)
    on conflict (community_id, endpoint_id) do update set secret_ciphertext = excluded.secret_ciphertext,
      previous_ciphertext = null, previous_expires_at = null;
  end if;
end
$$;

-- The ciphertexts that sign now: the current secret, then the previous one while its
-- grace period lasts.
create or replace function billing_private.webhook_signing_ciphertexts(p_community_id text, p_endpoint_id text)
  returns text[] language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select array_remove(array[s.secret_ciphertext,
    case when s.previous_expires_at > now() then s.previous_ciphertext end], null)
  from billing_private.webhook_secrets s
  where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id
$$;

-- For the test ping (run as billing_api): the endpoint of the current community, its
-- signing ciphertexts, and a token from its own bucket (10 per minute, burst 10).
create or replace function billing_private.webhook_test_target(p_endpoint_id text)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community_id text := billing.current_community_id();
  v_endpoint billing.webhook_endpoints;
  v_rl jsonb;
begin
  select * into v_endpoint from billing.webhook_endpoints w
  where w.community_id = v_community_id and w.id = p_endpoint_id;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || p_endpoint_id || '.');
  end if;
  v_rl := billing_private.take_token('webhook_test:' || v_endpoint.id, 10, 10);
  return jsonb_build_object('allowed', (v_rl->>'allowed')::boolean, 'retry_after', v_rl->'retry_after',
    'url', v_endpoint.url, 'community_id', v_community_id,
    'ciphertexts', to_jsonb(billing_private.webhook_signing_ciphertexts(v_community_id, v_endpoint.id)));
end
$$;

-- ---- API operations (billing_api, tenant-scoped by RLS) -------------------------------------

create or replace function billing_api.webhook_endpoints_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.webhook_endpoints[];
begin
  perform billing.require_scope('webhooks:read');
  select coalesce(array_agg(w order by w.id desc), '{}') into v_rows
  from (select * from billing.webhook_endpoints w
        where p_args->>'cursor' is null or w.id < p_args->>'cursor'
        order by w.id desc limit v_limit + 1) w;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.webhook_endpoint_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit then billing.encode_cursor(v_rows[v_limit].id) end);
end
$$;

create or replace function billing_api.webhook_endpoints_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  perform billing.require_scope('webhooks:read');
  select * into v_endpoint from billing.webhook_endpoints w where w.id = p_args->>'id';
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

-- Input: id (made by the caller, so the secret's ciphertext can be bound to it), url,
-- description, event_types, enabled, secret_ciphertext.
create or replace function billing_api.webhook_endpoints_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_endpoint billing.webhook_endpoints;
  v_enabled boolean := coalesce((p_args->>'enabled')::boolean, true);
begin
  perform billing.require_scope('webhooks:write');
  insert into billing.webhook_endpoints (community_id, id, url, description, event_types, enabled, disabled_reason)
  values (billing.current_community_id(), p_args->>'id', p_args->>'url', p_args->>'description',
    coalesce(array(select jsonb_array_elements_text(p_args->'event_types')), '{}'),
    v_enabled, case when v_enabled then null else 'manual' end)
  returning * into v_endpoint;
  perform billing_private.webhook_secret_store(v_endpoint.id, p_args->>'secret_ciphertext', false);
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

-- PATCH: only the keys present change. Enabling clears the disabled reason and the
-- failure streak; disabling records 'manual'.
create or replace function billing_api.webhook_endpoints_update(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  perform billing.require_scope('webhooks:write');
  update billing.webhook_endpoints w set
    url = case when p_args ? 'url' then p_args->>'url' else w.url end,
    description = case when p_args ? 'description' then p_args->>'description' else w.description end,
    event_types = case when p_args ? 'event_types'
      then coalesce(array(select jsonb_array_elements_text(p_args->'event_types')), '{}') else w.event_types end,
    enabled = case when p_args ? 'enabled' then (p_args->>'enabled')::boolean else w.enabled end,
    disabled_reason = case
      when not (p_args ? 'enabled') then w.disabled_reason
      when (p_args->>'enabled')::boolean then null
      when w.enabled then 'manual'
      else w.disabled_reason end,
    failing_since = case when (p_args->>'enabled')::boolean and not w.enabled then null else w.failing_since end,
    updated_at = now()
  where w.id = p_args->>'id'
  returning * into v_endpoint;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

create or replace function billing_api.webhook_endpoints_delete(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('webhooks:write');
  delete from billing.webhook_endpoints w where w.id = p_args->>'id';
  if not found then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return null;
end
$$;

create or replace function billing_api.webhook_endpoints_rotate_secret(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  perform billing.require_scope('webhooks:write');
  update billing.webhook_endpoints w set updated_at = now() where w.id = p_args->>'id'
  returning * into v_endpoint;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  perform billing_private.webhook_secret_store(v_endpoint.id, p_args->>'secret_ciphertext', true);
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

-- Deliveries newest first, each with its attempts.
create or replace function billing_api.webhook_deliveries_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.webhook_deliveries[];
begin
  perform billing.require_scope('webhooks:read');
  if not exists (select 1 from billing.webhook_endpoints w where w.id = p_args->>'id') then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  select coalesce(array_agg(d order by d.id desc), '{}') into v_rows
  from (select * from billing.webhook_deliveries d
        where d.community_id = billing.current_community_id() and d.endpoint_id = p_args->>'id'
          and (p_args->>'cursor' is null or d.id < p_args->>'cursor')
        order by d.id desc limit v_limit + 1) d;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.webhook_delivery_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit then billing.encode_cursor(v_rows[v_limit].id) end);
end
$$;

-- Requeues one delivery for an immediate attempt. A pending delivery keeps its retry
-- schedule (its next attempt just happens now); a succeeded or failed one gets one
-- more attempt, and no automatic retries after it. 409 while the endpoint is disabled.
create or replace function billing_api.webhook_deliveries_redeliver(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_endpoint billing.webhook_endpoints;
  v_delivery billing.webhook_deliveries;
  v_manual boolean;
begin
  perform billing.require_scope('webhooks:write');
  select * into v_endpoint from billing.webhook_endpoints w where w.id = p_args->>'id';
  select * into v_delivery from billing.webhook_deliveries d
  where d.community_id = billing.current_community_id() and d.id = p_args->>'deliveryId'
    and d.endpoint_id = v_endpoint.id
  for update;
  if v_endpoint.id is null or v_delivery.id is null then
    perform billing.raise('BL404', 'No delivery ' || (p_args->>'deliveryId') || ' for webhook endpoint '
      || (p_args->>'id') || '.');
  end if;
  if not v_endpoint.enabled then
    perform billing.raise('BL409', 'Webhook endpoint ' || v_endpoint.id || ' is disabled; enable it first.');
  end if;
  v_manual := v_delivery.status <> 'pending';
  update billing.webhook_deliveries d set status = 'pending', next_attempt_at = now(), updated_at = now()
  where d.community_id = v_delivery.community_id and d.id = v_delivery.id
  returning * into v_delivery;
  perform billing_private.webhook_delivery_enqueue(v_delivery.id, v_manual);
  return billing.webhook_delivery_json(v_delivery);
end
$$;

-- The API's only way to enqueue: one job for one pending delivery of the current
-- community (billing_api may not call add_job itself).
create or replace function billing_private.webhook_delivery_enqueue(p_delivery_id text, p_manual boolean)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_delivery billing.webhook_deliveries;
begin
  select * into v_delivery from billing.webhook_deliveries d
  where d.community_id = billing.current_community_id() and d.id = p_delivery_id and d.status = 'pending';
  if v_delivery.id is null then
    perform billing.raise('BL404', 'No pending delivery ' || p_delivery_id || '.');
  end if;
  perform billing_private.add_job('webhook_deliveries__send', array[json_build_object(
    'community_id', v_delivery.community_id, 'ids', array[v_delivery.id],
    'after', v_delivery.attempt_count, 'manual', p_manual)]);
end
$$;

-- ---- the worker's side (owner) ---------------------------------------------------------------

-- Loads the deliveries of one job that are still due: pending and not yet attempted
-- past p_after (a job re-run after its attempt was recorded finds nothing to do).
-- Deliveries whose endpoint was disabled meanwhile fail without an attempt.
create or replace function billing_private.webhook_deliveries_load(p_community_id text, p_ids text[], p_after integer)
  returns table (id text, endpoint_id text, url text, event_id text, body text, ciphertexts text[])
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
  set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
  v_disabled text[];
begin
  -- Every lookup is one primary-key probe per id of the job (lateral ... limit 1). Plans
  -- are made per call (plan_cache_mode above): a generic plan cached by a long-lived
  -- worker connection while the table was nearly empty may pick the endpoint index for
  -- these probes, which then reads every delivery of the community on each call.
  select array_agg(d.id) into v_disabled
  from unnest(p_ids) as x(id)
  cross join lateral (
    select d.id from billing.webhook_deliveries d
    join billing.webhook_endpoints w on w.community_id = d.community_id and w.id = d.endpoint_id
    where d.community_id = p_community_id and d.id = x.id and d.status = 'pending'
      and d.attempt_count = p_after and not w.enabled
    limit 1) d;
  if v_disabled is not null then
    update billing.webhook_deliveries d set status = 'failed', next_attempt_at = null,
      last_error = 'endpoint disabled', updated_at = now()
    where d.community_id = p_community_id and d.id = any (v_disabled);
  end if;
  return query
    select d.id::text, d.endpoint_id::text, d.url, d.event_id::text, d.body, d.ciphertexts
    from unnest(p_ids) as x(id)
    cross join lateral (
      select d.id, d.endpoint_id, w.url, d.event_id, billing.event_json(e)::text as body,
        array_remove(array[s.secret_ciphertext,
          case when s.previous_expires_at > now() then s.previous_ciphertext end], null) as ciphertexts
      from billing.webhook_deliveries d
      join billing.webhook_endpoints w on w.community_id = d.community_id and w.id = d.endpoint_id
      join billing.events e on e.community_id = d.community_id and e.id = d.event_id
      left join billing_private.webhook_secrets s on s.community_id = d.community_id and s.endpoint_id = d.endpoint_id
      where d.community_id = p_community_id and d.id = x.id and d.status = 'pending'
        and d.attempt_count = p_after and w.enabled
      limit 1) d;
end
$$;

-- Records the attempts of one job in one statement batch: the attempt log, each
-- delivery's state (only if no other attempt overtook it), the retry job, and each
-- endpoint's failure streak. An endpoint whose failures have lasted p_disable_after
-- with no success in between is disabled and a webhook_endpoint.disabled event is
-- written (delivered to the community's other endpoints).
--
-- p_results: [{id, ok, status_code, error, excerpt, started_at, finished_at, duration_ms}]
-- p_retry_at: when the failed ones are retried (null: they fail for good).
create or replace function billing_private.webhook_record_attempts(p_community_id text, p_after integer,
  p_manual boolean, p_results jsonb, p_retry_at timestamptz, p_disable_after interval)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
  set plan_cache_mode = force_custom_plan
as $$
declare
  v_retry_ids text[];
  v_endpoint_ids text[];
  v_disabled billing.webhook_endpoints;
  v_retry_at timestamptz := case when p_manual then null else p_retry_at end;
begin
  -- r.tid: each delivery's row, found by a primary-key probe (see webhook_deliveries_load);
  -- the update reaches it by ctid alone (a community_id condition there invites a scan
  -- of the community's deliveries).
  with r as (
    select r.*, t.tid from jsonb_to_recordset(p_results) as r (id text, ok boolean, status_code integer,
      error text, excerpt text, started_at timestamptz, finished_at timestamptz, duration_ms integer)
    cross join lateral (select d.ctid as tid from billing.webhook_deliveries d
                        where d.community_id = p_community_id and d.id = r.id limit 1) t
  ), upd as (
    update billing.webhook_deliveries d set
      attempt_count = d.attempt_count + 1,
      status = case when r.ok then 'succeeded' when v_retry_at is null then 'failed' else 'pending' end,
      next_attempt_at = case when r.ok then null else v_retry_at end,
      last_status_code = r.status_code, last_error = r.error, updated_at = now()
    from r
    where d.ctid = r.tid and d.id = r.id and d.attempt_count = p_after
    returning d.id, d.endpoint_id, d.attempt_count, d.status
  ), ins as (
    insert into billing.webhook_attempts (community_id, delivery_id, endpoint_id, attempt, status_code,
      duration_ms, error, response_excerpt, started_at, finished_at, next_attempt_at)
    select p_community_id, upd.id, upd.endpoint_id, upd.attempt_count, r.status_code, r.duration_ms, r.error,
      r.excerpt, r.started_at, r.finished_at, case when upd.status = 'pending' then v_retry_at end
    from upd join r on r.id = upd.id
  ), streak as (
    -- Success path: no write unless a streak was running (no hot-row contention).
    update billing.webhook_endpoints w set
      failing_since = case when s.any_ok then null else coalesce(w.failing_since, s.first_failure) end
    from (select upd.endpoint_id, bool_or(r.ok) as any_ok, min(r.started_at) as first_failure
          from upd join r on r.id = upd.id group by upd.endpoint_id) s
    where w.community_id = p_community_id and w.id = s.endpoint_id
      and (w.failing_since is not null or not s.any_ok)
    returning w.id
  )
  select array_agg(upd.id order by upd.id) filter (where upd.status = 'pending'),
    (select array_agg(streak.id) from streak)
  into v_retry_ids, v_endpoint_ids
  from upd;

  if v_retry_ids is not null then
    perform billing_private.add_job('webhook_deliveries__send', array[json_build_object(
      'community_id', p_community_id, 'ids', v_retry_ids, 'after', p_after + 1)], v_retry_at);
  end if;

  if v_endpoint_ids is null then
    return;
  end if;
  for v_disabled in
    update billing.webhook_endpoints w set enabled = false, disabled_reason = 'failing', updated_at = now()
    where w.community_id = p_community_id and w.id = any (v_endpoint_ids) and w.enabled
      and w.failing_since <= now() - p_disable_after
    returning w.*
  loop
    perform billing.emit_event(p_community_id, 'webhook_endpoint.disabled', jsonb_build_object(
      'endpoint', billing.webhook_endpoint_json(v_disabled), 'reason', 'failing',
      'failing_since', billing.iso(v_disabled.failing_since)));
  end loop;
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.webhook_delivery_json(billing.webhook_deliveries) to billing_api;
grant execute on function billing.webhook_endpoint_json(billing.webhook_endpoints) to billing_api;
grant execute on function billing_private.webhook_delivery_enqueue(text,boolean) to billing_api;
grant execute on function billing_private.webhook_secret_store(text,text,boolean,interval) to billing_api;
grant execute on function billing_private.webhook_test_target(text) to billing_api;
grant execute on function billing_api.webhook_endpoints_list(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_get(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_create(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_update(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_delete(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_rotate_secret(jsonb) to billing_api;
grant execute on function billing_api.webhook_deliveries_list(jsonb) to billing_api;
grant execute on function billing_api.webhook_deliveries_redeliver(jsonb) to billing_api;

-- What billing_worker calls (worker/tasks/webhook_deliveries__send.ts).
grant execute on function billing_private.webhook_deliveries_load(text,text[],integer) to billing_worker;
grant execute on function billing_private.webhook_record_attempts(text,integer,boolean,jsonb,timestamptz,interval) to billing_worker;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing_api to billing_writer;
alter function billing_api.webhook_endpoints_create(jsonb) owner to billing_writer;
alter function billing_api.webhook_endpoints_update(jsonb) owner to billing_writer;
alter function billing_api.webhook_endpoints_delete(jsonb) owner to billing_writer;
alter function billing_api.webhook_endpoints_rotate_secret(jsonb) owner to billing_writer;
alter function billing_api.webhook_deliveries_redeliver(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded 70-webhooks.sql
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
  select * into v_d from billing.discount_codes d where lower(d.code) = lower(p_code);
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

-- Token bucket refilling continuously. Returns allowed, remaining, reset, retry_after.
create or replace function billing_private.take_token(p_bucket text, p_per_minute double precision, p_burst double precision)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_now timestamptz := clock_timestamp();
  v_rate double precision := p_per_minute / 60.0;
  v_tokens double precision;
  v_allowed boolean;
begin
  insert into billing_private.rate_buckets as b (bucket, tokens, allowed, updated_at)
  values (p_bucket, p_burst - 1, true, v_now)
  -- v_now was read before waiting for the row lock, so it may precede the stored
  -- updated_at of a concurrent request that got the lock first: never refill
  -- negatively, never move updated_at back.
  on conflict (bucket) do update set
    allowed = least(p_burst, b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= 1,
    tokens = least(p_burst, b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate)
      - case when least(p_burst, b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= 1 then 1 else 0 end,
    updated_at = greatest(b.updated_at, v_now)
  returning tokens, allowed into v_tokens, v_allowed;
  return jsonb_build_object(
    'allowed', v_allowed,
    'limit', p_per_minute::bigint,
    'remaining', floor(greatest(v_tokens, 0))::bigint,
    'reset', ceil(greatest(p_burst - v_tokens, 0) / v_rate)::bigint,
    'retry_after', greatest(ceil((1 - v_tokens) / v_rate), 1)::bigint);
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
  delete from billing_private.rate_buckets b where b.updated_at < now() - interval '1 hour';
  get diagnostics v_buckets = row_count;
  return jsonb_build_object('idempotency_keys', v_idempotency, 'link_codes', v_link_codes,
    'portal_sessions', v_portal, 'webhook_attempts', v_attempts, 'webhook_deliveries', v_deliveries,
    'rate_buckets', v_buckets);
end
$$;

-- What billing_worker calls (worker/tasks/billing__purge_expired.ts).
grant execute on function billing_private.purge_expired(interval) to billing_worker;
--! EndIncluded 90-retention.sql
--! Included 95-graphql.sql
-- GraphQL: the read-only schema PostGraphile exposes (src/graphql/). It sees only
-- billing_graphql: one view per readable resource, never the tables, billing_private,
-- billing_api or graphile_worker.
--
-- Two fences, both in SQL:
--   community: every view is security_invoker, so the base tables' RLS policies
--     (tenant: community_id = app.community_id) apply to the API role exactly as they
--     do for REST; the GraphQL request sets app.community_id from its key the same way.
--   scope: every view filters on billing.has_scope('<resource>:read') of the key
--     (app.scopes), so a key without subscriptions:read sees no subscription at all.
--     It is an uncorrelated (select ...): one evaluation per statement, a one-time
--     filter in the plan.
--   Not security_barrier (said explicitly, since create or replace keeps options): a
--     barrier view is planned as a subquery, so ORDER BY id LIMIT n cannot use the
--     (community_id, id) index and every page sorts the whole community (measured
--     in bench/RESULTS.md, "RLS cost": 150x slower). A barrier would guard nothing
--     here: billing_api may select these tables directly, so the scope filter fences
--     the GraphQL door, not the role; the community fence is RLS, whose quals are
--     always applied before any leaky condition.
-- REST and SQL sessions keep their policies unchanged: the scope check lives in the
-- views only, so the REST read path pays nothing for it.
--
-- Smart tags (comments): @primaryKey / @foreignKey make connections, lookups and
-- relations; @behavior -insert -update -delete: no mutation (the preset also omits them).

create schema if not exists billing_graphql;
grant usage on schema billing_graphql to billing_api;

create or replace function billing.has_scope(p_scope text) returns boolean
  language sql stable parallel safe
as $$ select p_scope = any (billing.current_scopes()) $$;

-- ---- catalog (plans:read, discounts:read) -------------------------------------------

create or replace view billing_graphql.tiers with (security_invoker = true, security_barrier = false) as
  select t.id, t.key, t.name, t.description, t.kind, t.billing_mode, t.rank, t.active, t.features,
    t.perks, t.created_at, t.updated_at
  from billing.tiers t
  where (select billing.has_scope('plans:read'));
comment on view billing_graphql.tiers is E'@primaryKey id\n@behavior -insert -update -delete\nPlan tiers (customer-facing offerings). Needs plans:read.';

create or replace view billing_graphql.plans with (security_invoker = true, security_barrier = false) as
  select p.id, p.tier_id, p.key, p.name, p.amount_cents, p.currency, p.interval, p.trial_days,
    p.access_days, p.active, p.created_at
  from billing.plans p
  where (select billing.has_scope('plans:read'));
comment on view billing_graphql.plans is E'@primaryKey id\n@foreignKey (tier_id) references billing_graphql.tiers (id)\n@behavior -insert -update -delete\nBilling plans (priced options of a tier). Needs plans:read.';

create or replace view billing_graphql.entitlements with (security_invoker = true, security_barrier = false) as
  select e.id, e.key, e.name, e.created_at
  from billing.entitlements e
  where (select billing.has_scope('plans:read'));
comment on view billing_graphql.entitlements is E'@primaryKey id\n@behavior -insert -update -delete\nEntitlements of the catalog (logical permissions). Needs plans:read.';

create or replace view billing_graphql.discounts with (security_invoker = true, security_barrier = false) as
  select d.id, d.code, d.name, d.value_type, d.percent_off, d.amount_off_cents, d.currency, d.duration,
    d.duration_months, d.use_limit, d.min_spend_cents, d.max_spend_cents, d.starts_at, d.expires_at,
    d.is_active, d.tier_ids, d.created_at
  from billing.discount_codes d
  where d.archived_at is null and (select billing.has_scope('discounts:read'));
comment on view billing_graphql.discounts is E'@primaryKey id\n@behavior -insert -update -delete\nUnarchived discount codes. Needs discounts:read.';

-- ---- members (members:read) ---------------------------------------------------------

create or replace view billing_graphql.members with (security_invoker = true, security_barrier = false) as
  select m.id, m.created_at, m.updated_at
  from billing.members m
  where (select billing.has_scope('members:read'));
comment on view billing_graphql.members is E'@primaryKey id\n@behavior -insert -update -delete\nMembers. Needs members:read.';

create or replace view billing_graphql.member_identities with (security_invoker = true, security_barrier = false) as
  select i.platform, i.platform_uid, i.member_id, i.username, i.created_at
  from billing.member_identities i
  where (select billing.has_scope('members:read'));
comment on view billing_graphql.member_identities is E'@primaryKey platform,platform_uid\n@foreignKey (member_id) references billing_graphql.members (id)\n@behavior -insert -update -delete\nPlatform identities linked to members. Needs members:read.';

create or replace view billing_graphql.external_subjects with (security_invoker = true, security_barrier = false) as
  select x.namespace, x.external_user_id, x.member_id, x.created_at
  from billing.external_subjects x
  where (select billing.has_scope('members:read'));
comment on view billing_graphql.external_subjects is E'@primaryKey namespace,external_user_id\n@foreignKey (member_id) references billing_graphql.members (id)\n@behavior -insert -update -delete\nOperator-owned identities mapped to members. Needs members:read.';

-- The ledger: member entitlements (members:read, as GET /v1/members/{id}/entitlements).
create or replace view billing_graphql.member_entitlements with (security_invoker = true, security_barrier = false) as
  select me.id, me.member_id, me.entitlement_id, me.status, me.revision, me.sources, me.benefits,
    me.granted_at, me.revoked_at, me.updated_at
  from billing.member_entitlements me
  where (select billing.has_scope('members:read'));
comment on view billing_graphql.member_entitlements is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (entitlement_id) references billing_graphql.entitlements (id)\n@behavior -insert -update -delete\nThe entitlement ledger: one row per member and entitlement. Needs members:read.';

-- ---- money (subscriptions:read, purchases:read, invoices:read) ------------------------

create or replace view billing_graphql.subscriptions with (security_invoker = true, security_barrier = false) as
  select s.id, s.member_id, s.plan_id, s.status, s.current_period_start, s.current_period_end,
    s.trial_end, s.cancel_at, s.cancelled_at, s.cancellation_reason, s.paused_until, s.scheduled_plan_id,
    s.scheduled_at, s.client_reference_id, s.discount_id, s.created_at, s.updated_at
  from billing.subscriptions s
  where (select billing.has_scope('subscriptions:read'));
comment on view billing_graphql.subscriptions is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (plan_id) references billing_graphql.plans (id)\n@behavior -insert -update -delete\nSubscriptions. Needs subscriptions:read.';

create or replace view billing_graphql.purchases with (security_invoker = true, security_barrier = false) as
  select p.id, p.member_id, p.plan_id, p.status, p.amount_cents, p.currency, p.access_expires_at,
    p.paid_at, p.client_reference_id, p.created_at
  from billing.purchases p
  where (select billing.has_scope('purchases:read'));
comment on view billing_graphql.purchases is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (plan_id) references billing_graphql.plans (id)\n@behavior -insert -update -delete\nOne-time purchases. Needs purchases:read.';

create or replace view billing_graphql.invoices with (security_invoker = true, security_barrier = false) as
  select i.id, i.member_id, i.subscription_id, i.purchase_id, i.status, i.billing_reason, i.currency,
    i.lines, i.subtotal_cents, i.discount_cents, i.total_cents, i.amount_paid_cents,
    i.amount_refunded_cents, i.attempt_count, i.next_attempt_at, i.period_start, i.period_end,
    i.paid_at, i.created_at, i.updated_at
  from billing.invoices i
  where (select billing.has_scope('invoices:read'));
comment on view billing_graphql.invoices is E'@primaryKey id\n@foreignKey (member_id) references billing_graphql.members (id)\n@foreignKey (subscription_id) references billing_graphql.subscriptions (id)\n@foreignKey (purchase_id) references billing_graphql.purchases (id)\n@behavior -insert -update -delete\nInvoices. Needs invoices:read.';

create or replace view billing_graphql.payment_attempts with (security_invoker = true, security_barrier = false) as
  select a.id, a.invoice_id, a.status, a.amount_cents, a.failure_message, a.attempted_at, a.created_at
  from billing.payment_attempts a
  where (select billing.has_scope('invoices:read'));
comment on view billing_graphql.payment_attempts is E'@primaryKey id\n@foreignKey (invoice_id) references billing_graphql.invoices (id)\n@behavior -insert -update -delete\nAttempts to collect invoices. Needs invoices:read.';

-- ---- events (events:read) -----------------------------------------------------------

create or replace view billing_graphql.events with (security_invoker = true, security_barrier = false) as
  select e.id, e.type, e.created_at, e.api_version, e.data
  from billing.events e
  where (select billing.has_scope('events:read'));
comment on view billing_graphql.events is E'@primaryKey id\n@behavior -insert -update -delete\nThe event outbox (the envelopes of GET /v1/events). Needs events:read.';

-- ---- analytics (analytics:read): the analytics schema's views (48-analytics.sql) ---------

create or replace view billing_graphql.mrr with (security_invoker = true, security_barrier = false) as
  select m.currency, m.mrr_cents, m.billing_subscriptions from analytics.mrr m
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.mrr is E'@primaryKey currency\n@behavior -insert -update -delete\nMonthly recurring revenue now, per currency. Needs analytics:read.';

create or replace view billing_graphql.mrr_by_tier with (security_invoker = true, security_barrier = false) as
  select m.tier_id, m.tier_name, m.currency, m.mrr_cents, m.billing_subscriptions from analytics.mrr_by_tier m
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.mrr_by_tier is E'@primaryKey tier_id,currency\n@foreignKey (tier_id) references billing_graphql.tiers (id)\n@behavior -insert -update -delete\nMRR now per tier and currency. Needs analytics:read.';

create or replace view billing_graphql.mrr_daily with (security_invoker = true, security_barrier = false) as
  select m.day, m.currency, m.mrr_cents, m.billing_subscriptions from analytics.mrr_daily m
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.mrr_daily is E'@primaryKey day,currency\n@behavior -insert -update -delete\nMRR by day (last 90 days) and currency. Needs analytics:read.';

create or replace view billing_graphql.subscribers with (security_invoker = true, security_barrier = false) as
  select 1 as id, s.active_subscribers from analytics.subscribers s
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.subscribers is E'@primaryKey id\n@behavior -insert -update -delete\nMembers with access through a subscription now. Needs analytics:read.';

create or replace view billing_graphql.daily_activity with (security_invoker = true, security_barrier = false) as
  select a.day, a.signups, a.cancels, a.ended from analytics.daily_activity a
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.daily_activity is E'@primaryKey day\n@behavior -insert -update -delete\nSignups, cancels and ended subscriptions per day. Needs analytics:read.';

create or replace view billing_graphql.churn with (security_invoker = true, security_barrier = false) as
  select billing.iso(c.window_start) as window_start, billing.iso(c.window_end) as window_end,
    c.billing_at_start, c.churned, c.churn_rate from analytics.churn c
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.churn is E'@primaryKey window_start\n@behavior -insert -update -delete\nChurn over the last 30 days. Needs analytics:read.';

create or replace view billing_graphql.trial_conversion with (security_invoker = true, security_barrier = false) as
  select 1 as id, t.trials, t.trials_ended, t.converted, t.conversion_rate from analytics.trial_conversion t
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.trial_conversion is E'@primaryKey id\n@behavior -insert -update -delete\nTrials started, ended and converted. Needs analytics:read.';

create or replace view billing_graphql.paid_invoices_daily with (security_invoker = true, security_barrier = false) as
  select p.day, p.currency, p.invoices, p.paid_cents, p.refunded_cents from analytics.paid_invoices_daily p
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.paid_invoices_daily is E'@primaryKey day,currency\n@behavior -insert -update -delete\nPaid invoices by day and currency. Needs analytics:read.';

create or replace view billing_graphql.revenue_daily with (security_invoker = true, security_barrier = false) as
  select r.day, r.currency, r.subscription_cents, r.purchase_cents, r.total_cents from analytics.revenue_daily r
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.revenue_daily is E'@primaryKey day,currency\n@behavior -insert -update -delete\nRevenue from subscriptions (paid invoices) and purchases by day. Needs analytics:read.';

create or replace view billing_graphql.entitlement_activity_daily with (security_invoker = true, security_barrier = false) as
  select a.day, a.grants, a.revokes from analytics.entitlement_activity_daily a
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.entitlement_activity_daily is E'@primaryKey day\n@behavior -insert -update -delete\nEntitlement grants and revokes per day. Needs analytics:read.';

-- ---- rights ---------------------------------------------------------------------------

grant select on all tables in schema billing_graphql to billing_api;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

grant execute on function billing.has_scope(text) to billing_api;
--! EndIncluded 95-graphql.sql
