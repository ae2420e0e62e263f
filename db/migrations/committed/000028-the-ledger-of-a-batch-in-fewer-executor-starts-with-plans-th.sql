--! Previous: sha1:f8ea1ffe02be68ad43667cc52bf6efee021d105e
--! Hash: sha1:0ffde6128075d301f4ec68033b172316eda2a3ae
--! Message: The ledger of a batch in fewer executor starts, with plans that outlive an empty table

--! split: 1-current.sql
-- The ledger of a batch in fewer executor starts, with plans that outlive a table's
-- emptiness: ids inlined (billing.gen_id is SQL), the member object and the
-- community's clock joined rather than called per member, the entitlement joined for
-- each event, benefit differences without a query when nothing changed, index scans only
-- in the ledger refresh, and no purchases index by plan.
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

-- SQL with no SET clause, so PostgreSQL inlines it into the column defaults and
-- statements that draw ids: a SQL function with a SET clause is never inlined and was
-- planned again in every call (0.3 ms per id under load), and plpgsql with one paid a
-- configuration save and restore per call (10 us an id inlined into 6 us; a batch of
-- changes draws one per event). Built-ins are named with pg_catalog, so no search_path
-- can stand in for them.
create or replace function billing.gen_id(p_prefix text) returns text
  language sql volatile parallel unsafe
as $$
  select p_prefix || '_'
    || pg_catalog.lpad(pg_catalog.to_hex((extract(epoch from pg_catalog.clock_timestamp()) * 1000)::bigint), 12, '0')
    || pg_catalog.lpad(pg_catalog.to_hex(pg_catalog.nextval('billing_private.id_seq'::regclass)), 6, '0')
    || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 1, 8)
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
-- and every event that carries a member. A set-returning SQL function of one select,
-- so PostgreSQL inlines it into the query that reads it (a scalar SQL function with
-- subqueries is never inlined, and is planned again on every call): the ledger refresh
-- of a batch joins it for every member at once.
create or replace function billing.member_object(p_community_id text, p_member_id text) returns setof jsonb
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

-- plpgsql, not sql: its query (the inlined member_object) is planned once per session
-- (190 us a call when planned every time; every entitlement event carries the member).
create or replace function billing.member_json(p_community_id text, p_member_id text) returns jsonb
  language plpgsql stable parallel safe
as $$
begin
  return (select t.member from billing.member_object(p_community_id, p_member_id) t(member));
end
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
grant execute on function billing.member_object(text,text) to billing_api;
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
-- No index by plan: with one, a ledger plan made while the table looked empty read a
-- member's purchases through it (every purchase of the plan, once per member; costs tie
-- on an empty table), so a batch of purchases slowed with every purchase before it. What
-- reads purchases by plan (a catalog change, the check of a plan's deletion, which no
-- path does) is rare and reads them all anyway.
drop index if exists billing.purchases_plan;
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

-- Inserts, over the transition table: one purchase.created per row, all in one insert
-- in purchase id order, then each row's member's ledger with its row's event as
-- trigger_event_id, for all rows at once (billing.ledger_refresh_list, 50-ledger.sql):
-- a one-row insert writes what a row trigger wrote, in the same order; a statement of
-- many writes the purchases' events first, then the entitlement events.
create or replace function billing.tg_purchases__outbox_and_ledger_insert() returns trigger
  language plpgsql
as $$
declare
  v_communities text[];
  v_members text[];
  v_reasons text[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, 'purchase.created', jsonb_build_object(
      'purchase', billing.purchase_json(n, p, t) || jsonb_build_object('client_reference_id', n.client_reference_id),
      'previous_attributes', null)
    from new_rows n
    left join billing.plans p on p.community_id = n.community_id and p.id = n.plan_id
    left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    order by n.id
    returning id, data->'purchase'->>'id' as purchase_id
  )
  select array_agg(n.community_id order by n.id), array_agg(n.member_id order by n.id),
    array_agg(case when n.status = 'completed' then 'purchase_completed' else 'purchase_updated' end order by n.id),
    array_agg(ev.id order by n.id)
  into v_communities, v_members, v_reasons, v_event_ids
  from new_rows n join ev on ev.purchase_id = n.id;
  if v_event_ids is not null then  -- a statement that inserted nothing fires this too
    perform billing.ledger_refresh_list(v_communities, v_members, v_reasons, v_event_ids);
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger_insert on billing.purchases;
create trigger _500_outbox_and_ledger_insert after insert on billing.purchases
  referencing new table as new_rows
  for each statement execute function billing.tg_purchases__outbox_and_ledger_insert();

