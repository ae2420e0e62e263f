--! Previous: sha1:57f4b30c3a0bdf6ee266afcde573cbbf1db3745b
--! Hash: sha1:d81390bdd0ce849f5c0b0051fc3d81f9850b23fa
--! Message: webhook jobs per endpoint; per-member checkout lock

--! split: 1-current.sql
-- Resilience (issue 18): webhook delivery jobs one per endpoint and flagged with its
-- id, so a slow or hanging endpoint holds up only its own deliveries (fixtures are
-- idempotent; docs/development.md).
--! Included 05-worker.sql
-- graphile-worker: the one door through which SQL enqueues jobs, and the heartbeats
-- of the dead-worker reaper. Owner only: billing_api reaches add_job solely through
-- SECURITY DEFINER functions that pin their search_path.

-- Rows the dead-worker reaper reads: every live worker of startWorker() beats here.
create table if not exists billing_private.worker_heartbeats (
  worker_id text primary key,
  seen_at timestamptz not null default now()
);
alter table billing_private.worker_heartbeats enable row level security;
alter table billing_private.worker_heartbeats force row level security;
drop policy if exists owner_only on billing_private.worker_heartbeats;
create policy owner_only on billing_private.worker_heartbeats using (true);

-- Adds one job per payload (all for one task, one run_at), in the caller's
-- transaction. graphile_worker.add_jobs needs the owner's rights, hence SECURITY
-- DEFINER; every enqueue in this schema goes through here. p_flag_key: flag each job
-- with the value of that payload field (graphile-worker's job flags), so a worker can
-- leave jobs of that value aside for a while (forbiddenFlags: webhook deliveries to an
-- endpoint that already holds its share of the worker's slots).
drop function if exists billing_private.add_job(text, json[], timestamptz, integer);
create or replace function billing_private.add_job(p_identifier text, p_payloads json[],
  p_run_at timestamptz default null, p_max_attempts integer default null, p_flag_key text default null)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if coalesce(cardinality(p_payloads), 0) = 0 then
    return;
  end if;
  perform graphile_worker.add_jobs(array(
    select row(p_identifier, p.payload, null, p_run_at, p_max_attempts, null, null,
      case when p_flag_key is not null and p.payload->>p_flag_key is not null
        then array[p.payload->>p_flag_key] end)::graphile_worker.job_spec
    from unnest(p_payloads) as p(payload)));
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

-- Stops heartbeats of this process's workers (a clean shutdown).
create or replace function billing_private.worker_heartbeat_stop(p_worker_ids text[])
  returns void language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  delete from billing_private.worker_heartbeats where worker_id = any (p_worker_ids)
$$;

-- ---- the worker's role ------------------------------------------------------------------
-- billing_worker (a login created in 00-foundation.sql) runs graphile-worker and the
-- tasks. It owns nothing and holds no table of ours: it runs graphile-worker's own
-- queries (its schema is installed and migrated by the owner before our migrations)
-- and calls exactly the SECURITY DEFINER functions below and in 40-subscriptions,
-- 70-webhooks and 90-retention.
grant usage on schema billing_private to billing_worker;
do $$
begin
  if exists (select 1 from pg_namespace where nspname = 'graphile_worker') then
    grant usage on schema graphile_worker to billing_worker;
    grant select, insert, update, delete on all tables in schema graphile_worker to billing_worker;
    grant usage, select, update on all sequences in schema graphile_worker to billing_worker;
    grant execute on all functions in schema graphile_worker to billing_worker;
    -- graphile-worker leaves its functions executable by PUBLIC (behind a schema only its
    -- owner could use): opt-in here too, as everywhere (00-foundation.sql).
    revoke execute on all functions in schema graphile_worker from public;
    -- Tables of graphile-worker upgrades (migrated by the owner at start) too.
    alter default privileges in schema graphile_worker grant select, insert, update, delete on tables to billing_worker;
    alter default privileges in schema graphile_worker grant usage, select, update on sequences to billing_worker;
    alter default privileges in schema graphile_worker grant execute on functions to billing_worker;
    -- graphile-worker enables RLS on its private tables without policies (only their
    -- owner reads them): a policy for billing_worker on each (graphile-worker 0.18's).
    drop policy if exists billing_worker on graphile_worker._private_jobs;
    create policy billing_worker on graphile_worker._private_jobs to billing_worker using (true) with check (true);
    drop policy if exists billing_worker on graphile_worker._private_job_queues;
    create policy billing_worker on graphile_worker._private_job_queues to billing_worker using (true) with check (true);
    drop policy if exists billing_worker on graphile_worker._private_tasks;
    create policy billing_worker on graphile_worker._private_tasks to billing_worker using (true) with check (true);
    drop policy if exists billing_worker on graphile_worker._private_known_crontabs;
    create policy billing_worker on graphile_worker._private_known_crontabs to billing_worker using (true) with check (true);
  end if;
end
$$;
grant execute on function billing_private.worker_heartbeat(text[], interval) to billing_worker;
grant execute on function billing_private.worker_heartbeat_stop(text[]) to billing_worker;
--! EndIncluded 05-worker.sql
--! Included 60-events.sql
-- Events: the outbox table, the catalog of event types, the envelope JSON and the
-- events feed.
--
-- Every lifecycle event is written by the trigger of its source table, in the
-- statement's transaction: subscriptions and purchases (_500_outbox_and_ledger),
-- checkout sessions and members (_500_outbox), member identities and external
-- subjects (_500_outbox_and_ledger); entitlement events come from the ledger
-- (billing.ledger_refresh_member, 50-ledger.sql) and webhook_endpoint.disabled from
-- the delivery worker (70-webhooks.sql). Other code only changes rows; it never
-- writes billing.events itself.
--
-- Lifecycle event types (data holds the object under its resource name, plus
-- previous_attributes: the visible fields that changed and their old values):
--   subscription.created, subscription.updated, subscription.cancelled
--   purchase.created, purchase.updated, purchase.refunded
--   checkout.created, checkout.completed, checkout.expired
--   member.created, member.updated (identities or external subjects changed)
-- Entitlement events (the ones that decide access) come from the ledger:
--   member.entitlement.granted, member.entitlement.updated, member.entitlement.revoked
-- billing_private.event_types lists them all; test/db/event-types.test.ts keeps it
-- equal to EVENT_TYPES of src/domain/events/event-types.ts.

-- ---- the outbox ----------------------------------------------------------------------

-- The outbox: every event envelope, written in the transaction of its change.
create table if not exists billing.events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('evt'),
  type text not null,
  created_at timestamptz not null default now(),
  api_version text not null default billing.api_version(),
  data jsonb not null,
  primary key (community_id, id)
);
create index if not exists events_type on billing.events (community_id, type, id);
alter table billing.events enable row level security;
alter table billing.events force row level security;
drop policy if exists tenant on billing.events;
create policy tenant on billing.events
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.events;
create policy owner_access on billing.events to current_user using (true) with check (true);
grant select on billing.events to billing_api;
revoke insert, update, delete on billing.events from billing_api;
grant select, insert on billing.events to billing_writer;

-- Statement-level, over the transition table: one insert for all the statement's
-- deliveries (one per enabled endpoint of 70-webhooks.sql whose event_types match;
-- empty = all) and one add_jobs call for all its jobs, whatever the number of rows.
-- One job per 50 deliveries of one endpoint, flagged with the endpoint's id: a slow
-- or hanging endpoint then holds up only its own jobs (a job records its deliveries
-- when the last one ends) and the worker can leave its jobs aside (forbiddenFlags,
-- worker/tasks/webhook_deliveries__send.ts) while it holds its share of the slots.
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
    returning community_id, endpoint_id, id
  ), chunks as (
    select community_id, endpoint_id, id,
      (row_number() over (partition by community_id, endpoint_id order by id) - 1) / 50 as chunk
    from d
  )
  select array_agg(json_build_object('community_id', community_id, 'endpoint_id', endpoint_id, 'ids', ids, 'after', 0))
  into v_payloads
  from (select community_id, endpoint_id, array_agg(id order by id) as ids from chunks
        group by community_id, endpoint_id, chunk) c;
  perform billing_private.add_job('webhook_deliveries__send', v_payloads, p_flag_key => 'endpoint_id');
  return null;
end
$$;

drop trigger if exists _900_enqueue_deliveries on billing.events;
create trigger _900_enqueue_deliveries after insert on billing.events
  referencing new table as new_events
  for each statement execute function billing_private.tg_events__enqueue_deliveries();

-- The outbox: writes one event row and returns its id.
create or replace function billing.emit_event(p_community_id text, p_type text, p_data jsonb)
  returns text language plpgsql volatile
as $$
declare
  v_id text;
begin
  insert into billing.events (community_id, type, data) values (p_community_id, p_type, p_data)
  returning id into v_id;
  return v_id;
end
$$;

-- The envelope, exactly as the feed returns it and webhooks deliver it.
create or replace function billing.event_json(p_event billing.events) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object('id', p_event.id, 'type', p_event.type,
    'timestamp', billing.iso(p_event.created_at), 'api_version', p_event.api_version,
    'data', p_event.data)
$$;

-- Old values of the keys whose values differ between two objects.
create or replace function billing.jsonb_changed(p_old jsonb, p_new jsonb) returns jsonb
  language plpgsql immutable parallel safe
as $$
declare
  v_key text;
  v_out jsonb := '{}';
begin
  for v_key in select jsonb_object_keys(p_old) loop
    if (p_old->v_key) is distinct from (p_new->v_key) then
      v_out := v_out || jsonb_build_object(v_key, p_old->v_key);
    end if;
  end loop;
  return v_out;
end
$$;

-- ---- the event type catalog --------------------------------------------------------------

-- Every event type the service emits: what webhook endpoints may subscribe to.
-- Owner only; billing_api reaches it through the endpoint trigger of 70-webhooks.sql.
create table if not exists billing_private.event_types (
  type text collate "C" primary key,
  description text not null
);
alter table billing_private.event_types enable row level security;
alter table billing_private.event_types force row level security;
drop policy if exists owner_only on billing_private.event_types;
create policy owner_only on billing_private.event_types using (true);

insert into billing_private.event_types (type, description) values
  ('member.entitlement.granted', 'An entitlement became active for a member.'),
  ('member.entitlement.updated', 'Sources, benefits or linked identities of an active entitlement changed.'),
  ('member.entitlement.revoked', 'An entitlement became inactive for a member.'),
  ('subscription.created', 'A subscription was created.'),
  ('subscription.updated', 'A subscription changed.'),
  ('subscription.cancelled', 'A subscription ended.'),
  ('purchase.created', 'A one-time purchase was recorded.'),
  ('purchase.updated', 'A purchase changed.'),
  ('purchase.refunded', 'A purchase was refunded.'),
  ('checkout.created', 'A checkout session was created.'),
  ('checkout.completed', 'A checkout session was paid.'),
  ('checkout.expired', 'A checkout session expired unpaid.'),
  ('member.created', 'A member was created.'),
  ('member.updated', 'A member''s platform identities or external subjects changed.'),
  ('invoice.created', 'An invoice was written.'),
  ('invoice.paid', 'An invoice was paid in full.'),
  ('invoice.payment_failed', 'An attempt to collect an invoice failed.'),
  ('invoice.refunded', 'An invoice was refunded, in full or in part.'),
  ('invoice.disputed', 'A payment of an invoice was disputed; the access it paid for ended.'),
  ('webhook_endpoint.disabled', 'A webhook endpoint was disabled because its deliveries kept failing.')
on conflict (type) do update set description = excluded.description;

-- ---- the events feed ----------------------------------------------------------------

-- GET /v1/events: newest first, keyset by id. type: array of event types (any of);
-- after_id: only events newer than that id (id > after_id); cursor: the id to
-- continue after (id < cursor).
create or replace function billing_api.events_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_types text[];
  -- Bounds instead of "is null or": the (generic, cached) plan keeps both as index
  -- range conditions. Ids are [a-z0-9_] in the "C" collation: '' and '~' bound them.
  v_after text := coalesce(p_args->>'after_id', '');
  v_cursor text := coalesce(p_args->>'cursor', '~');
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_rows billing.events[];
begin
  perform billing.require_scope('events:read');
  if jsonb_typeof(p_args->'type') = 'array' then
    v_types := array(select distinct jsonb_array_elements_text(p_args->'type'));
  elsif jsonb_typeof(p_args->'type') = 'string' then
    v_types := array(select distinct btrim(t) from unnest(string_to_array(p_args->>'type', ',')) t where btrim(t) <> '');
  end if;
  if v_types is not null and cardinality(v_types) = 0 then
    v_types := null;
  end if;
  if v_types is null then
    v_rows := array(
      select e from billing.events e
      where e.community_id = v_community
        and e.id > v_after and e.id < v_cursor
      order by e.id desc
      limit v_limit + 1);
  else
    -- One keyset scan of events_type (community_id, type, id) per type, each limited,
    -- then merged: the page costs the same however rare or common the types are.
    v_rows := array(
      select e from unnest(v_types) t(type)
      cross join lateral (
        select x from billing.events x
        where x.community_id = v_community and x.type = t.type
          and x.id > v_after and x.id < v_cursor
        order by x.id desc
        limit v_limit + 1) l(e)
      order by (e).id desc
      limit v_limit + 1);
  end if;
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(billing.event_json(r) order by r.id desc)
                      from unnest(v_rows[1:v_limit]) r), '[]'),
    'next_cursor', case when cardinality(v_rows) > v_limit
                        then billing.encode_cursor((v_rows[v_limit]).id) end);
