-- Outbound webhooks: endpoints, encrypted signing secrets, the delivery queue and the
-- delivery log.
--
-- Flow: an event row (billing.events, the outbox) fans out, in the statement and
-- transaction that inserted it, into one webhook_deliveries row per enabled endpoint
-- whose event_types match (empty = all), and into graphile-worker jobs
-- 'webhook_deliveries__send' (one job per up to 50 deliveries of one community). The
-- worker (worker/tasks/webhook_deliveries__send.ts) signs and POSTs each delivery and
-- records the outcome through billing_private.webhook_record_attempts, which also
-- schedules the retry job, so nothing is sent before the event commits and nothing
-- committed is lost.
--
-- Secrets are AES-256-GCM ciphertexts made in Node (src/webhooks/crypto.ts); the key
-- never reaches the database. billing_api reaches billing_private only through the
-- SECURITY DEFINER functions below.

-- ---- table adjustments ---------------------------------------------------------------

-- The retry scheduled after an attempt (null when none), for the delivery log.
alter table billing.webhook_attempts add column next_attempt_at timestamptz;
-- The log is read per delivery (and cascades from deliveries): index it that way.
drop index billing.webhook_attempts_endpoint;
create index webhook_attempts_delivery on billing.webhook_attempts (community_id, delivery_id, attempt);
alter table billing.webhook_endpoints
  add constraint webhook_endpoints_url_length check (length(url) between 1 and 2048),
  add constraint webhook_endpoints_description_length check (length(description) <= 500),
  add constraint webhook_endpoints_disabled_reason check (disabled_reason in ('manual', 'failing'));
-- Deliveries are updated once per attempt (usually once): half of each page is left
-- free so those updates are HOT (no new index entries in its three indexes).
alter table billing.webhook_deliveries set (fillfactor = 50);

-- Rows the dead-worker reaper reads: every live worker of startWorker() beats here.
create table billing_private.worker_heartbeats (
  worker_id text primary key,
  seen_at timestamptz not null default now()
);
alter table billing_private.worker_heartbeats enable row level security;
alter table billing_private.worker_heartbeats force row level security;
create policy owner_only on billing_private.worker_heartbeats using (true);

-- ---- the one door into graphile-worker ------------------------------------------------

-- Adds one job per payload (all for one task, one run_at), in the caller's
-- transaction. graphile_worker.add_jobs needs the owner's rights, hence SECURITY
-- DEFINER; every enqueue in this schema goes through here.
create or replace function billing_private.add_job(p_identifier text, p_payloads json[],
  p_run_at timestamptz default null, p_max_attempts integer default null)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if coalesce(cardinality(p_payloads), 0) = 0 then
    return;
  end if;
  perform graphile_worker.add_jobs(array(
    select row(p_identifier, p.payload, null, p_run_at, p_max_attempts, null, null, null)::graphile_worker.job_spec
    from unnest(p_payloads) as p(payload)));
end
$$;
revoke all on function billing_private.add_job(text, json[], timestamptz, integer) from public;

-- ---- enqueue: events -> deliveries + jobs ----------------------------------------------

-- Statement-level, over the transition table: one insert for all the statement's
-- deliveries and one add_jobs call for all its jobs, whatever the number of rows.
create or replace function billing_private.tg_events__enqueue_deliveries() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
begin
  with d as (
    insert into billing.webhook_deliveries (community_id, endpoint_id, event_id, event_type, next_attempt_at)
    select e.community_id, w.id, e.id, e.type, now()
    from new_events e
    join billing.webhook_endpoints w
      on w.community_id = e.community_id and w.enabled
     and (w.event_types = '{}' or e.type = any (w.event_types))
    order by e.community_id, e.id, w.id
    returning community_id, id
  ), chunks as (
    select community_id, id, (row_number() over (partition by community_id order by id) - 1) / 50 as chunk
    from d
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids, 'after', 0))
  into v_payloads
  from (select community_id, array_agg(id order by id) as ids from chunks group by community_id, chunk) c;
  perform billing_private.add_job('webhook_deliveries__send', v_payloads);
  return null;
