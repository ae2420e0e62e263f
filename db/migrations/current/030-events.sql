-- Lifecycle events (the outbox) and the events feed.
--
-- Every event-emitting trigger lives here (ledger catalog triggers in 020-ledger.sql).
-- A source row's trigger first writes its lifecycle event, then refreshes the
-- member's ledger with that event's id as trigger_event_id, all in the statement's
-- transaction. Other code only changes rows; it never writes billing.events itself.
--
-- Lifecycle event types (data holds the object under its resource name, plus
-- previous_attributes: the visible fields that changed and their old values):
--   subscription.created, subscription.updated, subscription.cancelled
--   purchase.created, purchase.updated, purchase.refunded
--   checkout.created, checkout.completed, checkout.expired
--   member.created, member.updated (identities or external subjects changed)
-- Entitlement events (the ones that decide access) come from the ledger:
--   member.entitlement.granted, member.entitlement.updated, member.entitlement.revoked
-- Keep src/events/catalog.ts in step with this list.

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

-- ---- subscriptions ----------------------------------------------------------------

-- plpgsql (not sql) so its plans are cached: it runs twice per subscription change.
create or replace function billing.event_subscription_json(p_sub billing.subscriptions) returns jsonb
  language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_tier_name text;
begin
  select * into v_plan from billing.plans p where p.community_id = p_sub.community_id and p.id = p_sub.plan_id;
  select t.name into v_tier_name from billing.tiers t where t.community_id = v_plan.community_id and t.id = v_plan.tier_id;
  return jsonb_build_object(
    'id', p_sub.id, 'status', p_sub.status, 'plan_id', p_sub.plan_id, 'plan_name', v_plan.name,
    'tier_id', v_plan.tier_id, 'tier_name', v_tier_name, 'member_id', p_sub.member_id,
    'amount_cents', v_plan.amount_cents, 'currency', v_plan.currency, 'interval', v_plan.interval,
    'current_period_end', billing.iso(p_sub.current_period_end), 'cancel_at', billing.iso(p_sub.cancel_at),
    'paused_until', billing.iso(p_sub.paused_until), 'scheduled_plan_id', p_sub.scheduled_plan_id,
    'scheduled_at', billing.iso(p_sub.scheduled_at), 'client_reference_id', p_sub.client_reference_id,
    'created_at', billing.iso(p_sub.created_at), 'updated_at', billing.iso(p_sub.updated_at));
end
$$;

create or replace function billing.tg_subscriptions__events() returns trigger
  language plpgsql
as $$
declare
  v_new jsonb;
  v_prev jsonb;
  v_type text;
  v_reason text;
  v_event_id text;
begin
  if tg_op = 'DELETE' then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, 'subscription_deleted', null);
    return null;
  end if;
  v_new := billing.event_subscription_json(new);
  if tg_op = 'INSERT' then
    v_type := 'subscription.created';
    v_reason := 'subscription_created';
    v_prev := null;
  else
    v_prev := billing.jsonb_changed(billing.event_subscription_json(old) - 'updated_at' - 'tier_name' - 'plan_name',
      v_new);
    if v_prev = '{}' then
      return null; -- nothing a consumer sees (nor a ledger source) changed
    end if;
    v_type := case when new.status = 'cancelled' and old.status <> 'cancelled'
      then 'subscription.cancelled' else 'subscription.updated' end;
    v_reason := case
      when new.plan_id <> old.plan_id then 'plan_changed'
      when new.status = old.status then 'subscription_updated'
      when new.status = 'cancelled' then 'subscription_ended'
      when new.status = 'paused' then 'subscription_paused'
      when new.status = 'cancelling' then 'subscription_cancelling'
      when old.status in ('cancelled', 'paused') then 'subscription_activated'
      else 'subscription_updated' end;
  end if;
  v_event_id := billing.emit_event(new.community_id, v_type,
    jsonb_build_object('subscription', v_new, 'previous_attributes', v_prev));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  if tg_op = 'UPDATE' and old.member_id <> new.member_id then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;

create trigger _500_events after insert or update or delete on billing.subscriptions
  for each row execute function billing.tg_subscriptions__events();

