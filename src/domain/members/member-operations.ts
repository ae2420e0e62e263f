import { z } from 'zod';
import { memberEntitlement } from '../entitlements/entitlement-schema';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation, Operation } from '../operation';
import { emailAddress, identityPairQuery, member } from './member-schema';

export const memberOperations: Operation[] = [
  defineOperation({
    name: 'list_members',
    method: 'GET',
    path: '/v1/members',
    scope: 'members:read',
    tag: 'Members',
    summary: 'List members, newest first',
    query: z.object({ ...pageQuery, email: emailAddress.optional().describe('Only the member with this email (case-insensitive)') }),
    response: listOf(member),
    sql: 'members_list',
  }),
  defineOperation({
    name: 'update_member',
    method: 'PATCH',
    path: '/v1/members/{id}',
    scope: 'members:write',
    tag: 'Members',
    summary: "Set or clear a member's email",
    description: 'Additive endpoint (not in the spec\'s table). email null clears it. Writes no event: the email is '
      + 'personal data and never leaves in an event or webhook.',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    body: z.object({ email: emailAddress.nullable().optional().describe('The member\'s email; null clears it') }),
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
