// A grant (comp): access handed out by an operator, as billing.grant_json builds it
// (db/migrations/fixtures/functions/47-grants.sql). It is a ledger source like a subscription.
import { z } from 'zod';
import { timestamp } from '../fields';

export const GRANT_STATUSES = ['active', 'expired', 'revoked'] as const;

export const grant = z.object({
  id: z.string().describe('grt_...'),
  member_id: z.string(),
  tier_id: z.string(),
  note: z.string().nullable(),
  status: z.enum(GRANT_STATUSES),
  expires_at: timestamp.nullable(),
  revoked_at: timestamp.nullable(),
  created_at: timestamp,
});
