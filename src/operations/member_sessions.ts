import type { Operation } from './registry';

export const memberSessionOperations: Operation[] = [];
