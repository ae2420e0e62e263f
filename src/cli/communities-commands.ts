// billing communities create --name NAME
import { createCommunity } from '../domain/communities/community-admin';
import { defineCommand, defineGroup, requireString, UsageError } from './command';

export default defineGroup({
  name: 'communities',
  summary: 'create communities',
  commands: [defineCommand({
    name: 'create',
    summary: 'creates a community',
    options: { name: { type: 'string', required: true, description: 'display name (1 to 200 characters)' } },
    async run(ctx, input) {
      const name = requireString(input, 'name').trim();
      if (name.length < 1 || name.length > 200) throw new UsageError('--name: expected 1 to 200 characters');
      return createCommunity(await ctx.ownerPool(), name);
    },
    print: (r: { id: string }) => `Created community ${r.id}`,
  })],
});
