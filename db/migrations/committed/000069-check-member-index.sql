--! Previous: sha1:d8506de21d126b42e4c012f88a9f1b2b3e403b5b
--! Hash: sha1:97c46819f4216d4a12c1ab7f72bf2c7857cdf7ff
--! Message: check member index

--! split: 1-current.sql
-- The check's member as an InitPlan: a bare coalesce is not leakproof, so under the
-- tenant policy it was no index condition and member_entitlements was read whole.

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
        and me.member_id = (select coalesce(v_member, (select i.member_id from billing.member_identities i
          where i.community_id = (select billing.current_community_id()) and i.platform = p_args->>'platform'
            and i.platform_uid = p_args->>'platform_uid')))
        and me.status = 'active'
        and (nullif(p_args->>'tier_id', '') is null
          or me.sources @> jsonb_build_array(jsonb_build_object('tier_id', nullif(p_args->>'tier_id', ''))))) x);
end
$$;
