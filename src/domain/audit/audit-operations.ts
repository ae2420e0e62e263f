import { z } from 'zod';
import { AUDIT_ACTOR_TYPES, AUDIT_OPERATIONS, AUDITED_TABLES } from '../../core/statuses';
import { listOf, pageQuery } from '../fields';
import { defineOperation, Operation } from '../operation';
import { auditEntry } from './audit-schema';

/** A day (2026-05-01, its start in UTC) or an RFC 3339 instant, as an RFC 3339 instant. */
const instant = z.union([z.iso.date(), z.iso.datetime({ offset: true })])
  .transform((value) => (value.length === 10 ? `${value}T00:00:00Z` : value));

export const auditOperations: Operation[] = [
  defineOperation({
    name: 'list_audit_log',
    method: 'GET',
    path: '/v1/audit-log',
    scope: 'audit:read',
    tag: 'Audit log',
    summary: 'List the audit log, newest first',
    description: 'Every change to the catalog, API keys, webhook endpoints, settings and operators, and every change an actor '
      + '(an API key, a dashboard operator, the member portal, the CLI, an operator SQL login) made to subscriptions, invoices, '
      + 'refunds, grants and members: who, when, which row, before and after (credentials and personal data left out), and the '
      + 'request id. Written by the database itself; append-only; kept for the community\'s retention (365 days by default). '
      + 'Filters: actor_type, actor_id, table, row_id, operation, since (inclusive), until (exclusive).',
    query: z.object({
      ...pageQuery,
      actor_type: z.enum(AUDIT_ACTOR_TYPES).optional().describe('Only changes made by this kind of actor'),
      actor_id: z.string().min(1).max(200).optional().describe('Only changes made by this actor (opu_..., key_..., mem_..., a CLI command or a login role)'),
      table: z.enum(AUDITED_TABLES).optional().describe('Only changes of this table'),
      row_id: z.string().min(1).max(400).optional().describe('Only changes of this row (its id)'),
      operation: z.enum(AUDIT_OPERATIONS).optional(),
      since: instant.optional().describe('Only changes at or after this instant (RFC 3339) or day (YYYY-MM-DD, from 00:00 UTC)'),
      until: instant.optional().describe('Only changes before this instant (RFC 3339) or day (YYYY-MM-DD, before 00:00 UTC)'),
    }),
    response: listOf(auditEntry),
    sql: 'audit_log_list',
  }),
];
