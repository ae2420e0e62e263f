import { z } from 'zod';
import { idParam } from '../fields';
import { defineOperation } from '../operation';
import { member } from './member-schema';

export const externalSubjectOperations = [
  defineOperation({
    name: 'attach_external_subject',
    method: 'POST',
    path: '/v1/members/{id}/external-subjects',
    scope: 'members:write',
    tag: 'Members',
    summary: 'Map an operator-owned external identity onto a member',
    description:
      'Attaches {namespace, external_user_id} to the member and republishes each active entitlement as ' +
      'member.entitlement.updated carrying the new subject. The identical mapping again is a no-op (same answer, ' +
      'no event). A subject mapped to another member, or a member with a different subject in that namespace, ' +
      'answers 409 conflict.',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    body: z.object({
      namespace: z.string().min(1).max(200).describe('Operator namespace, e.g. "acme-app"'),
      external_user_id: z.string().min(1).max(200).describe('The user id in that namespace'),
    }),
    response: member,
    idempotent: true,
    sql: 'external_subjects_attach',
  }),
];
