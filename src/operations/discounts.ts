import type { Operation } from './registry';

export const discountOperations: Operation[] = [];