end
$$;

create or replace function billing_api.events_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_event billing.events;
begin
  perform billing.require_scope('events:read');
  select * into v_event from billing.events e
  where e.community_id = billing.current_community_id() and e.id = p_args->>'id';
  if v_event.id is null then
    perform billing.raise('BL404', 'No event ' || (p_args->>'id') || '.');
  end if;
  return billing.event_json(v_event);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.emit_event(text,text,jsonb) to billing_api;
grant execute on function billing.event_json(billing.events) to billing_api;
grant execute on function billing.jsonb_changed(jsonb,jsonb) to billing_api;
grant execute on function billing_api.events_list(jsonb) to billing_api;
grant execute on function billing_api.events_get(jsonb) to billing_api;
--! EndIncluded 60-events.sql
--! Included 70-webhooks.sql
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

-- ---- endpoints ---------------------------------------------------------------------------

create table if not exists billing.webhook_endpoints (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('we'),
  url text not null,
  description text,
  event_types text[] not null default '{}',
  enabled boolean not null default true,
  disabled_reason text,
  failing_since timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  constraint webhook_endpoints_url_length check (length(url) between 1 and 2048),
  constraint webhook_endpoints_description_length check (length(description) <= 500),
  constraint webhook_endpoints_disabled_reason check (disabled_reason in ('manual', 'failing'))
);
alter table billing.webhook_endpoints enable row level security;
alter table billing.webhook_endpoints force row level security;
drop policy if exists tenant on billing.webhook_endpoints;
create policy tenant on billing.webhook_endpoints
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.webhook_endpoints;
create policy owner_access on billing.webhook_endpoints to current_user using (true) with check (true);
grant select on billing.webhook_endpoints to billing_api;
revoke insert, update, delete on billing.webhook_endpoints from billing_api;
grant select, insert, update, delete on billing.webhook_endpoints to billing_writer;

