-- The API's door into the database. One call authenticates the key, takes a rate
-- token, sets the community and scopes transaction-locally and (for SQL operations)
-- runs the operation: one round trip per request.

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
revoke all on function billing_private.authenticate(text, text, jsonb) from public;
grant usage on schema billing_private to billing_api;
grant execute on function billing_private.authenticate(text, text, jsonb) to billing_api;
revoke all on function billing_private.take_token(text, double precision, double precision) from public;

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
revoke all on function billing_private.authenticate_deferred(text, text, jsonb) from public;
revoke all on function billing_private.take_key_token(jsonb) from public;
grant execute on function billing_private.authenticate_deferred(text, text, jsonb) to billing_api;
grant execute on function billing_private.take_key_token(jsonb) to billing_api;

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

-- Idempotency: a transaction-level advisory lock marks the key in flight; a
-- finished record replays. Returns null when the request should run.
create or replace function billing.idempotency_begin(p_endpoint text, p_key text, p_hash text)
  returns jsonb language plpgsql volatile
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
as $$
  insert into billing.idempotency_keys (community_id, endpoint, key, request_hash, response_status,
    response_body, expires_at)
  values (billing.current_community_id(), p_endpoint, p_key, p_hash, p_status, p_body, now() + interval '24 hours')
  on conflict (community_id, endpoint, key) do update set
    request_hash = excluded.request_hash, response_status = excluded.response_status,
    response_body = excluded.response_body, created_at = now(), expires_at = excluded.expires_at
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
  v_out jsonb;
  v_replay jsonb;
  v_state text;
  v_msg text;
  v_detail text;
begin
  if p_op is not null and p_idem is null then
    return billing.api_call_deferred(p_key_hash, p_ip, p_limits, p_scope, p_op, p_args);
  end if;
  v_auth := billing.api_auth(p_key_hash, p_ip, p_limits);
  if not (v_auth->>'ok')::boolean then
    return v_auth;
  end if;
  if p_scope is not null and not (p_scope = any (billing.current_scopes())) then
    return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', 'BL403',
      'message', 'This key lacks the scope ' || p_scope || '.', 'detail', p_scope));
  end if;
  if p_op is null then
    return v_auth;
  end if;
  if p_idem is null then
    begin
      execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
      return v_auth || jsonb_build_object('result', v_out);
    exception when others then
      get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
      if v_state not like 'BL%' then
        raise;
      end if;
      return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
        'detail', nullif(v_detail, '')));
    end;
  end if;
  begin
    if p_idem is not null then
      v_replay := billing.idempotency_begin(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash');
      if v_replay is not null then
        return v_auth || jsonb_build_object('replayed', true) || (v_replay->'body');
      end if;
    end if;
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
    if p_idem is not null then
      perform billing.idempotency_finish(p_idem->>'endpoint', p_idem->>'key', p_idem->>'hash', 0, v_out);
    end if;
  exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_msg = message_text, v_detail = pg_exception_detail;
    if v_state not like 'BL%' then
      raise;
    end if;
    return v_auth || jsonb_build_object('error', jsonb_build_object('sqlstate', v_state, 'message', v_msg,
      'detail', nullif(v_detail, '')));
  end;
  return v_auth || v_out;
end
$$;

grant execute on all functions in schema billing to billing_api;
alter default privileges in schema billing grant execute on functions to billing_api;
alter default privileges in schema billing_api grant execute on functions to billing_api;

-- Opaque list cursor: base64url of {"id": ...}; src/operations/registry.ts decodes it.
create or replace function billing.encode_cursor(p_id text) returns text
  language sql immutable parallel safe
as $$
  select translate(encode(convert_to(jsonb_build_object('id', p_id)::text, 'UTF8'), 'base64'), E'+/=\n', '-_')
$$;
