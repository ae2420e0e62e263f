// The event envelope: the feed (GET /v1/events) and every webhook delivery carry it;
// data is the event type's schema (src/domain/events/event-types.ts).
import { z } from 'zod';
import { timestamp } from '../fields';

/** The envelope every event shares (feed and webhook deliveries). */
export const eventEnvelopeSchema = z.object({
  id: z.string().describe('evt_ id; stable across retries'),
  type: z.string(),
  timestamp,
  api_version: z.string(),
  data: z.looseObject({}),
});
