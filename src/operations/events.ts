import type { Operation } from './registry';

export const eventOperations: Operation[] = [];
