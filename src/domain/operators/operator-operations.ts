// Dashboard users managed by a community's owners (operators:read / operators:write,
// held by the owner role only: 15-operators.sql). Page-only operations, not under /v1
// (src/operations/index.ts dashboardOperations).
import { z } from 'zod';
import { hashKey } from '../../core/ids';
import { OPERATOR_ROLES } from '../../core/scopes';
import { idParam, listOf, pageQuery, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';
import { newLinkToken, signInLink } from './operator-accounts';

export const operatorUser = z.object({
  id: z.string(),
  email: z.string(),
  role: z.enum(OPERATOR_ROLES),
  has_password: z.boolean(),
  created_at: timestamp,
  disabled_at: timestamp.nullable(),
});

export const operatorOperations: Operation[] = [
  defineOperation({
    name: 'list_operators',
    method: 'GET',
    path: '/dashboard/operators',
    scope: 'operators:read',
    tag: 'Operators',
    summary: 'The community\'s dashboard users, newest first',
    query: z.object({ ...pageQuery }),
    response: listOf(operatorUser),
    sql: 'operators_list',
  }),
  defineOperation({
    name: 'invite_operator',
    method: 'POST',
    path: '/dashboard/operators',
    scope: 'operators:write',
    tag: 'Operators',
    summary: 'Invite a dashboard user (or change the role of the one with that email); answers a one-time sign-in link',
    body: z.object({ email: z.string().trim().min(3).max(254).regex(/^[^@\s]+@[^@\s]+$/, 'expected an email address'), role: z.enum(OPERATOR_ROLES) }),
    response: z.object({ user_id: z.string(), email: z.string(), role: z.enum(OPERATOR_ROLES), expires_at: timestamp, url: z.string() }),
    handler: async (ctx, input) => {
      const token = newLinkToken();
      const r = await ctx.call<{ user_id: string; email: string; role: string; expires_at: string }>('operators_invite',
        { email: input.email, role: input.role, token_sha256: hashKey(token) });
      return { user_id: r.user_id, email: r.email, role: r.role, expires_at: r.expires_at, url: signInLink(ctx.baseUrl, token) };
    },
  }),
  defineOperation({
    name: 'update_operator',
    method: 'PATCH',
    path: '/dashboard/operators/{id}',
    scope: 'operators:write',
    tag: 'Operators',
    summary: 'Change a dashboard user\'s role, or disable / enable it (a community keeps an enabled owner)',
    params: z.object({ id: idParam('Operator id (opu_...)') }),
    body: z.object({ role: z.enum(OPERATOR_ROLES).optional(), disabled: z.boolean().optional() }),
    response: operatorUser,
    sql: 'operators_update',
  }),
];
