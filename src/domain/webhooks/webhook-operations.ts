// Webhook endpoints and their delivery log (spec: Endpoints, Limits, Events).
// Every operation is a handler: secrets are made and encrypted in Node, and without
// WEBHOOK_ENCRYPTION_KEY each route answers 503 service_unavailable (after the key
// and scope checks). Rules that must hold for every door live in SQL
// (billing_api.webhook_endpoints_* and the delivery triggers): the 5-endpoint limit,
// tenancy, the enqueue of deliveries.
import { z } from 'zod';
import { API_VERSION } from '../../core/api-version';
import { ApiError } from '../../core/errors';
import type { WebhookService } from '../../webhooks';
import { isEventType } from '../events/event-types';
import { idParam, listOf, pageQuery } from '../fields';
import { defineOperation, OpContext, Operation } from '../operation';
import { testPingResult, webhookDelivery, webhookEndpoint, webhookEndpointWithSecret } from './webhook-schema';

/** A type an endpoint may subscribe to: one of the catalog's. */
function knownEventType(type: string): boolean {
  return isEventType(type);
}

const url = z.string().min(1).max(2048).describe('HTTPS URL that receives the deliveries.');
const description = z.string().max(500).nullable().describe('Free text for the operator.');
const eventTypes = z.array(z.string().refine(knownEventType, 'must be an event type of GET /v1/webhooks/event-types other than webhook.ping (sent by the test route whatever event_types say), such as member.entitlement.granted'))
  .max(50)
  .refine((types) => new Set(types).size === types.length, 'must not repeat a type')
  .describe('Event types to deliver; omit or [] for every type.');

const endpointParams = z.object({ id: idParam('Webhook endpoint id (we_...)') });

function webhooks(ctx: OpContext): WebhookService {
  const service = ctx.services.webhooks;
  if (!service.available) {
    throw new ApiError('service_unavailable', service.unavailableReason ?? 'Webhooks are not configured on this deployment.');
  }
  return service;
}

async function checkUrl(service: WebhookService, value: unknown) {
  if (typeof value !== 'string') return;
  const problem = await service.urlProblem(value);
  if (problem) throw new ApiError('invalid_request', `Invalid url: ${problem}.`, { status: 422, extra: { param: 'url' } });
}

/**
 * Idempotent answers that hold the whsec_ secret keep it encrypted (with the endpoint's
 * own encryption, bound to the endpoint) in the idempotency record; a replay decrypts
 * it, so the replay is the first answer and no record holds a live secret in clear.
 */
const sealedSecret: NonNullable<Operation['idempotencySeal']> = {
  seal(result, ctx) {
    const { secret, ...endpoint } = result as { id: string; secret: string };
    return { ...endpoint, sealed_secret: ctx.services.webhooks.sealSecret(ctx.communityId, endpoint.id, secret) };
  },
  unseal(stored, ctx) {
    const { sealed_secret: sealed, ...endpoint } = stored as { id: string; sealed_secret: string };
    const service = ctx.services.webhooks;
    if (!service.available) throw new ApiError('service_unavailable', service.unavailableReason ?? 'Webhooks are not configured on this deployment.');
    return { ...endpoint, secret: service.openSecret(ctx.communityId, endpoint.id, sealed) };
  },
};

