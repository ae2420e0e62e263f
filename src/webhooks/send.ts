// The HTTP side of a delivery: one POST with keep-alive agents, a hard timeout, and
// at most EXCERPT_BYTES of the answer kept for the delivery log. A redirect is never
// followed (node:http does not; a 3xx is a failed attempt like any non-2xx).
import http from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import net from 'node:net';
import { isPrivateAddress, PortRanges, portProblem, publicOnlyLookup } from './urls';

export const DELIVERY_TIMEOUT_MS = 15_000;
export const EXCERPT_BYTES = 1024;

export interface SendResult {
  ok: boolean;
  status_code: number | null;
  error: string | null;
  excerpt: string | null;
  started_at: string;
  finished_at: string;
  duration_ms: number;
}

export interface Sender {
  /** signal: a graceful shutdown cuts the request short (the attempt fails and is retried). */
  post(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SendResult>;
  close(): void;
}

/** ports: the ports a delivery may connect to (WEBHOOK_PORTS), checked for every delivery; default any. */
export function createSender(opts: { allowPrivate: boolean; ports?: PortRanges; timeoutMs?: number; maxSockets?: number }): Sender {
  const timeoutMs = opts.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  const lookup = opts.allowPrivate ? undefined : publicOnlyLookup;
  const agentOpts = { keepAlive: true, maxSockets: opts.maxSockets ?? 64, lookup } as http.AgentOptions;
  const httpAgent = new http.Agent(agentOpts);
  const httpsAgent = new https.Agent(agentOpts);

  function post(target: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SendResult> {
    const startedAt = new Date();
    const t0 = performance.now();
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      let onAbort = () => {};
      const finish = (statusCode: number | null, error: string | null, excerpt: string | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve({
          ok: error === null && statusCode !== null && statusCode >= 200 && statusCode < 300,
          status_code: statusCode,
          error,
          excerpt,
          started_at: startedAt.toISOString(),
          finished_at: new Date().toISOString(),
          duration_ms: Math.round(performance.now() - t0),
        });
      };
      let url: URL;
      try {
        url = new URL(target);
      } catch {
        return finish(null, 'invalid URL', null);
      }
      if (url.protocol !== 'https:' && !(opts.allowPrivate && url.protocol === 'http:')) {
        return finish(null, 'URL scheme not allowed', null);
      }
      // An endpoint saved under other settings is held to today's ports.
      const port = portProblem(url, opts.ports ?? null);
      if (port) return finish(null, `EPORTNOTALLOWED: the URL ${port}`, null);
      // An IP literal never goes through the lookup hook: check it here, for every
      // delivery (an endpoint saved while private URLs were allowed is still refused).
      const literal = url.hostname.replace(/^\[|\]$/g, '');
      if (!opts.allowPrivate && net.isIP(literal) && isPrivateAddress(literal)) {
        return finish(null, `EADDRNOTPUBLIC: refused to connect to non-public address ${literal}`, null);
      }
      const mod = url.protocol === 'https:' ? https : http;
      const payload = Buffer.from(body, 'utf8');
      const req = mod.request(url, {
        method: 'POST',
        agent: url.protocol === 'https:' ? httpsAgent : httpAgent,
        headers: { ...headers, 'content-length': String(payload.length) },
      }, (res) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        res.on('data', (chunk: Buffer) => {
          if (kept < EXCERPT_BYTES) {
            chunks.push(chunk.subarray(0, EXCERPT_BYTES - kept));
            kept += Math.min(chunk.length, EXCERPT_BYTES - kept);
          }
        });
        res.on('end', () => finish(res.statusCode ?? null, null, excerptOf(Buffer.concat(chunks))));
        res.on('error', (err) => finish(res.statusCode ?? null, err.message, excerptOf(Buffer.concat(chunks))));
        res.on('close', () => finish(res.statusCode ?? null, res.complete ? null : 'connection closed before the response ended', excerptOf(Buffer.concat(chunks))));
      });
      timer = setTimeout(() => {
        req.destroy(new Error(`timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      onAbort = () => req.destroy(new Error('worker shutting down'));
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', (err: NodeJS.ErrnoException) => finish(null, err.code && !err.message.includes(err.code) ? `${err.code}: ${err.message}` : err.message, null));
      req.end(payload);
    });
  }

  return {
    post,
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

/** Valid UTF-8 text of at most EXCERPT_BYTES bytes (a cut character is dropped), or null. */
function excerptOf(buf: Buffer): string | null {
  if (buf.length === 0) return null;
  return new TextDecoder('utf-8', { fatal: false }).decode(buf).replace(/\uFFFD+$/, '').replace(/\u0000/g, '');
}
