// billing keys create --community ID --scopes LIST [--name LABEL]
// billing keys revoke KEY_ID
import { createKey, CreatedKey, parseScopes, revokeKey } from '../domain/communities/community-admin';
import { defineCommand, defineGroup, requireString, UsageError } from './command';

export default defineGroup({
  name: 'keys',
  summary: 'create and revoke API keys',
  commands: [
    defineCommand({
      name: 'create',
      summary: 'creates an API key; the full key is shown once',
      options: {
        community: { type: 'string', required: true, value: 'ID', description: 'community id' },
        scopes: { type: 'string', required: true, value: 'LIST', description: 'comma-separated scopes, or "all"' },
        name: { type: 'string', value: 'LABEL', description: 'a label for the key' },
      },
      async run(ctx, input) {
        const community = requireString(input, 'community');
        let scopes;
        try {
          scopes = parseScopes(requireString(input, 'scopes'));
        } catch (err) {
          throw new UsageError(`--scopes: ${(err as Error).message}`);
        }
        const name = typeof input.options.name === 'string' ? input.options.name : undefined;
        const key = await createKey(await ctx.ownerPool(), community, scopes, name);
        return { id: key.id, key: key.key, prefix: key.prefix, scopes: key.scopes };
      },
      print: (r: CreatedKey) =>
        `Created key ${r.id} (${r.scopes.join(' ')})\n\n  ${r.key}\n\nStore it now: it is not shown again.`,
    }),
    defineCommand({
      name: 'revoke',
      summary: 'revokes a key at once',
      args: ['KEY_ID'],
      async run(ctx, input) {
        return revokeKey(await ctx.ownerPool(), input.args[0]);
      },
      print: (r: { id: string; revoked_at: string }) => `Revoked key ${r.id} at ${r.revoked_at}`,
    }),
  ],
});
