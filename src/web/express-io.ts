// Express plumbing shared by the adapters mounted on the HTTP server (REST, MCP): who
// is calling, and an operation's Outcome written as a response. Protocol only: no rule.
import type express from 'express';
import type { Request, Response } from 'express';
import { API_VERSION } from '../core/api-version';
import { resolveProblemType } from '../core/errors';
import type { Caller, Outcome, RateLimitInfo } from '../operations/executor';

export const WWW_AUTHENTICATE = 'Bearer realm="billing"';

export function bearerKey(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer ([^\s]+)$/.exec(header);
  return m ? m[1] : null;
}

export function callerOf(req: Request): Caller {
  const observation = req.observation;
  return {
    key: bearerKey(req.header('authorization')),
    ip: req.ip ?? req.socket.remoteAddress ?? 'unknown',
    origin: { protocol: req.protocol, host: req.get('host') },
    requestId: observation?.requestId,
    identified: observation && ((communityId, keyId) => { observation.communityId = communityId; observation.keyId = keyId; }),
  };
}

type BaseUrlOf = (req: Request) => string;
const BASE_URL = 'billing.baseUrlOf';

/** How the app computes a request's base URL (src/core/config.ts baseUrlFor); set by the composition root. */
export function setBaseUrlOf(app: express.Express, baseUrlOf: BaseUrlOf): void {
  app.locals[BASE_URL] = baseUrlOf;
}

/** The base URL of this response's request, when the app said how to compute it. */
export function baseUrlOf(res: Response): string | undefined {
  const of = res.app?.locals[BASE_URL] as BaseUrlOf | undefined;
  return of && res.req ? of(res.req) : undefined;
}

export function setRateHeaders(res: Response, rl: RateLimitInfo | undefined, retry: boolean) {
  if (!rl) return;
  res.setHeader('RateLimit-Limit', String(rl.limit));
  res.setHeader('RateLimit-Remaining', String(rl.remaining));
  res.setHeader('RateLimit-Reset', String(rl.reset));
  if (retry) res.setHeader('Retry-After', String(rl.retry_after));
}

export function sendOutcome(res: Response, outcome: Outcome) {
  res.setHeader('Api-Version', API_VERSION);
  setRateHeaders(res, outcome.rateLimit, outcome.status === 429);
  // An outage (503) says when to come back.
  if (outcome.status === 503 && outcome.retryAfter !== undefined) res.setHeader('Retry-After', String(outcome.retryAfter));
  // For the access log line (src/web/observe.ts): one line per failure, with its cause.
  if (outcome.cause) res.locals.cause = outcome.cause;
  if (outcome.replayed) res.setHeader('Idempotent-Replayed', 'true');
  // RFC 9110 11.6.1 / RFC 6750 3: a 401 names the scheme it wants.
  if (outcome.status === 401) res.setHeader('WWW-Authenticate', WWW_AUTHENTICATE);
  res.status(outcome.status);
  if (outcome.status === 204 || (outcome.bodyText === undefined && outcome.body === undefined)) {
    res.end();
    return;
  }
  if (outcome.document) return sendDocument(res, outcome.document);
  res.type(outcome.problem ? 'application/problem+json' : 'application/json');
  // A problem's type names this service's page for its code, at this request's base URL.
  if (outcome.problem) return void res.send(JSON.stringify(resolveProblemType(outcome.body, baseUrlOf(res))));
  res.send(outcome.bodyText ?? JSON.stringify(outcome.body));
}

/**
 * A rendered document: a PDF is shown inline by a browser, a CSV (a report) downloaded;
 * either is saved under its file name.
 */
export function sendDocument(res: Response, doc: { mediaType: string; filename: string; bytes: Uint8Array }) {
  const text = doc.mediaType.startsWith('text/');
  res.setHeader('Content-Type', text ? `${doc.mediaType}; charset=utf-8` : doc.mediaType);
  res.setHeader('Content-Disposition', `${text ? 'attachment' : 'inline'}; filename="${doc.filename.replace(/[^A-Za-z0-9._-]/g, '_')}"`);
  res.send(Buffer.from(doc.bytes.buffer, doc.bytes.byteOffset, doc.bytes.byteLength));
}
