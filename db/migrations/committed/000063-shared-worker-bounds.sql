--! Previous: sha1:216f78b8f214556b3a047a910662ae405000ac78
--! Hash: sha1:9458c26aa719ca8151631e16e0018137e0698b71
--! Message: shared worker bounds

--! split: 1-current.sql
-- Enter migration here

--! split: 2-shared-worker-bounds.sql
-- Issue 32, item 3: rate-token leases and webhook endpoint slots hold their bounds
-- across any number of processes (docs/decisions/shared-worker-and-lease-bounds.md).

-- Tokens held by live leases (tables/85-idempotency-and-limits.sql).
alter table billing_private.rate_buckets add column if not exists leases jsonb not null default '[]';

-- Delivery slots of each endpoint, shared by every worker (tables/70-webhooks.sql).
create unlogged table if not exists billing_private.webhook_endpoint_slots (
  community_id text collate "C" not null,
  endpoint_id text collate "C" not null,
  fast boolean not null default false,
  last_token bigint not null default 0,
  slots jsonb not null default '{}',
  primary key (community_id, endpoint_id)
);
alter table billing_private.webhook_endpoint_slots enable row level security;
alter table billing_private.webhook_endpoint_slots force row level security;
drop policy if exists owner_only on billing_private.webhook_endpoint_slots;
create policy owner_only on billing_private.webhook_endpoint_slots using (true);

create or replace function billing_private.rate_leases_held(p_leases jsonb, p_now timestamptz)
  returns double precision language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
begin
  return coalesce((select sum((e->>'n')::float8) from jsonb_array_elements(p_leases) e
                   where (e->>'u')::float8 > extract(epoch from p_now)), 0);
end
$$;

create or replace function billing_private.take_tokens(p_bucket text, p_per_minute double precision,
  p_burst double precision, p_n integer, p_return integer, p_lease_ms integer)
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
                      where (e->>'u')::float8 > extract(epoch from v_now)), '[]');
  v_avail := least(p_burst - billing_private.rate_leases_held(v_live, v_now),
    v_tokens + p_return + extract(epoch from (v_now - v_updated)) * v_rate);
  v_granted := greatest(0, least(p_n, floor(v_avail)))::integer;
  if p_lease_ms is not null and v_granted > 0 then
    v_live := v_live || jsonb_build_array(jsonb_build_object(
      'u', extract(epoch from v_now) + p_lease_ms / 1000.0, 'n', v_granted));
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
    'retry_after', greatest(ceil((1 - v_tokens) / v_rate), 1)::bigint);
end
$$;

create or replace function billing_private.take_tokens(p_bucket text, p_per_minute double precision,
  p_burst double precision, p_n integer, p_return integer default 0)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return billing_private.take_tokens(p_bucket, p_per_minute, p_burst, p_n, p_return, null);
end
$$;

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
    greatest(1, least(p_n, 100)), greatest(0, least(p_return, 100)),
    greatest(1, coalesce((p_limits->>'lease_ms')::integer, 1000))) || jsonb_build_object('key', true);
end
$$;

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
    tokens = least(v_burst - billing_private.rate_leases_held(b.leases, v_now), b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate)
      - case when least(v_burst - billing_private.rate_leases_held(b.leases, v_now), b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= v_n
          then v_n else 0 end,
    granted = case when least(v_burst - billing_private.rate_leases_held(b.leases, v_now), b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= v_n
          then v_n else 0 end,
    allowed = least(v_burst - billing_private.rate_leases_held(b.leases, v_now), b.tokens + greatest(extract(epoch from (v_now - b.updated_at)), 0) * v_rate) >= v_n,
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

create or replace function billing_private.webhook_slot_enter(p_community_id text, p_endpoint_id text,
  p_max integer, p_slow_ms integer, p_hold_ms integer, p_holder text)
  returns bigint language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_fast boolean;
  v_last bigint;
  v_slots jsonb;
  v_now double precision;
  v_live jsonb;
  v_count integer;
  v_slow boolean;
  v_cap integer;
begin
  select s.fast, s.last_token, s.slots into v_fast, v_last, v_slots
  from billing_private.webhook_endpoint_slots s
  where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id for update;
  if not found then
    insert into billing_private.webhook_endpoint_slots (community_id, endpoint_id)
    values (p_community_id, p_endpoint_id) on conflict do nothing;
    select s.fast, s.last_token, s.slots into v_fast, v_last, v_slots
    from billing_private.webhook_endpoint_slots s
    where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id for update;
  end if;
  v_now := extract(epoch from clock_timestamp());
  select coalesce(jsonb_object_agg(e.key, e.value), '{}'), count(*),
      coalesce(bool_or((e.value->>0)::float8 <= v_now - p_slow_ms / 1000.0), false)
    into v_live, v_count, v_slow
  from jsonb_each(v_slots) e where (e.value->>1)::float8 > v_now;
  v_cap := case when v_fast and not v_slow then greatest(p_max, 1) else 1 end;
  if v_count >= v_cap then
    if v_live <> v_slots then
      update billing_private.webhook_endpoint_slots s set slots = v_live
      where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id;
    end if;
    return null;
  end if;
  v_last := v_last + 1;
  update billing_private.webhook_endpoint_slots s set last_token = v_last,
    slots = v_live || jsonb_build_object(v_last::text, jsonb_build_array(v_now, v_now + p_hold_ms / 1000.0, p_holder))
  where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id;
  return v_last;
end
$$;

create or replace function billing_private.webhook_slot_leave(p_community_id text, p_endpoint_id text,
  p_token bigint, p_fast boolean)
  returns void language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  update billing_private.webhook_endpoint_slots s set slots = s.slots - p_token::text, fast = p_fast
  where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id
$$;

-- The reaper frees a dead worker's endpoint slots (05-worker.sql).
create or replace function billing_private.worker_heartbeat(p_worker_ids text[], p_stale interval)
  returns text[] language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_dead text[];
begin
  insert into billing_private.worker_heartbeats (worker_id, seen_at)
  select w, now() from unnest(p_worker_ids) w
  on conflict (worker_id) do update set seen_at = excluded.seen_at;
  with dead as (
    delete from billing_private.worker_heartbeats h where h.seen_at < now() - p_stale returning h.worker_id
  )
  select array_agg(worker_id) into v_dead from dead;
  if v_dead is not null then
    perform graphile_worker.force_unlock_workers(v_dead);
    -- Their webhook endpoint slots (70-webhooks.sql) free at once too.
    update billing_private.webhook_endpoint_slots s
    set slots = coalesce((select jsonb_object_agg(e.key, e.value) from jsonb_each(s.slots) e
                          where not coalesce(e.value->>2 = any (v_dead), false)), '{}')
    where s.slots <> '{}'
      and exists (select 1 from jsonb_each(s.slots) e where e.value->>2 = any (v_dead));
  end if;
  return coalesce(v_dead, '{}');
end
$$;

grant execute on function billing_private.webhook_slot_enter(text,text,integer,integer,integer,text) to billing_worker;
grant execute on function billing_private.webhook_slot_leave(text,text,bigint,boolean) to billing_worker;
