--! Previous: sha1:7383d1390af2ba1ca367bfef24a2477082d7cec9
--! Hash: sha1:005d4fcabe65d83a1c87ae609941adf40abfb6cf
--! Message: gate-run

--! split: 1-current.sql
-- Issue 33 item 2: a leased request's operation answers JSON text (billing.gate_run),
-- the entitlement check writes its answer as text (json_agg) instead of jsonb, and a
-- lease names its key (for the access log of a request whose operation fails).

create or replace function billing_private.entitlements_check_text(p_args jsonb) returns text
  language plpgsql stable
as $$
declare
  v_member text;
begin
  -- Any request but the usual one: its member ('' when unknown: not entitled).
  if not coalesce(p_args->>'platform' in ('discord', 'telegram') and coalesce(p_args->>'platform_uid', '') <> ''
          and coalesce(p_args->>'namespace', '') = '' and coalesce(p_args->>'external_user_id', '') = '', false) then
    v_member := coalesce(billing.resolve_identity(p_args), '');
  end if;
  return (
    select '{"entitled": ' || (count(*) > 0)::text || ', "entitlements": ' || coalesce(json_agg(x order by x.id)::text, '[]') || '}'
    from (
      select me.id, e.key, e.name, me.status, me.sources, me.benefits, me.revision, billing.iso(me.granted_at) as granted_at,
        billing.iso(me.revoked_at) as revoked_at, me.entitlement_id
      from billing.member_entitlements me
      join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
      where me.community_id = (select billing.current_community_id())
        and me.member_id = (select coalesce(v_member, (select i.member_id from billing.member_identities i
          where i.community_id = (select billing.current_community_id()) and i.platform = p_args->>'platform'
            and i.platform_uid = p_args->>'platform_uid')))
        and me.status = 'active'
        and (nullif(p_args->>'tier_id', '') is null
          or me.sources @> jsonb_build_array(jsonb_build_object('tier_id', nullif(p_args->>'tier_id', ''))))) x);
end
$$;

create or replace function billing_api.entitlements_check(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  return billing_private.entitlements_check_text(p_args)::jsonb;
end
$$;

create or replace function billing.gate_run(p_credential text, p_scope text, p_op text, p_args jsonb,
  p_request_id text default null)
  returns text language plpgsql volatile
as $$
declare
  v_open jsonb := billing.gate_open(p_credential, null, null, p_scope, null, true, p_request_id);
begin
  if not (v_open->>'ok')::boolean then
    raise exception using errcode = 'BL401', message = 'A valid API key is required.';
  end if;
  if v_open ? 'error' then
    raise exception using errcode = v_open->'error'->>'sqlstate', message = v_open->'error'->>'message',
      detail = coalesce(v_open->'error'->>'detail', '');
  end if;
  if p_op = 'entitlements_check' then
    return billing_private.entitlements_check_text(p_args);
  end if;
  return billing_private.op_dispatch(p_op, p_args)::text;  -- 98-dispatch.sql
end
$$;

create or replace function billing_private.lease_key_tokens(p_key_hash text, p_n integer, p_limits jsonb,
  p_return integer default 0, p_returned_lease text default null)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key_id text;
  v_community_id text;
begin
  select k.id, k.community_id into v_key_id, v_community_id from billing_private.api_keys k
  where k.key_hash = p_key_hash and k.revoked_at is null;
  if v_key_id is null then
    return jsonb_build_object('key', false);
  end if;
  return billing_private.take_tokens('key:' || v_key_id,
    coalesce((p_limits->>'key_per_minute')::float8, 300), coalesce((p_limits->>'key_burst')::float8, 60),
    greatest(1, least(p_n, 100)), greatest(0, least(p_return, 100)),
    greatest(1, coalesce((p_limits->>'lease_ms')::integer, 1000)), p_returned_lease) || jsonb_build_object('key', true, 'key_id', v_key_id, 'community_id', v_community_id);
end
$$;

grant execute on function billing_private.entitlements_check_text(jsonb) to billing_api;
grant execute on function billing.gate_run(text,text,text,jsonb,text) to billing_api;
