// The closed value lists of the data model, written once for TypeScript. The
// database holds the same lists as CHECK constraints; test/core/sql-agreement.test.ts
// reads those from pg_constraint and holds each pair equal.
export const SUBSCRIPTION_STATUSES = ['active', 'trialing', 'past_due', 'cancelling', 'cancelled', 'paused'] as const;
export const PURCHASE_STATUSES = ['completed', 'refunded', 'disputed'] as const;
export const CHECKOUT_STATUSES = ['open', 'completed', 'expired'] as const;
export const CHECKOUT_SUBJECT_KINDS = ['member', 'external', 'platform'] as const;
export const MEMBER_ENTITLEMENT_STATUSES = ['active', 'inactive'] as const;
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export const WEBHOOK_DISABLED_REASONS = ['manual', 'failing'] as const;
/** billing.plans.interval; null is a one-time plan. */
export const BILLING_INTERVALS = ['month', 'year'] as const;
export const TIER_KINDS = ['subscription', 'one_time'] as const;
export const TIER_BILLING_MODES = ['recurring', 'one_time'] as const;
export const DISCOUNT_VALUE_TYPES = ['percent', 'amount'] as const;
export const DISCOUNT_DURATIONS = ['once', 'repeating', 'forever'] as const;
/** Why a discount code is not active now (billing.discount_json, 80-checkout.sql). */
export const DISCOUNT_INACTIVE_REASONS = ['disabled', 'expired', 'exhausted', 'not_started'] as const;
/** First-party platforms of member identities and link codes. */
export const PLATFORMS = ['discord', 'telegram'] as const;
export const PAYMENT_PROVIDERS = ['sandbox', 'stripe'] as const;
/** Invoices (Stripe's statuses), why each was written, its line types, its attempts. */
export const INVOICE_STATUSES = ['draft', 'open', 'paid', 'void', 'uncollectible'] as const;
export const INVOICE_BILLING_REASONS = ['subscription_create', 'subscription_cycle', 'subscription_update', 'purchase'] as const;
export const INVOICE_LINE_TYPES = ['plan', 'proration', 'discount'] as const;
export const PAYMENT_ATTEMPT_STATUSES = ['succeeded', 'failed'] as const;
/** Why a subscription ended (billing.subscriptions.cancellation_reason). */
export const CANCELLATION_REASONS = ['cancellation_requested', 'payment_failed', 'refunded', 'payment_disputed'] as const;
export const DISPUTE_STATUSES = ['needs_response', 'under_review', 'won', 'lost'] as const;
/** Who made a change the audit log records (billing.audit_log.actor_type, 12-audit.sql), and how. */
export const AUDIT_ACTOR_TYPES = ['operator', 'api_key', 'member', 'cli', 'sql_login', 'service'] as const;
// 'export': a member's data exported, a line without the data (billing_private.audit_export).
export const AUDIT_OPERATIONS = ['insert', 'update', 'delete', 'export'] as const;
/**
 * The tables the audit log records (each with _950_audit triggers; docs/decisions/audit-log.md):
 * operator-controlled ones always, lifecycle ones (subscriptions, invoices, refunds,
 * grants, members) when an actor made the change.
 */
export const AUDITED_TABLES = [
  'communities', 'api_keys', 'payment_secrets', 'operator_users', 'operator_roles',
  'platform_configs', 'platform_secrets', 'tiers', 'plans', 'entitlements', 'entitlement_benefits',
  'tier_entitlements', 'discount_codes', 'price_migrations', 'tax_rates', 'webhook_endpoints', 'webhook_secrets',
  'operator_second_factors', 'operator_recovery_codes', 'operator_policies',
  'members', 'subscriptions', 'invoices', 'refunds', 'grants',
] as const;

export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];
export type Platform = (typeof PLATFORMS)[number];
export type PaymentProviderName = (typeof PAYMENT_PROVIDERS)[number];
