--! Previous: sha1:bec4b9b2d5cfa1ab8c947a105ff313d3e9720d67
--! Hash: sha1:aec40711ae0b75e7d49940b1e1774bc02d3492f4
--! Message: check one query

--! split: 1-current.sql
-- Enter migration here

--! split: 2-check-one-query.sql
-- The entitlement check's two queries (migration 000065: the usual request's and the
-- others') written as one: the usual request finds its member inside it.

create or replace function billing_api.entitlements_check(p_args jsonb) returns jsonb
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
    select jsonb_build_object('entitled', count(*) > 0, 'entitlements', coalesce(jsonb_agg(x order by x.id), '[]'))
    from (
      select me.id, me.entitlement_id, e.key, e.name, me.revision, me.status, billing.iso(me.granted_at) as granted_at,
        billing.iso(me.revoked_at) as revoked_at, me.sources, me.benefits
      from billing.member_entitlements me
      join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
      where me.community_id = (select billing.current_community_id())
        and me.member_id = coalesce(v_member, (select i.member_id from billing.member_identities i
          where i.community_id = (select billing.current_community_id()) and i.platform = p_args->>'platform'
            and i.platform_uid = p_args->>'platform_uid'))
        and me.status = 'active'
        and (nullif(p_args->>'tier_id', '') is null
          or me.sources @> jsonb_build_array(jsonb_build_object('tier_id', nullif(p_args->>'tier_id', ''))))) x);
end
$$;
