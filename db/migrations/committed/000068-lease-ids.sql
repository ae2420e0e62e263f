--! Previous: sha1:aec40711ae0b75e7d49940b1e1774bc02d3492f4
--! Hash: sha1:d8506de21d126b42e4c012f88a9f1b2b3e403b5b
--! Message: lease ids

--! split: 1-current.sql
-- A lease is given back by name and the bucket row forgets it at once; the bucket's
-- level is folded over its leases' ends, so refill a live lease held back is lost,
-- not deferred (docs/decisions/leased-rate-tokens.md, session 15 amendment).
drop function if exists billing_private.lease_key_tokens(text, integer, jsonb, integer);
drop function if exists billing_private.take_tokens(text, double precision, double precision, integer, integer, integer);

create or replace function billing_private.rate_level(p_tokens double precision, p_updated timestamptz,
  p_leases jsonb, p_now timestamptz, p_burst double precision, p_rate double precision)
  returns double precision language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_now double precision := extract(epoch from p_now);
  v_level double precision := p_tokens + greatest(v_now - extract(epoch from p_updated), 0) * p_rate;
begin
  if jsonb_array_length(p_leases) = 0 then
    return least(p_burst, v_level);
  end if;
  return least(v_level, p_burst - billing_private.rate_leases_held(p_leases, p_now),
    coalesce((select min(p_burst - (select sum((f->>'n')::float8) from jsonb_array_elements(p_leases) f
                                    where (f->>'u')::float8 >= (e->>'u')::float8)
                         + (v_now - (e->>'u')::float8) * p_rate)
              from jsonb_array_elements(p_leases) e
              where (e->>'u')::float8 <= v_now and (e->>'u')::float8 > extract(epoch from p_updated)),
             'infinity'::float8));
end
$$;

create or replace function billing_private.take_tokens(p_bucket text, p_per_minute double precision,
  p_burst double precision, p_n integer, p_return integer, p_lease_ms integer,
  p_returned_lease text default null)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_now timestamptz;
  v_rate double precision := p_per_minute / 60.0;
  v_tokens double precision;
  v_updated timestamptz;
  v_leases jsonb;
  v_live jsonb;
  v_avail double precision;
  v_granted integer;
  v_lease text;
begin
  select b.tokens, b.updated_at, b.leases into v_tokens, v_updated, v_leases
  from billing_private.rate_buckets b where b.bucket = p_bucket for update;
  if not found then
    insert into billing_private.rate_buckets (bucket, tokens, updated_at)
    values (p_bucket, p_burst, clock_timestamp()) on conflict (bucket) do nothing;
    select b.tokens, b.updated_at, b.leases into v_tokens, v_updated, v_leases
    from billing_private.rate_buckets b where b.bucket = p_bucket for update;
  end if;
  -- Read after the row lock: never before the updated_at of whoever held it.
  v_now := greatest(clock_timestamp(), v_updated);
  v_live := coalesce((select jsonb_agg(e) from jsonb_array_elements(v_leases) e
                      where (e->>'u')::float8 > extract(epoch from v_now)
                        and (e->>'i') is distinct from p_returned_lease), '[]');
  -- The tokens given back come on top of the bucket as it stood under the returned
  -- lease's cap: they were its, and it no longer holds any.
  v_avail := least(p_burst - billing_private.rate_leases_held(v_live, v_now),
    billing_private.rate_level(v_tokens, v_updated, v_leases, v_now, p_burst, v_rate) + p_return);
  v_granted := greatest(0, least(p_n, floor(v_avail)))::integer;
  if p_lease_ms is not null and v_granted > 0 then
    v_lease := pg_current_xact_id()::text;
    v_live := v_live || jsonb_build_array(jsonb_build_object(
      'u', extract(epoch from v_now) + p_lease_ms / 1000.0, 'n', v_granted, 'i', v_lease));
  end if;
  v_tokens := v_avail - v_granted;
  update billing_private.rate_buckets b set tokens = v_tokens, allowed = v_avail >= 1, granted = v_granted,
    updated_at = v_now, leases = v_live
  where b.bucket = p_bucket;
  return jsonb_build_object(
    'allowed', v_granted > 0,
    'granted', v_granted,
    'limit', p_per_minute::bigint,
    'remaining', floor(greatest(v_tokens, 0))::bigint,
    'reset', ceil(greatest(p_burst - v_tokens, 0) / v_rate)::bigint,
    'retry_after', greatest(ceil((1 - v_tokens) / v_rate), 1)::bigint,
    'lease', v_lease);
end
$$;

create or replace function billing_private.lease_key_tokens(p_key_hash text, p_n integer, p_limits jsonb,
  p_return integer default 0, p_returned_lease text default null)
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
    greatest(1, least(p_n, 100)), greatest(0, least(p_return, 100)),
    greatest(1, coalesce((p_limits->>'lease_ms')::integer, 1000)), p_returned_lease) || jsonb_build_object('key', true);
end
$$;
grant execute on function billing_private.lease_key_tokens(text,integer,jsonb,integer,text) to billing_api;

create or replace function billing_private.charge_key_tokens(p_key_id text, p_n integer, p_limits jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_per_minute double precision := coalesce((p_limits->>'key_per_minute')::float8, 300);
  v_burst double precision := coalesce((p_limits->>'key_burst')::float8, 60);
  v_rate double precision := v_per_minute / 60.0;
  v_n integer := greatest(0, least(p_n, floor(v_burst)::integer));
  v_now timestamptz := clock_timestamp();
  v_tokens double precision;
  v_ok boolean;
begin
  -- Refill as take_tokens does (never negatively, updated_at never moves back, never
  -- past the burst less the tokens of live leases), then take v_n only when all of
  -- them are there.
  insert into billing_private.rate_buckets as b (bucket, tokens, allowed, granted, updated_at)
  values ('key:' || p_key_id, v_burst - v_n, true, v_n, v_now)
  on conflict (bucket) do update set
    tokens = billing_private.rate_level(b.tokens, b.updated_at, b.leases, v_now, v_burst, v_rate)
      - case when billing_private.rate_level(b.tokens, b.updated_at, b.leases, v_now, v_burst, v_rate) >= v_n
          then v_n else 0 end,
    granted = case when billing_private.rate_level(b.tokens, b.updated_at, b.leases, v_now, v_burst, v_rate) >= v_n
          then v_n else 0 end,
    allowed = billing_private.rate_level(b.tokens, b.updated_at, b.leases, v_now, v_burst, v_rate) >= v_n,
    updated_at = greatest(b.updated_at, v_now)
  returning tokens, allowed into v_tokens, v_ok;
  return jsonb_build_object(
    'allowed', v_ok,
    'limit', v_per_minute::bigint,
    'remaining', floor(greatest(v_tokens, 0))::bigint,
    'reset', ceil(greatest(v_burst - v_tokens, 0) / v_rate)::bigint,
    'retry_after', greatest(ceil((v_n - v_tokens) / v_rate), 1)::bigint);
end
$$;
