// The API key scopes (spec: "Authentication"). Each operation names the one it needs
// (op.scope, its only declaration); the request gate checks it (billing.gate_open).
export const SCOPES = [
  'subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
  'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
  'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write', 'audit:read',
  // A member's data exported whole, and erased (issue 31; docs/decisions/member-privacy-scopes.md):
  // neither is a :read or :write of one resource, so no older key or viewer holds them.
  'members:export', 'members:erase',
  // Creating, changing and archiving the catalog (issue 31; docs/decisions/catalog-write-scope.md):
  // admins and owners hold it, viewers and older keys do not.
  'catalog:write',
] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * Scopes only operator sessions hold (db/migrations/fixtures/functions/15-operators.sql,
 * billing_private.operator_role_scopes): managing API keys (admins and owners) and
 * dashboard users (owners). No key can hold them.
 */
export const OPERATOR_SCOPES = ['keys:read', 'keys:write', 'operators:read', 'operators:write'] as const;
export type OperatorScope = (typeof OPERATOR_SCOPES)[number];

/** Operator roles: viewer reads; admin and owner also change (db: their scopes). */
export const OPERATOR_ROLES = ['owner', 'admin', 'viewer'] as const;
export type OperatorRole = (typeof OPERATOR_ROLES)[number];