-- Event types an endpoint subscribes to must be in the catalog
-- (billing_private.event_types, 60-events.sql), whatever door the write comes
-- through; 422 naming the offending element (event_types.N, as the API's own check).
create or replace function billing_private.tg_webhook_endpoints__check_event_types() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_i integer;
begin
  for v_i in 1 .. coalesce(cardinality(new.event_types), 0) loop
    if not exists (select 1 from billing_private.event_types t where t.type = new.event_types[v_i]) then
      raise exception using errcode = 'BL422',
        message = 'Unknown event type "' || coalesce(new.event_types[v_i], 'null')
          || '"; GET /v1/webhooks/event-types lists them.',
        detail = 'event_types.' || (v_i - 1);
    end if;
  end loop;
  return new;
end
$$;

drop trigger if exists _100_check_event_types on billing.webhook_endpoints;
create trigger _100_check_event_types before insert or update of event_types on billing.webhook_endpoints
  for each row execute function billing_private.tg_webhook_endpoints__check_event_types();

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

drop trigger if exists _200_endpoint_limit on billing.webhook_endpoints;
create trigger _200_endpoint_limit before insert on billing.webhook_endpoints
  for each row execute function billing_private.tg_webhook_endpoints__limit();

-- Encrypted signing secrets: owner only; the worker and API reach them through
-- SECURITY DEFINER functions.
create table if not exists billing_private.webhook_secrets (
  community_id text collate "C" not null,
  endpoint_id text collate "C" not null,
  secret_ciphertext text not null,
  previous_ciphertext text,
  previous_expires_at timestamptz,
  primary key (community_id, endpoint_id),
  foreign key (community_id, endpoint_id) references billing.webhook_endpoints on delete cascade
);
alter table billing_private.webhook_secrets enable row level security;
alter table billing_private.webhook_secrets force row level security;
drop policy if exists owner_only on billing_private.webhook_secrets;
create policy owner_only on billing_private.webhook_secrets using (true);

-- ---- deliveries and their attempts -------------------------------------------------------

-- Deliveries are updated once per attempt (usually once): half of each page is left
-- free so those updates are HOT (no new index entries in its three indexes).
create table if not exists billing.webhook_deliveries (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('wd'),
  endpoint_id text collate "C" not null,
  event_id text collate "C" not null,
  event_type text not null,
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempt_count integer not null default 0,
  next_attempt_at timestamptz,
  last_status_code integer,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, endpoint_id, event_id),
  foreign key (community_id, endpoint_id) references billing.webhook_endpoints on delete cascade,
  foreign key (community_id, event_id) references billing.events on delete cascade
) with (fillfactor = 50);
create index if not exists webhook_deliveries_endpoint on billing.webhook_deliveries (community_id, endpoint_id, id);
alter table billing.webhook_deliveries enable row level security;
alter table billing.webhook_deliveries force row level security;
drop policy if exists tenant on billing.webhook_deliveries;
create policy tenant on billing.webhook_deliveries
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.webhook_deliveries;
create policy owner_access on billing.webhook_deliveries to current_user using (true) with check (true);
grant select on billing.webhook_deliveries to billing_api;
revoke insert, update, delete on billing.webhook_deliveries from billing_api;
grant select, update on billing.webhook_deliveries to billing_writer;

create table if not exists billing.webhook_attempts (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('wa'),
  delivery_id text collate "C" not null,
  endpoint_id text collate "C" not null,
  attempt integer not null,
  status_code integer,
  duration_ms integer,
  error text,
  response_excerpt text,
  started_at timestamptz not null,
  finished_at timestamptz,
  -- The retry scheduled after an attempt (null when none), for the delivery log.
  next_attempt_at timestamptz,
  primary key (community_id, id),
  foreign key (community_id, delivery_id) references billing.webhook_deliveries on delete cascade
);
-- The log is read per delivery (and cascades from deliveries): index it that way.
create index if not exists webhook_attempts_delivery on billing.webhook_attempts (community_id, delivery_id, attempt);
alter table billing.webhook_attempts enable row level security;
alter table billing.webhook_attempts force row level security;
drop policy if exists tenant on billing.webhook_attempts;
create policy tenant on billing.webhook_attempts
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.webhook_attempts;
create policy owner_access on billing.webhook_attempts to current_user using (true) with check (true);
grant select on billing.webhook_attempts to billing_api;
revoke insert, update, delete on billing.webhook_attempts from billing_api;

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
  security definer
  set search_path = pg_catalog, pg_temp
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
  security definer
  set search_path = pg_catalog, pg_temp
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
  security definer
  set search_path = pg_catalog, pg_temp
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
  security definer
  set search_path = pg_catalog, pg_temp
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
  security definer
  set search_path = pg_catalog, pg_temp
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
    'community_id', v_delivery.community_id, 'endpoint_id', v_delivery.endpoint_id, 'ids', array[v_delivery.id],
    'after', v_delivery.attempt_count, 'manual', p_manual)], p_flag_key => 'endpoint_id');
