// The registry: every operation of the API, in one list. Each resource's folder under
// src/domain/ exports its own.
import type { Operation } from '../domain/operation';
import { analyticsDashboardOperations, analyticsOperations } from '../domain/analytics/analytics-operations';
import { reportOperations } from '../domain/analytics/analytics-reports';
import { apiKeyOperations } from '../domain/keys/api-key-operations';
import { auditOperations } from '../domain/audit/audit-operations';
import { operatorOperations } from '../domain/operators/operator-operations';
import { portalOperations } from '../domain/subscriptions/portal-operations';
import { catalogDashboardOperations } from '../domain/catalog/catalog-operations';
import { catalogWriteOperations } from '../domain/catalog/catalog-write-operations';
import { checkoutOperations } from '../domain/checkout/checkout-operations';
import { discountOperations } from '../domain/discounts/discount-operations';
import { entitlementOperations } from '../domain/entitlements/entitlement-operations';
import { eventDashboardOperations, eventOperations } from '../domain/events/event-operations';
import { externalSubjectOperations } from '../domain/members/external-subject-operations';
import { memberOperations } from '../domain/members/member-operations';
import { memberPrivacyOperations } from '../domain/members/member-privacy-operations';
import { memberSessionOperations } from '../domain/members/member-session-operations';
import { planOperations } from '../domain/plans/plan-operations';
import { purchaseOperations } from '../domain/purchases/purchase-operations';
import { invoiceOperations } from '../domain/invoices/invoice-operations';
import { taxOperations } from '../domain/tax/tax-operations';
import { grantOperations } from '../domain/grants/grant-operations';
import { lifecycleOperations } from '../domain/subscriptions/lifecycle-operations';
import { subscriptionOperations } from '../domain/subscriptions/subscription-operations';
import { webhookOperations } from '../domain/webhooks/webhook-operations';
import { deliveryDashboardOperations, deliveryOperations } from '../domain/members/delivery-operations';
import { mailDashboardOperations } from '../domain/mail/mail-operations';
import { platformConfigDashboardOperations } from '../domain/catalog/platform-config-operations';

export const operations: readonly Operation[] = [
  ...planOperations,
  ...catalogWriteOperations,
  ...memberOperations,
  ...memberPrivacyOperations,
  ...subscriptionOperations,
  ...purchaseOperations,
  ...invoiceOperations,
  ...taxOperations,
  ...grantOperations,
  ...discountOperations,
  ...analyticsOperations,
  ...reportOperations,
  ...entitlementOperations,
  ...externalSubjectOperations,
  ...eventOperations,
  ...checkoutOperations,
  ...lifecycleOperations,
  ...memberSessionOperations,
  ...webhookOperations,
  ...deliveryOperations,
  ...auditOperations,
];

/**
 * Operations only the pages run (operator sessions: API key management, the
 * overview's series; member portal sessions: the switch preview, the sandbox card).
 * Run by the same executor; not mounted under /v1 or MCP.
 */
export const dashboardOperations: readonly Operation[] = [
  ...apiKeyOperations, ...operatorOperations, ...analyticsDashboardOperations, ...catalogDashboardOperations, ...eventDashboardOperations,
  ...portalOperations,
  ...deliveryDashboardOperations,
  ...mailDashboardOperations,
  ...platformConfigDashboardOperations,
];

export function findOperation(name: string): Operation | undefined {
  return operations.find((op) => op.name === name);
}

/** An operation the dashboard may run: any of the API's, or a dashboard-only one. */
export function dashboardOperation(name: string): Operation {
  const op = operations.find((o) => o.name === name) ?? dashboardOperations.find((o) => o.name === name);
  if (!op) throw new Error(`no operation ${name}`);
  return op;
}
