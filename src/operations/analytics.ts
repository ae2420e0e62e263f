import type { Operation } from './registry';

export const analyticsOperations: Operation[] = [];
