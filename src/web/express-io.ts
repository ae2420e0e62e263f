// Express plumbing shared by the adapters mounted on the HTTP server (REST, MCP): who
// is calling, and an operation's Outcome written as a response. Protocol only: no rule.
import type { Request, Response } from 'express';
import { API_VERSION } from '../core/api-version';
import type { Caller, Outcome, RateLimitInfo } from '../operations/executor';

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
    identified: observation && ((communityId, keyId) => { observation.communityId = communityId; observation.keyId = keyId; }),
  };
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
  if (outcome.replayed) res.setHeader('Idempotent-Replayed', 'true');
  res.status(outcome.status);
  if (outcome.status === 204 || outcome.body === undefined) {
    res.end();
    return;
  }
  res.type(outcome.problem ? 'application/problem+json' : 'application/json');
  res.send(JSON.stringify(outcome.body));
}
