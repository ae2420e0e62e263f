// Dashboard users managed by a community's owners (operators:read / operators:write,
// held by the owner role only: 15-operators.sql): inviting, roles, removing, their
// live sessions, and whether a second factor is required. Page-only operations, not
// under /v1 (src/operations/index.ts dashboardOperations).
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
  second_factor: z.boolean(),
  created_at: timestamp,
  disabled_at: timestamp.nullable(),
});

/** A live dashboard session as owners see it (billing_private.operator_session_json). */
export const operatorSession = z.object({
  id: z.string(),
  user_id: z.string(),
  email: z.string().nullable(),
  current: z.boolean(),
  code_pending: z.boolean(),
  created_at: timestamp,
  last_seen_at: timestamp,
  expires_at: timestamp,
  address: z.string().nullable(),
  browser: z.string().nullable(),
});

const sessionsEnded = z.object({ ended: z.number().int() });

const operatorPolicy = z.object({
  second_factor_required: z.boolean(),
  updated_at: timestamp.nullable(),
  operators_without_second_factor: z.number().int(),
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
  defineOperation({
    name: 'remove_operator',
    method: 'DELETE',
    path: '/dashboard/operators/{id}',
    scope: 'operators:write',
    tag: 'Operators',
    summary: 'Remove a dashboard user: their sessions end at once (a community keeps an enabled owner)',
    params: z.object({ id: idParam('Operator id (opu_...)') }),
    response: z.object({ id: z.string(), email: z.string(), role: z.enum(OPERATOR_ROLES), removed: z.literal(true) }),
    sql: 'operators_remove',
  }),
  defineOperation({
    name: 'sign_out_operator',
    method: 'POST',
    path: '/dashboard/operators/{id}/sign-out',
    scope: 'operators:write',
    tag: 'Operators',
    summary: 'End every session of a dashboard user',
    params: z.object({ id: idParam('Operator id (opu_...)') }),
    response: sessionsEnded,
    sql: 'operators_sign_out',
  }),
  defineOperation({
    name: 'reset_operator_second_factor',
    method: 'POST',
    path: '/dashboard/operators/{id}/reset-second-factor',
    scope: 'operators:write',
    tag: 'Operators',
    summary: 'Remove a dashboard user\'s second factor and recovery codes (a lost phone); their sessions end',
    params: z.object({ id: idParam('Operator id (opu_...)') }),
    response: operatorUser,
    sql: 'operators_reset_second_factor',
  }),
  defineOperation({
    name: 'list_operator_sessions',
    method: 'GET',
    path: '/dashboard/operator-sessions',
    scope: 'operators:read',
    tag: 'Operators',
    summary: 'The live dashboard sessions of the community (others\' addresses cut to their network), most recently seen first',
    query: z.object({ user_id: z.string().max(100).optional() }),
    response: z.object({ data: z.array(operatorSession) }),
    sql: 'operator_sessions_list',
  }),
  defineOperation({
    name: 'end_operator_session',
    method: 'DELETE',
    path: '/dashboard/operator-sessions/{session_id}',
    scope: 'operators:write',
    tag: 'Operators',
    summary: 'End one dashboard session of the community',
    params: z.object({ session_id: idParam('Session id (ops_...)') }),
    response: sessionsEnded,
    sql: 'operator_sessions_end',
  }),
  defineOperation({
    name: 'get_operator_policy',
    method: 'GET',
    path: '/dashboard/operator-policy',
    scope: 'operators:read',
    tag: 'Operators',
    summary: 'Whether the community requires a second factor of its operators',
    response: operatorPolicy,
    sql: 'operator_policy_get',
  }),
  defineOperation({
    name: 'update_operator_policy',
    method: 'PATCH',
    path: '/dashboard/operator-policy',
    scope: 'operators:write',
    tag: 'Operators',
    summary: 'Require (or stop requiring) a second factor of the community\'s operators; the owner needs one first',
    body: z.object({ second_factor_required: z.boolean() }),
    response: operatorPolicy,
    sql: 'operator_policy_update',
  }),
];