end
$$;

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
  v_retries json[];
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
  select (select array_agg(json_build_object('community_id', p_community_id, 'endpoint_id', p.endpoint_id,
            'ids', p.ids, 'after', p_after + 1))
          from (select u.endpoint_id, array_agg(u.id order by u.id) as ids from upd u
                where u.status = 'pending' group by u.endpoint_id) p),
    (select array_agg(streak.id) from streak)
  into v_retries, v_endpoint_ids;

  -- One retry job per endpoint, flagged like the first (60-events.sql).
  perform billing_private.add_job('webhook_deliveries__send', v_retries, v_retry_at, p_flag_key => 'endpoint_id');

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

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.webhook_delivery_json(billing.webhook_deliveries) to billing_api;
grant execute on function billing.webhook_endpoint_json(billing.webhook_endpoints) to billing_api;
grant execute on function billing_private.webhook_delivery_enqueue(text,boolean) to billing_api;
grant execute on function billing_private.webhook_secret_store(text,text,boolean,interval) to billing_api;
grant execute on function billing_private.webhook_test_target(text) to billing_api;
grant execute on function billing_api.webhook_endpoints_list(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_get(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_create(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_update(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_delete(jsonb) to billing_api;
grant execute on function billing_api.webhook_endpoints_rotate_secret(jsonb) to billing_api;
grant execute on function billing_api.webhook_deliveries_list(jsonb) to billing_api;
grant execute on function billing_api.webhook_deliveries_redeliver(jsonb) to billing_api;

-- What billing_worker calls (worker/tasks/webhook_deliveries__send.ts).
grant execute on function billing_private.webhook_deliveries_load(text,text[],integer) to billing_worker;
grant execute on function billing_private.webhook_record_attempts(text,integer,boolean,jsonb,timestamptz,interval) to billing_worker;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing_api to billing_writer;
alter function billing_api.webhook_endpoints_create(jsonb) owner to billing_writer;
alter function billing_api.webhook_endpoints_update(jsonb) owner to billing_writer;
alter function billing_api.webhook_endpoints_delete(jsonb) owner to billing_writer;
alter function billing_api.webhook_endpoints_rotate_secret(jsonb) owner to billing_writer;
alter function billing_api.webhook_deliveries_redeliver(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded 70-webhooks.sql
-- Completing a checkout takes a per-member lock before its eligibility check, so
-- racing checkouts of one buyer make one subscription (issue 18, item 4).
--! Included 80-checkout.sql
-- Checkout: creating checkout links (every rule of the spec's request table and
-- eligibility list), discount codes at checkout, completing a paid checkout (the
-- sandbox page, `billing sandbox complete` and the Stripe webhook all end here),
-- portal sessions and link codes.
--
-- Lifetimes: a checkout is open 24 hours; a portal session and a link code 10 minutes.
-- Discount codes are catalog rows (20-catalog.sql); their redemptions, JSON object
-- (with redemption counts) and list operation are here. Inbound provider events
-- (applied exactly once) are recorded here too.

-- ---- tables ----------------------------------------------------------------------------

create table if not exists billing.checkout_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('cs'),
  member_id text collate "C" not null,
  tier_id text collate "C" not null,
  plan_id text collate "C" not null,
  discount_id uuid,
  amount_cents integer not null,
  discount_cents integer not null default 0,
  currency text not null,
  client_reference_id text,
  return_url text,
  subject_kind text not null check (subject_kind in ('member', 'external', 'platform')),
  status text not null default 'open' check (status in ('open', 'completed', 'expired')),
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  url text,
  expires_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz not null default now(),
  access_token text,
  subscription_id text collate "C",
  purchase_id text collate "C",
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, plan_id) references billing.plans on delete restrict,
  foreign key (community_id, discount_id) references billing.discount_codes on delete restrict
);
-- The pay token is kept as its sha256 only (the url is built from the clear token once,
-- at creation; the page looks the session up by id and hash). access_token held it in
-- clear before; it is emptied here and no longer written.
alter table billing.checkout_sessions add column if not exists access_token_sha256 bytea;
update billing.checkout_sessions set access_token_sha256 = sha256(convert_to(access_token, 'UTF8')), access_token = null
where access_token is not null;
create index if not exists checkout_sessions_member on billing.checkout_sessions (community_id, member_id);
create index if not exists checkout_sessions_open on billing.checkout_sessions (community_id, expires_at) where status = 'open';
create index if not exists checkout_sessions_provider_ref on billing.checkout_sessions (community_id, provider_ref)
  where provider_ref is not null;
alter table billing.checkout_sessions enable row level security;
alter table billing.checkout_sessions force row level security;
drop policy if exists tenant on billing.checkout_sessions;
create policy tenant on billing.checkout_sessions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.checkout_sessions;
create policy owner_access on billing.checkout_sessions to current_user using (true) with check (true);
grant select on billing.checkout_sessions to billing_api;
revoke insert, update, delete on billing.checkout_sessions from billing_api;
grant select, insert, update on billing.checkout_sessions to billing_writer;

create table if not exists billing.discount_redemptions (
  community_id text collate "C" not null,
  discount_id uuid not null,
  checkout_id text collate "C" not null,
  member_id text collate "C" not null,
  status text not null check (status in ('pending', 'redeemed', 'released')),
  created_at timestamptz not null default now(),
  primary key (community_id, discount_id, checkout_id),
  foreign key (community_id, discount_id) references billing.discount_codes on delete cascade,
  foreign key (community_id, checkout_id) references billing.checkout_sessions on delete cascade
);
create index if not exists discount_redemptions_checkout on billing.discount_redemptions (community_id, checkout_id);
alter table billing.discount_redemptions enable row level security;
alter table billing.discount_redemptions force row level security;
drop policy if exists tenant on billing.discount_redemptions;
create policy tenant on billing.discount_redemptions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.discount_redemptions;
create policy owner_access on billing.discount_redemptions to current_user using (true) with check (true);
grant select on billing.discount_redemptions to billing_api;
revoke insert, update, delete on billing.discount_redemptions from billing_api;
grant select, insert, update on billing.discount_redemptions to billing_writer;

create table if not exists billing.portal_sessions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('ps'),
  member_id text collate "C" not null,
  return_url text,
  url text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  access_token text,
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
-- As checkout_sessions: the portal token is kept as its sha256 only.
alter table billing.portal_sessions add column if not exists access_token_sha256 bytea;
update billing.portal_sessions set access_token_sha256 = sha256(convert_to(access_token, 'UTF8')), access_token = null
where access_token is not null;
alter table billing.portal_sessions enable row level security;
alter table billing.portal_sessions force row level security;
drop policy if exists tenant on billing.portal_sessions;
create policy tenant on billing.portal_sessions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.portal_sessions;
create policy owner_access on billing.portal_sessions to current_user using (true) with check (true);
grant select on billing.portal_sessions to billing_api;
revoke insert, update, delete on billing.portal_sessions from billing_api;
grant select, insert, update on billing.portal_sessions to billing_writer;

create table if not exists billing.link_codes (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('lc'),
  member_id text collate "C" not null,
  code text not null,
  intended_platform text not null check (intended_platform in ('discord', 'telegram')),
  expires_at timestamptz not null,
  redeemed_at timestamptz,
  invalidated_at timestamptz,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, code),
  foreign key (community_id, member_id) references billing.members on delete cascade
);

create index if not exists link_codes_member on billing.link_codes (community_id, member_id, intended_platform);
alter table billing.link_codes enable row level security;
alter table billing.link_codes force row level security;
drop policy if exists tenant on billing.link_codes;
create policy tenant on billing.link_codes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.link_codes;
create policy owner_access on billing.link_codes to current_user using (true) with check (true);
grant select on billing.link_codes to billing_api;
revoke insert, update, delete on billing.link_codes from billing_api;
grant select, insert, update on billing.link_codes to billing_writer;

-- Inbound provider events applied exactly once.
create table if not exists billing.provider_events (
  community_id text collate "C" not null references billing.communities on delete cascade,
  provider text not null,
  event_id text not null,
  type text not null,
  received_at timestamptz not null default now(),
  primary key (community_id, provider, event_id)
);
alter table billing.provider_events enable row level security;
alter table billing.provider_events force row level security;
drop policy if exists tenant on billing.provider_events;
create policy tenant on billing.provider_events
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.provider_events;
create policy owner_access on billing.provider_events to current_user using (true) with check (true);
grant select on billing.provider_events to billing_api;
revoke insert, update, delete on billing.provider_events from billing_api;

-- One provider customer per member and community (Stripe: the cus_... that every later
-- Checkout Session of the member is given as `customer`). Recorded by complete_checkout
-- from the provider's completion; the first one recorded stays (a duplicate or late
-- event changes nothing). The API role only reads it (checkout, portal).
create table if not exists billing.member_provider_customers (
  community_id text collate "C" not null references billing.communities on delete cascade,
  member_id text collate "C" not null,
  provider text not null check (provider in ('stripe')),
  customer_ref text not null check (length(customer_ref) between 1 and 255),
  created_at timestamptz not null default now(),
  primary key (community_id, member_id, provider),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
alter table billing.member_provider_customers enable row level security;
alter table billing.member_provider_customers force row level security;
drop policy if exists tenant on billing.member_provider_customers;
create policy tenant on billing.member_provider_customers
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.member_provider_customers;
create policy owner_access on billing.member_provider_customers to current_user using (true) with check (true);
grant select on billing.member_provider_customers to billing_api;

-- ---- helpers ---------------------------------------------------------------------------

create or replace function billing.checkout_lifetime() returns interval
  language sql immutable parallel safe as $$ select interval '24 hours' $$;

create or replace function billing.random_token() returns text
  language sql volatile parallel safe
as $$ select replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '') $$;

-- ---- buyer -------------------------------------------------------------------------

-- Finds or creates the member named by a checkout subject. Serialised per subject with
-- an advisory lock so two parallel checkouts for a new buyer make one member.
create or replace function billing.checkout_member(p_subject jsonb) returns text
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_member text;
  v_ns text;
  v_uid text;
  v_platform text;
begin
  if p_subject ? 'member_id' then
    select m.id into v_member from billing.members m where m.id = p_subject->>'member_id';
    if v_member is null then
      perform billing.raise('BL404', 'No member ' || (p_subject->>'member_id') || '.');
    end if;
    return v_member;
  elsif p_subject ? 'external' then
    v_ns := p_subject->'external'->>'namespace';
    v_uid := p_subject->'external'->>'external_user_id';
    perform pg_advisory_xact_lock(hashtextextended(v_cid || ' ext ' || v_ns || ' ' || v_uid, 5));
    select x.member_id into v_member from billing.external_subjects x
    where x.namespace = v_ns and x.external_user_id = v_uid;
    if v_member is null then
      insert into billing.members (community_id) values (v_cid) returning id into v_member;
      insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
      values (v_cid, v_member, v_ns, v_uid);
    end if;
    return v_member;
  else
    v_platform := p_subject->>'platform';
    v_uid := p_subject->>'platform_uid';
    perform pg_advisory_xact_lock(hashtextextended(v_cid || ' pid ' || v_platform || ' ' || v_uid, 5));
    select i.member_id into v_member from billing.member_identities i
    where i.platform = v_platform and i.platform_uid = v_uid;
    if v_member is null then
      insert into billing.members (community_id) values (v_cid) returning id into v_member;
      insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
      values (v_cid, v_member, v_platform, v_uid, p_subject->>'username');
    end if;
    return v_member;
  end if;
end
$$;

-- not_eligible: the member already holds this tier (a non-cancelled subscription on
-- one of its plans, or an unexpired purchase of it), or is buying a recurring plan
-- while holding a non-cancelled subscription on another tier (that needs a switch,
-- not a second subscription).
create or replace function billing.check_eligible(p_member_id text, p_tier billing.tiers, p_plan billing.plans) returns void
  language plpgsql stable
as $$
declare
  v_other text;
begin
  if exists (select 1 from billing.purchases pu join billing.plans p on p.community_id = pu.community_id and p.id = pu.plan_id
             where pu.member_id = p_member_id and p.tier_id = p_tier.id and pu.status = 'completed'
               and (pu.access_expires_at is null or pu.access_expires_at > billing.now())) then
    raise exception using errcode = 'BLNEL', message = 'The buyer already purchased this tier and its access has not expired.';
  end if;
  select p.tier_id into v_other
  from billing.subscriptions s join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  where s.member_id = p_member_id and s.status <> 'cancelled'
  order by (p.tier_id = p_tier.id) desc
  limit 1;
  if v_other = p_tier.id then
    raise exception using errcode = 'BLNEL', message = 'The buyer is already subscribed to this tier.';
  elsif v_other is not null and p_plan.interval is not null then
    raise exception using errcode = 'BLNEL',
      message = 'The buyer is subscribed to another tier (' || v_other || '); switch the subscription instead.';
  end if;
end
$$;

-- ---- discounts ---------------------------------------------------------------------

-- Validates a code for this checkout and returns the discount and its amount. The
-- caller holds the discount's advisory lock, so the use limit holds under concurrency.
create or replace function billing.checkout_discount(p_code text, p_member_id text, p_tier_id text, p_plan billing.plans,
  out discount_id uuid, out discount_cents integer)
  language plpgsql volatile
as $$
declare
  v_d billing.discount_codes;
  v_now timestamptz := billing.now();
  v_used bigint;
begin
  -- The community named explicitly: the owner's callers (the sandbox page's discount
  -- field, billing.checkout_apply_discount) see every community's codes.
  select * into v_d from billing.discount_codes d
  where d.community_id = billing.current_community_id() and lower(d.code) = lower(p_code);
  if v_d.id is null then
    raise exception using errcode = 'BLDSC', message = 'Unknown discount code.', detail = 'discount_code';
  end if;
  perform pg_advisory_xact_lock(hashtextextended(v_d.community_id || ' discount ' || v_d.id::text, 6));
  if not v_d.is_active or v_d.archived_at is not null then
    raise exception using errcode = 'BLDSC', message = 'This discount code is not active.';
  elsif v_d.starts_at is not null and v_d.starts_at > v_now then
    raise exception using errcode = 'BLDSC', message = 'This discount code has not started yet.';
  elsif v_d.expires_at is not null and v_d.expires_at <= v_now then
    raise exception using errcode = 'BLDSC', message = 'This discount code has expired.';
  elsif cardinality(v_d.tier_ids) > 0 and not (p_tier_id = any (v_d.tier_ids)) then
    raise exception using errcode = 'BLDSC', message = 'This discount code does not apply to this tier.';
  elsif jsonb_array_length(v_d.members) > 0 and not exists (
      select 1 from billing.member_identities i, jsonb_array_elements(v_d.members) m
      where i.member_id = p_member_id and i.platform = m->>'platform' and i.platform_uid = m->>'platform_uid') then
    raise exception using errcode = 'BLDSC', message = 'This discount code is not available to this buyer.';
  elsif v_d.min_spend_cents is not null and p_plan.amount_cents < v_d.min_spend_cents then
    raise exception using errcode = 'BLDSC', message = 'The price is below this discount code''s minimum spend.';
  elsif v_d.max_spend_cents is not null and p_plan.amount_cents > v_d.max_spend_cents then
    raise exception using errcode = 'BLDSC', message = 'The price is above this discount code''s maximum spend.';
  elsif v_d.value_type = 'amount' and v_d.currency is not null and lower(v_d.currency) <> p_plan.currency then
    raise exception using errcode = 'BLDSC', message = 'This discount code is in another currency.';
  end if;
  if v_d.use_limit is not null then
    select count(*) into v_used
    from billing.discount_redemptions r
    join billing.checkout_sessions cs on cs.community_id = r.community_id and cs.id = r.checkout_id
    where r.discount_id = v_d.id
      and (r.status = 'redeemed' or (r.status = 'pending' and cs.status = 'open' and cs.expires_at > v_now));
    if v_used >= v_d.use_limit then
      raise exception using errcode = 'BLDSC', message = 'This discount code has reached its use limit.';
    end if;
  end if;
  discount_id := v_d.id;
  discount_cents := least(p_plan.amount_cents,
    case v_d.value_type when 'percent' then round(p_plan.amount_cents * v_d.percent_off / 100)::integer
                        else coalesce(v_d.amount_off_cents, 0) end);
