--! Previous: sha1:139fa14de6c58d0d888a377e84ae6ac8eee0905a
--! Hash: sha1:00a24d3b67733876958a2be34f248b9b20d1e6ff
--! Message: leased rate tokens

--! split: 1-current.sql
-- Leased rate tokens: a process takes a key's tokens a few at a time, and a SQL
-- operation run on a leased token writes nothing (billing.api_call_leased).
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
    execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
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

-- One token (a request).
create or replace function billing_private.take_token(p_bucket text, p_per_minute double precision, p_burst double precision)
  returns jsonb language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$ select billing_private.take_tokens(p_bucket, p_per_minute, p_burst, 1, 0) - 'granted' $$;

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
