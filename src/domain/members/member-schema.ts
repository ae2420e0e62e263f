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

/**
 * The member as the API answers it (billing.member_api_json): plus its email, display
 * name, and the operators' note and tags. All personal data: never in events or webhooks.
 */
export const member = eventMemberObject.extend({
  email: z.string().nullable().describe('The member\'s email (personal data; never in events or webhooks), null when unknown'),
  display_name: z.string().nullable().describe('How operators see the member: the Discord username, else the Telegram username, '
    + 'else the email, else the first external subject\'s external_user_id; null when there is none (personal data; never in events or webhooks)'),
  note: z.string().nullable().describe('The operators\' note about the member, null when none (personal data; never in events or webhooks)'),
  tags: z.array(z.string()).describe('The operators\' tags on the member, lowercase and sorted ([] when none)'),
  erased_at: timestamp.nullable().describe('When the member\'s personal data was erased (POST /v1/members/{id}/erase): '
    + 'identities, email and the rest are empty from then on; null when it was not'),
});

/** An email address as the API takes it (billing.email_valid has the last word). */
export const emailAddress = z.string().trim().min(3).max(254)
  .regex(/^[^@\s<>(),;:"[\]]+@[^@\s<>(),;:"[\]]+\.[^@\s<>(),;:"[\]]+$/, { message: 'must be an email address' });

// ---- the operators' note and tags, and the members list's search (docs/decisions/member-notes.md, member-search.md)

/** C0 and C1 control characters (U+0000-U+001F, U+007F-U+009F), tab and line feed excepted. */
const CONTROL_BUT_TAB_AND_LF = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * An operator's note: line breaks as LF (a browser's CR LF too), trimmed, 1 to 2000
 * characters, no control character but tab and line feed. billing.member_note_valid
 * holds the same rule in the database.
 */
export const memberNote = z.string()
  .overwrite((s) => s.replace(/\r\n?/g, '\n').trim())
  .min(1, { message: 'must not be empty (send null to clear the note)' })
  .max(2000, { message: 'must be at most 2000 characters' })
  .refine((s) => !CONTROL_BUT_TAB_AND_LF.test(s), { message: 'must not contain control characters (tabs and line breaks excepted)' });

/** A tag as operators type it, normalised: NFC, trimmed, lowercase, each run of spaces one "-". */
export const normaliseTag = (tag: string) => tag.normalize('NFC').trim().toLowerCase().replace(/\s+/gu, '-');
const TAG_CHARACTERS = /^[\p{L}\p{M}\p{N}_.:/-]+$/u;

/** One tag: normalised, then 1 to 40 letters, digits or - _ . : / (billing.member_tags_valid). */
export const memberTag = z.string()
  .overwrite(normaliseTag)
  .min(1, { message: 'must not be empty' })
  .refine((t) => [...t].length <= 40, { message: 'must be at most 40 characters' })
  .refine((t) => TAG_CHARACTERS.test(t), { message: 'may hold letters, digits and - _ . : / only' })
  .meta({ maxLength: 40 });

/** The tags of a member: at most 20, normalised, duplicates dropped, sorted. */
export const memberTags = z.array(memberTag).max(20, { message: 'must be at most 20 tags' })
  .overwrite((tags) => [...new Set(tags)].sort());

/**
 * A search of the members list: trimmed, 1 to 200 characters, no control character.
 * Matched as a case-insensitive substring, %, _ and \ taken literally (SQL escapes them).
 */
export const memberSearch = z.string().trim()
  .min(1, { message: 'must not be empty' })
  .max(200, { message: 'must be at most 200 characters' })
  .refine((s) => !CONTROL.test(s), { message: 'must not contain control characters' });

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