end
$$;

create trigger _900_enqueue_deliveries after insert on billing.events
  referencing new table as new_events
  for each statement execute function billing_private.tg_events__enqueue_deliveries();

-- ---- endpoint limit ----------------------------------------------------------------------

-- At most 5 endpoints per community, whatever door the insert comes through: a
-- transaction-level lock per community serialises concurrent creates, and the count
-- (a fresh snapshot in READ COMMITTED) sees every committed one.
create or replace function billing_private.tg_webhook_endpoints__limit() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform pg_advisory_xact_lock(hashtextextended('webhook_endpoints ' || new.community_id, 70));
  if (select count(*) from billing.webhook_endpoints w where w.community_id = new.community_id) >= 5 then
    raise exception using errcode = 'BLEPL',
      message = 'This community already has 5 webhook endpoints; delete one first.';
  end if;
  return new;
end
$$;

create trigger _200_endpoint_limit before insert on billing.webhook_endpoints
  for each row execute function billing_private.tg_webhook_endpoints__limit();

-- ---- JSON shapes --------------------------------------------------------------------------

create or replace function billing.webhook_endpoint_json(p_endpoint billing.webhook_endpoints) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', p_endpoint.id, 'url', p_endpoint.url, 'description', p_endpoint.description,
    'event_types', to_jsonb(p_endpoint.event_types), 'enabled', p_endpoint.enabled,
    'disabled_reason', p_endpoint.disabled_reason,
    'created_at', billing.iso(p_endpoint.created_at), 'updated_at', billing.iso(p_endpoint.updated_at))
$$;

create or replace function billing.webhook_delivery_json(p_delivery billing.webhook_deliveries) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', p_delivery.id, 'endpoint_id', p_delivery.endpoint_id,
    'event_id', p_delivery.event_id, 'event_type', p_delivery.event_type, 'status', p_delivery.status,
    'attempt_count', p_delivery.attempt_count, 'next_attempt_at', billing.iso(p_delivery.next_attempt_at),
    'last_status_code', p_delivery.last_status_code, 'last_error', p_delivery.last_error,
    'created_at', billing.iso(p_delivery.created_at), 'updated_at', billing.iso(p_delivery.updated_at),
    'attempts', coalesce((
      select jsonb_agg(jsonb_build_object('id', a.id, 'event_id', p_delivery.event_id,
        'event_type', p_delivery.event_type, 'attempt', a.attempt, 'status_code', a.status_code,
        'duration_ms', a.duration_ms, 'error', a.error, 'response_excerpt', a.response_excerpt,
        'started_at', billing.iso(a.started_at), 'finished_at', billing.iso(a.finished_at),
        'next_attempt_at', billing.iso(a.next_attempt_at)) order by a.attempt, a.id)
      from billing.webhook_attempts a
      where a.community_id = p_delivery.community_id and a.delivery_id = p_delivery.id), '[]'))
$$;

-- ---- secrets (SECURITY DEFINER: billing_api has no rights on billing_private) -------------

-- Stores a new secret for an endpoint of the current community. With p_rotate the old
-- one keeps signing until p_grace from now (a second v1 token).
create or replace function billing_private.webhook_secret_store(p_endpoint_id text, p_ciphertext text,
  p_rotate boolean, p_grace interval default '24 hours')
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community_id text := billing.current_community_id();
begin
  if v_community_id is null or not exists (select 1 from billing.webhook_endpoints w
      where w.community_id = v_community_id and w.id = p_endpoint_id) then
    perform billing.raise('BL404', 'No webhook endpoint ' || p_endpoint_id || '.');
  end if;
  if p_rotate then
    update billing_private.webhook_secrets s set
      previous_ciphertext = s.secret_ciphertext, previous_expires_at = now() + p_grace,
      secret_ciphertext = p_ciphertext
    where s.community_id = v_community_id and s.endpoint_id = p_endpoint_id;
    if not found then
      insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext)
      values (v_community_id, p_endpoint_id, p_ciphertext);
    end if;
  else
    insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext)
    values (v_community_id, p_endpoint_id, p_ciphertext)
    on conflict (community_id, endpoint_id) do update set secret_ciphertext = excluded.secret_ciphertext,
      previous_ciphertext = null, previous_expires_at = null;
  end if;
