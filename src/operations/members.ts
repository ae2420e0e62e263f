import { z } from 'zod';
import { defineOperation, idParam, listOf, Operation, pageQuery, timestamp } from './registry';
import { identityQuery, memberEntitlement } from './entitlements';

/** Built by billing.member_json(community_id, member_id). */
export const member = z.object({
  id: z.string(),
  created_at: timestamp,
  identities: z.array(z.object({
    platform: z.string(),
    platform_uid: z.string(),
    username: z.string().nullable(),
  })),
  external_subjects: z.array(z.object({
    namespace: z.string(),
    external_user_id: z.string(),
  })),
});

export const memberOperations: Operation[] = [
  defineOperation({
    name: 'list_members',
    method: 'GET',
    path: '/v1/members',
    scope: 'members:read',
    tag: 'Members',
    summary: 'List members, newest first',
    query: z.object({ ...pageQuery }),
    response: listOf(member),
    sql: 'members_list',
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
    query: z.object(identityQuery),
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