end
$$;

create or replace function billing.discount_json(p_d billing.discount_codes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_d.id, 'code', p_d.code, 'name', p_d.name, 'value_type', p_d.value_type,
    'percent_off', p_d.percent_off, 'amount_off_cents', p_d.amount_off_cents, 'currency', p_d.currency,
    'duration', p_d.duration, 'duration_months', p_d.duration_months, 'use_limit', p_d.use_limit,
    'min_spend_cents', p_d.min_spend_cents, 'max_spend_cents', p_d.max_spend_cents,
    'starts_at', billing.iso(p_d.starts_at), 'expires_at', billing.iso(p_d.expires_at),
    'is_active', p_d.is_active, 'tier_ids', to_jsonb(p_d.tier_ids),
    'members', coalesce((
      select jsonb_agg(jsonb_build_object('platform', m->>'platform', 'platform_uid', m->>'platform_uid',
        'username', m->>'username'))
      from jsonb_array_elements(p_d.members) m), '[]'),
    'redeemed_count', (select count(*) from billing.discount_redemptions r
      where r.community_id = p_d.community_id and r.discount_id = p_d.id and r.status = 'redeemed'),
    'pending_count', (select count(*) from billing.discount_redemptions r
      where r.community_id = p_d.community_id and r.discount_id = p_d.id and r.status = 'pending'),
    'created_at', billing.iso(p_d.created_at))
$$;

create or replace function billing_api.discounts_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('discounts:read');
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.discount_json(d) order by d.created_at desc, d.id)
    from billing.discount_codes d
    where d.community_id = billing.current_community_id() and d.archived_at is null), '[]'));
