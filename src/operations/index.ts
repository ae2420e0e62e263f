// Every operation of the API, in one list. Each resource module exports its own.
import type { Operation } from './registry';
import { planOperations } from './plans';
import { memberOperations } from './members';
import { subscriptionOperations } from './subscriptions';
import { purchaseOperations } from './purchases';
import { discountOperations } from './discounts';
import { analyticsOperations } from './analytics';
import { entitlementOperations } from './entitlements';
import { externalSubjectOperations } from './external_subjects';
import { eventOperations } from './events';
import { checkoutOperations } from './checkout';
import { lifecycleOperations } from './lifecycle';
import { memberSessionOperations } from './member_sessions';
import { webhookOperations } from './webhooks';

export const operations: readonly Operation[] = [
  ...planOperations,
  ...memberOperations,
  ...subscriptionOperations,
  ...purchaseOperations,
  ...discountOperations,
  ...analyticsOperations,
  ...entitlementOperations,
  ...externalSubjectOperations,
  ...eventOperations,
  ...checkoutOperations,
  ...lifecycleOperations,
  ...memberSessionOperations,
  ...webhookOperations,
];

export function findOperation(name: string): Operation | undefined {
  return operations.find((op) => op.name === name);
}