end
$$;

-- The ciphertexts that sign now: the current secret, then the previous one while its
-- grace period lasts.
create or replace function billing_private.webhook_signing_ciphertexts(p_community_id text, p_endpoint_id text)
  returns text[] language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select array_remove(array[s.secret_ciphertext,
    case when s.previous_expires_at > now() then s.previous_ciphertext end], null)
  from billing_private.webhook_secrets s
  where s.community_id = p_community_id and s.endpoint_id = p_endpoint_id
$$;

-- For the test ping (run as billing_api): the endpoint of the current community, its
-- signing ciphertexts, and a token from its own bucket (10 per minute, burst 10).
create or replace function billing_private.webhook_test_target(p_endpoint_id text)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community_id text := billing.current_community_id();
  v_endpoint billing.webhook_endpoints;
  v_rl jsonb;
begin
  select * into v_endpoint from billing.webhook_endpoints w
  where w.community_id = v_community_id and w.id = p_endpoint_id;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || p_endpoint_id || '.');
  end if;
  v_rl := billing_private.take_token('webhook_test:' || v_endpoint.id, 10, 10);
  return jsonb_build_object('allowed', (v_rl->>'allowed')::boolean, 'retry_after', v_rl->'retry_after',
    'url', v_endpoint.url, 'community_id', v_community_id,
    'ciphertexts', to_jsonb(billing_private.webhook_signing_ciphertexts(v_community_id, v_endpoint.id)));
end
$$;

revoke all on function billing_private.webhook_secret_store(text, text, boolean, interval) from public;
revoke all on function billing_private.webhook_signing_ciphertexts(text, text) from public;
revoke all on function billing_private.webhook_test_target(text) from public;
grant execute on function billing_private.webhook_secret_store(text, text, boolean, interval) to billing_api;
grant execute on function billing_private.webhook_test_target(text) to billing_api;

-- ---- API operations (billing_api, tenant-scoped by RLS) -------------------------------------

create or replace function billing_api.webhook_endpoints_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.webhook_endpoints[];
begin
  perform billing.require_scope('webhooks:read');
  select coalesce(array_agg(w order by w.id desc), '{}') into v_rows
  from (select * from billing.webhook_endpoints w
        where p_args->>'cursor' is null or w.id < p_args->>'cursor'
        order by w.id desc limit v_limit + 1) w;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.webhook_endpoint_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit then billing.encode_cursor(v_rows[v_limit].id) end);
end
$$;

create or replace function billing_api.webhook_endpoints_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  perform billing.require_scope('webhooks:read');
  select * into v_endpoint from billing.webhook_endpoints w where w.id = p_args->>'id';
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

