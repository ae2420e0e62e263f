--! Previous: sha1:bd9d0a8dcb505d02bff948b65b896cbe17d7db89
--! Hash: sha1:bec4b9b2d5cfa1ab8c947a105ff313d3e9720d67
--! Message: slots out

--! split: 1-current.sql
-- Enter migration here

--! split: 2-slots-out.sql
-- The endpoint slots shared in the database (migration 000063) are taken out again:
-- with them, test/resilience/db-outage.test.ts (every committed event delivered after a
-- database restart) failed in two full runs of the suite of three, the worker leaving
-- an endpoint's jobs in the queue after the outage; the cause was not found. The
-- endpoint's share is this process's again (worker/tasks/webhook_deliveries__send.ts,
-- docs/decisions/shared-worker-and-lease-bounds.md). The key leases stay shared.

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

drop function if exists billing_private.webhook_slot_enter(text, text, integer, integer, integer, text);
drop function if exists billing_private.webhook_slot_leave(text, text, bigint, boolean);
drop table if exists billing_private.webhook_endpoint_slots;
