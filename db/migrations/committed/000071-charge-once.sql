--! Previous: sha1:dc3c683a4c691162b04d457f651df643dfcde87d
--! Hash: sha1:7383d1390af2ba1ca367bfef24a2477082d7cec9
--! Message: charge once

--! split: 1-current.sql
-- The GraphQL charge folds the bucket's refill once, not once per column it sets.

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
  v_bucket billing_private.rate_buckets;
  v_level double precision;
  v_ok boolean;
begin
  insert into billing_private.rate_buckets (bucket, tokens, updated_at)
  values ('key:' || p_key_id, v_burst, v_now) on conflict (bucket) do nothing;
  select * into v_bucket from billing_private.rate_buckets b where b.bucket = 'key:' || p_key_id for update;
  -- Refilled as take_tokens does (never past the burst less the tokens of live leases;
  -- updated_at never moves back), then v_n taken only when all of them are there.
  v_level := billing_private.rate_level(v_bucket.tokens, v_bucket.updated_at, v_bucket.leases, v_now, v_burst, v_rate);
  v_ok := v_level >= v_n;
  update billing_private.rate_buckets b
  set tokens = v_level - case when v_ok then v_n else 0 end, granted = case when v_ok then v_n else 0 end,
    allowed = v_ok, updated_at = greatest(b.updated_at, v_now)
  where b.bucket = v_bucket.bucket
  returning b.tokens into v_level;
  return jsonb_build_object(
    'allowed', v_ok,
    'limit', v_per_minute::bigint,
    'remaining', floor(greatest(v_level, 0))::bigint,
    'reset', ceil(greatest(v_burst - v_level, 0) / v_rate)::bigint,
    'retry_after', greatest(ceil((v_n - v_level) / v_rate), 1)::bigint);
end
$$;
