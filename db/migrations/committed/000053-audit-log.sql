--! Previous: sha1:d4d7e87419a287dae9e314f3c0e883d4a6c55066
--! Hash: sha1:7f658e3d4ac13b59be52ff80d71c50ce2aed30d3
--! Message: audit log

--! split: 1-current.sql
-- Enter migration here

--! split: 50-audit-log.sql
-- Issue 31 item 3: the audit log (docs/decisions/audit-log.md). billing.audit_log,
-- append-only, written by statement-level triggers (_950_audit_*) on the
-- operator-controlled tables (always) and the lifecycle tables (when an actor made the
-- change); the request gate keeps the request id (app.request_id); the hourly purge
-- deletes rows past the community's audit_retention_days; GET /v1/audit-log
-- (audit:read). Fixtures: tables/12-audit.sql, functions/12-audit.sql and the tables
-- beside which each audited table's triggers stand.

-- ---- the table (tables/12-audit.sql) ----
create table if not exists billing.audit_log (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('aud'),
  occurred_at timestamptz not null default now(),
  -- operator (a dashboard session: actor_id the operator user opu_..., key_id the session
  -- ops_...), api_key (actor_id = key_id = key_...), member (a member portal session:
  -- actor_id mem_..., key_id mps_...), cli (actor_id the command, e.g. "catalog apply"),
  -- sql_login (actor_id the operator's login role), service (no actor: the worker, a
  -- provider's webhook, an owner session; actor_id the database role).
  actor_type text not null check (actor_type in ('operator', 'api_key', 'member', 'cli', 'sql_login', 'service')),
  actor_id text,
  key_id text collate "C",
  -- The X-Request-Id of the request (or the CLI run) that made the change.
  request_id text,
  table_name text not null,
  row_id text,
  operation text not null check (operation in ('insert', 'update', 'delete')),
  -- An update's changed columns (hidden ones by name only); empty for insert and delete.
  changed text[] not null default '{}',
  before jsonb,
  after jsonb,
  primary key (community_id, id)
);
create index if not exists audit_log_table on billing.audit_log (community_id, table_name, id);
create index if not exists audit_log_actor on billing.audit_log (community_id, actor_id, id);
create index if not exists audit_log_row on billing.audit_log (community_id, row_id, id);
create index if not exists audit_log_time on billing.audit_log (community_id, occurred_at);
alter table billing.audit_log enable row level security;
alter table billing.audit_log force row level security;
drop policy if exists tenant on billing.audit_log;
create policy tenant on billing.audit_log for select
  using (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.audit_log;
create policy owner_access on billing.audit_log to current_user using (true) with check (true);
drop policy if exists member_fence on billing.audit_log;
create policy member_fence on billing.audit_log as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null);
revoke all on billing.audit_log from billing_api, billing_writer, billing_operator;
grant select on billing.audit_log to billing_api, billing_operator;

-- ---- its functions (functions/12-audit.sql, new) ----
-- ---- who is acting -----------------------------------------------------------------------

-- The actor of the current statement, {type, id, key_id, request_id}, from what the
-- doors set for the transaction or the session:
--   an operator SQL login (session_user, which no SET changes, before any setting: a
--     login cannot pass itself off as a key), then
--   app.key_id, set by billing.gate_open for a request (10-tenancy.sql): an API key
--     (key_...), a dashboard session (ops_..., whose operator user is looked up) or a
--     member portal session (app.member_id), with app.request_id;
--   app.actor, set by the CLI for its session (the command) with app.request_id;
--   else the service itself (its database role: the worker, a provider's webhook).
-- The trigger tests of lifecycle tables (the WHEN of their _950_audit triggers) are the
-- same conditions, written with built-ins only.
create or replace function billing_private.audit_actor() returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key text := nullif(current_setting('app.key_id', true), '');
  v_request text := nullif(current_setting('app.request_id', true), '');
  v_cli text := nullif(current_setting('app.actor', true), '');
begin
  if pg_has_role(session_user, 'billing_operator', 'MEMBER')
     and not pg_has_role(session_user, 'billing_owner_probe', 'MEMBER') then
    return jsonb_build_object('type', 'sql_login', 'id', session_user::text, 'key_id', null, 'request_id', null);
  elsif v_key like 'key\_%' then
    return jsonb_build_object('type', 'api_key', 'id', v_key, 'key_id', v_key, 'request_id', v_request);
  elsif v_key like 'ops\_%' then
    return jsonb_build_object('type', 'operator', 'id', (select s.user_id from billing_private.operator_sessions s
        where s.community_id = current_setting('app.community_id', true) and s.id = v_key),
      'key_id', v_key, 'request_id', v_request);
  elsif v_key is not null then
    return jsonb_build_object('type', 'member', 'id', nullif(current_setting('app.member_id', true), ''),
      'key_id', v_key, 'request_id', v_request);
  elsif v_cli is not null then
    return jsonb_build_object('type', 'cli', 'id', v_cli, 'key_id', null, 'request_id', v_request);
  end if;
  return jsonb_build_object('type', 'service', 'id', session_user::text, 'key_id', null, 'request_id', v_request);
end
$$;

-- ---- the trigger of every audited table ------------------------------------------------------

-- Statement-level, over the transition tables (new_rows, old_rows): one insert into the
-- log per statement, whatever its number of rows. Arguments (written beside each
-- trigger, in its table's file):
--   tg_argv[0]  the row's key columns, comma-separated, at most four (row_id joins their
--               values with '/');
--   tg_argv[1]  hidden columns: credentials and personal data, never copied into
--               before/after (an update names them in `changed` only);
--   tg_argv[2]  quiet columns: bookkeeping that alone makes no line (updated_at always).
-- An update's old and new versions are paired by position: PostgreSQL appends both
-- versions of each row to old_rows and new_rows together, so a change of a key column
-- is an update too. An update whose only changes are quiet ones writes nothing. The
-- row's community is its community_id (a community's own row: its id). A statement
-- that changed no row (statement triggers fire anyway: the webhook worker's failure
-- streak update, most often) returns before anything else.
create or replace function billing_private.tg_audit() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_k1 text := split_part(tg_argv[0], ',', 1);
  v_k2 text := nullif(split_part(tg_argv[0], ',', 2), '');
  v_k3 text := nullif(split_part(tg_argv[0], ',', 3), '');
  v_k4 text := nullif(split_part(tg_argv[0], ',', 4), '');
  v_hidden text[] := coalesce(string_to_array(nullif(tg_argv[1], ''), ','), '{}');
  v_quiet text[] := array['updated_at'] || coalesce(string_to_array(nullif(tg_argv[2], ''), ','), '{}');
  v_com text := case when tg_table_name = 'communities' then 'id' else 'community_id' end;
  v_actor jsonb;
begin
  if tg_op = 'DELETE' then
    if not exists (select from old_rows) then
      return null;
    end if;
  elsif not exists (select from new_rows) then
    return null;
  end if;
  v_actor := billing_private.audit_actor();
  if tg_op = 'INSERT' then
    insert into billing.audit_log (community_id, actor_type, actor_id, key_id, request_id, table_name, row_id,
      operation, before, after)
    select r.j->>v_com, v_actor->>'type', v_actor->>'id', v_actor->>'key_id', v_actor->>'request_id', tg_table_name,
      concat_ws('/', r.j->>v_k1, r.j->>v_k2, r.j->>v_k3, r.j->>v_k4), 'insert', null, r.j - v_hidden
    from (select to_jsonb(n) as j from new_rows n) r;
  elsif tg_op = 'DELETE' then
    insert into billing.audit_log (community_id, actor_type, actor_id, key_id, request_id, table_name, row_id,
      operation, before, after)
    select r.j->>v_com, v_actor->>'type', v_actor->>'id', v_actor->>'key_id', v_actor->>'request_id', tg_table_name,
      concat_ws('/', r.j->>v_k1, r.j->>v_k2, r.j->>v_k3, r.j->>v_k4), 'delete', r.j - v_hidden, null
    from (select to_jsonb(o) as j from old_rows o) r;
  else
    -- Materialized: each row's JSON is made once (inlined, to_jsonb ran again for every
    -- column compared), and its changed columns listed once.
    with o as materialized (select to_jsonb(x) as j, row_number() over () as i from old_rows x),
         n as materialized (select to_jsonb(x) as j, row_number() over () as i from new_rows x),
         p as materialized (select o.j as oj, n.j as nj, array(select e.key from jsonb_each(n.j) e
                                     where e.value is distinct from o.j->e.key order by e.key) as changed
                            from o join n on n.i = o.i)
    insert into billing.audit_log (community_id, actor_type, actor_id, key_id, request_id, table_name, row_id,
      operation, changed, before, after)
    select p.nj->>v_com, v_actor->>'type', v_actor->>'id', v_actor->>'key_id', v_actor->>'request_id', tg_table_name,
      concat_ws('/', p.nj->>v_k1, p.nj->>v_k2, p.nj->>v_k3, p.nj->>v_k4), 'update', p.changed, p.oj - v_hidden, p.nj - v_hidden
    from p
    where not (p.changed <@ v_quiet);
  end if;
  return null;
