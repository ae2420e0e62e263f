// The dashboard's mail page (not under /v1: src/operations/index.ts dashboardOperations):
// the messages of the outbox (billing.mail_messages, 65-mail.sql) and the templates,
// each with its on/off switch, whether members may unsubscribe from it, and a preview.
// Messages hold members' addresses: reading them needs members:read, switching a
// template members:write.
import { z } from 'zod';
import { idParam, listOf, pageQuery, timestamp } from '../fields';
import { defineOperation } from '../operation';

/** skipped: its member unsubscribed from its (optional) template; kept: no SMTP_URL. */
export const MAIL_STATUSES = ['queued', 'sending', 'sent', 'failed', 'kept', 'skipped'] as const;

export const mailMessage = z.object({
  id: z.string(),
  member_id: z.string(),
  template: z.string(),
  event_id: z.string().nullable().describe('the event that caused it; null for a reminder'),
  ref: z.string().nullable().describe('a reminder\'s key (template:subscription:date); null for an event\'s message'),
  to: z.string(),
  subject: z.string(),
  status: z.enum(MAIL_STATUSES),
  unsubscribable: z.boolean().describe('optional mail: it carries an unsubscribe link, and is skipped once its member unsubscribed'),
  attempts: z.number().int(),
  last_error: z.string().nullable(),
  created_at: timestamp,
  sent_at: timestamp.nullable(),
});

const rendered = z.object({ subject: z.string(), text: z.string(), html: z.string() });

export const mailDashboardOperations = [
  defineOperation({
    name: 'list_mail_messages',
    method: 'GET',
    path: '/dashboard/mail',
    scope: 'members:read',
    tag: 'Mail',
    summary: 'Mail to members, newest first',
    query: z.object({ ...pageQuery }),
    response: listOf(mailMessage),
    sql: 'mail_messages_list',
  }),
  defineOperation({
    name: 'get_mail_message',
    method: 'GET',
    path: '/dashboard/mail/{id}',
    scope: 'members:read',
    tag: 'Mail',
    summary: 'One message with its text and HTML (links as placeholders)',
    params: z.object({ id: idParam('Message id (msg_...)') }),
    response: mailMessage.extend({ text: z.string(), html: z.string() }),
    sql: 'mail_messages_get',
  }),
  defineOperation({
    name: 'list_mail_templates',
    method: 'GET',
    path: '/dashboard/mail/templates',
    scope: 'members:read',
    tag: 'Mail',
    summary: 'The templates, whether each is on, and a preview of each',
    response: z.object({
      sender_name: z.string(),
      reply_to: z.string().nullable(),
      data: z.array(z.object({
        template: z.string(), event_type: z.string(), transactional: z.boolean(),
        required: z.boolean().describe('no unsubscribe: transactional, or an optional template the community requires'),
        title: z.string(), enabled: z.boolean(), preview: rendered,
      })),
    }),
    sql: 'mail_templates_list',
  }),
  defineOperation({
    name: 'set_mail_template',
    method: 'POST',
    path: '/dashboard/mail/templates/{template}',
    scope: 'members:write',
    tag: 'Mail',
    summary: 'Turn a template on or off for the community, or mark an optional one required (no unsubscribe)',
    params: z.object({ template: z.string().min(1).max(50) }),
    body: z.object({ enabled: z.boolean().optional(), required: z.boolean().optional() }),
    response: z.object({ template: z.string(), enabled: z.boolean(), required: z.boolean() }),
    sql: 'mail_template_set',
  }),
];
