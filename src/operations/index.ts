// Every operation of the API, in one list. Each resource module exports its own.
import type { Operation } from './registry';
import { planOperations } from './plans';

export const operations: readonly Operation[] = [
  ...planOperations,
];

export function findOperation(name: string): Operation | undefined {
  return operations.find((op) => op.name === name);
}
