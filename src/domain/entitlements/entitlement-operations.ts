import { z } from 'zod';
import { identityPairQuery } from '../members/member-schema';
import { defineOperation, Operation } from '../operation';
import { memberEntitlement } from './entitlement-schema';

export const entitlementOperations: Operation[] = [
  defineOperation({
    name: 'check_entitlement',
    method: 'GET',
    path: '/v1/entitlements/check',
    scope: 'members:read',
    tag: 'Entitlements',
    summary: 'Is this identity entitled (optionally: through this tier)?',
    description: 'Send exactly one identity pair. An unknown identity is not entitled. With tier_id, entitled is true '
      + 'only when an active entitlement has a source on that tier, and only such entitlements are listed.',
    query: z.object({
      ...identityPairQuery,
      tier_id: z.string().min(1).max(100).optional().describe('Only access granted through this tier counts.'),
    }),
    response: z.object({ entitled: z.boolean(), entitlements: z.array(memberEntitlement) }),
    sql: 'entitlements_check',
  }),
];