-- ---- purchases --------------------------------------------------------------------

create or replace function billing.event_purchase_json(p_pur billing.purchases) returns jsonb
  language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_tier_name text;
begin
  select * into v_plan from billing.plans p where p.community_id = p_pur.community_id and p.id = p_pur.plan_id;
  select t.name into v_tier_name from billing.tiers t where t.community_id = v_plan.community_id and t.id = v_plan.tier_id;
  return jsonb_build_object(
    'id', p_pur.id, 'status', p_pur.status, 'plan_id', p_pur.plan_id, 'plan_name', v_plan.name,
    'tier_id', v_plan.tier_id, 'tier_name', v_tier_name, 'member_id', p_pur.member_id,
    'amount_cents', p_pur.amount_cents, 'currency', p_pur.currency,
    'access_expires_at', billing.iso(p_pur.access_expires_at), 'paid_at', billing.iso(p_pur.paid_at),
    'client_reference_id', p_pur.client_reference_id, 'created_at', billing.iso(p_pur.created_at));
end
$$;

create or replace function billing.tg_purchases__events() returns trigger
  language plpgsql
as $$
declare
  v_new jsonb;
  v_prev jsonb;
  v_type text;
  v_reason text;
  v_event_id text;
begin
  if tg_op = 'DELETE' then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, 'purchase_deleted', null);
    return null;
  end if;
  v_new := billing.event_purchase_json(new);
  if tg_op = 'INSERT' then
    v_type := 'purchase.created';
    v_reason := case when new.status = 'completed' then 'purchase_completed' else 'purchase_updated' end;
    v_prev := null;
  else
    v_prev := billing.jsonb_changed(billing.event_purchase_json(old) - 'tier_name' - 'plan_name', v_new);
    if v_prev = '{}' then
      return null;
    end if;
    v_type := case when new.status = 'refunded' and old.status <> 'refunded'
      then 'purchase.refunded' else 'purchase.updated' end;
    v_reason := case when v_type = 'purchase.refunded' then 'purchase_refunded' else 'purchase_updated' end;
  end if;
  v_event_id := billing.emit_event(new.community_id, v_type,
    jsonb_build_object('purchase', v_new, 'previous_attributes', v_prev));
  perform billing.ledger_refresh_member(new.community_id, new.member_id, v_reason, v_event_id);
  if tg_op = 'UPDATE' and old.member_id <> new.member_id then
    perform billing.ledger_refresh_member(old.community_id, old.member_id, v_reason, v_event_id);
  end if;
  return null;
end
$$;

create trigger _500_events after insert or update or delete on billing.purchases
  for each row execute function billing.tg_purchases__events();

-- ---- checkout sessions (no ledger effect: a checkout grants nothing) -------------

create or replace function billing.event_checkout_json(p_cs billing.checkout_sessions) returns jsonb
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

create or replace function billing.tg_checkout_sessions__events() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'INSERT' then
    perform billing.emit_event(new.community_id, 'checkout.created',
      jsonb_build_object('checkout', billing.event_checkout_json(new), 'previous_attributes', null));
    if new.status = 'open' then
      return null;
    end if;
  elsif new.status is not distinct from old.status then
    return null;
  end if;
  if new.status in ('completed', 'expired') then
    perform billing.emit_event(new.community_id, 'checkout.' || new.status,
      jsonb_build_object('checkout', billing.event_checkout_json(new), 'previous_attributes',
        case when tg_op = 'UPDATE' then jsonb_build_object('status', old.status) end));
  end if;
  return null;
end
$$;

create trigger _500_events after insert or update of status on billing.checkout_sessions
  for each row execute function billing.tg_checkout_sessions__events();

-- ---- members, identities, external subjects --------------------------------------

create or replace function billing.tg_members__events() returns trigger
  language plpgsql
as $$
begin
  perform billing.emit_event(new.community_id, 'member.created', jsonb_build_object(
    'member', billing.member_json(new.community_id, new.id), 'change', null));
  return null;
end
$$;

create trigger _500_events after insert on billing.members
  for each row execute function billing.tg_members__events();

