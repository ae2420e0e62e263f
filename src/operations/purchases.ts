import type { Operation } from './registry';

export const purchaseOperations: Operation[] = [];
