// billing communities create --name NAME
// billing communities mail COMMUNITY_ID [--sender-name NAME] [--reply-to ADDRESS]
import { createCommunity, setCommunityMail } from '../domain/communities/community-admin';
import { defineCommand, defineGroup, requireString, UsageError } from './command';

export default defineGroup({
  name: 'communities',
  summary: 'create communities, set their mail sender',
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
  }), defineCommand({
    name: 'mail',
    summary: 'sets the display name and reply-to of the community\'s mail to members ("" clears one)',
    args: ['community_id'],
    options: {
      'sender-name': { type: 'string', description: 'display name of the sender (default: the community\'s name)' },
      'reply-to': { type: 'string', description: 'address members\' replies go to' },
    },
    async run(ctx, input) {
      const name = input.options['sender-name'];
      const replyTo = input.options['reply-to'];
      try {
        const r = await setCommunityMail(await ctx.ownerPool(), input.args[0],
          typeof name === 'string' ? name : undefined, typeof replyTo === 'string' ? replyTo : undefined);
        if (!r) throw new UsageError(`no community ${input.args[0]}`);
        return r;
      } catch (err) {
        if ((err as { code?: string }).code === '23514') {
          throw new UsageError('--sender-name: 1 to 200 characters without quotes, brackets or line breaks; --reply-to: an email address');
        }
        throw err;
      }
    },
    print: (r: { id: string; mail_sender_name: string | null; mail_reply_to: string | null }) =>
      `Mail of ${r.id}: sender name ${r.mail_sender_name ?? '(the community name)'}, reply-to ${r.mail_reply_to ?? '(none)'}`,
  })],
});