export const webhookOperations: Operation[] = [
  defineOperation({
    name: 'list_webhook_endpoints',
    method: 'GET',
    path: '/v1/webhooks/endpoints',
    scope: 'webhooks:read',
    tag: 'Webhooks',
    summary: 'List webhook endpoints, newest first',
    query: z.object({ ...pageQuery }),
    response: listOf(webhookEndpoint),
    handler: async (ctx, input) => {
      webhooks(ctx);
      return ctx.call('webhook_endpoints_list', input);
    },
  }),
  defineOperation({
    name: 'create_webhook_endpoint',
    method: 'POST',
    path: '/v1/webhooks/endpoints',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Create a webhook endpoint (at most 5 per community)',
    description: 'Answers 201 with the endpoint and its whsec_ signing secret in `secret`, shown only this once. A sixth endpoint answers 422 endpoint_limit.',
    body: z.object({
      url,
      description: description.optional(),
      event_types: eventTypes.optional(),
      enabled: z.boolean().optional().describe('Default true.'),
    }),
    response: webhookEndpointWithSecret,
    status: 201,
    idempotent: true,
    idempotencySeal: sealedSecret,
    handler: async (ctx, input) => {
      const service = webhooks(ctx);
      await checkUrl(service, input.url);
      const { rows } = await ctx.query<{ id: string }>(`select billing.gen_id('we') as id`);
      const id = rows[0].id;
      const { secret, ciphertext } = service.newSecret(ctx.communityId, id);
      const endpoint = await ctx.call<Record<string, unknown>>('webhook_endpoints_create', { ...input, id, secret_ciphertext: ciphertext });
      return { ...endpoint, secret };
    },
  }),
  defineOperation({
    name: 'get_webhook_endpoint',
    method: 'GET',
    path: '/v1/webhooks/endpoints/{id}',
    scope: 'webhooks:read',
    tag: 'Webhooks',
    summary: 'Get one webhook endpoint',
    params: endpointParams,
    response: webhookEndpoint,
    handler: async (ctx, input) => {
      webhooks(ctx);
      return ctx.call('webhook_endpoints_get', input);
    },
  }),
  defineOperation({
    name: 'update_webhook_endpoint',
    method: 'PATCH',
    path: '/v1/webhooks/endpoints/{id}',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Change a webhook endpoint (only the fields sent)',
    description: 'enabled: true re-enables an endpoint (clearing disabled_reason); enabled: false disables it with disabled_reason manual.',
    params: endpointParams,
    body: z.object({
      url: url.optional(),
      description: description.optional(),
      event_types: eventTypes.optional(),
      enabled: z.boolean().optional(),
    }),
    response: webhookEndpoint,
    idempotent: true,
    handler: async (ctx, input) => {
      const service = webhooks(ctx);
      await checkUrl(service, input.url);
      return ctx.call('webhook_endpoints_update', input);
    },
  }),
  defineOperation({
    name: 'delete_webhook_endpoint',
    method: 'DELETE',
    path: '/v1/webhooks/endpoints/{id}',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Delete a webhook endpoint and its delivery log (answers 204)',
    params: endpointParams,
    status: 204,
    idempotent: true,
    handler: async (ctx, input) => {
      webhooks(ctx);
      await ctx.call('webhook_endpoints_delete', input);
      return undefined;
    },
  }),
  defineOperation({
    name: 'rotate_webhook_secret',
    method: 'POST',
    path: '/v1/webhooks/endpoints/{id}/rotate-secret',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Replace the signing secret',
    description: 'Answers the endpoint with the new whsec_ secret in `secret`, shown only this once. For 24 hours deliveries carry two v1 signatures, by the new and the previous secret.',
    params: endpointParams,
    response: webhookEndpointWithSecret,
    idempotent: true,
    idempotencySeal: sealedSecret,
    handler: async (ctx, input) => {
      const service = webhooks(ctx);
      const { secret, ciphertext } = service.newSecret(ctx.communityId, String(input.id));
      const endpoint = await ctx.call<Record<string, unknown>>('webhook_endpoints_rotate_secret', { id: input.id, secret_ciphertext: ciphertext });
      return { ...endpoint, secret };
    },
  }),
  defineOperation({
    name: 'list_webhook_deliveries',
    method: 'GET',
    path: '/v1/webhooks/endpoints/{id}/deliveries',
    scope: 'webhooks:read',
    tag: 'Webhooks',
    summary: 'Delivery log of an endpoint, newest first, each delivery with its attempts',
    params: endpointParams,
    query: z.object({ ...pageQuery }),
    response: listOf(webhookDelivery),
    handler: async (ctx, input) => {
      webhooks(ctx);
      return ctx.call('webhook_deliveries_list', input);
    },
  }),
  defineOperation({
    name: 'redeliver_webhook_delivery',
    method: 'POST',
    path: '/v1/webhooks/endpoints/{id}/deliveries/{deliveryId}/redeliver',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Requeue one delivery for an immediate attempt (answers 202 with the delivery)',
    description: 'A pending delivery keeps its retry schedule; a succeeded or failed one gets one more attempt without automatic retries. 409 conflict while the endpoint is disabled.',
    params: z.object({ id: idParam('Webhook endpoint id (we_...)'), deliveryId: idParam('Delivery id (wd_...)') }),
    response: webhookDelivery,
    status: 202,
    idempotent: true,
    handler: async (ctx, input) => {
      webhooks(ctx);
      return ctx.call('webhook_deliveries_redeliver', input);
    },
  }),
  defineOperation({
    name: 'test_webhook_endpoint',
    method: 'POST',
    path: '/v1/webhooks/endpoints/{id}/test',
    scope: 'webhooks:write',
    tag: 'Webhooks',
    summary: 'Send a signed webhook.ping envelope now and report the answer',
    description: 'The ping is {id (a fresh evt_ id, not in the feed), type "webhook.ping", timestamp, api_version, data: {endpoint_id, message}}, signed like every delivery; it is not recorded in the delivery log. At most 10 per minute per endpoint (429 rate_limited).',
    params: endpointParams,
    response: testPingResult,
    idempotencyRefused: 'a test ping reports what the endpoint answers now, so it is never replayed; sending it again is harmless.',
    handler: async (ctx, input) => {
      const service = webhooks(ctx);
      const { rows } = await ctx.query<{ t: { allowed: boolean; retry_after: number; url: string; community_id: string; ciphertexts: string[] | null }; id: string; ts: string }>(
        `select billing_private.webhook_test_target($1) as t, billing.gen_id('evt') as id, billing.iso(billing.now()) as ts`, [input.id]);
      const { t: target, id, ts } = rows[0];
      if (!target.allowed) {
        throw new ApiError('rate_limited', `At most 10 test pings per minute per endpoint; retry after ${target.retry_after} seconds.`,
          { extra: { retry_after: target.retry_after } });
      }
      const body = JSON.stringify({
        id, type: 'webhook.ping', timestamp: ts, api_version: API_VERSION,
        data: { endpoint_id: input.id, message: 'Test ping from the webhook test endpoint.' },
      });
      // The ping goes out after the transaction commits: a slow receiver holds no
      // database connection.
      ctx.afterCommit(async () => {
        const result = await service.send({ url: target.url, communityId: target.community_id, endpointId: String(input.id), ciphertexts: target.ciphertexts ?? [] }, id, body);
        return { status_code: result.status_code, error: result.status_code === null ? result.error : null };
      });
      return null;
    },
  }),
];
