import { z } from 'zod';
import { ID_PATTERN } from '../../core/ids';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation } from '../operation';
import { eventEnvelopeSchema } from './event-schema';
import { EVENT_CATALOG, EVENT_TYPES, isEventType } from './event-types';

/** Comma-separated event types (or an array, from MCP); each must be in the catalog. */
const typeList = z
  .union([z.string().max(2000), z.array(z.string().max(200)).max(50)])
  .transform((value, ctx) => {
    const items = (Array.isArray(value) ? value : value.split(',')).map((t) => t.trim()).filter(Boolean);
    const unknown = items.find((t) => !isEventType(t));
    if (unknown !== undefined) {
      ctx.addIssue({ code: 'custom', message: `unknown event type "${unknown}"; see GET /v1/webhooks/event-types` });
      return z.NEVER;
    }
    return items;
  });

const eventId = z.string().regex(ID_PATTERN).refine((v) => v.startsWith('evt_'), 'must be an event id (evt_...)');

export const eventOperations = [
  defineOperation({
    name: 'list_events',
    method: 'GET',
    path: '/v1/events',
    scope: 'events:read',
    tag: 'Events',
    summary: 'List events, newest first',
    description:
      'The outbox of every event (the same envelopes webhooks deliver), newest first, keyset-paginated by id. ' +
      '`type` filters to a comma-separated list of event types; `after_id` returns only events newer than that ' +
      'event (poll with the newest id you have seen); `cursor` pages towards older events.',
    query: z.object({
      ...pageQuery,
      type: typeList.optional().describe(`Comma-separated event types, any of: ${EVENT_TYPES.join(', ')}`),
      after_id: eventId.optional().describe('Only events newer than this event id'),
    }),
    response: listOf(eventEnvelopeSchema),
    sql: 'events_list',
  }),
  defineOperation({
    name: 'get_event',
    method: 'GET',
    path: '/v1/events/{id}',
    scope: 'events:read',
    tag: 'Events',
    summary: 'Get one event envelope',
    params: z.object({ id: idParam('Event id (evt_...)') }),
    response: eventEnvelopeSchema,
    sql: 'events_get',
  }),
  defineOperation({
    name: 'list_event_types',
    method: 'GET',
    path: '/v1/webhooks/event-types',
    scope: null,
    tag: 'Webhooks',
    summary: 'The catalog of event types with the JSON Schema of each one\'s data',
    response: z.object({
      data: z.array(z.object({ type: z.string(), description: z.string(), data_schema: z.record(z.string(), z.unknown()) })),
    }),
    handler: async () => EVENT_CATALOG,
  }),
];

/** The dashboard's member page (not under /v1: src/operations/index.ts dashboardOperations). */
export const eventDashboardOperations = [
  defineOperation({
    name: 'list_member_entitlement_history',
    method: 'GET',
    path: '/dashboard/members/{id}/entitlement-history',
    scope: 'events:read',
    tag: 'Events',
    summary: 'A member\'s member.entitlement.* events (revisions), newest first',
    params: z.object({ id: idParam('Member id (mem_...)') }),
    query: z.object({ ...pageQuery }),
    response: listOf(eventEnvelopeSchema),
    sql: 'member_entitlement_history',
  }),
];
