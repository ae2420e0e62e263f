// The webhook endpoint and its delivery log, as billing_api.webhook_* build them.
import { z } from 'zod';
import { WEBHOOK_DELIVERY_STATUSES, WEBHOOK_DISABLED_REASONS } from '../../core/statuses';
import { timestamp } from '../fields';

export const webhookEndpoint = z.object({
  id: z.string(),
  url: z.string(),
  description: z.string().nullable(),
  event_types: z.array(z.string()).describe('Event types delivered to this endpoint; empty means every type.'),
  enabled: z.boolean(),
  disabled_reason: z.enum(WEBHOOK_DISABLED_REASONS).nullable()
    .describe('null while enabled; manual when turned off through the API; failing when the service disabled it after 5 days of continuous delivery failure.'),
  created_at: timestamp,
  updated_at: timestamp,
});

export const webhookEndpointWithSecret = webhookEndpoint.extend({
  secret: z.string().describe('The whsec_ signing secret. Returned only here (creation and rotation).'),
});

export const webhookAttempt = z.object({
  id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  attempt: z.number().int().describe('1 for the first attempt.'),
  status_code: z.number().int().nullable().describe('HTTP status answered; null when none (network error, timeout).'),
  duration_ms: z.number().int().nullable(),
  error: z.string().nullable(),
  response_excerpt: z.string().nullable().describe('The first 1 KB of the answer body.'),
  started_at: timestamp,
  finished_at: timestamp.nullable(),
  next_attempt_at: timestamp.nullable().describe('The retry scheduled after this attempt, if any.'),
});

export const webhookDelivery = z.object({
  id: z.string(),
  endpoint_id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  status: z.enum(WEBHOOK_DELIVERY_STATUSES),
  attempt_count: z.number().int(),
  next_attempt_at: timestamp.nullable(),
  last_status_code: z.number().int().nullable(),
  last_error: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  attempts: z.array(webhookAttempt),
});

export const testPingResult = z.object({
  status_code: z.number().int().nullable().describe('The HTTP status the endpoint answered; null when it did not answer.'),
  error: z.string().nullable().describe('Why no status was received (connection refused, timeout...), else null.'),
});
