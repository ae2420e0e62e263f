// billing members export MEMBER_ID [--community ID] [--out FILE]
// billing members erase MEMBER_ID [--community ID] --yes
// A member's data exported as JSON, and erased (issue 31 item 4;
// docs/decisions/member-export.md, member-erasure.md): the same SQL as the API's
// GET /v1/members/{id}/export and POST /v1/members/{id}/erase, as the owner. Without
// --community the member's own community is used (member ids are unique).
import fs from 'node:fs';
import { eraseMember, exportMember, MemberErasure, MemberExport } from '../domain/members/member-privacy';
import { defineCommand, defineGroup, UsageError } from './command';

const community = { type: 'string', value: 'ID', description: 'the member\'s community (default: the one holding the member id)' } as const;
const optionalString = (v: string | boolean | undefined) => (typeof v === 'string' && v !== '' ? v : undefined);

interface Written { file: string; member_id: string; bytes: number }

export default defineGroup({
  name: 'members',
  summary: "export a member's data as JSON, or erase it",
  commands: [
    defineCommand({
      name: 'export',
      summary: 'prints (or writes to --out, mode 600) everything the service holds about a member, as JSON',
      args: ['MEMBER_ID'],
      options: {
        community,
        out: { type: 'string', value: 'FILE', description: 'write the JSON document to this file instead of stdout' },
      },
      async run(ctx, input): Promise<MemberExport | Written> {
        const doc = await exportMember(await ctx.ownerPool(), input.args[0], optionalString(input.options.community));
        const out = optionalString(input.options.out);
        if (!out) return doc;
        const text = `${JSON.stringify(doc, null, 2)}\n`;
        fs.writeFileSync(out, text, { mode: 0o600 });
        return { file: out, member_id: doc.member.id, bytes: Buffer.byteLength(text) };
      },
      print: (r: MemberExport | Written) => ('format' in r ? JSON.stringify(r, null, 2) : `Wrote the export of ${r.member_id} to ${r.file} (${r.bytes.toLocaleString('en-US')} bytes)`),
    }),
    defineCommand({
      name: 'erase',
      summary: "erases a member's personal data and ends their access (irreversible; a repeat does nothing)",
      args: ['MEMBER_ID'],
      options: {
        community,
        yes: { type: 'boolean', description: 'confirm: the erasure cannot be undone' },
      },
      async run(ctx, input) {
        if (input.options.yes !== true) throw new UsageError('erasing a member cannot be undone: add --yes to confirm');
        return eraseMember(await ctx.ownerPool(), input.args[0], optionalString(input.options.community));
      },
      print: (e: MemberErasure) => (!e.changed ? `Member ${e.member_id} was erased already (${e.erased_at}): nothing done.` : [
        `Member ${e.member_id} erased at ${e.erased_at}.`,
        `  access ended: ${e.subscriptions_cancelled} subscriptions cancelled (no refund), ${e.grants_revoked} grants revoked, `
          + `${e.purchases_ended} purchases ended, ${e.checkouts_expired} checkouts expired`,
        `  kept: ${e.invoices_kept} invoices (with the fields the law requires); ${e.events_redacted} events redacted`,
        ...(e.discount_codes_naming_member.length > 0
          ? [`  discount codes naming them (remove them from the catalog yourself): ${e.discount_codes_naming_member.join(', ')}`] : []),
      ].join('\n')),
    }),
  ],
});