end
$$;

-- ---- append-only --------------------------------------------------------------------------

-- UPDATE and TRUNCATE are refused to every role, the owner included; DELETE too, but
-- within billing_private.audit_purge (app.audit_purge set for its statement).
create or replace function billing_private.tg_audit_log__append_only() returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  if tg_op = 'DELETE' and current_setting('app.audit_purge', true) = 'on' then
    return null;
  end if;
  raise exception using errcode = 'insufficient_privilege',
    message = format('billing.audit_log is append-only: %s is refused (only the retention purge deletes, rows older than the community''s audit_retention_days).', lower(tg_op));
end
$$;

-- And a purge deletes only rows past their community's retention (365 days for a
-- community that no longer exists), whatever set app.audit_purge.
create or replace function billing_private.tg_audit_log__retention_only() returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  if exists (select 1 from old_rows o
             where o.occurred_at >= now() - make_interval(days => coalesce((select c.audit_retention_days
               from billing.communities c where c.id = o.community_id), 365))) then
    raise exception using errcode = 'insufficient_privilege',
      message = 'billing.audit_log is append-only: a row within its community''s audit_retention_days cannot be deleted.';
  end if;
  return null;
end
$$;

-- ---- retention (the worker's hourly billing_private.purge_expired, 90-retention.sql) ------------

-- Deletes each community's rows older than its audit_retention_days, and those of a
-- community deleted since after 365 days. The communities are found from the log
-- itself (a skip scan of its primary key: one probe per community).
create or replace function billing_private.audit_purge() returns integer
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  r record;
  v_n integer;
  v_total integer := 0;
begin
  perform set_config('app.audit_purge', 'on', true);
  for r in
    with recursive cs(c) as (
      select min(a.community_id) from billing.audit_log a
      union all
      select (select min(a.community_id) from billing.audit_log a where a.community_id > cs.c) from cs where cs.c is not null)
    select cs.c, coalesce(com.audit_retention_days, 365) as days
    from cs left join billing.communities com on com.id = cs.c where cs.c is not null
  loop
    delete from billing.audit_log a
    where a.community_id = r.c and a.occurred_at < now() - make_interval(days => r.days);
    get diagnostics v_n = row_count;
    v_total := v_total + v_n;
  end loop;
  perform set_config('app.audit_purge', '', true);
  return v_total;
end
$$;

-- ---- GET /v1/audit-log (audit:read) ----------------------------------------------------------

create or replace function billing.audit_entry_json(a billing.audit_log) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', a.id, 'occurred_at', billing.iso(a.occurred_at),
    'actor_type', a.actor_type, 'actor_id', a.actor_id, 'key_id', a.key_id, 'request_id', a.request_id,
    'table', a.table_name, 'row_id', a.row_id, 'operation', a.operation, 'changed', to_jsonb(a.changed),
    'before', a.before, 'after', a.after)
