// The member, as billing.member_json builds it, and the identity pair that finds one.
import { z } from 'zod';
import { ApiError } from '../../core/errors';
import { platform, timestamp } from '../fields';

export const identity = z.object({
  platform: z.string(),
  platform_uid: z.string(),
  username: z.string().nullable(),
});

export const externalSubject = z.object({ namespace: z.string(), external_user_id: z.string() });

/** The member as events carry it (billing.member_json): never the email. */
export const eventMemberObject = z.object({
  id: z.string(),
  created_at: timestamp,
  identities: z.array(identity),
  external_subjects: z.array(externalSubject),
});

/** The member as the API answers it (billing.member_api_json): plus its email. */
export const member = eventMemberObject.extend({
  email: z.string().nullable().describe('The member\'s email (personal data; never in events or webhooks), null when unknown'),
});

/** An email address as the API takes it (billing.email_valid has the last word). */
export const emailAddress = z.string().trim().min(3).max(254)
  .regex(/^[^@\s<>(),;:"[\]]+@[^@\s<>(),;:"[\]]+\.[^@\s<>(),;:"[\]]+$/, { message: 'must be an email address' });

/**
 * One identity pair, as query fields: platform with platform_uid, or namespace with
 * external_user_id. Exactly one pair is required; billing.resolve_identity enforces
 * that for every door (400 naming what is missing).
 */
export const identityPairQuery = {
  platform: platform.optional().describe('First-party platform; send with platform_uid.'),
  platform_uid: z.string().min(1).max(200).optional().describe('User id on the platform; send with platform.'),
  namespace: z.string().min(1).max(200).optional().describe('Operator namespace; send with external_user_id.'),
  external_user_id: z.string().min(1).max(200).optional().describe('Operator user id; send with namespace.'),
};

export type IdentityPair =
  | { kind: 'platform'; platform: unknown; platform_uid: unknown }
  | { kind: 'external'; namespace: unknown; external_user_id: unknown };

/**
 * The identity-pair rule for flat input (the fields of identityPairQuery side by
 * side, as MCP tools take them): exactly one whole pair. A violation is a 422 naming
 * the field to fix. Query operations leave the rule to billing.resolve_identity.
 */
export function identityPair(input: Record<string, unknown>): IdentityPair {
  const invalid = (param: string, detail: string) => new ApiError('invalid_request', detail, { status: 422, extra: { param } });
  const hasPlatform = input.platform !== undefined || input.platform_uid !== undefined;
  const hasExternal = input.namespace !== undefined || input.external_user_id !== undefined;
  if (hasPlatform && hasExternal) {
    throw invalid(input.platform !== undefined ? 'platform' : 'platform_uid',
      'Give exactly one identity: platform with platform_uid, or namespace with external_user_id, not both.');
  }
  if (!hasPlatform && !hasExternal) {
    throw invalid('platform', 'Missing identity: give platform with platform_uid, or namespace with external_user_id.');
  }
  if (hasPlatform) {
    if (input.platform === undefined) throw invalid('platform', 'Missing required field "platform" (it goes with platform_uid).');
    if (input.platform_uid === undefined) throw invalid('platform_uid', 'Missing required field "platform_uid" (it goes with platform).');
    return { kind: 'platform', platform: input.platform, platform_uid: input.platform_uid };
  }
  if (input.namespace === undefined) throw invalid('namespace', 'Missing required field "namespace" (it goes with external_user_id).');
  if (input.external_user_id === undefined) throw invalid('external_user_id', 'Missing required field "external_user_id" (it goes with namespace).');
  return { kind: 'external', namespace: input.namespace, external_user_id: input.external_user_id };
}