-- Updates and deletes, row by row: purchase.updated or purchase.refunded when a visible
-- field changed, then the member's ledger (and the one it left).
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
  v_prev := billing.jsonb_changed(billing.purchase_event_json(old) - 'tier_name' - 'plan_name', v_new);
  if v_prev = '{}' then
    return null;
  end if;
  v_type := case when new.status = 'refunded' and old.status <> 'refunded'
    then 'purchase.refunded' else 'purchase.updated' end;
  v_reason := case when v_type = 'purchase.refunded' then 'purchase_refunded' else 'purchase_updated' end;
  v_event_id := billing.emit_event(new.community_id, v_type,
    jsonb_build_object('purchase', v_new, 'previous_attributes', v_prev));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  if old.member_id <> new.member_id then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox_and_ledger on billing.purchases;
create trigger _500_outbox_and_ledger after update or delete on billing.purchases
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
-- (inserts and updates per statement, _500_outbox_and_ledger_insert and _update;
-- deletes per row, _500_ledger_delete; 40-subscriptions.sql) and purchases (inserts
-- per statement, _500_outbox_and_ledger_insert; updates and deletes per row,
-- _500_outbox_and_ledger; 45-purchases.sql), the statement-level ones through
-- billing.ledger_refresh_list, invoices of past_due subscriptions (46-invoices.sql),
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

-- plpgsql, not sql: a SQL function reading a table is planned again on every call (70
-- us; every entitlement event builds one).
create or replace function billing.member_entitlement_json(p_me billing.member_entitlements) returns jsonb
  language plpgsql stable parallel safe
as $$
declare
  v_ent billing.entitlements;
begin
  select * into v_ent from billing.entitlements e where e.community_id = p_me.community_id and e.id = p_me.entitlement_id;
  return billing.member_entitlement_json(p_me, v_ent);
end
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
  -- the common cases (benefits unchanged, first grant, revoke) without a query
  if b = '[]' or a = '[]' then
    return a;
  elsif a = b then
    return '[]';
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
-- Index scans only (enable_seqscan off): every table it reads is read by the member's
-- or the catalog's keys, and its plans are kept for the session. A plan kept from a
-- moment when billing.purchases was empty (a new deployment's first purchases, or a
-- server without autovacuum) otherwise scanned every purchase once per member: a
-- sequential scan costs nothing on an empty table, and the plan outlived it. And a
-- sequential scan of a catalog table once per member asks the kernel for the table's
-- size each time.
create or replace function billing.ledger_refresh_member(p_community_id text, p_member_id text,
  p_reason text, p_trigger_event_id text)
  returns integer language plpgsql volatile
  set enable_seqscan = off
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

