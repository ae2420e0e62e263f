--! Previous: sha1:d81390bdd0ce849f5c0b0051fc3d81f9850b23fa
--! Hash: sha1:336cad811da84d50a7d59f779d6384f3ddeece51
--! Message: Operations run by name through a static dispatcher (98-dispatch.sql), not EXECUTE per request

--! split: 1-current.sql
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
-- revocation holds from the next request on, leased tokens or not.
create or replace function billing_private.authenticate_key(p_key_hash text)
  returns jsonb language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('ok', true, 'community_id', k.community_id, 'key_id', k.id, 'scopes', to_jsonb(k.scopes))
  from billing_private.api_keys k
  where k.key_hash = p_key_hash and k.revoked_at is null
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
