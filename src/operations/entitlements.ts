import type { Operation } from './registry';

export const entitlementOperations: Operation[] = [];
