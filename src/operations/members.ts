import type { Operation } from './registry';

export const memberOperations: Operation[] = [];
