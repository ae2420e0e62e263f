// billing operators invite --community ID --email E --role owner|admin|viewer
// billing operators reset-second-factor --community ID --email E
import { baseUrlFor, Config } from '../core/config';
import { recordedServerUrl } from '../db/server-url';
import { OPERATOR_ROLES, OperatorRole } from '../core/scopes';
import { Invitation, inviteOperator, signInLink } from '../domain/operators/operator-accounts';
import { resetSecondFactor } from '../domain/operators/second-factor';
import { defineCommand, defineGroup, requireString, UsageError } from './command';

/**
 * Where the link points: PUBLIC_BASE_URL; else the URL the running server recorded when
 * it started (its real port, whatever PORT this shell has); else localhost:PORT.
 */
export function dashboardBaseUrl(config: Config): string {
  if (config.publicBaseUrl) return baseUrlFor(config, null);
  return recordedServerUrl(config.dataDir) ?? baseUrlFor(config, null);
}

export default defineGroup({
  name: 'operators',
  summary: 'dashboard users',
  commands: [
    defineCommand({
      name: 'invite',
      summary: 'creates a dashboard user (or changes its role) and prints a one-time sign-in link',
      options: {
        community: { type: 'string', required: true, value: 'ID', description: 'community id' },
        email: { type: 'string', required: true, value: 'EMAIL', description: 'the operator\'s email' },
        role: { type: 'string', required: true, value: 'ROLE', description: 'owner, admin or viewer' },
      },
      async run(ctx, input) {
        const role = requireString(input, 'role');
        if (!(OPERATOR_ROLES as readonly string[]).includes(role)) throw new UsageError(`--role: expected one of ${OPERATOR_ROLES.join(', ')}`);
        const email = requireString(input, 'email').trim();
        if (!/^[^@\s]+@[^@\s]+$/.test(email) || email.length > 254) throw new UsageError('--email: expected an email address');
        const invitation = await inviteOperator(await ctx.ownerPool(), requireString(input, 'community'), email, role as OperatorRole);
        return { ...invitation, url: signInLink(dashboardBaseUrl(ctx.config), invitation.token) };
      },
      print: (r: Invitation & { url: string }) =>
        `Invited ${r.email} as ${r.role} of ${r.community_id}. One-time sign-in link (until ${r.expires_at}):\n\n  ${r.url}\n`,
    }),
    defineCommand({
      name: 'reset-second-factor',
      summary: 'removes a dashboard user\'s second factor and recovery codes (a lost phone) and ends their sessions',
      options: {
        community: { type: 'string', required: true, value: 'ID', description: 'community id' },
        email: { type: 'string', required: true, value: 'EMAIL', description: 'the operator\'s email' },
      },
      async run(ctx, input) {
        const community = requireString(input, 'community');
        const email = requireString(input, 'email');
        const r = await resetSecondFactor(await ctx.ownerPool(), community, email);
        if (!r) throw new UsageError(`--email: no operator ${email} in ${community}`);
        return r;
      },
      print: (r: { email: string; had_second_factor: boolean; sessions_ended: number }) =>
        `${r.had_second_factor ? `Removed the second factor of ${r.email}` : `${r.email} had no second factor`}; ${r.sessions_ended} session(s) ended. They sign in with their password (or a link) and can set up a new one.\n`,
    }),
  ],
});
