--! Previous: sha1:dd822c7d5a6d6e70cb2b8941db078cf4f3129155
--! Hash: sha1:bd9d0a8dcb505d02bff948b65b896cbe17d7db89
--! Message: check fast path

--! split: 1-current.sql
-- Enter migration here

--! split: 2-check-fast-path.sql
-- Issue 33 item 2: the entitlement check's SQL with fewer set-ups per request (each
-- plpgsql expression and statement is set up again in every transaction):
-- billing.gate_open answers a leased token in one query, billing_api.entitlements_check
-- answers the usual request in one statement reading the community once, and
-- billing_private.op_dispatch finds an operation by halving instead of one CASE over all.
-- Fixtures: functions/10-tenancy.sql, functions/50-ledger.sql, 98-dispatch.sql.

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
  if p_leased and p_idem is null then
    -- The hot path (a read on a leased token): one query and a few expressions, the
    -- settings made by expressions rather than PERFORM (a query: an executor run per
    -- request). plpgsql sets up each statement it reaches again in every transaction.
    select k.id, k.community_id, k.scopes into v_key_id, v_community_id, v_scopes
    from billing_private.api_keys k
    where k.key_hash = p_credential and k.revoked_at is null;
    if v_key_id is null then
      return jsonb_build_object('ok', false, 'error', 'unauthorized');
    end if;
    v_msg := set_config('app.community_id', v_community_id, true) || set_config('app.key_id', v_key_id, true)
      || set_config('app.member_id', '', true) || set_config('app.scopes', array_to_string(v_scopes, ' '), true)
      || set_config('app.gate_token', '', true) || set_config('app.request_id', coalesce(p_request_id, ''), true);
    v_open := jsonb_build_object('ok', true, 'community_id', v_community_id, 'key_id', v_key_id,
      'scopes', to_jsonb(v_scopes), 'member_id', null);
    if p_scope is not null and not (p_scope = any (v_scopes)) then
      return v_open || jsonb_build_object('error', jsonb_build_object('sqlstate', 'BL403',
        'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
    end if;
    return v_open;
  end if;
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

create or replace function billing_api.entitlements_check(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text;
begin
  if p_args->>'platform' in ('discord', 'telegram') and coalesce(p_args->>'platform_uid', '') <> ''
     and coalesce(p_args->>'namespace', '') = '' and coalesce(p_args->>'external_user_id', '') = '' then
    return (
      select jsonb_build_object('entitled', count(*) > 0, 'entitlements', coalesce(jsonb_agg(x order by x.id), '[]'))
      from (
        select me.id, me.entitlement_id, e.key, e.name, me.revision, me.status, billing.iso(me.granted_at) as granted_at,
          billing.iso(me.revoked_at) as revoked_at, me.sources, me.benefits
        from billing.member_identities i
        join billing.member_entitlements me on me.community_id = i.community_id and me.member_id = i.member_id
        join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
        where i.community_id = (select billing.current_community_id()) and i.platform = p_args->>'platform'
          and i.platform_uid = p_args->>'platform_uid' and me.status = 'active'
          and (nullif(p_args->>'tier_id', '') is null
            or me.sources @> jsonb_build_array(jsonb_build_object('tier_id', nullif(p_args->>'tier_id', ''))))) x);
  end if;
  v_member := billing.resolve_identity(p_args);
  return (
    select jsonb_build_object('entitled', count(*) > 0, 'entitlements', coalesce(jsonb_agg(x order by x.id), '[]'))
    from (
      select me.id, me.entitlement_id, e.key, e.name, me.revision, me.status, billing.iso(me.granted_at) as granted_at,
        billing.iso(me.revoked_at) as revoked_at, me.sources, me.benefits
      from billing.member_entitlements me
      join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
      where me.community_id = (select billing.current_community_id()) and me.member_id = v_member
        and me.status = 'active'
        and (nullif(p_args->>'tier_id', '') is null
          or me.sources @> jsonb_build_array(jsonb_build_object('tier_id', nullif(p_args->>'tier_id', ''))))) x);
end
$$;

--! Included 98-dispatch.sql
-- Operations run by name without dynamic SQL. billing.api_call (the request gate,
-- 10-tenancy.sql) runs billing_private.op_dispatch(op, args): IFs and CASEs (below)
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

-- The names are found by halving (an IF on p_op per level, then a CASE of at most four):
-- plpgsql sets up each WHEN it reaches again in every transaction (about 3 us each), so
-- one CASE of all the operations cost the entitlement check, 31st, 100 us of
-- instructions (issue 33); now any operation takes about nine tests. Every leaf ends in
-- op_dispatch_dynamic, so an unknown name still runs by EXECUTE.
do $do$
declare
  v_names text[];
  v_blocks text[] := '{}';
  v_firsts text[] := '{}';
  v_next_blocks text[];
  v_next_firsts text[];
  v_leaf text;
  i integer;
begin
  select coalesce(array_agg(p.proname::text order by p.proname::text collate "C"), '{}') into v_names
  from pg_proc p
  join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'billing_api' and p.prorettype = 'jsonb'::regtype
    and pg_get_function_identity_arguments(p.oid) = 'p_args jsonb';
  -- Leaves: CASEs of up to four names, in order.
  i := 1;
  while i <= cardinality(v_names) loop
    select string_agg(format('  when %L then return billing_api.%I(p_args);', v_names[j], v_names[j]), E'\n' order by j)
    into v_leaf from generate_series(i, least(i + 3, cardinality(v_names))) j;
    v_blocks := v_blocks || format(E'case p_op\n%s\n  else return billing_private.op_dispatch_dynamic(p_op, p_args);\nend case;', v_leaf);
    v_firsts := v_firsts || v_names[i];
    i := i + 4;
  end loop;
  if cardinality(v_blocks) = 0 then
    v_blocks := array['return billing_private.op_dispatch_dynamic(p_op, p_args);'];
    v_firsts := array[''];
  end if;
  -- Then pairs of neighbours, level by level, until one block is left.
  while cardinality(v_blocks) > 1 loop
    v_next_blocks := '{}';
    v_next_firsts := '{}';
    i := 1;
    while i <= cardinality(v_blocks) loop
      if i = cardinality(v_blocks) then
        v_next_blocks := v_next_blocks || v_blocks[i];
      else
        v_next_blocks := v_next_blocks || format(E'if p_op collate "C" < %L then\n%s\nelse\n%s\nend if;',
          v_firsts[i + 1], v_blocks[i], v_blocks[i + 1]);
      end if;
      v_next_firsts := v_next_firsts || v_firsts[i];
      i := i + 2;
    end loop;
    v_blocks := v_next_blocks;
    v_firsts := v_next_firsts;
  end loop;
  execute format($f$
create or replace function billing_private.op_dispatch(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $b$
begin
  if p_args ? 'cursor_list' then
    perform set_config('app.cursor_list', p_args->>'cursor_list', true),
      set_config('app.cursor_filters', p_args->>'cursor_filters', true);
  end if;
%s
end
$b$$f$, v_blocks[1]);
end
$do$;

grant execute on function billing_private.op_dispatch_dynamic(text, jsonb) to billing_api;
grant execute on function billing_private.op_dispatch(text, jsonb) to billing_api;
--! EndIncluded 98-dispatch.sql
