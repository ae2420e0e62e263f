--! Previous: sha1:992df271503886003b2990098285066d2dceec0e
--! Hash: sha1:ef969c863e4a83b93be0d4f965441cbc83644612
--! Message: one-request-gate

--! split: 1-current.sql
-- Enter migration here

--! split: 10-one-request-gate.sql
-- Issue 28 item 1, one request gate (docs/decisions/one-request-gate.md): the six
-- authentication/call variants become billing.gate_open, billing.gate_close and
-- billing.api_call (10-tenancy.sql), and the scope is checked there only, from the
-- registry's op.scope: the perform billing.require_scope(...) line leaves every function.

drop function if exists billing.api_call(text,text,jsonb,text,text,jsonb,jsonb);
drop function if exists billing.api_call_deferred(text,text,jsonb,text,text,jsonb);
drop function if exists billing.api_call_leased(text,text,text,jsonb);
drop function if exists billing.api_auth(text,text,jsonb);
drop function if exists billing.api_auth_deferred(text,text,jsonb);
drop function if exists billing_private.authenticate(text,text,jsonb);
drop function if exists billing_private.authenticate_deferred(text,text,jsonb);
drop function if exists billing_private.authenticate_key(text);
drop function if exists billing_private.take_key_token(jsonb);

create or replace function billing.gate_open(p_credential text, p_ip text, p_limits jsonb, p_scope text,
  p_idem jsonb default null, p_leased boolean default false)
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
  -- gate_close spends the token taken here, if any (app.gate_token).
  perform set_config('app.community_id', v_community_id, true), set_config('app.key_id', v_key_id, true),
    set_config('app.member_id', coalesce(v_member_id, ''), true),
    set_config('app.scopes', array_to_string(v_scopes, ' '), true),
    set_config('app.gate_token', coalesce(v_rl::text, ''), true);
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

create or replace function billing.gate_close(p_limits jsonb, p_idem jsonb default null, p_answer jsonb default null)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_rl jsonb := nullif(current_setting('app.gate_token', true), '')::jsonb;
begin
  if p_idem is not null and p_answer is not null then
    perform billing.idempotency_finish(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash', 0, p_answer);
  end if;
  if v_rl is null then
    v_rl := billing_private.take_token('key:' || current_setting('app.key_id'),
      coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60));
  end if;
  if not (v_rl->>'allowed')::boolean then
    raise exception using errcode = 'BL429', message = 'rate limited', detail = v_rl::text;
  end if;
  return v_rl;
end
$$;

create or replace function billing.api_call(p_credential text, p_ip text, p_limits jsonb, p_scope text,
  p_op text, p_args jsonb, p_idem jsonb default null, p_leased boolean default false)
  returns jsonb language plpgsql volatile
as $$
declare
  v_open jsonb := billing.gate_open(p_credential, p_ip, p_limits, p_scope,
    case when p_op is not null then p_idem end, p_leased);
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

grant execute on function billing.gate_open(text,text,jsonb,text,jsonb,boolean) to billing_api;
grant execute on function billing.gate_close(jsonb,jsonb,jsonb) to billing_api;
grant execute on function billing.api_call(text,text,jsonb,text,text,jsonb,jsonb,boolean) to billing_api;
-- The gate (owner rights) keeps idempotency records; billing_api no longer calls them.
revoke execute on function billing.idempotency_begin(text,text,text) from billing_api;
revoke execute on function billing.idempotency_finish(text,text,text,integer,jsonb) from billing_api;

-- The scope check leaves the operation functions: each function whose body holds a
-- line "perform billing.require_scope('...');" is created again from its own
-- definition without that line (the fixtures were edited the same way), whatever its
-- schema, rights, owner or settings.
do $do$
declare
  v_fn regprocedure;
begin
  for v_fn in
    select p.oid::regprocedure from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname in ('billing', 'billing_api', 'billing_private', 'analytics')
      and p.prosrc ~ '\n[ \t]*perform billing\.require_scope\(''[^'']*''\);'
  loop
    execute regexp_replace(pg_get_functiondef(v_fn), '\n[ \t]*perform billing\.require_scope\(''[^'']*''\);', '', 'g');
  end loop;
end
$do$;

drop function if exists billing.require_scope(text);