$$;

-- Newest first; filters: actor_type, actor_id, table, row_id, operation, since
-- (inclusive) and until (exclusive), instants as the executor normalised them.
create or replace function billing_api.audit_log_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_since timestamptz := (p_args->>'since')::timestamptz;
  v_until timestamptz := (p_args->>'until')::timestamptz;
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(a.id order by a.id desc), array_agg(billing.audit_entry_json(a) order by a.id desc)
    into v_ids, v_items
  from (select * from billing.audit_log a
        where a.community_id = billing.current_community_id()
          and a.id < coalesce(p_args->>'cursor', chr(1114111))
          and (p_args->>'actor_type' is null or a.actor_type = p_args->>'actor_type')
          and (p_args->>'actor_id' is null or a.actor_id = p_args->>'actor_id')
          and (p_args->>'table' is null or a.table_name = p_args->>'table')
          and (p_args->>'row_id' is null or a.row_id = p_args->>'row_id')
          and (p_args->>'operation' is null or a.operation = p_args->>'operation')
          and (v_since is null or a.occurred_at >= v_since)
          and (v_until is null or a.occurred_at < v_until)
        order by a.id desc limit v_limit + 1) a;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- billing_api runs the list (and the JSON builder it calls with invoker rights); the
-- triggers' functions need no grant (a trigger runs its function whoever fires it), and
-- tg_audit runs as its owner (SECURITY DEFINER), the only role that inserts here.
grant execute on function billing.audit_entry_json(billing.audit_log) to billing_api;
grant execute on function billing_api.audit_log_list(jsonb) to billing_api;
revoke execute on function billing_private.audit_actor() from public;
revoke execute on function billing_private.audit_purge() from public;

