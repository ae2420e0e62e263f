import type { Operation } from './registry';

export const checkoutOperations: Operation[] = [];
