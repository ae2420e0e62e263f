import type { Operation } from './registry';

export const lifecycleOperations: Operation[] = [];