-- ---- append-only (tables/12-audit.sql) ----
drop trigger if exists _100_append_only_update on billing.audit_log;
create trigger _100_append_only_update before update on billing.audit_log
  for each statement execute function billing_private.tg_audit_log__append_only();
drop trigger if exists _100_append_only_truncate on billing.audit_log;
create trigger _100_append_only_truncate before truncate on billing.audit_log
  for each statement execute function billing_private.tg_audit_log__append_only();
drop trigger if exists _100_append_only_delete on billing.audit_log;
create trigger _100_append_only_delete before delete on billing.audit_log
  for each statement execute function billing_private.tg_audit_log__append_only();
drop trigger if exists _110_retention_only on billing.audit_log;
create trigger _110_retention_only after delete on billing.audit_log
  referencing old table as old_rows
  for each statement execute function billing_private.tg_audit_log__retention_only();

-- ---- the community's retention and the audited tables' triggers ----

-- (from 12-audit.sql) How long the community's audit log is kept, in days: the worker's
-- hourly purge deletes older rows (billing_private.audit_purge). Set by the owner
-- (`billing communities set-audit-retention`, or SQL); its change is itself audited.
alter table billing.communities add column if not exists audit_retention_days integer not null default 365;
alter table billing.communities drop constraint if exists communities_audit_retention_valid;
alter table billing.communities add constraint communities_audit_retention_valid
  check (audit_retention_days between 30 and 3650);

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.communities;
create trigger _950_audit_insert after insert on billing.communities
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.communities;
create trigger _950_audit_update after update on billing.communities
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.communities;
create trigger _950_audit_delete after delete on billing.communities
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing_private.operator_roles;
create trigger _950_audit_insert after insert on billing_private.operator_roles
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('role_name');
drop trigger if exists _950_audit_update on billing_private.operator_roles;
create trigger _950_audit_update after update on billing_private.operator_roles
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('role_name');
drop trigger if exists _950_audit_delete on billing_private.operator_roles;
create trigger _950_audit_delete after delete on billing_private.operator_roles
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('role_name');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit); never ciphertext.
drop trigger if exists _950_audit_insert on billing_private.payment_secrets;
create trigger _950_audit_insert after insert on billing_private.payment_secrets
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('provider,name', 'ciphertext');
drop trigger if exists _950_audit_update on billing_private.payment_secrets;
create trigger _950_audit_update after update on billing_private.payment_secrets
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('provider,name', 'ciphertext');
drop trigger if exists _950_audit_delete on billing_private.payment_secrets;
create trigger _950_audit_delete after delete on billing_private.payment_secrets
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('provider,name', 'ciphertext');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit); never key_hash.
drop trigger if exists _950_audit_insert on billing_private.api_keys;
create trigger _950_audit_insert after insert on billing_private.api_keys
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id', 'key_hash', 'last_used_at');
drop trigger if exists _950_audit_update on billing_private.api_keys;
create trigger _950_audit_update after update on billing_private.api_keys
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id', 'key_hash', 'last_used_at');
drop trigger if exists _950_audit_delete on billing_private.api_keys;
create trigger _950_audit_delete after delete on billing_private.api_keys
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id', 'key_hash', 'last_used_at');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit); never password_hash.
drop trigger if exists _950_audit_insert on billing_private.operator_users;
create trigger _950_audit_insert after insert on billing_private.operator_users
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id', 'password_hash');
drop trigger if exists _950_audit_update on billing_private.operator_users;
create trigger _950_audit_update after update on billing_private.operator_users
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id', 'password_hash');
drop trigger if exists _950_audit_delete on billing_private.operator_users;
create trigger _950_audit_delete after delete on billing_private.operator_users
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id', 'password_hash');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.platform_configs;
create trigger _950_audit_insert after insert on billing.platform_configs
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.platform_configs;
create trigger _950_audit_update after update on billing.platform_configs
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.platform_configs;
create trigger _950_audit_delete after delete on billing.platform_configs
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit); never ciphertext.
drop trigger if exists _950_audit_insert on billing_private.platform_secrets;
create trigger _950_audit_insert after insert on billing_private.platform_secrets
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('platform_config_id,name', 'ciphertext');
drop trigger if exists _950_audit_update on billing_private.platform_secrets;
create trigger _950_audit_update after update on billing_private.platform_secrets
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('platform_config_id,name', 'ciphertext');
drop trigger if exists _950_audit_delete on billing_private.platform_secrets;
create trigger _950_audit_delete after delete on billing_private.platform_secrets
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('platform_config_id,name', 'ciphertext');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.tiers;
create trigger _950_audit_insert after insert on billing.tiers
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.tiers;
create trigger _950_audit_update after update on billing.tiers
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.tiers;
create trigger _950_audit_delete after delete on billing.tiers
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.plans;
create trigger _950_audit_insert after insert on billing.plans
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.plans;
create trigger _950_audit_update after update on billing.plans
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.plans;
create trigger _950_audit_delete after delete on billing.plans
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.entitlements;
create trigger _950_audit_insert after insert on billing.entitlements
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.entitlements;
create trigger _950_audit_update after update on billing.entitlements
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.entitlements;
create trigger _950_audit_delete after delete on billing.entitlements
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.entitlement_benefits;
create trigger _950_audit_insert after insert on billing.entitlement_benefits
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('entitlement_id,platform_config_id,type,value');
drop trigger if exists _950_audit_update on billing.entitlement_benefits;
create trigger _950_audit_update after update on billing.entitlement_benefits
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('entitlement_id,platform_config_id,type,value');
drop trigger if exists _950_audit_delete on billing.entitlement_benefits;
create trigger _950_audit_delete after delete on billing.entitlement_benefits
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('entitlement_id,platform_config_id,type,value');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.tier_entitlements;
create trigger _950_audit_insert after insert on billing.tier_entitlements
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('tier_id,entitlement_id');
drop trigger if exists _950_audit_update on billing.tier_entitlements;
create trigger _950_audit_update after update on billing.tier_entitlements
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('tier_id,entitlement_id');
drop trigger if exists _950_audit_delete on billing.tier_entitlements;
create trigger _950_audit_delete after delete on billing.tier_entitlements
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('tier_id,entitlement_id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit); never members.
drop trigger if exists _950_audit_insert on billing.discount_codes;
create trigger _950_audit_insert after insert on billing.discount_codes
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id', 'members');
drop trigger if exists _950_audit_update on billing.discount_codes;
create trigger _950_audit_update after update on billing.discount_codes
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id', 'members');
drop trigger if exists _950_audit_delete on billing.discount_codes;
create trigger _950_audit_delete after delete on billing.discount_codes
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id', 'members');

-- (from 12-audit.sql) The audit log (billing_private.tg_audit) records changes made by an
-- actor (a request, the CLI, an operator login), not the service's own (renewals, sweeps); never email.
drop trigger if exists _950_audit_insert on billing.members;
create trigger _950_audit_insert after insert on billing.members
  referencing new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');
drop trigger if exists _950_audit_update on billing.members;
create trigger _950_audit_update after update on billing.members
  referencing old table as old_rows new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');
drop trigger if exists _950_audit_delete on billing.members;
create trigger _950_audit_delete after delete on billing.members
  referencing old table as old_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'email,display_name,search_text,note,tags,billing_name,billing_address_lines,billing_country,billing_tax_id', 'display_name,search_text');

