-- JSON builders shared by the ledger (event envelopes) and the read API: one
-- definition of the member and member-entitlement objects of the spec.

create or replace function billing.member_json(p_community_id text, p_member_id text) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', m.id,
    'created_at', billing.iso(m.created_at),
    'identities', coalesce((
      select jsonb_agg(jsonb_build_object('platform', i.platform, 'platform_uid', i.platform_uid,
        'username', i.username) order by i.platform, i.platform_uid)
      from billing.member_identities i
      where i.community_id = m.community_id and i.member_id = m.id), '[]'),
    'external_subjects', coalesce((
      select jsonb_agg(jsonb_build_object('namespace', x.namespace, 'external_user_id', x.external_user_id)
        order by x.namespace, x.external_user_id)
      from billing.external_subjects x
      where x.community_id = m.community_id and x.member_id = m.id), '[]'))
  from billing.members m
  where m.community_id = p_community_id and m.id = p_member_id
$$;

create or replace function billing.member_entitlement_json(p_me billing.member_entitlements,
  p_ent billing.entitlements) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_me.id,
    'entitlement_id', p_me.entitlement_id,
    'key', p_ent.key,
    'name', p_ent.name,
    'revision', p_me.revision,
    'status', p_me.status,
    'granted_at', billing.iso(p_me.granted_at),
    'revoked_at', billing.iso(p_me.revoked_at),
    'sources', p_me.sources,
    'benefits', p_me.benefits)
$$;

create or replace function billing.member_entitlement_json(p_me billing.member_entitlements) returns jsonb
  language sql stable parallel safe
as $$
  select billing.member_entitlement_json(p_me, e)
  from (select 1) one
  left join billing.entitlements e on e.community_id = p_me.community_id and e.id = p_me.entitlement_id
$$;
