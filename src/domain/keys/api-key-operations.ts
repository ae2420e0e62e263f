// API keys managed by operators from the dashboard (the spec: keys are "created and
// revoked in the operator dashboard"). Operator-only operations: their scopes
// (keys:read, keys:write) are held by operator sessions only, never by a key, so they
// are not mounted under /v1 (src/operations/index.ts: dashboardOperations). The rules
// (a key's scopes are API scopes the operator holds) are SQL's (15-operators.sql).
import { z } from 'zod';
import { SCOPES } from '../../core/scopes';
import { newKey } from '../communities/community-admin';
import { idParam, listOf, pageQuery, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';

export const apiKey = z.object({
  id: z.string(),
  name: z.string().nullable(),
  prefix: z.string().describe('Display prefix (bk_XXXXXXXX); the full key is shown once'),
  scopes: z.array(z.string()),
  created_at: timestamp,
  revoked_at: timestamp.nullable(),
  last_used_at: timestamp.nullable().describe('When the key last made a request (approximate: kept in its rate bucket)'),
});

export const apiKeyOperations: Operation[] = [
  defineOperation({
    name: 'list_api_keys',
    method: 'GET',
    path: '/dashboard/keys',
    scope: 'keys:read',
    tag: 'Keys',
    summary: 'The community\'s API keys, newest first',
    query: z.object({ ...pageQuery }),
    response: listOf(apiKey),
    sql: 'api_keys_list',
  }),
  defineOperation({
    name: 'create_api_key',
    method: 'POST',
    path: '/dashboard/keys',
    scope: 'keys:write',
    tag: 'Keys',
    summary: 'Create an API key; the full key is answered only this once',
    body: z.object({
      name: z.string().max(200).optional(),
      scopes: z.array(z.enum(SCOPES)).min(1).max(SCOPES.length),
    }),
    response: apiKey.extend({ key: z.string() }),
    handler: async (ctx, input) => {
      const made = newKey();
      const created = await ctx.call<z.infer<typeof apiKey>>('api_keys_create',
        { name: input.name, scopes: input.scopes, prefix: made.prefix, key_hash: made.key_hash });
      return { ...created, key: made.key };
    },
  }),
  defineOperation({
    name: 'revoke_api_key',
    method: 'POST',
    path: '/dashboard/keys/{id}/revoke',
    scope: 'keys:write',
    tag: 'Keys',
    summary: 'Revoke an API key at once',
    params: z.object({ id: idParam('Key id (key_...)') }),
    response: apiKey,
    sql: 'api_keys_revoke',
  }),
];