-- (from 12-audit.sql) The audit log (billing_private.tg_audit) records changes made by an
-- actor (a request, the CLI, an operator login), not the service's own (renewals, sweeps).
drop trigger if exists _950_audit_insert on billing.subscriptions;
create trigger _950_audit_insert after insert on billing.subscriptions
  referencing new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.subscriptions;
create trigger _950_audit_update after update on billing.subscriptions
  referencing old table as old_rows new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.subscriptions;
create trigger _950_audit_delete after delete on billing.subscriptions
  referencing old table as old_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.price_migrations;
create trigger _950_audit_insert after insert on billing.price_migrations
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.price_migrations;
create trigger _950_audit_update after update on billing.price_migrations
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.price_migrations;
create trigger _950_audit_delete after delete on billing.price_migrations
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) The audit log (billing_private.tg_audit) records changes made by an
-- actor (a request, the CLI, an operator login), not the service's own (renewals, sweeps).
drop trigger if exists _950_audit_insert on billing.invoices;
create trigger _950_audit_insert after insert on billing.invoices
  referencing new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');
drop trigger if exists _950_audit_update on billing.invoices;
create trigger _950_audit_update after update on billing.invoices
  referencing old table as old_rows new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');
drop trigger if exists _950_audit_delete on billing.invoices;
create trigger _950_audit_delete after delete on billing.invoices
  referencing old table as old_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'buyer_name,buyer_address_lines,buyer_tax_id');