end
$$;

-- ---- create_checkout_link ----------------------------------------------------------

-- Input: tier_id, plan_id?, subject, client_reference_id?, return_url?, discount_code?,
-- and from the handler provider_ready (false for a stripe community without keys).
-- Records an open checkout; the handler then asks the provider for its url.
create or replace function billing_api.checkout_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_tier billing.tiers;
  v_plan billing.plans;
  v_provider text;
  v_subject jsonb := p_args->'subject';
  v_kind text;
  v_member text;
  v_disc record;
  v_cs billing.checkout_sessions;
  v_token text := billing.random_token();
  v_plans integer;
begin
  perform billing.require_scope('checkout:write');
  select * into v_tier from billing.tiers t where t.id = p_args->>'tier_id' and t.active;
  if v_tier.id is null then
    perform billing.raise('BL404', 'No active tier ' || (p_args->>'tier_id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  if v_provider is null or not coalesce((p_args->>'provider_ready')::boolean, true) then
    raise exception using errcode = 'BLPCI', message = 'This community has no active payment provider.';
  end if;
  select count(*) into v_plans from billing.plans p where p.tier_id = v_tier.id and p.active;
  if p_args->>'plan_id' is not null then
    select * into v_plan from billing.plans p where p.id = p_args->>'plan_id' and p.tier_id = v_tier.id and p.active;
    if v_plan.id is null then
      perform billing.raise('BL422', 'plan_id is not an active plan of tier ' || v_tier.id || '.', 'plan_id');
    end if;
  elsif v_plans > 1 then
    raise exception using errcode = 'BLPRQ', message = 'This tier has several active plans: send plan_id.', detail = 'plan_id';
  elsif v_plans = 0 then
    perform billing.raise('BL404', 'Tier ' || v_tier.id || ' has no active plan.');
  else
    select * into v_plan from billing.plans p where p.tier_id = v_tier.id and p.active;
  end if;

  v_kind := case when v_subject ? 'member_id' then 'member' when v_subject ? 'external' then 'external' else 'platform' end;
  if v_kind = 'platform' and not exists (select 1 from billing.platform_configs pc where pc.platform = v_subject->>'platform') then
    raise exception using errcode = 'BLPNC', message = 'No ' || (v_subject->>'platform') || ' platform is connected to this community.',
      detail = 'subject.platform';
  end if;
  if p_args->>'return_url' is not null and v_kind <> 'external' then
    perform billing.raise('BL422', 'return_url is only allowed for operator (external) subjects.', 'return_url');
  end if;

  v_member := billing.checkout_member(v_subject);
  perform billing.check_eligible(v_member, v_tier, v_plan);

  insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency,
    client_reference_id, return_url, subject_kind, provider, expires_at, access_token_sha256)
  values (v_cid, v_member, v_tier.id, v_plan.id, v_plan.amount_cents, v_plan.currency,
    p_args->>'client_reference_id', p_args->>'return_url', v_kind, v_provider,
    billing.now() + billing.checkout_lifetime(), sha256(convert_to(v_token, 'UTF8')))
  returning * into v_cs;

  if p_args->>'discount_code' is not null then
    select * into v_disc from billing.checkout_discount(p_args->>'discount_code', v_member, v_tier.id, v_plan);
    update billing.checkout_sessions set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cid, v_disc.discount_id, v_cs.id, v_member, 'pending');
  end if;

  -- The clear token leaves the database once, here, for the provider to build the url.
  return billing.checkout_json(v_cs) || jsonb_build_object('access_token', v_token);
end
$$;

-- The sandbox checkout page's discount field: applies a code to an open checkout by the
-- rules of checkout_create (billing.checkout_discount), replacing any earlier one; an
-- empty code removes it. Owner only: the page runs in the checkout's community.
create or replace function billing.checkout_apply_discount(p_checkout_id text, p_code text) returns jsonb
  language plpgsql volatile
as $$
declare
  v_cs billing.checkout_sessions;
  v_plan billing.plans;
  v_disc record;
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || coalesce(p_checkout_id, '') || '.');
  elsif v_cs.status <> 'open' or v_cs.expires_at <= billing.now() then
    perform billing.raise('BL409', 'This checkout is no longer open.');
  end if;
  delete from billing.discount_redemptions r
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id and r.status = 'pending';
  if nullif(btrim(coalesce(p_code, '')), '') is null then
    update billing.checkout_sessions cs set discount_id = null, discount_cents = 0
    where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
  else
    select * into v_plan from billing.plans p where p.community_id = v_cs.community_id and p.id = v_cs.plan_id;
    select * into v_disc from billing.checkout_discount(btrim(p_code), v_cs.member_id, v_cs.tier_id, v_plan);
    update billing.checkout_sessions cs set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cs.community_id, v_disc.discount_id, v_cs.id, v_cs.member_id, 'pending');
  end if;
  return billing.checkout_json(v_cs);
end
$$;

-- Everything a provider adapter needs to present or pay a checkout.
create or replace function billing.checkout_json(p_cs billing.checkout_sessions) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'checkout_id', p_cs.id, 'member_id', p_cs.member_id, 'status', p_cs.status,
    'provider', p_cs.provider, 'url', p_cs.url,
    'expires_at', billing.iso(p_cs.expires_at), 'expired', p_cs.status = 'expired' or (p_cs.status = 'open' and p_cs.expires_at <= billing.now()),
    'tier_id', t.id, 'tier_name', t.name, 'tier_kind', t.kind,
    'plan_id', p.id, 'plan_name', p.name, 'interval', p.interval, 'trial_days', p.trial_days,
    'access_days', p.access_days, 'stripe_price_id', p.stripe_price_id,
    'amount_cents', p_cs.amount_cents, 'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'discount_code', d.code, 'discount', case when d.id is null then null else jsonb_build_object(
      'id', d.id, 'value_type', d.value_type, 'percent_off', d.percent_off, 'amount_off_cents', d.amount_off_cents,
      'duration', d.duration, 'duration_months', d.duration_months) end,
    'client_reference_id', p_cs.client_reference_id, 'return_url', p_cs.return_url,
    'subscription_id', p_cs.subscription_id, 'purchase_id', p_cs.purchase_id)
  from billing.plans p
  join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
  left join billing.discount_codes d on d.community_id = p_cs.community_id and d.id = p_cs.discount_id
  where p.community_id = p_cs.community_id and p.id = p_cs.plan_id
$$;

