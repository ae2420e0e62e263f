// The API key scopes (spec: "Authentication"). SQL checks them by name
// (billing.require_scope); operations name the one they need.
export const SCOPES = [
  'subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
  'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
  'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write',
] as const;
export type Scope = (typeof SCOPES)[number];
