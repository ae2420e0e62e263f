// Standard Webhooks signatures (https://www.standardwebhooks.com): the headers a
// delivery carries. webhook-id is the event id (stable across retries), webhook-
// timestamp is Unix seconds at send time, webhook-signature holds one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" token per signing secret, separated
// by spaces (two during the 24 hours after a rotation).
import crypto from 'node:crypto';

export function signatureTokens(hmacKeys: readonly Buffer[], id: string, timestamp: number, body: string): string {
  return hmacKeys
    .map((key) => `v1,${crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`)
    .join(' ');
}

export function webhookHeaders(hmacKeys: readonly Buffer[], id: string, body: string, now = Date.now()): Record<string, string> {
  const timestamp = Math.floor(now / 1000);
  return {
    'content-type': 'application/json',
    'user-agent': 'community-billing-webhooks/1',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureTokens(hmacKeys, id, timestamp, body),
  };
}