-- member.updated, then the ledger refresh (the identities snapshot changed).
create or replace function billing.member_changed(p_community_id text, p_member_id text, p_change jsonb)
  returns void language plpgsql volatile
as $$
declare
  v_member jsonb := billing.member_json(p_community_id, p_member_id);
  v_event_id text;
begin
  if v_member is null then
    return; -- the member itself is being deleted
  end if;
  v_event_id := billing.emit_event(p_community_id, 'member.updated',
    jsonb_build_object('member', v_member, 'change', p_change));
  perform billing.ledger_refresh_member(p_community_id, p_member_id, p_change->>'kind', v_event_id);
end
$$;

create or replace function billing.tg_member_identities__events() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'UPDATE' and old.member_id = new.member_id and old.platform = new.platform
     and old.platform_uid = new.platform_uid and old.username is not distinct from new.username then
    return null;
  end if;
  if tg_op in ('DELETE', 'UPDATE') then
    perform billing.member_changed(old.community_id, old.member_id, jsonb_build_object(
      'kind', case when tg_op = 'DELETE' or old.member_id <> new.member_id then 'identity_unlinked'
        else 'identity_updated' end,
      'platform', old.platform, 'platform_uid', old.platform_uid));
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.member_id <> new.member_id) then
    perform billing.member_changed(new.community_id, new.member_id, jsonb_build_object(
      'kind', 'identity_linked', 'platform', new.platform, 'platform_uid', new.platform_uid));
  end if;
  return null;
end
$$;

create trigger _500_events after insert or update or delete on billing.member_identities
  for each row execute function billing.tg_member_identities__events();

create or replace function billing.tg_external_subjects__events() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'UPDATE' and old.member_id = new.member_id and old.namespace = new.namespace
     and old.external_user_id = new.external_user_id then
    return null;
  end if;
  if tg_op in ('DELETE', 'UPDATE') then
    perform billing.member_changed(old.community_id, old.member_id, jsonb_build_object(
      'kind', 'external_subject_removed', 'namespace', old.namespace,
      'external_user_id', old.external_user_id));
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    perform billing.member_changed(new.community_id, new.member_id, jsonb_build_object(
      'kind', 'external_subject_attached', 'namespace', new.namespace,
      'external_user_id', new.external_user_id));
  end if;
  return null;
end
$$;

create trigger _500_events after insert or update or delete on billing.external_subjects
  for each row execute function billing.tg_external_subjects__events();

-- ---- POST /v1/members/{id}/external-subjects --------------------------------------

-- Maps {namespace, external_user_id} onto the member. The identical mapping again is
-- a no-op; a subject of another member, or a different subject of this member in the
-- namespace, is a conflict. The insert's trigger republishes active entitlements.
create or replace function billing_api.external_subjects_attach(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_community text := billing.current_community_id();
  v_member_id text := p_args->>'id';
  v_namespace text := p_args->>'namespace';
  v_external text := p_args->>'external_user_id';
  v_owner text;
  v_current text;
begin
  perform billing.require_scope('members:write');
  perform 1 from billing.members m where m.community_id = v_community and m.id = v_member_id for update;
  if not found then
    perform billing.raise('BL404', 'No member ' || v_member_id || '.');
  end if;
  select x.member_id into v_owner from billing.external_subjects x
  where x.community_id = v_community and x.namespace = v_namespace and x.external_user_id = v_external;
  if v_owner = v_member_id then
    return billing.member_json(v_community, v_member_id);
  elsif v_owner is not null then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' is already mapped to another member.');
  end if;
  select x.external_user_id into v_current from billing.external_subjects x
  where x.community_id = v_community and x.member_id = v_member_id and x.namespace = v_namespace;
  if v_current is not null then
    perform billing.raise('BL409', 'Member ' || v_member_id || ' already has the external subject '
      || v_namespace || '/' || v_current || ' in namespace ' || v_namespace || '.');
  end if;
  begin
    insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
    values (v_community, v_member_id, v_namespace, v_external);
  exception when unique_violation then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' was mapped concurrently.');
  end;
  return billing.member_json(v_community, v_member_id);
end
$$;

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
