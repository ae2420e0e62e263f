--! Previous: sha1:8da94e417421a73a85f4b88edeb5c7b0b33a5e08
--! Hash: sha1:520880ebc0a8320190ebe92d2f73264589c5eccd
--! Message: Cursors bound to their list

--! split: 1-current.sql
-- Enter migration here

--! split: 40-cursors-bound-to-their-list.sql
-- Issue 27 item 9: a list cursor names the list and the filters that issued it
-- (docs/decisions/cursors-bound-to-their-list.md). billing.encode_cursor reads them from
-- the transaction (app.cursor_list, app.cursor_filters); op_dispatch sets them from a
-- list's input. Fixtures: 00-foundation.sql, 98-dispatch.sql.

create or replace function billing.encode_cursor(p_id text) returns text
  language sql stable parallel safe
as $$
  select translate(encode(convert_to(jsonb_build_object('id', p_id,
    'list', nullif(current_setting('app.cursor_list', true), ''),
    'filters', nullif(current_setting('app.cursor_filters', true), ''))::text, 'UTF8'), 'base64'), E'+/=\n', '-_')
$$;

--! Included 98-dispatch.sql
-- Operations run by name without dynamic SQL. billing.api_call, api_call_deferred and
-- api_call_leased (10-tenancy.sql) run billing_private.op_dispatch(op, args): a CASE
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
