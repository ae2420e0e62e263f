-- Issue 26, items 2, 3, 4 and 6 (branch money): disputes refuse refunds and show on the
-- invoice, a pause keeps the paid period, a trial is given once per tier, discount state
-- that is true. The delta of the fixtures named in each part; idempotent.

-- 80-checkout.sql
-- is_active tells the truth of now (issue 26): false when the operator turned the
-- code off or archived it, once it has expired, while its use limit is reached
-- (redeemed, plus pending redemptions of open checkouts, as billing.checkout_discount
-- counts them) and before it starts; inactive_reason (additive) says which, the first
-- that applies in that order: disabled, expired, exhausted, not_started.
create or replace function billing.discount_json(p_d billing.discount_codes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_d.id, 'code', p_d.code, 'name', p_d.name, 'value_type', p_d.value_type,
    'percent_off', p_d.percent_off, 'amount_off_cents', p_d.amount_off_cents, 'currency', p_d.currency,
    'duration', p_d.duration, 'duration_months', p_d.duration_months, 'use_limit', p_d.use_limit,
    'min_spend_cents', p_d.min_spend_cents, 'max_spend_cents', p_d.max_spend_cents,
    'starts_at', billing.iso(p_d.starts_at), 'expires_at', billing.iso(p_d.expires_at),
    'is_active', st.reason is null, 'inactive_reason', st.reason, 'tier_ids', to_jsonb(p_d.tier_ids),
    'members', coalesce((
      select jsonb_agg(jsonb_build_object('platform', m->>'platform', 'platform_uid', m->>'platform_uid',
        'username', m->>'username'))
      from jsonb_array_elements(p_d.members) m), '[]'),
    'redeemed_count', c.redeemed,
    'pending_count', c.pending,
    'created_at', billing.iso(p_d.created_at))
  from (select billing.now() as now) t
  cross join lateral (
    select count(*) filter (where r.status = 'redeemed') as redeemed,
      count(*) filter (where r.status = 'pending') as pending,
      count(*) filter (where r.status = 'redeemed'
        or (r.status = 'pending' and cs.status = 'open' and cs.expires_at > t.now)) as held
    from billing.discount_redemptions r
    left join billing.checkout_sessions cs on cs.community_id = r.community_id and cs.id = r.checkout_id
    where r.community_id = p_d.community_id and r.discount_id = p_d.id) c
  cross join lateral (select case
      when not p_d.is_active or p_d.archived_at is not null then 'disabled'
      when p_d.expires_at is not null and p_d.expires_at <= t.now then 'expired'
      when p_d.use_limit is not null and c.held >= p_d.use_limit then 'exhausted'
      when p_d.starts_at is not null and p_d.starts_at > t.now then 'not_started' end as reason) st
$$;
