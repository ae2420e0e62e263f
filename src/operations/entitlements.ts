import { z } from 'zod';
import { defineOperation, Operation, timestamp } from './registry';

/** One supporting source of a ledger entitlement (as the ledger holds it). */
export const entitlementSource = z.looseObject({
  type: z.string(),
  id: z.string(),
  status: z.string().nullable(),
  tier_id: z.string().nullable(),
  plan_id: z.string().nullable(),
  client_reference_id: z.string().nullable(),
  valid_until: timestamp.nullable(),
});

export const entitlementBenefit = z.looseObject({
  platform: z.string(),
  platform_config_id: z.string(),
  type: z.string(),
  value: z.string(),
});

/** Built by billing.member_entitlement_json. */
export const memberEntitlement = z.object({
  id: z.string(),
  entitlement_id: z.string(),
  key: z.string(),
  name: z.string(),
  revision: z.number().int(),
  status: z.enum(['active', 'inactive']),
  granted_at: timestamp.nullable(),
  revoked_at: timestamp.nullable(),
  sources: z.array(entitlementSource),
  benefits: z.array(entitlementBenefit),
});

/** Exactly one pair is required; the rule is enforced by billing.resolve_identity (400 naming what is missing). */
export const identityQuery = {
  platform: z.enum(['discord', 'telegram']).optional().describe('First-party platform; send with platform_uid.'),
  platform_uid: z.string().min(1).max(200).optional().describe('User id on the platform; send with platform.'),
  namespace: z.string().min(1).max(200).optional().describe('Operator namespace; send with external_user_id.'),
  external_user_id: z.string().min(1).max(200).optional().describe('Operator user id; send with namespace.'),
};

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
      ...identityQuery,
      tier_id: z.string().min(1).max(100).optional().describe('Only access granted through this tier counts.'),
    }),
    response: z.object({ entitled: z.boolean(), entitlements: z.array(memberEntitlement) }),
    sql: 'entitlements_check',
  }),
];
