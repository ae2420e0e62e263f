// The one mail the dashboard sends itself: a one-time sign-in link to an operator whose
// right password came from a new address while the account was under a guessing
// attack (operator-accounts.ts, signInWithPassword; docs/decisions/operator-sign-in-throttles.md).
// Sent over SMTP_URL with nodemailer, loaded with the first such mail; without SMTP_URL
// there is no mailer and an owner makes the link instead. The link names
// PUBLIC_BASE_URL (else localhost:PORT), never the request's Host: whoever typed the
// password does not choose where the mail points. Addresses and links are never
// logged: a failure logs the SMTP server's code only.
import type { Transporter } from 'nodemailer';
import { log } from '../core/log';
import { baseUrlFor, type Config } from '../core/config';
import { LinkMailer, MAILED_LINK_TTL, signInLink } from '../domain/operators/operator-accounts';

const TIMEOUT_MS = 30_000;

/** Header-safe display name: no quotes, brackets or line breaks. */
const displayName = (name: string) => name.replace(/[\r\n"<>\\]/g, ' ').trim().slice(0, 200);

export function operatorLinkMailer(config: Config): LinkMailer | null {
  const smtpUrl = config.smtpUrl;
  if (!smtpUrl) return null;
  let transport: Transporter | null = null;
  return async ({ to, communityName, token }) => {
    try {
      if (!transport) {
        const { createTransport } = await import('nodemailer');
        transport = createTransport({ url: smtpUrl, connectionTimeout: TIMEOUT_MS, greetingTimeout: TIMEOUT_MS, socketTimeout: TIMEOUT_MS });
      }
      const link = signInLink(baseUrlFor(config, null), token);
      await transport.sendMail({
        from: { name: displayName(`${communityName} billing`), address: config.mailFrom },
        to,
        subject: `Your sign-in link for ${communityName}`,
        text: `Your password was entered on the ${communityName} billing dashboard from an address this account has not signed in from, while the account is being sent many wrong passwords. To sign in there, open this one-time link within ${MAILED_LINK_TTL}:\n\n${link}\n\nIf that was not you, someone knows your password: sign in from an address you use and change it.\n`,
      });
    } catch (err) {
      const e = err as { responseCode?: number; code?: string };
      log.warn(`operator sign-in link mail not sent (${[e.responseCode, e.code].filter(Boolean).join(' ') || 'send failed'})`);
      throw err;
    }
  };
}
