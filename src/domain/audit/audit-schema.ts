// An audit log entry, as billing.audit_entry_json builds it (db/migrations/fixtures/functions/12-audit.sql):
// one changed row of an audited table, written by the database's own triggers
// (docs/decisions/audit-log.md). Append-only; never holds credentials or personal data.
import { z } from 'zod';
import { AUDIT_ACTOR_TYPES, AUDIT_OPERATIONS, AUDITED_TABLES } from '../../core/statuses';
import { timestamp } from '../fields';

/** A row as the audit log keeps it: its columns, less the hidden ones (credentials, personal data). */
const rowImage = z.record(z.string(), z.unknown());

export const auditEntry = z.object({
  id: z.string().describe('aud_...'),
  occurred_at: timestamp.describe('when the change was made (the time of its transaction)'),
  actor_type: z.enum(AUDIT_ACTOR_TYPES).describe('operator: a dashboard session; api_key: a key (REST or MCP); member: a member '
    + 'portal session; cli: the operator CLI; sql_login: an operator\'s SQL login; service: the service\'s own work '
    + '(the worker, a provider\'s webhook)'),
  actor_id: z.string().nullable().describe('operator: the operator user (opu_...); api_key: the key (key_...); member: the member '
    + '(mem_...); cli: the command (e.g. "catalog apply"); sql_login: the login role; service: the database role'),
  key_id: z.string().nullable().describe('the credential of the request: the key (key_...), the dashboard session (ops_...) or the '
    + 'portal session (mps_...); null otherwise'),
  request_id: z.string().nullable().describe('the X-Request-Id of the request (or the id of the CLI run) that made the change'),
  table: z.enum(AUDITED_TABLES).describe('the table of the changed row'),
  row_id: z.string().nullable().describe('the row\'s id (its key columns joined with "/" where it has no id)'),
  operation: z.enum(AUDIT_OPERATIONS),
  changed: z.array(z.string()).describe('an update\'s changed columns (a hidden column by name only); empty for insert and delete'),
  before: rowImage.nullable().describe('the row before the change (null for an insert), without credentials and personal data'),
  after: rowImage.nullable().describe('the row after the change (null for a delete), without credentials and personal data'),
});