-- Input: id (made by the caller, so the secret's ciphertext can be bound to it), url,
-- description, event_types, enabled, secret_ciphertext.
create or replace function billing_api.webhook_endpoints_create(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_endpoint billing.webhook_endpoints;
  v_enabled boolean := coalesce((p_args->>'enabled')::boolean, true);
begin
  perform billing.require_scope('webhooks:write');
  insert into billing.webhook_endpoints (community_id, id, url, description, event_types, enabled, disabled_reason)
  values (billing.current_community_id(), p_args->>'id', p_args->>'url', p_args->>'description',
    coalesce(array(select jsonb_array_elements_text(p_args->'event_types')), '{}'),
    v_enabled, case when v_enabled then null else 'manual' end)
  returning * into v_endpoint;
  perform billing_private.webhook_secret_store(v_endpoint.id, p_args->>'secret_ciphertext', false);
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

-- PATCH: only the keys present change. Enabling clears the disabled reason and the
-- failure streak; disabling records 'manual'.
create or replace function billing_api.webhook_endpoints_update(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  perform billing.require_scope('webhooks:write');
  update billing.webhook_endpoints w set
    url = case when p_args ? 'url' then p_args->>'url' else w.url end,
    description = case when p_args ? 'description' then p_args->>'description' else w.description end,
    event_types = case when p_args ? 'event_types'
      then coalesce(array(select jsonb_array_elements_text(p_args->'event_types')), '{}') else w.event_types end,
    enabled = case when p_args ? 'enabled' then (p_args->>'enabled')::boolean else w.enabled end,
    disabled_reason = case
      when not (p_args ? 'enabled') then w.disabled_reason
      when (p_args->>'enabled')::boolean then null
      when w.enabled then 'manual'
      else w.disabled_reason end,
    failing_since = case when (p_args->>'enabled')::boolean and not w.enabled then null else w.failing_since end,
    updated_at = now()
  where w.id = p_args->>'id'
  returning * into v_endpoint;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

create or replace function billing_api.webhook_endpoints_delete(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  perform billing.require_scope('webhooks:write');
  delete from billing.webhook_endpoints w where w.id = p_args->>'id';
  if not found then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  return null;
end
$$;

create or replace function billing_api.webhook_endpoints_rotate_secret(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_endpoint billing.webhook_endpoints;
begin
  perform billing.require_scope('webhooks:write');
  update billing.webhook_endpoints w set updated_at = now() where w.id = p_args->>'id'
  returning * into v_endpoint;
  if v_endpoint.id is null then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  perform billing_private.webhook_secret_store(v_endpoint.id, p_args->>'secret_ciphertext', true);
  return billing.webhook_endpoint_json(v_endpoint);
end
$$;

-- Deliveries newest first, each with its attempts.
create or replace function billing_api.webhook_deliveries_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.webhook_deliveries[];
begin
  perform billing.require_scope('webhooks:read');
  if not exists (select 1 from billing.webhook_endpoints w where w.id = p_args->>'id') then
    perform billing.raise('BL404', 'No webhook endpoint ' || (p_args->>'id') || '.');
  end if;
  select coalesce(array_agg(d order by d.id desc), '{}') into v_rows
  from (select * from billing.webhook_deliveries d
        where d.community_id = billing.current_community_id() and d.endpoint_id = p_args->>'id'
          and (p_args->>'cursor' is null or d.id < p_args->>'cursor')
        order by d.id desc limit v_limit + 1) d;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.webhook_delivery_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit then billing.encode_cursor(v_rows[v_limit].id) end);
end
$$;

-- Requeues one delivery for an immediate attempt. A pending delivery keeps its retry
-- schedule (its next attempt just happens now); a succeeded or failed one gets one
-- more attempt, and no automatic retries after it. 409 while the endpoint is disabled.
create or replace function billing_api.webhook_deliveries_redeliver(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_endpoint billing.webhook_endpoints;
  v_delivery billing.webhook_deliveries;
  v_manual boolean;
begin
  perform billing.require_scope('webhooks:write');
  select * into v_endpoint from billing.webhook_endpoints w where w.id = p_args->>'id';
  select * into v_delivery from billing.webhook_deliveries d
  where d.community_id = billing.current_community_id() and d.id = p_args->>'deliveryId'
    and d.endpoint_id = v_endpoint.id
  for update;
  if v_endpoint.id is null or v_delivery.id is null then
    perform billing.raise('BL404', 'No delivery ' || (p_args->>'deliveryId') || ' for webhook endpoint '
      || (p_args->>'id') || '.');
  end if;
  if not v_endpoint.enabled then
    perform billing.raise('BL409', 'Webhook endpoint ' || v_endpoint.id || ' is disabled; enable it first.');
  end if;
  v_manual := v_delivery.status <> 'pending';
  update billing.webhook_deliveries d set status = 'pending', next_attempt_at = now(), updated_at = now()
  where d.community_id = v_delivery.community_id and d.id = v_delivery.id
  returning * into v_delivery;
  perform billing_private.webhook_delivery_enqueue(v_delivery.id, v_manual);
  return billing.webhook_delivery_json(v_delivery);
end
$$;

-- The API's only way to enqueue: one job for one pending delivery of the current
-- community (billing_api may not call add_job itself).
create or replace function billing_private.webhook_delivery_enqueue(p_delivery_id text, p_manual boolean)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_delivery billing.webhook_deliveries;
begin
  select * into v_delivery from billing.webhook_deliveries d
  where d.community_id = billing.current_community_id() and d.id = p_delivery_id and d.status = 'pending';
  if v_delivery.id is null then
    perform billing.raise('BL404', 'No pending delivery ' || p_delivery_id || '.');
  end if;
  perform billing_private.add_job('webhook_deliveries__send', array[json_build_object(
    'community_id', v_delivery.community_id, 'ids', array[v_delivery.id],
    'after', v_delivery.attempt_count, 'manual', p_manual)]);
end
$$;
revoke all on function billing_private.webhook_delivery_enqueue(text, boolean) from public;
grant execute on function billing_private.webhook_delivery_enqueue(text, boolean) to billing_api;

-- ---- the worker's side (owner) ---------------------------------------------------------------

-- Loads the deliveries of one job that are still due: pending and not yet attempted
-- past p_after (a job re-run after its attempt was recorded finds nothing to do).
-- Deliveries whose endpoint was disabled meanwhile fail without an attempt.
create or replace function billing_private.webhook_deliveries_load(p_community_id text, p_ids text[], p_after integer)
  returns table (id text, endpoint_id text, url text, event_id text, body text, ciphertexts text[])
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
  set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
  v_disabled text[];
begin
  -- Every lookup is one primary-key probe per id of the job (lateral ... limit 1). Plans
  -- are made per call (plan_cache_mode above): a generic plan cached by a long-lived
  -- worker connection while the table was nearly empty may pick the endpoint index for
  -- these probes, which then reads every delivery of the community on each call.
  select array_agg(d.id) into v_disabled
  from unnest(p_ids) as x(id)
  cross join lateral (
    select d.id from billing.webhook_deliveries d
    join billing.webhook_endpoints w on w.community_id = d.community_id and w.id = d.endpoint_id
    where d.community_id = p_community_id and d.id = x.id and d.status = 'pending'
      and d.attempt_count = p_after and not w.enabled
    limit 1) d;
  if v_disabled is not null then
    update billing.webhook_deliveries d set status = 'failed', next_attempt_at = null,
      last_error = 'endpoint disabled', updated_at = now()
    where d.community_id = p_community_id and d.id = any (v_disabled);
  end if;
  return query
    select d.id::text, d.endpoint_id::text, d.url, d.event_id::text, d.body, d.ciphertexts
    from unnest(p_ids) as x(id)
    cross join lateral (
      select d.id, d.endpoint_id, w.url, d.event_id, billing.event_json(e)::text as body,
        array_remove(array[s.secret_ciphertext,
          case when s.previous_expires_at > now() then s.previous_ciphertext end], null) as ciphertexts
      from billing.webhook_deliveries d
      join billing.webhook_endpoints w on w.community_id = d.community_id and w.id = d.endpoint_id
      join billing.events e on e.community_id = d.community_id and e.id = d.event_id
      left join billing_private.webhook_secrets s on s.community_id = d.community_id and s.endpoint_id = d.endpoint_id
      where d.community_id = p_community_id and d.id = x.id and d.status = 'pending'
        and d.attempt_count = p_after and w.enabled
      limit 1) d;
end
$$;

-- Records the attempts of one job in one statement batch: the attempt log, each
-- delivery's state (only if no other attempt overtook it), the retry job, and each
-- endpoint's failure streak. An endpoint whose failures have lasted p_disable_after
-- with no success in between is disabled and a webhook_endpoint.disabled event is
-- written (delivered to the community's other endpoints).
--
-- p_results: [{id, ok, status_code, error, excerpt, started_at, finished_at, duration_ms}]
-- p_retry_at: when the failed ones are retried (null: they fail for good).
create or replace function billing_private.webhook_record_attempts(p_community_id text, p_after integer,
  p_manual boolean, p_results jsonb, p_retry_at timestamptz, p_disable_after interval)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
  set plan_cache_mode = force_custom_plan
as $$
declare
  v_retry_ids text[];
  v_endpoint_ids text[];
  v_disabled billing.webhook_endpoints;
  v_retry_at timestamptz := case when p_manual then null else p_retry_at end;
begin
  -- r.tid: each delivery's row, found by a primary-key probe (see webhook_deliveries_load);
  -- the update reaches it by ctid alone (a community_id condition there invites a scan
  -- of the community's deliveries).
  with r as (
    select r.*, t.tid from jsonb_to_recordset(p_results) as r (id text, ok boolean, status_code integer,
      error text, excerpt text, started_at timestamptz, finished_at timestamptz, duration_ms integer)
    cross join lateral (select d.ctid as tid from billing.webhook_deliveries d
                        where d.community_id = p_community_id and d.id = r.id limit 1) t
  ), upd as (
    update billing.webhook_deliveries d set
      attempt_count = d.attempt_count + 1,
      status = case when r.ok then 'succeeded' when v_retry_at is null then 'failed' else 'pending' end,
      next_attempt_at = case when r.ok then null else v_retry_at end,
      last_status_code = r.status_code, last_error = r.error, updated_at = now()
    from r
    where d.ctid = r.tid and d.id = r.id and d.attempt_count = p_after
    returning d.id, d.endpoint_id, d.attempt_count, d.status
  ), ins as (
    insert into billing.webhook_attempts (community_id, delivery_id, endpoint_id, attempt, status_code,
      duration_ms, error, response_excerpt, started_at, finished_at, next_attempt_at)
    select p_community_id, upd.id, upd.endpoint_id, upd.attempt_count, r.status_code, r.duration_ms, r.error,
      r.excerpt, r.started_at, r.finished_at, case when upd.status = 'pending' then v_retry_at end
    from upd join r on r.id = upd.id
  ), streak as (
    -- Success path: no write unless a streak was running (no hot-row contention).
    update billing.webhook_endpoints w set
      failing_since = case when s.any_ok then null else coalesce(w.failing_since, s.first_failure) end
    from (select upd.endpoint_id, bool_or(r.ok) as any_ok, min(r.started_at) as first_failure
          from upd join r on r.id = upd.id group by upd.endpoint_id) s
    where w.community_id = p_community_id and w.id = s.endpoint_id
      and (w.failing_since is not null or not s.any_ok)
    returning w.id
  )
  select array_agg(upd.id order by upd.id) filter (where upd.status = 'pending'),
    (select array_agg(streak.id) from streak)
  into v_retry_ids, v_endpoint_ids
  from upd;

  if v_retry_ids is not null then
    perform billing_private.add_job('webhook_deliveries__send', array[json_build_object(
      'community_id', p_community_id, 'ids', v_retry_ids, 'after', p_after + 1)], v_retry_at);
  end if;

  if v_endpoint_ids is null then
    return;
  end if;
  for v_disabled in
    update billing.webhook_endpoints w set enabled = false, disabled_reason = 'failing', updated_at = now()
    where w.community_id = p_community_id and w.id = any (v_endpoint_ids) and w.enabled
      and w.failing_since <= now() - p_disable_after
    returning w.*
  loop
    perform billing.emit_event(p_community_id, 'webhook_endpoint.disabled', jsonb_build_object(
      'endpoint', billing.webhook_endpoint_json(v_disabled), 'reason', 'failing',
      'failing_since', billing.iso(v_disabled.failing_since)));
  end loop;
end
$$;

-- Dead-worker reaper: live workers beat every few seconds; the jobs of workers silent
-- for longer than p_stale go back to the queue at once (graphile-worker alone would
-- wait 4 hours). Returns the reaped worker ids.
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
  end if;
  return coalesce(v_dead, '{}');
end
$$;
revoke all on function billing_private.webhook_deliveries_load(text, text[], integer) from public;
revoke all on function billing_private.webhook_record_attempts(text, integer, boolean, jsonb, timestamptz, interval) from public;
revoke all on function billing_private.worker_heartbeat(text[], interval) from public;
