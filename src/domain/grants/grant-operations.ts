import { z } from 'zod';
import { idParam, listOf, pageQuery, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';
import { grant } from './grant-schema';

const member = { id: idParam('Member id (mem_...)') };

export const grantOperations: Operation[] = [
  defineOperation({
    name: 'create_grant',
    method: 'POST',
    path: '/v1/members/{id}/grants',
    scope: 'members:write',
    tag: 'Members',
    summary: 'Grant a member a tier\'s access by hand (a comp)',
    description: 'A grant is a ledger source like a subscription: member.entitlement.granted / updated / revoked follow at the edges, '
      + 'and it lapses by the community\'s clock at expires_at (none: until revoked).',
    params: z.object(member),
    body: z.object({
      tier_id: z.string().min(1).max(100).describe('A tier of this community'),
      expires_at: timestamp.pipe(z.iso.datetime({ offset: true })).optional().describe('When the access ends by itself'),
      note: z.string().max(500).optional().describe('Why (for operators)'),
    }),
    response: grant,
    idempotent: true,
    sql: 'grants_create',
  }),
  defineOperation({
    name: 'list_grants',
    method: 'GET',
    path: '/v1/members/{id}/grants',
    scope: 'members:read',
    tag: 'Members',
    summary: 'A member\'s grants, newest first',
    params: z.object(member),
    query: z.object({ ...pageQuery }),
    response: listOf(grant),
    sql: 'grants_list',
  }),
  defineOperation({
    name: 'revoke_grant',
    method: 'DELETE',
    path: '/v1/members/{id}/grants/{grant_id}',
    scope: 'members:write',
    tag: 'Members',
    summary: 'Revoke a grant now',
    description: 'The access it gave ends at once (member.entitlement.revoked unless another source still supports it). Revoking again changes nothing.',
    params: z.object({ ...member, grant_id: idParam('Grant id (grt_...)') }),
    response: grant,
    idempotent: true,
    sql: 'grants_revoke',
  }),
];
