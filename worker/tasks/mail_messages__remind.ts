// Periodic (the worker's crontab, when it runs mail): the reminders no event announces,
// a trial ending within 3 days and a yearly renewal within 7
// (billing_private.mail_reminders, 65-mail.sql), queued as mail to members once per
// subscription and date; mail_messages__send sends them.
import type { Task } from 'graphile-worker';

export const mailMessagesRemindCron = '*/5 * * * * mail_messages__remind ?max=1';

export const mailMessagesRemind: Task = async (payload, helpers) => {
  // The cron job covers every community; a payload {community_id} limits a manual run.
  const only = typeof (payload as { community_id?: unknown } | null)?.community_id === 'string'
    ? (payload as { community_id: string }).community_id : null;
  await helpers.withPgClient((client) => client.query('select billing_private.mail_reminders($1)', [only]));
};
