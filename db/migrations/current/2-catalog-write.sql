-- Issue 31 item 1: the catalog from the dashboard and the API (docs/decisions/
-- catalog-write-rules-in-sql.md, catalog-write-scope.md). The scope catalog:write; the
-- catalog's write rules once, in SQL (functions/20-catalog-write.sql: one put per
-- object, called by `billing catalog apply`, the /v1/catalog operations and the
-- dashboard); billing_writer, which owns the operations, writes the catalog tables.

-- ---- grants (tables/20-catalog.sql) ----
grant select, insert, update on billing.tiers to billing_writer;
grant select, insert, update on billing.plans to billing_writer;
grant select, insert, update on billing.entitlements to billing_writer;
grant select, insert, delete on billing.entitlement_benefits to billing_writer;
grant select, insert, delete on billing.tier_entitlements to billing_writer;
grant select, insert, update on billing.discount_codes to billing_writer;

-- ---- the scope (functions/15-operators.sql) ----
create or replace function billing_private.api_key_scopes() returns text[]
  language sql immutable parallel safe
as $$
  select array['subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
    'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
    'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write', 'audit:read', 'members:export', 'members:erase',
    'catalog:write']
$$;

--!include functions/20-catalog-write.sql
--!include 98-dispatch.sql