-- The handler stores the provider's url and reference (and expiry, when reported).
create or replace function billing_api.checkout_set_provider(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cs billing.checkout_sessions;
begin
  perform billing.require_scope('checkout:write');
  update billing.checkout_sessions cs set url = p_args->>'url', provider_ref = coalesce(p_args->>'provider_ref', cs.provider_ref),
    expires_at = coalesce((p_args->>'expires_at')::timestamptz, cs.expires_at)
  where cs.id = p_args->>'checkout_id'
  returning * into v_cs;
  return billing.checkout_json(v_cs);
end
$$;

-- ---- the checkout object of events --------------------------------------------------
-- (billing.checkout_json above is the provider adapters' view of a checkout, with its
-- access token: never an API or event object.)

create or replace function billing.checkout_event_json(p_cs billing.checkout_sessions) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object(
    'id', p_cs.id, 'checkout_id', p_cs.id, 'status', p_cs.status, 'member_id', p_cs.member_id,
    'tier_id', p_cs.tier_id, 'plan_id', p_cs.plan_id, 'amount_cents', p_cs.amount_cents,
    'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'client_reference_id', p_cs.client_reference_id, 'subject_kind', p_cs.subject_kind,
    'expires_at', billing.iso(p_cs.expires_at), 'completed_at', billing.iso(p_cs.completed_at),
    'created_at', billing.iso(p_cs.created_at))
$$;

-- No ledger effect: a checkout grants nothing.
create or replace function billing.tg_checkout_sessions__outbox() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'INSERT' then
    perform billing.emit_event(new.community_id, 'checkout.created',
      jsonb_build_object('checkout', billing.checkout_event_json(new), 'previous_attributes', null));
    if new.status = 'open' then
      return null;
    end if;
  elsif new.status is not distinct from old.status then
    return null;
  end if;
  if new.status in ('completed', 'expired') then
    perform billing.emit_event(new.community_id, 'checkout.' || new.status,
      jsonb_build_object('checkout', billing.checkout_event_json(new), 'previous_attributes',
        case when tg_op = 'UPDATE' then jsonb_build_object('status', old.status) end));
  end if;
  return null;
end
$$;

drop trigger if exists _500_outbox on billing.checkout_sessions;
create trigger _500_outbox after insert or update of status on billing.checkout_sessions
  for each row execute function billing.tg_checkout_sessions__outbox();

-- ---- completing a paid checkout ------------------------------------------------------

-- Completes a checkout in the current community: creates the subscription (trialing
-- when the plan has trial days, else active; period from billing.now()) or the
-- purchase (access_expires_at from access_days), marks the checkout completed and
-- redeems its discount. Idempotent: a completed checkout returns the same result.
-- p_details (from a provider): provider_ref, customer_ref, status, period_start,
-- period_end, trial_end, cancel_at, provider_updated_at (ISO), paid (true when the
-- provider has taken the money: no expiry or eligibility check then).
create or replace function billing.complete_checkout(p_checkout_id text, p_details jsonb default '{}')
  returns jsonb language plpgsql volatile
as $$
declare
  v_cs billing.checkout_sessions;
  v_plan billing.plans;
  v_tier billing.tiers;
  v_now timestamptz := billing.now();
  v_paid boolean := coalesce((p_details->>'paid')::boolean, false);
  v_sub billing.subscriptions;
  v_sub_id text;
  v_pur_id text;
  v_trial_end timestamptz;
  v_lines jsonb;
  v_code text;
  v_inv billing.invoices;
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || p_checkout_id || '.');
  end if;
  if v_cs.status = 'completed' then
    return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
      'subscription_id', v_cs.subscription_id, 'purchase_id', v_cs.purchase_id, 'already_completed', true);
  end if;
  if not v_paid and (v_cs.status = 'expired' or v_cs.expires_at <= v_now) then
    perform billing.raise('BL409', 'Checkout ' || v_cs.id || ' has expired.');
  end if;
  select * into v_plan from billing.plans p where p.community_id = v_cs.community_id and p.id = v_cs.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_cs.community_id and t.id = v_plan.tier_id;
  if not v_paid then
    -- One completion per member at a time: two checkouts of one buyer paid at once
    -- must not both pass the check and both subscribe (found by the concurrent money
    -- property test). The check runs after the lock, so it sees the other's commit.
    perform pg_advisory_xact_lock(hashtextextended(v_cs.community_id || ' member ' || v_cs.member_id, 5));
    perform billing.check_eligible(v_cs.member_id, v_tier, v_plan);
  end if;
  select d.code into v_code from billing.discount_codes d where d.community_id = v_cs.community_id and d.id = v_cs.discount_id;

  if v_plan.interval is not null then
    if p_details->>'provider_ref' is not null then
      select s.id into v_sub_id from billing.subscriptions s
      where s.community_id = v_cs.community_id and s.provider_ref = p_details->>'provider_ref';
    end if;
    if v_sub_id is null then
      v_trial_end := coalesce((p_details->>'trial_end')::timestamptz,
        case when v_plan.trial_days > 0 and p_details->>'status' is null then v_now + make_interval(days => v_plan.trial_days) end);
      insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start,
        current_period_end, trial_end, cancel_at, client_reference_id, checkout_id, provider, provider_ref,
        provider_customer_ref, provider_updated_at, billing_anchor, discount_id, created_at)
      values (v_cs.community_id, v_cs.member_id, v_plan.id,
        coalesce(p_details->>'status', case when v_trial_end is not null then 'trialing' else 'active' end),
        coalesce((p_details->>'period_start')::timestamptz, v_now),
        coalesce((p_details->>'period_end')::timestamptz, v_trial_end, billing.add_utc(v_now, billing.plan_interval(v_plan.interval))),
        v_trial_end, (p_details->>'cancel_at')::timestamptz, v_cs.client_reference_id, v_cs.id, v_cs.provider,
        p_details->>'provider_ref', p_details->>'customer_ref', (p_details->>'provider_updated_at')::timestamptz,
        coalesce(v_trial_end, (p_details->>'period_start')::timestamptz, v_now), v_cs.discount_id, v_now)
      returning * into v_sub;
      v_sub_id := v_sub.id;
      if v_cs.provider = 'sandbox' then
        if v_trial_end is not null then
          v_lines := jsonb_build_array(billing.plan_line(v_plan, 0, v_sub.current_period_start, v_trial_end,
            'Trial period for ' || v_tier.name || coalesce(' (' || v_plan.name || ')', '')));
        else
          v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_sub.current_period_start,
            v_sub.current_period_end));
          if v_cs.discount_cents > 0 then
            v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_sub.current_period_start,
              v_sub.current_period_end);
          end if;
        end if;
        v_inv := billing.invoice_open(v_sub.id, null, v_cs.member_id, 'subscription_create', v_cs.currency, v_lines,
          v_sub.current_period_start, v_sub.current_period_end, v_cs.provider, v_now, v_cs.id);
        perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
      end if;
    else
      update billing.subscriptions s set checkout_id = v_cs.id,
        client_reference_id = coalesce(s.client_reference_id, v_cs.client_reference_id),
        provider_customer_ref = coalesce(s.provider_customer_ref, p_details->>'customer_ref'),
        discount_id = coalesce(s.discount_id, v_cs.discount_id)
      where s.community_id = v_cs.community_id and s.id = v_sub_id
        and (s.checkout_id is distinct from v_cs.id or s.client_reference_id is null and v_cs.client_reference_id is not null
          or s.discount_id is null and v_cs.discount_id is not null);
    end if;
  else
    insert into billing.purchases (community_id, member_id, plan_id, status, amount_cents, currency,
      access_expires_at, paid_at, client_reference_id, checkout_id, provider_ref, created_at)
    values (v_cs.community_id, v_cs.member_id, v_plan.id, 'completed', v_cs.amount_cents - v_cs.discount_cents,
      v_cs.currency, case when v_plan.access_days is not null then v_now + make_interval(days => v_plan.access_days) end,
      v_now, v_cs.client_reference_id, v_cs.id, p_details->>'provider_ref', v_now)
    returning id into v_pur_id;
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_now, null));
    if v_cs.discount_cents > 0 then
      v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_now, null);
    end if;
    v_inv := billing.invoice_open(null, v_pur_id, v_cs.member_id, 'purchase', v_cs.currency, v_lines, v_now, null,
      v_cs.provider, v_now, v_cs.id, case when v_cs.provider = 'stripe' then p_details->>'provider_ref' end);
    perform billing.invoice_mark_paid(v_inv, v_now, p_details->>'provider_ref');
  end if;

  if v_cs.provider = 'stripe' and p_details->>'customer_ref' is not null then
    insert into billing.member_provider_customers (community_id, member_id, provider, customer_ref)
    values (v_cs.community_id, v_cs.member_id, v_cs.provider, p_details->>'customer_ref')
    on conflict (community_id, member_id, provider) do nothing;
  end if;

  update billing.checkout_sessions cs set status = 'completed', completed_at = v_now,
    subscription_id = v_sub_id, purchase_id = v_pur_id
  where cs.community_id = v_cs.community_id and cs.id = v_cs.id;
  update billing.discount_redemptions r set status = 'redeemed'
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id;

  return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
    'subscription_id', v_sub_id, 'purchase_id', v_pur_id, 'already_completed', false);
