-- Schemas, roles, ids, per-request identity and the error table.
--
-- SQLSTATE table (mapped once in src/http/problems.ts):
--   BL400 invalid_request (400)      BL422 invalid_request (422)
--   BL401 unauthorized               BL403 missing_scope
--   BL404 not_found                  BL409 conflict
--   BLPCI payment_config_inactive    BLNEL not_eligible
--   BLPRQ plan_required              BLPNC platform_not_connected
--   BLDSC discount_invalid           BLEPL endpoint_limit
--   BLIKR idempotency_key_reuse      BLRIF request_in_flight
--   BL429 rate_limited               BL503 service_unavailable

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
-- The connecting (owner) role switches to billing_api for every API connection.
grant billing_api to current_user;

revoke all on schema billing_private from public;
grant usage on schema billing, billing_api, analytics to billing_api;

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

-- Per-request identity, set transaction-locally by billing.api_auth().
create or replace function billing.current_community_id() returns text
  language sql stable parallel safe
as $$ select nullif(current_setting('app.community_id', true), '') $$;

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
