--! Previous: sha1:a57891d07278d50899483f6c9b8117f59a1ead4c
--! Hash: sha1:5f6a59ac548c38b459e2c8a08f810780b29bffe6
--! Message: rollup locks

--! split: 61-rollup-locks.sql
-- Refreshes of subscriptions' facts by writers that do not hold those rows take
-- their share locks first (rollup-races.test.ts).

-- For the writers that refresh subscriptions' facts without writing those rows (a
-- discount code's or a plan's change, a discounted invoice): each row's share lock
-- first, in key order, so a concurrent writer of the subscription (who holds its row
-- until commit) has committed before the refresh, a statement of its own with a new
-- snapshot, reads it. Without it the refresh read the row as it was before, and wrote
-- those stale facts over the writer's (test/analytics/rollup-races.test.ts). A
-- subscription's own triggers hold the row already and call analytics_refresh.
create or replace function billing_private.analytics_refresh_locking(p_communities text[], p_ids text[]) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform 1 from billing.subscriptions s
  where (s.community_id, s.id) in (select k.c, k.id from unnest(p_communities, p_ids) k(c, id))
  order by s.community_id, s.id
  for share of s;
  perform billing_private.analytics_refresh(p_communities, p_ids);
end
$$;

create or replace function billing_private.tg_invoices__analytics() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing_private.analytics_refresh_locking(array_agg(n.community_id), array_agg(n.subscription_id))
  from new_rows n where n.subscription_id is not null and n.discount_cents > 0;
  return null;
end
$$;

create or replace function billing_private.tg_plans__analytics() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing_private.analytics_refresh_locking(array_agg(s.community_id), array_agg(s.id))
  from billing.subscriptions s where s.community_id = new.community_id and s.plan_id = new.id;
  return null;
end
$$;

create or replace function billing_private.tg_discount_codes__analytics() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing_private.analytics_refresh_locking(array_agg(s.community_id), array_agg(s.id))
  from billing.subscriptions s where s.community_id = new.community_id and s.discount_id = new.id;
  return null;
end
$$;
