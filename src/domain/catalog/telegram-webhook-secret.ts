// The secret Telegram sends back with every update of a connection's webhook
// (X-Telegram-Bot-Api-Secret-Token), which the service passes as `secret_token` to
// setWebhook. Derived, not stored: HMAC-SHA256 of the connection under the service's
// WEBHOOK_ENCRYPTION_KEY, so whoever sets the webhook and the route that checks updates
// compute the same value and no table holds it. docs/decisions/platform-linking.md.
import crypto from 'node:crypto';
import { parseEncryptionKey } from '../../webhooks/crypto';

/** 43 characters of base64url: within the Bot API's 1-256 characters of A-Z, a-z, 0-9, _ and -. */
export function telegramWebhookSecret(encryptionKey: string, communityId: string, platformConfigId: string): string {
  return crypto.createHmac('sha256', parseEncryptionKey(encryptionKey))
    .update(`telegram-webhook-secret:${communityId}/${platformConfigId}`)
    .digest('base64url');
}
