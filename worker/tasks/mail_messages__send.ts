// graphile-worker task: sends mail to members (docs/decisions/mail-outbox.md). Queued by
// the _800_mail trigger on billing.events (65-mail.sql) with the ids of one
// community's new messages. It claims those still queued (billing_private.mail_claim:
// a message sent, kept or given up is never claimed again, so a job run twice sends
// nothing twice; a message its member unsubscribed from is skipped there), fills in
// the signed links (src/domain/mail/mail-links.ts) and sends each with nodemailer; an
// optional message also gets List-Unsubscribe and List-Unsubscribe-Post (RFC 8058
// one-click) naming its signed unsubscribe link. Without an SMTP URL it keeps them
// (status kept: the dashboard's mail page shows them). A failed send goes back to queued with its error and the job
// fails, so graphile-worker runs it again with its backoff; after MAX_ATTEMPTS the
// message is failed. Addresses and bodies are personal data: never logged.
import type { Task } from 'graphile-worker';
import type { Transporter } from 'nodemailer';
import { fillLinks, unsubscribeLink } from '../../src/domain/mail/mail-links';

export const MAX_ATTEMPTS = 5;

export interface MailOptions {
  /** SMTP_URL; null keeps messages instead of sending them. */
  smtpUrl: string | null;
  /** MAIL_FROM: the sender's address. */
  from: string;
  /** Where the links in messages point (PUBLIC_BASE_URL, or the local service once it listens). */
  baseUrl: string | (() => string);
  /** The deployment's key the links are signed with (WEBHOOK_ENCRYPTION_KEY). */
  key: string | null;
  /** One SMTP exchange's bound (default 30 s). */
  timeoutMs?: number;
}

interface Payload { community_id: string; ids: string[] }

interface Claimed {
  id: string; member_id: string; template: string; to_address: string; subject: string; text_body: string; html_body: string;
  attempts: number; sender_name: string; reply_to: string | null; unsubscribable: boolean;
}

function isPayload(p: unknown): p is Payload {
  const x = p as Payload;
  return typeof x === 'object' && x !== null && typeof x.community_id === 'string' && Array.isArray(x.ids) && x.ids.every((i) => typeof i === 'string');
}

/** A display name safe in a header: no quotes, brackets or line breaks. */
const displayName = (name: string) => name.replace(/[\r\n"<>\\]/g, ' ').trim().slice(0, 200);

export function makeMailTask(opts: MailOptions): { task: Task; close(): void } {
  const timeout = opts.timeoutMs ?? 30_000;
  // nodemailer loads on the first message to send: a service without SMTP_URL (npm
  // start's default) never loads it, and start-up stays light.
  let transport: Transporter | null = null;
  const transportFor = async (smtpUrl: string): Promise<Transporter> => {
    if (!transport) {
      const { createTransport } = await import('nodemailer');
      transport = createTransport({ url: smtpUrl, connectionTimeout: timeout, greetingTimeout: timeout, socketTimeout: timeout });
    }
    return transport;
  };
  const task: Task = async (payload, helpers) => {
    if (!isPayload(payload)) throw new Error('mail_messages__send: bad payload');
    const { community_id: communityId, ids } = payload;
    const record = (id: string, status: string, error: string | null) => helpers.withPgClient((c) =>
      c.query('select billing_private.mail_record($1, $2, $3, $4)', [communityId, id, status, error]));
    const claimed = await helpers.withPgClient(async (c) =>
      (await c.query<Claimed>('select * from billing_private.mail_claim($1, $2)', [communityId, ids])).rows);
    let failures = 0;
    for (const m of claimed) {
      if (!opts.smtpUrl) {
        await record(m.id, 'kept', null);
        continue;
      }
      const links = { baseUrl: typeof opts.baseUrl === 'function' ? opts.baseUrl() : opts.baseUrl, key: opts.key, communityId,
        memberId: m.member_id, template: m.template, now: Date.now() };
      const unsubscribe = m.unsubscribable && links.key
        ? unsubscribeLink(links.baseUrl, links.key, communityId, m.member_id, m.template, links.now) : null;
      try {
        await (await transportFor(opts.smtpUrl)).sendMail({
          from: { name: displayName(m.sender_name), address: opts.from },
          to: m.to_address,
          ...(m.reply_to ? { replyTo: m.reply_to } : {}),
          subject: m.subject,
          text: fillLinks(m.text_body, links, false),
          html: fillLinks(m.html_body, links, true),
          headers: {
            'X-Billing-Message-Id': m.id,
            ...(unsubscribe ? { 'List-Unsubscribe': `<${unsubscribe}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } : {}),
          },
        });
        await record(m.id, 'sent', null);
      } catch (err) {
        // The SMTP server's answer (a code and its text), never the address.
        const e = err as { responseCode?: number; code?: string; message?: string };
        const error = [e.responseCode, e.code].filter(Boolean).join(' ') || 'send failed';
        const giveUp = m.attempts >= MAX_ATTEMPTS || (e.responseCode !== undefined && e.responseCode >= 500 && e.responseCode < 600);
        await record(m.id, giveUp ? 'failed' : 'queued', error);
        if (!giveUp) failures++;
        helpers.logger.warn(`mail ${m.id} of ${communityId}: ${giveUp ? 'failed' : 'will retry'} (${error})`);
      }
    }
    if (failures > 0) throw new Error(`${failures} message(s) not sent yet; retrying later`);
  };
  return { task, close: () => transport?.close() };
}