-- (from 12-audit.sql) The audit log (billing_private.tg_audit) records changes made by an
-- actor (a request, the CLI, an operator login), not the service's own (renewals, sweeps).
drop trigger if exists _950_audit_insert on billing.refunds;
create trigger _950_audit_insert after insert on billing.refunds
  referencing new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.refunds;
create trigger _950_audit_update after update on billing.refunds
  referencing old table as old_rows new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.refunds;
create trigger _950_audit_delete after delete on billing.refunds
  referencing old table as old_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) The audit log (billing_private.tg_audit) records changes made by an
-- actor (a request, the CLI, an operator login), not the service's own (renewals, sweeps).
drop trigger if exists _950_audit_insert on billing.grants;
create trigger _950_audit_insert after insert on billing.grants
  referencing new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.grants;
create trigger _950_audit_update after update on billing.grants
  referencing old table as old_rows new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.grants;
create trigger _950_audit_delete after delete on billing.grants
  referencing old table as old_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.webhook_endpoints;
create trigger _950_audit_insert after insert on billing.webhook_endpoints
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id', '', 'failing_since');
drop trigger if exists _950_audit_update on billing.webhook_endpoints;
create trigger _950_audit_update after update on billing.webhook_endpoints
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id', '', 'failing_since');
drop trigger if exists _950_audit_delete on billing.webhook_endpoints;
create trigger _950_audit_delete after delete on billing.webhook_endpoints
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id', '', 'failing_since');

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit); never secret_ciphertext, previous_ciphertext.
drop trigger if exists _950_audit_insert on billing_private.webhook_secrets;
create trigger _950_audit_insert after insert on billing_private.webhook_secrets
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('endpoint_id', 'secret_ciphertext,previous_ciphertext');
drop trigger if exists _950_audit_update on billing_private.webhook_secrets;
create trigger _950_audit_update after update on billing_private.webhook_secrets
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('endpoint_id', 'secret_ciphertext,previous_ciphertext');
drop trigger if exists _950_audit_delete on billing_private.webhook_secrets;
create trigger _950_audit_delete after delete on billing_private.webhook_secrets
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('endpoint_id', 'secret_ciphertext,previous_ciphertext');

-- ---- the request gate keeps the request id (functions/10-tenancy.sql) ----

-- A new last parameter (p_request_id, default null): the old signatures go, and callers
-- with the old arguments reach the new functions.
drop function if exists billing.api_call(text, text, jsonb, text, text, jsonb, jsonb, boolean);
drop function if exists billing.gate_open(text, text, jsonb, text, jsonb, boolean);
-- Opens a request. p_credential is the sha256 of an API key or of a session token (an
-- operator's dashboard session or a member's portal session, 15-operators.sql). Answers
--   {ok: false, error: 'unauthorized' | 'rate_limited', rl}  nothing set; a missing,
--       unknown or revoked credential took its token from the client IP's bucket;
--   {ok: true, community_id, key_id, scopes, member_id}      with, when the request is
--       answered without running the operation, error ({sqlstate, message, detail}:
--       a missing scope, a reused or in-flight Idempotency-Key) or replay (the stored
--       answer); and rl when the token was taken already.
-- p_leased: the caller holds a leased token for this key (src/operations/token-leases.ts):
-- the key is read, no bucket is touched (a read writes nothing), sessions are not
-- looked up, and an unknown key answers {ok: false, error: 'unauthorized'} without rl
-- (the caller then comes again without a lease). p_request_id: the request's X-Request-Id,
-- kept as app.request_id for the audit log (12-audit.sql).
-- Owner rights (keys, sessions and buckets are private); the settings it makes are
-- transaction-local and outlive the call.
create or replace function billing.gate_open(p_credential text, p_ip text, p_limits jsonb, p_scope text,
  p_idem jsonb default null, p_leased boolean default false, p_request_id text default null)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key_id text;
  v_community_id text;
  v_scopes text[];
  v_member_id text;
  v_available boolean;
  v_rl jsonb;
  v_open jsonb;
  v_replay jsonb;
  v_state text;
  v_msg text;
