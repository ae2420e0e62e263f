-- Plans: tiers with their nested billing plans.

create or replace function billing.tier_json(p_tier billing.tiers) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'id', p_tier.id, 'name', p_tier.name, 'description', p_tier.description,
    'kind', p_tier.kind, 'billing_mode', p_tier.billing_mode, 'rank', p_tier.rank,
    'features', to_jsonb(p_tier.features), 'perks', p_tier.perks,
    'plans', coalesce((
      select jsonb_agg(jsonb_build_object('id', p.id, 'name', p.name, 'amount_cents', p.amount_cents,
        'currency', p.currency, 'interval', p.interval, 'trial_days', p.trial_days,
        'access_days', p.access_days) order by p.amount_cents, p.id)
      from billing.plans p
      where p.community_id = p_tier.community_id and p.tier_id = p_tier.id and p.active), '[]'))
$$;

create or replace function billing_api.plans_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  perform billing.require_scope('plans:read');
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.tier_json(t) order by t.rank, t.id)
    from billing.tiers t where t.active), '[]'));
end
$$;

create or replace function billing_api.plans_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_tier billing.tiers;
begin
  perform billing.require_scope('plans:read');
  select * into v_tier from billing.tiers t where t.id = p_args->>'tierId';
  if v_tier.id is null then
    perform billing.raise('BL404', 'No tier ' || (p_args->>'tierId') || '.');
  end if;
  return billing.tier_json(v_tier);
end
$$;
