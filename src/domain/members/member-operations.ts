import { z } from 'zod';
import { memberEntitlement } from '../entitlements/entitlement-schema';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation, Operation } from '../operation';
import { SUBSCRIPTION_STATUSES } from '../../core/statuses';
import { emailAddress, identityPairQuery, member, memberNote, memberSearch, memberTag, memberTags } from './member-schema';

/** An ISO 8601 instant PostgreSQL can read (it has no year 0000: 1 BC comes before 1 AD). */
const instant = z.iso.datetime({ offset: true }).refine((v) => !v.startsWith('0000-'), { message: 'there is no year 0000' });

export const memberOperations: Operation[] = [
  defineOperation({
    name: 'list_members',
    method: 'GET',
    path: '/v1/members',
    scope: 'members:read',
    tag: 'Members',
    summary: 'List members, newest first: search and filters',
    description: 'Additive filters (not in the spec\'s table), combinable with each other and with the cursor (a cursor '
      + 'continues only the filters it was issued with). q finds members by a case-insensitive substring of their id, '
      + 'email, platform usernames and ids, or external user ids (%, _ and \\ match themselves); status, tier_id and '
      + 'plan_id keep members with one subscription that has them all; tag, created_after and created_before as named.',
    query: z.object({
      ...pageQuery,
      email: emailAddress.optional().describe('Only the member with this email (case-insensitive)'),
      q: memberSearch.optional().describe('Search: a case-insensitive substring of the member id, email, a platform '
        + 'username or platform_uid, or an external_user_id (1 to 200 characters; % and _ are literal).'),
      status: z.enum(SUBSCRIPTION_STATUSES).optional().describe('Only members with a subscription in this status.'),
      tier_id: z.string().min(1).max(100).optional().describe('Only members with a subscription on a plan of this tier.'),
      plan_id: z.string().min(1).max(100).optional().describe('Only members with a subscription on this billing plan.'),
      tag: memberTag.optional().describe('Only members with this tag (normalised as tags are: lowercase, spaces as -).'),
      created_after: instant.optional().describe('Only members created at or after this instant (ISO 8601).'),
      created_before: instant.optional().describe('Only members created before this instant (ISO 8601).'),
    }),
    response: listOf(member),
    sql: 'members_list',
  }),
  defineOperation({
    name: 'update_member',
    method: 'PATCH',
    path: '/v1/members/{id}',
    scope: 'members:write',
    tag: 'Members',
    summary: "Set a member's email, note and tags",
    description: 'Additive endpoint (not in the spec\'s table). A field left out is kept; email and note null clear them; '
      + 'tags replaces the member\'s tags ([] clears them). Writes no event: these fields are personal data and never '
      + 'leave in an event or webhook.',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    body: z.object({
      email: emailAddress.nullable().optional().describe('The member\'s email; null clears it'),
      note: memberNote.nullable().optional().describe('The operators\' note: 1 to 2000 characters, no control character '
        + 'but tab and line break; null clears it'),
      tags: memberTags.optional().describe('The member\'s tags, replacing the current ones: at most 20, each 1 to 40 letters, '
        + 'digits or - _ . : /, normalised (lowercase, spaces as -, duplicates dropped); [] clears them'),
    }),
    response: member,
    idempotent: true,
    sql: 'members_update',
  }),
  defineOperation({
    name: 'lookup_member',
    method: 'GET',
    path: '/v1/members/lookup',
    scope: 'members:read',
    tag: 'Members',
    summary: 'Find the member holding one identity pair',
    description: 'Send exactly one pair: platform with platform_uid, or namespace with external_user_id. '
      + 'None, both or half a pair answers 400; an unknown platform 422; an unknown identity 404.',
    query: z.object(identityPairQuery),
    response: member,
    sql: 'members_lookup',
  }),
  defineOperation({
    name: 'get_member',
    method: 'GET',
    path: '/v1/members/{id}',
    scope: 'members:read',
    tag: 'Members',
    summary: 'Get one member',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    response: member,
    sql: 'members_get',
  }),
  defineOperation({
    name: 'get_member_entitlements',
    method: 'GET',
    path: '/v1/members/{id}/entitlements',
    scope: 'members:read',
    tag: 'Members',
    summary: "A member's active entitlements, from the ledger",
    params: z.object({ id: idParam('Member id (mem_...)') }),
    response: z.object({ data: z.array(memberEntitlement) }),
    sql: 'member_entitlements_list',
  }),
];