end
$$;

-- Open checkouts past their expiry become expired and release their discount holds.
-- No entitlement changes and no granted event: a checkout never grants anything.
create or replace function billing.expire_checkouts() returns integer
  language plpgsql volatile
as $$
declare
  v_n integer;
begin
  with expired as (
    update billing.checkout_sessions cs set status = 'expired'
    where cs.community_id = billing.current_community_id() and cs.status = 'open' and cs.expires_at <= billing.now()
    returning cs.community_id, cs.id)
  , released as (
    update billing.discount_redemptions r set status = 'released'
    from expired e where r.community_id = e.community_id and r.checkout_id = e.id and r.status = 'pending'
    returning 1)
  select count(*) into v_n from expired;
  return v_n;
end
$$;

-- A provider reports a checkout it will never complete (Stripe: checkout.session.expired).
create or replace function billing.expire_checkout(p_checkout_id text) returns boolean
  language plpgsql volatile
as $$
declare
  v_id text;
begin
  update billing.checkout_sessions cs set status = 'expired'
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id and cs.status = 'open'
  returning cs.id into v_id;
  if v_id is null then
    return false;
  end if;
  update billing.discount_redemptions r set status = 'released'
  where r.community_id = billing.current_community_id() and r.checkout_id = v_id and r.status = 'pending';
  return true;
end
$$;

-- ---- inbound provider events ----------------------------------------------------------

-- Inbound provider events are applied exactly once: true the first time an id is seen.
create or replace function billing.record_provider_event(p_provider text, p_event_id text, p_type text) returns boolean
  language sql volatile
as $$
  with ins as (
    insert into billing.provider_events (community_id, provider, event_id, type)
    values (billing.current_community_id(), p_provider, p_event_id, p_type)
    on conflict do nothing returning 1)
  select exists (select 1 from ins)
$$;

-- ---- portal sessions -----------------------------------------------------------------

create or replace function billing_api.portal_session_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_ps billing.portal_sessions;
  v_provider text;
  v_token text := billing.random_token();
begin
  perform billing.require_scope('members:write');
  if not exists (select 1 from billing.members m where m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  insert into billing.portal_sessions (community_id, member_id, return_url, url, expires_at, access_token_sha256)
  values (v_cid, p_args->>'id', p_args->>'return_url', '', billing.now() + interval '10 minutes',
    sha256(convert_to(v_token, 'UTF8')))
  returning * into v_ps;
  return jsonb_build_object('id', v_ps.id, 'member_id', v_ps.member_id, 'access_token', v_token,
    'expires_at', billing.iso(v_ps.expires_at), 'return_url', v_ps.return_url, 'provider', v_provider,
    'customer_ref', coalesce(
      (select c.customer_ref from billing.member_provider_customers c
       where c.member_id = v_ps.member_id and c.provider = 'stripe'),
      (select s.provider_customer_ref from billing.subscriptions s
       where s.member_id = v_ps.member_id and s.provider = 'stripe' and s.provider_customer_ref is not null
       order by s.id desc limit 1)));
end
$$;

create or replace function billing_api.portal_session_set_url(p_args jsonb) returns void
  language sql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
  update billing.portal_sessions set url = p_args->>'url' where id = p_args->>'id'
$$;

-- ---- link codes ----------------------------------------------------------------------

-- A new code for the same member and platform invalidates the earlier one. Expiry
-- changes nothing (the code simply stops being redeemable).
create or replace function billing_api.link_code_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
begin
  perform billing.require_scope('members:write');
  if not exists (select 1 from billing.members m where m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  update billing.link_codes lc set invalidated_at = billing.now()
  where lc.member_id = p_args->>'id' and lc.intended_platform = p_args->>'intended_platform'
    and lc.redeemed_at is null and lc.invalidated_at is null;
  insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at)
  values (v_cid, p_args->>'id', upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 10)),
    p_args->>'intended_platform', billing.now() + interval '10 minutes')
  returning * into v_lc;
  return jsonb_build_object('code', v_lc.code, 'member_id', v_lc.member_id,
    'intended_platform', v_lc.intended_platform, 'expires_at', billing.iso(v_lc.expires_at));
end
$$;

-- A platform bot finishes the link: the identity joins the code's member.
create or replace function billing_api.link_code_redeem(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_owner text;
begin
  perform billing.require_scope('members:write');
  select * into v_lc from billing.link_codes lc where lc.code = upper(p_args->>'code') for update;
  if v_lc.id is null or v_lc.redeemed_at is not null or v_lc.invalidated_at is not null
     or v_lc.expires_at <= billing.now() or v_lc.intended_platform <> p_args->>'platform' then
    perform billing.raise('BL404', 'No usable link code ' || (p_args->>'code') || ' for ' || (p_args->>'platform') || '.');
  end if;
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_args->>'platform' and i.platform_uid = p_args->>'platform_uid';
  if v_owner is not null and v_owner <> v_lc.member_id then
    perform billing.raise('BL409', 'This ' || (p_args->>'platform') || ' identity belongs to another member.');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = v_lc.member_id and i.platform = p_args->>'platform') then
      perform billing.raise('BL409', 'Member ' || v_lc.member_id || ' already has another ' || (p_args->>'platform') || ' identity.');
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (v_cid, v_lc.member_id, p_args->>'platform', p_args->>'platform_uid', p_args->>'username');
  end if;
  update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  return billing.member_json(v_cid, v_lc.member_id);
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

-- What billing_api calls, directly or with invoker rights from its triggers, policies,
-- column defaults, views and JSON builders.
grant execute on function billing.check_eligible(text,billing.tiers,billing.plans) to billing_api;
grant execute on function billing.checkout_discount(text,text,text,billing.plans) to billing_api;
grant execute on function billing.checkout_event_json(billing.checkout_sessions) to billing_api;
grant execute on function billing.checkout_json(billing.checkout_sessions) to billing_api;
grant execute on function billing.checkout_lifetime() to billing_api;
grant execute on function billing.checkout_member(jsonb) to billing_api;
grant execute on function billing.discount_json(billing.discount_codes) to billing_api;
grant execute on function billing.random_token() to billing_api;
grant execute on function billing_api.discounts_list(jsonb) to billing_api;
grant execute on function billing_api.checkout_create(jsonb) to billing_api;
grant execute on function billing_api.checkout_set_provider(jsonb) to billing_api;
grant execute on function billing_api.portal_session_create(jsonb) to billing_api;
grant execute on function billing_api.portal_session_set_url(jsonb) to billing_api;
grant execute on function billing_api.link_code_create(jsonb) to billing_api;
grant execute on function billing_api.link_code_redeem(jsonb) to billing_api;

-- API operations that write run as billing_writer (00-foundation.sql): SECURITY
-- DEFINER, yet bound to the request's community by the tenant policies, so billing_api
-- itself needs no write right on these tables. Owning a function needs CREATE on its
-- schema only while ownership changes.
grant create on schema billing_api to billing_writer;
alter function billing_api.checkout_create(jsonb) owner to billing_writer;
alter function billing_api.checkout_set_provider(jsonb) owner to billing_writer;
alter function billing_api.portal_session_create(jsonb) owner to billing_writer;
alter function billing_api.portal_session_set_url(jsonb) owner to billing_writer;
alter function billing_api.link_code_create(jsonb) owner to billing_writer;
alter function billing_api.link_code_redeem(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded 80-checkout.sql