-- billing.ledger_refresh_member for each (p_community_ids[i], p_member_ids[i]) in turn,
-- with its own reason and trigger event, in a few statements for the whole list (a
-- statement that changes many subscriptions, such as a batch of renewals, refreshes
-- its members at once). The same rows, revisions, timestamps and events, in the same
-- order, as the calls one by one: a member listed again is refreshed once, at its first
-- place (nothing between the calls changes its sources, so a second call finds nothing
-- to change). Returns how many rows changed visibly.
create or replace function billing.ledger_refresh_each(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns integer language plpgsql volatile
  set enable_seqscan = off -- see ledger_refresh_member
as $$
declare
  v_changed integer;
  v_present integer[];
begin
  -- One refresh of a member at a time (see ledger_refresh_member), taken in list order:
  -- each member's row locked by its key, one index probe per entry (the lateral runs
  -- per entry, in order; joined, the planner hashed every member of the community for
  -- each statement). The entries whose member exists (not being deleted) are kept.
  select array_agg(k order by k) into v_present
  from generate_subscripts(p_member_ids, 1) k
  cross join lateral (select 1 from billing.members mb
                      where mb.community_id = p_community_ids[k] and mb.id = p_member_ids[k]
                      for no key update) l;
  with req as (
    -- each member at its first place in the list; a member being deleted is skipped
    select distinct on (l.c, l.m) l.k, l.c, l.m, p_reasons[l.k] as reason, p_trigger_event_ids[l.k] as trigger_event_id
    from (select k, p_community_ids[k] as c, p_member_ids[k] as m from unnest(v_present) k) l
    order by l.c, l.m, l.k
  ), mem as materialized (
    -- billing.community_now and billing.member_json(text, text), joined rather than
    -- called: a plpgsql call per member starts an executor for each of its queries
    select r.*, now() + coalesce(co.clock_offset, '0'::interval) as now, t.member,
      jsonb_build_object('identities', t.member->'identities',
        'external_subjects', t.member->'external_subjects') as snapshot
    from req r
    left join billing.communities co on co.id = r.c
    cross join lateral (select o.member from billing.member_object(r.c, r.m) o(member) offset 0) t
  ), des as (
    select mem.k, d.entitlement_id, d.sources, d.benefits, d.next_check_at
    from mem cross join lateral billing.ledger_desired(mem.c, mem.m, mem.now) d
  ), sto as (
    select mem.k, x.id, x.entitlement_id, x.status, x.sources, x.benefits, x.identities, x.next_check_at
    from mem join billing.member_entitlements x on x.community_id = mem.c and x.member_id = mem.m
  ), cmp as materialized (
    select mem.k, mem.c, mem.m, mem.now, mem.snapshot, mem.member, mem.reason, mem.trigger_event_id,
      coalesce(des.entitlement_id, sto.entitlement_id) as entitlement_id,
      des.entitlement_id as d_ent, des.sources as d_sources, des.benefits as d_benefits, des.next_check_at as d_next,
      sto.id as stored_id, sto.status as s_status, sto.sources as s_sources, sto.benefits as s_benefits,
      sto.identities as s_identities, sto.next_check_at as s_next,
      case when des.entitlement_id is not null then 'active' else 'inactive' end as status
    from des full join sto on sto.k = des.k and sto.entitlement_id = des.entitlement_id
    join mem on mem.k = coalesce(des.k, sto.k)
  ), act as materialized (
    -- A new row's id is drawn here rather than by the column default, so its event is
    -- built from this row: joining the inserted rows back to act (three keys, through
    -- the returned record) was a nested loop the planner chose on a one-row estimate,
    -- 1.5 s of a 1,000-switch statement.
    select cmp.*, case when cmp.status = 'active' then cmp.snapshot else cmp.s_identities end as identities,
      case when cmp.stored_id is null then billing.gen_id('ment') end as new_id,
      case
        when cmp.stored_id is null then 'member.entitlement.granted'
        when cmp.s_status = cmp.status and cmp.s_sources = coalesce(cmp.d_sources, '[]')
             and cmp.s_benefits = coalesce(cmp.d_benefits, '[]')
             and cmp.s_identities = case when cmp.status = 'active' then cmp.snapshot else cmp.s_identities end then null
        when cmp.s_status = cmp.status then 'member.entitlement.updated'
        when cmp.status = 'active' then 'member.entitlement.granted'
        else 'member.entitlement.revoked' end as type
    from cmp
  ), nxt as (
    update billing.member_entitlements x set next_check_at = a.d_next
    from act a
    where a.type is null and a.s_next is distinct from a.d_next and x.community_id = a.c and x.id = a.stored_id
  ), upd as (
    -- returning what the row's event needs, so no join finds the row again
    update billing.member_entitlements x set
      status = a.status,
      revision = x.revision + 1,
      sources = coalesce(a.d_sources, '[]'),
      benefits = coalesce(a.d_benefits, '[]'),
      identities = a.identities,
      granted_at = case when a.type = 'member.entitlement.granted' then a.now else x.granted_at end,
      revoked_at = case when a.type = 'member.entitlement.granted' then null
                        when a.type = 'member.entitlement.revoked' then a.now else x.revoked_at end,
      next_check_at = a.d_next,
      updated_at = now()
    from act a
    where a.type is not null and a.stored_id is not null and x.community_id = a.c and x.id = a.stored_id
    returning a.k, a.type, a.entitlement_id, a.s_benefits, a.member, a.reason, a.trigger_event_id, x as me
  ), ins as (
    insert into billing.member_entitlements (community_id, id, member_id, entitlement_id, status,
      revision, sources, benefits, identities, granted_at, next_check_at, updated_at)
    select a.c, a.new_id, a.m, a.d_ent, 'active', 1, a.d_sources, a.d_benefits, a.snapshot, a.now, a.d_next, now()
    from act a
    where a.stored_id is null
    order by a.k, a.entitlement_id
  ), changed as (
    select u.k, u.type, u.entitlement_id, u.s_benefits, u.member, u.reason, u.trigger_event_id, u.me from upd u
    union all
    -- the row ins writes, as it writes it (columns it leaves to their defaults: none
    -- that an event shows)
    select a.k, a.type, a.entitlement_id, null, a.member, a.reason, a.trigger_event_id,
      jsonb_populate_record(null::billing.member_entitlements, jsonb_build_object(
        'community_id', a.c, 'id', a.new_id, 'member_id', a.m, 'entitlement_id', a.d_ent,
        'status', 'active', 'revision', 1, 'sources', a.d_sources, 'benefits', a.d_benefits,
        'identities', a.snapshot, 'granted_at', a.now, 'next_check_at', a.d_next, 'updated_at', now()))
    from act a
    where a.stored_id is null
  ), ev as (
    -- One event per changed row, in list order, then entitlement order (the calls' order).
    insert into billing.events (community_id, type, data)
    select (r.me).community_id, r.type, jsonb_build_object(
      'member', r.member,
      'entitlement', billing.member_entitlement_json(r.me, ent),
      'changes', jsonb_build_object(
        'added_benefits', billing.jsonb_array_minus((r.me).benefits, coalesce(r.s_benefits, '[]')),
        'removed_benefits', billing.jsonb_array_minus(coalesce(r.s_benefits, '[]'), (r.me).benefits)),
      'reason', r.reason,
      'trigger_event_id', r.trigger_event_id)
    from changed r
    join billing.entitlements ent on ent.community_id = (r.me).community_id and ent.id = (r.me).entitlement_id
    order by r.k, r.entitlement_id
    returning 1
  )
  select count(*)::integer into v_changed from ev;
  return v_changed;
end
$$;

-- The ledgers of a statement's rows, in list order (a member listed again is refreshed
-- once, at its first place): a few one member at a time (ledger_refresh_member), more
-- in a few statements for the whole list (ledger_refresh_each: the same outcome, and
-- its one big statement costs more than the per-member functions for a single row).
-- The statement-level triggers of subscriptions and purchases call it.
create or replace function billing.ledger_refresh_list(p_community_ids text[], p_member_ids text[],
  p_reasons text[], p_trigger_event_ids text[])
  returns void language plpgsql volatile
as $$
begin
  if cardinality(p_member_ids) <= 8 then
    for i in 1 .. cardinality(p_member_ids) loop
      perform billing.ledger_refresh_member(p_community_ids[i], p_member_ids[i], p_reasons[i], p_trigger_event_ids[i]);
    end loop;
  elsif p_member_ids is not null then
    perform billing.ledger_refresh_each(p_community_ids, p_member_ids, p_reasons, p_trigger_event_ids);
  end if;
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
grant execute on function billing.ledger_refresh_each(text[],text[],text[],text[]) to billing_api;
grant execute on function billing.ledger_refresh_list(text[],text[],text[],text[]) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements) to billing_api;
grant execute on function billing.member_entitlement_json(billing.member_entitlements,billing.entitlements) to billing_api;
grant execute on function billing_api.member_entitlements_list(jsonb) to billing_api;
grant execute on function billing_api.entitlements_check(jsonb) to billing_api;
--! EndIncluded 50-ledger.sql