begin
  if p_credential is not null and p_leased then
    -- Two statements, not one with "p_leased or (...)": PostgreSQL would fold that
    -- differently per value and plan it again on every call.
    select k.id, k.community_id, k.scopes into v_key_id, v_community_id, v_scopes
    from billing_private.api_keys k
    where k.key_hash = p_credential and k.revoked_at is null;
  elsif p_credential is not null then
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
    where k.key_hash = p_credential and k.revoked_at is null;
    if v_key_id is null then
      -- A session (15-operators.sql): its role's scopes; its bucket is keyed by the session id.
      select c->>'key_id', c->>'community_id', array(select jsonb_array_elements_text(c->'scopes')), c->>'member_id',
        (select least(coalesce((p_limits->>'key_burst')::float8, 60),
            b.tokens + extract(epoch from (clock_timestamp() - b.updated_at))
              * coalesce((p_limits->>'key_per_minute')::float8, 300) / 60.0) >= 1
         from billing_private.rate_buckets b where b.bucket = ('key:' || (c->>'key_id')) collate "default")
        into v_key_id, v_community_id, v_scopes, v_member_id, v_available
      from billing_private.session_credential(p_credential) c where c is not null;
    end if;
  end if;
  if v_key_id is null then
    if p_leased then
      return jsonb_build_object('ok', false, 'error', 'unauthorized');
    end if;
    v_rl := billing_private.take_token('ip:' || coalesce(p_ip, '?'),
      coalesce((p_limits->>'ip_per_minute')::float8, 20), coalesce((p_limits->>'ip_burst')::float8, 10));
    return jsonb_build_object('ok', false,
      'error', case when (v_rl->>'allowed')::boolean then 'unauthorized' else 'rate_limited' end, 'rl', v_rl);
  end if;
  if not coalesce(v_available, true) then
    -- Empty or nearly: take the token now, and answer 429 before anything runs.
    v_rl := billing_private.take_token('key:' || v_key_id,
      coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
    if not (v_rl->>'allowed')::boolean then
      return jsonb_build_object('ok', false, 'error', 'rate_limited', 'rl', v_rl);
    end if;
  end if;
  -- The tenant: RLS reads app.community_id; a member portal session sees its own
  -- member only (app.member_id: 82-member-portal.sql, member_fence policies);
  -- gate_close spends the token taken here, if any (app.gate_token). The audit log
  -- (12-audit.sql) names the request's key or session and its X-Request-Id.
  perform set_config('app.community_id', v_community_id, true), set_config('app.key_id', v_key_id, true),
    set_config('app.member_id', coalesce(v_member_id, ''), true),
    set_config('app.scopes', array_to_string(v_scopes, ' '), true),
    set_config('app.gate_token', coalesce(v_rl::text, ''), true),
    set_config('app.request_id', coalesce(p_request_id, ''), true);
  v_open := jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
    'scopes', to_jsonb(v_scopes), 'member_id', v_member_id);
  if v_rl is not null then
    v_open := v_open || jsonb_build_object('rl', v_rl);
  end if;
  if p_scope is not null and not (p_scope = any (v_scopes)) then
    return v_open || jsonb_build_object('error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  if p_idem is not null then
    begin
      v_replay := billing.idempotency_begin(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash');
    exception when others then
      get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text;
      if v_state not like 'BL%' then
        raise;
      end if;
      return v_open || jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg, 'detail', null));
    end;
    if v_replay is not null then
      return v_open || jsonb_build_object('replay', v_replay->'body');
    end if;
  end if;
  return v_open;
end
$$;

-- One round trip for SQL operations: gate_open, billing_api.<p_op>(p_args) through
-- op_dispatch, gate_close. An error of the operation is returned as a value (its
-- writes rolled back) so the rate token stays taken and the idempotency record keeps
-- the answer: {ok, community_id, key_id, scopes, member_id, rl} with result, or error
-- ({sqlstate, message, detail}), and replayed when it came from the record. With
-- p_op null nothing runs: the caller is identified and its token taken (GraphQL,
-- refused input). With p_leased the token is the caller's (no rl, no bucket touched).
-- Invoker rights: the operation runs as billing_api.
create or replace function billing.api_call(p_credential text, p_ip text, p_limits jsonb, p_scope text,
  p_op text, p_args jsonb, p_idem jsonb default null, p_leased boolean default false, p_request_id text default null)
  returns jsonb language plpgsql volatile
