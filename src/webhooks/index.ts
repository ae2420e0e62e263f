// Outbound webhooks: secret encryption, signing, delivery. Owned by the webhooks work.
import type { ServiceDeps } from '../services';

export function createWebhookServices(_deps: ServiceDeps): Record<string, unknown> {
  return {};
}
