import type { Operation } from './registry';

export const externalSubjectOperations: Operation[] = [];