as $$
declare
  v_open jsonb := billing.gate_open(p_credential, p_ip, p_limits, p_scope,
    case when p_op is not null then p_idem end, p_leased, p_request_id);
  v_out jsonb;
  v_state text;
  v_msg text;
  v_detail text;
  v_ran boolean := false;
begin
  if not (v_open->>'ok')::boolean then
    return v_open;
  end if;
  if v_open ? 'error' then
    v_out := jsonb_build_object('error', v_open->'error');
  elsif v_open ? 'replay' then
    v_out := jsonb_build_object('replayed', true) || (v_open->'replay');
  elsif p_op is not null then
    v_ran := true;
    begin
      v_out := jsonb_build_object('result', billing_private.op_dispatch(p_op, p_args));  -- 98-dispatch.sql
    exception when others then
      get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
      if v_state not like 'BL%' then
        raise;
      end if;
      v_out := jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
        'detail', nullif(v_detail, '')));
    end;
  end if;
  v_open := v_open - 'error' - 'replay' - 'rl';
  if p_leased then
    return v_open || coalesce(v_out, '{}');
  end if;
  -- Only an answer the operation gave is kept under the Idempotency-Key.
  return v_open || jsonb_build_object('rl', billing.gate_close(p_limits, case when v_ran then p_idem end, v_out))
    || coalesce(v_out, '{}');
end
$$;

grant execute on function billing.gate_open(text,text,jsonb,text,jsonb,boolean,text) to billing_api;
grant execute on function billing.api_call(text,text,jsonb,text,text,jsonb,jsonb,boolean,text) to billing_api;

-- ---- the hourly purge deletes the audit log past retention (functions/90-retention.sql) ----

-- Retention: the worker purges what has outlived its use (hourly, billing__purge_expired).
--   idempotency records      after expires_at (24 hours)
--   link codes, portal URLs  a day after they expired (by the community's clock)
--   webhook attempts         after p_delivery_retention (30 days); finished deliveries too
--   rate buckets             idle for an hour (a purged bucket is simply full again)
--   audit log                after the community's audit_retention_days (365 by default;
--                            billing_private.audit_purge, 12-audit.sql)
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
  v_audit integer;
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
  v_audit := billing_private.audit_purge();
  return jsonb_build_object('idempotency_keys', v_idempotency, 'link_codes', v_link_codes,
    'portal_sessions', v_portal, 'webhook_attempts', v_attempts, 'webhook_deliveries', v_deliveries,
    'rate_buckets', v_buckets, 'operator_links', v_links, 'operator_sessions', v_sessions,
    'member_portal_sessions', v_member_sessions, 'audit_log', v_audit);
end
$$;

grant execute on function billing_private.purge_expired(interval) to billing_worker;

-- ---- audit:read, and a password change names its operator (functions/15-operators.sql) ----

-- The API key scopes (src/core/scopes.ts; test/core/sql-agreement.test.ts keeps both equal).
create or replace function billing_private.api_key_scopes() returns text[]
  language sql immutable parallel safe
as $$
  select array['subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
    'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
    'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write', 'audit:read']
$$;

grant execute on function billing_private.api_key_scopes() to billing_api;

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
  -- The audit log (12-audit.sql) names the operator: this runs outside the request gate.
  perform set_config('app.community_id', v_user.community_id, true), set_config('app.key_id', v_session.id, true);
  update billing_private.operator_users u set password_hash = p_password_hash
  where u.community_id = v_user.community_id and u.id = v_user.id;
  update billing_private.operator_sessions s set revoked_at = now()
  where s.community_id = v_user.community_id and s.user_id = v_user.id and s.id <> v_session.id and s.revoked_at is null;
  get diagnostics v_ended = row_count;
  return jsonb_build_object('ok', true, 'ended', v_ended);
end
$$;

grant execute on function billing_private.operator_change_password(text, text, text, text) to billing_api;

-- (from 12-audit.sql) Every change is recorded in the audit log (billing_private.tg_audit).
drop trigger if exists _950_audit_insert on billing.tax_rates;
create trigger _950_audit_insert after insert on billing.tax_rates
  referencing new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_update on billing.tax_rates;
create trigger _950_audit_update after update on billing.tax_rates
  referencing old table as old_rows new table as new_rows for each statement
  execute function billing_private.tg_audit('id');
drop trigger if exists _950_audit_delete on billing.tax_rates;
create trigger _950_audit_delete after delete on billing.tax_rates
  referencing old table as old_rows for each statement
  execute function billing_private.tg_audit('id');

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
