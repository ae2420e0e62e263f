-- Tenancy in the database (the owner role, which runs migrations and the operator
-- CLI, has its own policy; billing_api and operator roles never match it): row-level security enabled and forced on every table.
-- Tenant tables show a row only when its community is the transaction's community
-- (set by billing.api_auth); with no community set they show nothing.

do $$
declare
  v_table regclass;
begin
  for v_table in
    select c.oid::regclass from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'billing' and c.relkind = 'r'
  loop
    execute format('alter table %s enable row level security', v_table);
    execute format('alter table %s force row level security', v_table);
    if v_table = 'billing.communities'::regclass then
      execute format('create policy tenant on %s using (id = (select billing.current_community_id())) '
        'with check (id = (select billing.current_community_id()))', v_table);
    else
      execute format('create policy tenant on %s using (community_id = (select billing.current_community_id())) '
        'with check (community_id = (select billing.current_community_id()))', v_table);
    end if;
    -- The owner (migrations, operator CLI, worker) sees every community.
    execute format('create policy owner_access on %s to %I using (true) with check (true)', v_table, current_user);
  end loop;

  -- Private tables: reachable only by the owner (no grants to billing_api), through
  -- SECURITY DEFINER functions that pin their search_path.
  for v_table in
    select c.oid::regclass from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'billing_private' and c.relkind = 'r'
  loop
    execute format('alter table %s enable row level security', v_table);
    execute format('alter table %s force row level security', v_table);
    execute format('create policy owner_only on %s using (true)', v_table);
  end loop;
end
$$;

grant select on all tables in schema billing to billing_api;
grant insert, update, delete on
  billing.members, billing.member_identities, billing.external_subjects,
  billing.subscriptions, billing.purchases, billing.checkout_sessions,
  billing.discount_redemptions, billing.portal_sessions, billing.link_codes,
  billing.member_entitlements, billing.events, billing.webhook_endpoints,
  billing.webhook_deliveries, billing.webhook_attempts, billing.idempotency_keys,
  billing.provider_events
  to billing_api;
grant update (clock_offset) on billing.communities to billing_api;
