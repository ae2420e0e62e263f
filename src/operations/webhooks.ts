import type { Operation } from './registry';

export const webhookOperations: Operation[] = [];
