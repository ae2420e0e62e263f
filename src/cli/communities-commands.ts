// billing communities create --name NAME
// billing communities set-legal --community ID [--legal-name N] [--address 'LINE|LINE'] [--country CC] [--tax-id T]
// billing communities mail COMMUNITY_ID [--sender-name NAME] [--reply-to ADDRESS]
// billing communities set-audit-retention COMMUNITY_ID --days N
import { CommunityLegal, createCommunity, setAuditRetention, setCommunityLegal, setCommunityMail } from '../domain/communities/community-admin';
import { defineCommand, defineGroup, positiveInteger, requireString, UsageError } from './command';

type Legal = Awaited<ReturnType<typeof setCommunityLegal>>;

/** An option as a field: absent is left out (kept), empty text is null (cleared). */
function field(value: string | boolean | undefined): string | null | undefined {
  if (typeof value !== 'string') return undefined;
  return value.trim() === '' ? null : value.trim();
}

export default defineGroup({
  name: 'communities',
  summary: 'create communities, set what their invoices say of them, their mail sender and how long their audit log is kept',
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
    name: 'set-legal',
    summary: 'sets the legal name, address, country and tax id its invoices print (an empty value clears one)',
    options: {
      community: { type: 'string', required: true, description: 'community id' },
      'legal-name': { type: 'string', description: 'legal name (1 to 200 characters; else invoices print the display name)' },
      address: { type: 'string', value: 'LINE|LINE', description: 'postal address, lines separated by | (at most 6)' },
      country: { type: 'string', value: 'CC', description: 'ISO 3166-1 alpha-2 country code, e.g. IE' },
      'tax-id': { type: 'string', description: 'tax id (VAT, GST, EIN ...), printed as written' },
    },
    async run(ctx, input) {
      const community = requireString(input, 'community');
      const legal: CommunityLegal = {};
      const o = input.options;
      if (field(o['legal-name']) !== undefined) legal.legal_name = field(o['legal-name']);
      const address = field(o.address);
      if (address !== undefined) legal.address_lines = address === null ? null : address.split('|').map((l) => l.trim()).filter(Boolean);
      const country = field(o.country);
      if (country !== undefined) legal.country = country === null ? null : country.toUpperCase();
      if (field(o['tax-id']) !== undefined) legal.tax_id = field(o['tax-id']);
      if (Object.keys(legal).length === 0) throw new UsageError('give at least one of --legal-name, --address, --country, --tax-id');
      if (legal.country && !/^[A-Z]{2}$/.test(legal.country)) throw new UsageError('--country: expected a two-letter ISO 3166-1 code, e.g. IE');
      return setCommunityLegal(await ctx.ownerPool(), community, legal);
    },
    print: (r: Legal) => [`Community ${r.id} invoices print:`, r.legal_name ?? '(its display name)', ...(r.address_lines ?? []),
      ...(r.country ? [r.country] : []), ...(r.tax_id ? [`Tax id: ${r.tax_id}`] : [])].join('\n'),
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
  }), defineCommand({
    name: 'set-audit-retention',
    summary: 'sets how many days the community\'s audit log is kept (30 to 3650; 365 by default)',
    args: ['community_id'],
    options: { days: { type: 'string', required: true, value: 'N', description: 'days, 30 to 3650; older lines are purged hourly' } },
    async run(ctx, input) {
      const days = positiveInteger(requireString(input, 'days'), '--days');
      if (days < 30 || days > 3650) throw new UsageError('--days: expected 30 to 3650');
      const r = await setAuditRetention(await ctx.ownerPool(), input.args[0], days);
      if (!r) throw new UsageError(`no community ${input.args[0]}`);
      return r;
    },
    print: (r: { id: string; audit_retention_days: number }) => `The audit log of ${r.id} is kept ${r.audit_retention_days} days.`,
  })],
});
