--! Previous: sha1:5f6a59ac548c38b459e2c8a08f810780b29bffe6
--! Hash: sha1:6fd1f64a8338ae68455df2bef639d3381e8329c7
--! Message: discount state in graphql

--! split: 10-discount-state-in-graphql.sql
-- Issue 26 items 6 and 12 (audit): GraphQL's discounts said the operator's stored switch
-- (isActive true for a code expired in 2020) while GET /v1/discounts said the state of
-- now. The rule moves into billing.discount_inactive_reason, which billing.discount_json
-- and the billing_graphql.discounts view both read; the view gains inactive_reason
-- (additive). Idempotent.

-- 80-checkout.sql
-- is_active tells the truth of now (issue 26): false when the operator turned the
-- code off or archived it, once it has expired, while its use limit is reached
-- (redeemed, plus pending redemptions of open checkouts, as billing.checkout_discount
-- counts them) and before it starts; inactive_reason (additive) says which, the first
-- that applies in that order: disabled, expired, exhausted, not_started. The rule is
-- billing.discount_inactive_reason, read by the API's JSON and GraphQL's view alike.
-- plpgsql: its plans are kept per session (a SQL function with a subquery is planned
-- on every call; GraphQL's view calls it per row).
create or replace function billing.discount_inactive_reason(p_d billing.discount_codes) returns text
  language plpgsql stable parallel safe
as $$
declare
  v_now timestamptz := billing.now();
begin
  if not p_d.is_active or p_d.archived_at is not null then
    return 'disabled';
  elsif p_d.expires_at is not null and p_d.expires_at <= v_now then
    return 'expired';
  elsif p_d.use_limit is not null and (
      select count(*) from billing.discount_redemptions r
      left join billing.checkout_sessions cs on cs.community_id = r.community_id and cs.id = r.checkout_id
      where r.community_id = p_d.community_id and r.discount_id = p_d.id
        and (r.status = 'redeemed' or (r.status = 'pending' and cs.status = 'open' and cs.expires_at > v_now))) >= p_d.use_limit then
    return 'exhausted';
  elsif p_d.starts_at is not null and p_d.starts_at > v_now then
    return 'not_started';
  end if;
  return null;
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
    'is_active', st.reason is null, 'inactive_reason', st.reason, 'tier_ids', to_jsonb(p_d.tier_ids),
    'members', coalesce((
      select jsonb_agg(jsonb_build_object('platform', m->>'platform', 'platform_uid', m->>'platform_uid',
        'username', m->>'username'))
      from jsonb_array_elements(p_d.members) m), '[]'),
    'redeemed_count', c.redeemed,
    'pending_count', c.pending,
    'created_at', billing.iso(p_d.created_at))
  from (
    select count(*) filter (where r.status = 'redeemed') as redeemed,
      count(*) filter (where r.status = 'pending') as pending
    from billing.discount_redemptions r
    where r.community_id = p_d.community_id and r.discount_id = p_d.id) c
  cross join lateral (select billing.discount_inactive_reason(p_d) as reason) st
$$;
grant execute on function billing.discount_inactive_reason(billing.discount_codes) to billing_api;
grant execute on function billing.discount_json(billing.discount_codes) to billing_api;

-- 95-graphql.sql
-- is_active and inactive_reason are the state of now, as GET /v1/discounts answers them
-- (billing.discount_inactive_reason, 80-checkout.sql): an expired or used-up code is
-- not active, though the operator's switch is on (issue 26 items 6 and 12).
create or replace view billing_graphql.discounts with (security_invoker = true, security_barrier = false) as
  select d.id, d.code, d.name, d.value_type, d.percent_off, d.amount_off_cents, d.currency, d.duration,
    d.duration_months, d.use_limit, d.min_spend_cents, d.max_spend_cents, d.starts_at, d.expires_at,
    st.reason is null as is_active, d.tier_ids, d.created_at, st.reason as inactive_reason
  from billing.discount_codes d
  cross join lateral (select billing.discount_inactive_reason(d) as reason) st
  where d.archived_at is null and (select billing.has_scope('discounts:read'));
comment on view billing_graphql.discounts is E'@primaryKey id\n@scope discounts:read\n@behavior -insert -update -delete\nUnarchived discount codes. Needs discounts:read.';
comment on column billing_graphql.discounts.id is E'@notNull';
comment on column billing_graphql.discounts.code is E'@notNull';
comment on column billing_graphql.discounts.value_type is E'@notNull';
comment on column billing_graphql.discounts.duration is E'@notNull';
comment on column billing_graphql.discounts.is_active is E'@notNull\nWhether a checkout can use the code now: false when turned off, expired, at its use limit or not started yet.';
comment on column billing_graphql.discounts.inactive_reason is E'@enumValues disabled expired exhausted not_started\nWhy the code is not active now, the first that applies; null when active.';
comment on column billing_graphql.discounts.tier_ids is E'@notNull';
comment on column billing_graphql.discounts.created_at is E'@notNull';
