// Outbound webhooks: the process-wide service handed to operation handlers
// (ctx.services.webhooks, built by src/app.ts). Without WEBHOOK_ENCRYPTION_KEY it
// reports itself unavailable and every webhook management route answers 503.
import { generateSecret, parseEncryptionKey, SecretBox } from './crypto';
import { createSender, Sender, SendResult } from './send';
import { webhookHeaders } from './sign';
import { endpointTargetProblem, PortRanges, Resolver, systemResolver } from './urls';

export { endpointUrlProblem } from './urls';
export type { PortRanges, Resolver } from './urls';

export interface WebhookService {
  /** False when the deployment lacks the encryption key (routes answer 503). */
  readonly available: boolean;
  readonly unavailableReason: string | null;
  readonly allowPrivateUrls: boolean;
  /** Encrypts a fresh whsec_ secret for an endpoint; returns both. */
  newSecret(communityId: string, endpointId: string): { secret: string; ciphertext: string };
  /** Encrypts a secret shown once for keeping beside its idempotent answer (bound to the endpoint). */
  sealSecret(communityId: string, endpointId: string, secret: string): string;
  /** The secret sealSecret encrypted. */
  openSecret(communityId: string, endpointId: string, ciphertext: string): string;
  /** Signs and POSTs a body to a URL with the endpoint's signing ciphertexts. */
  send(target: { url: string; communityId: string; endpointId: string; ciphertexts: string[] }, id: string, body: string): Promise<SendResult>;
  /** Null when an endpoint may have this URL, else the reason; resolves its host name (docs/decisions/webhook-targets.md). */
  urlProblem(url: string): Promise<string | null>;
}

/**
 * The test ping runs inside the request's database transaction, so it waits less than
 * a delivery (15 s): a hanging receiver holds an API connection for at most this long.
 */
export const PING_TIMEOUT_MS = 10_000;

export function createWebhookService(opts: {
  encryptionKey: string | null;
  allowPrivateUrls: boolean;
  /** WEBHOOK_PORTS; default any. */
  ports?: PortRanges;
  /** How a host name is resolved when an endpoint is saved (tests inject one). */
  resolve?: Resolver;
  timeoutMs?: number;
}): WebhookService {
  const rules = { allowPrivate: opts.allowPrivateUrls, ports: opts.ports ?? null };
  let box: SecretBox | null = null;
  let unavailableReason: string | null = null;
  if (!opts.encryptionKey) {
    unavailableReason = 'Webhooks are not configured on this deployment (WEBHOOK_ENCRYPTION_KEY is not set).';
  } else {
    try {
      box = new SecretBox(parseEncryptionKey(opts.encryptionKey));
    } catch (err) {
      unavailableReason = `Webhooks are not configured on this deployment: ${(err as Error).message}.`;
    }
  }
  let sender: Sender | null = null;
  const need = (): SecretBox => {
    if (!box) throw new Error(unavailableReason ?? 'webhooks unavailable');
    return box;
  };
  return {
    available: box !== null,
    unavailableReason,
    allowPrivateUrls: opts.allowPrivateUrls,
    newSecret(communityId, endpointId) {
      const secret = generateSecret();
      return { secret, ciphertext: need().encrypt(communityId, endpointId, secret) };
    },
    sealSecret(communityId, endpointId, secret) {
      return need().encrypt(communityId, endpointId, secret);
    },
    openSecret(communityId, endpointId, ciphertext) {
      return need().decrypt(communityId, endpointId, ciphertext);
    },
    async send(target, id, body) {
      const b = need();
      const keys = target.ciphertexts.map((c) => b.hmacKey(target.communityId, target.endpointId, c));
      sender ??= createSender({ allowPrivate: opts.allowPrivateUrls, ports: rules.ports, timeoutMs: opts.timeoutMs ?? PING_TIMEOUT_MS, maxSockets: 16 });
      return sender.post(target.url, webhookHeaders(keys, id, body), body);
    },
    urlProblem(url) {
      return endpointTargetProblem(url, rules, opts.resolve ?? systemResolver);
    },
  };
}
