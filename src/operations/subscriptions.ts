import type { Operation } from './registry';

export const subscriptionOperations: Operation[] = [];
