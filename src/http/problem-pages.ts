// The pages a problem's `type` points to: {base}/problems lists every error code, each
// in a section whose id is the code, so {base}/problems#<code> (the spec's "URI ending
// in an anchor for the code") resolves here; {base}/problems/<code> is the one code's
// page. The OpenAPI document's error table (src/http/openapi.ts) links the same
// addresses. No key needed: it is documentation. docs/decisions/problem-type-urls.md.
import crypto from 'node:crypto';
import type express from 'express';
import { ApiError, codesByStatus, ErrorCode, PROBLEM_PATH, problemType, resolveProblemType, TITLES } from '../core/errors';
import { baseUrlOf } from '../web/express-io';
import { html, Html, raw } from '../web/html';

/** What each code means and what a client does about it. A new code needs its entry here. */
export const PROBLEM_DOCS: Readonly<Record<ErrorCode, { when: string; then: string }>> = {
  unauthorized: {
    when: 'The API key is missing, malformed, unknown or revoked (the same answer for each).',
    then: 'Send Authorization: Bearer <key> with a live key of the community. Retrying as is will not help.',
  },
  missing_scope: {
    when: 'The API key lacks the scope the operation requires; required_scope names it.',
    then: 'Use a key that has that scope (keys are made in the operator dashboard).',
  },
  not_found: {
    when: 'No such resource in the key\'s community (an id of another community answers the same), no such route, or a checkout tier that does not exist or is inactive.',
    then: 'Check the id or path; ids are copied from the API\'s own answers.',
  },
  invalid_request: {
    when: 'Status 400: the request could not be read (body not JSON or not UTF-8, a missing required query parameter, a cursor this API did not return, an unknown Api-Version, a malformed Idempotency-Key). Status 422: a value is invalid or a business rule refuses it.',
    then: 'param names the field to fix and detail says why. Retrying the same request fails the same way.',
  },
  conflict: {
    when: 'The resource is not in a state that allows the operation (e.g. reactivating a subscription that is not cancelling), or a duplicate or mismatched mapping.',
    then: 'Read the resource again and act on its current state.',
  },
  payment_config_inactive: {
    when: 'The community has no active payment provider, so nothing can be charged.',
    then: 'The operator configures a payment provider; retrying before that fails the same way.',
  },
  not_eligible: {
    when: 'The buyer cannot start this checkout: already subscribed to or owning the tier, or a plan switch is needed instead.',
    then: 'Use the member\'s subscription (switch options) instead of a new checkout.',
  },
  request_in_flight: {
    when: 'Another request with the same Idempotency-Key is still being processed.',
    then: 'Wait for it to finish, then retry with the same key to receive its answer.',
  },
  plan_required: {
    when: 'The tier has several active plans and the request named none.',
    then: 'Send plan_id, one of the tier\'s plans (GET /v1/plans).',
  },
  platform_not_connected: {
    when: 'The community has no configuration for the requested platform.',
    then: 'Use a connected platform, or identify the buyer by namespace and external_user_id.',
  },
  idempotency_key_reuse: {
    when: 'The Idempotency-Key was used within 24 hours for a request with a different body.',
    then: 'Use a new key for a new request; reuse a key only to retry the very same request.',
  },
  endpoint_limit: {
    when: 'The community already has the maximum number of webhook endpoints (5).',
    then: 'Delete an endpoint first, or subscribe an existing one to more event types.',
  },
  discount_invalid: {
    when: 'The discount code is unknown, expired, exhausted or not valid for this buyer or tier.',
    then: 'Retry without the code, or with another one.',
  },
  rate_limited: {
    when: 'The key (or, without a valid key, the client IP) exceeded its rate limit.',
    then: 'Wait the Retry-After header\'s seconds; the RateLimit-* headers show the budget.',
  },
  internal_error: {
    when: 'An unexpected error; nothing is said about it in the answer (the X-Request-Id response header identifies it in the service\'s logs).',
    then: 'Retry later; for a state-changing request, with the same Idempotency-Key.',
  },
  service_unavailable: {
    when: 'A dependency is unavailable: the database is unreachable (the answer carries Retry-After), or the payment provider or webhook encryption is not configured on this deployment (retrying will not help).',
    then: 'With Retry-After, retry after that many seconds; without it, the operator must configure the deployment.',
  },
  payment_failed: {
    when: 'The payment provider declined the payment; nothing was changed.',
    then: 'Ask the member to update the payment method, then retry.',
  },
  method_not_allowed: {
    when: 'The path exists but does not take this HTTP method; the Allow header lists the methods it takes.',
    then: 'Use one of the methods in Allow.',
  },
  payload_too_large: {
    when: 'The request body is larger than 100 kB.',
    then: 'Send a smaller body.',
  },
  request_header_too_large: {
    when: 'The request line and headers exceed 16 kB.',
    then: 'Send shorter headers or a shorter URL.',
  },
};

export const PROBLEM_CODES = Object.keys(PROBLEM_DOCS) as ErrorCode[];

/** The HTTP statuses each code is answered with. */
export function statusesOf(code: ErrorCode): number[] {
  const statuses: number[] = [];
  for (const [status, codes] of codesByStatus()) if (codes.includes(code)) statuses.push(status);
  return statuses.sort((a, b) => a - b);
}

/** The error table as Markdown (for the OpenAPI document): code, status, meaning, with the page's address. */
export function problemTableMarkdown(base: string): string {
  const rows = PROBLEM_CODES.map((code) => {
    const doc = PROBLEM_DOCS[code];
    return `| [\`${code}\`](${problemType(code, base)}) | ${statusesOf(code).join(', ')} | ${doc.when.replace(/\|/g, '\\|')} |`;
  });
  return ['| code | status | meaning |', '|---|---|---|', ...rows].join('\n');
}

const PAGE_CSS = 'body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1b1f24}'
  + 'section{border-top:1px solid #dfe3e8;padding:.4rem 0}section:target{background:#fff8e1}code{background:#eef0f3;padding:0 .25rem;border-radius:3px}'
  + 'a{color:#0b57d0}dt{font-weight:600}dd{margin:0 0 .6rem 0}';

/** Static documentation: no script, the one inline style allowed by its hash. */
const CSP = `default-src 'none'; style-src 'sha256-${crypto.createHash('sha256').update(PAGE_CSS).digest('base64')}'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'`;

function section(code: ErrorCode, heading: 'h1' | 'h2'): Html {
  const doc = PROBLEM_DOCS[code];
  const title = html`<code>${code}</code>: ${TITLES[code]}`;
  return html`<section id="${code}">
${heading === 'h1' ? html`<h1>${title}</h1>` : html`<h2><a href="${PROBLEM_PATH}/${code}">${title}</a></h2>`}
<dl><dt>HTTP status</dt><dd>${statusesOf(code).join(' or ')}</dd>
<dt>When</dt><dd>${doc.when}</dd>
<dt>What to do</dt><dd>${doc.then}</dd></dl>
</section>`;
}

function page(title: string, body: Html): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title><style>${raw(PAGE_CSS)}</style></head>
<body><main>${body}</main></body></html>`.value;
}

export function mountProblemPages(app: express.Express): void {
  const index = page('Error codes', html`<h1>Error codes</h1>
<p>Errors are <code>application/problem+json</code> (RFC 9457). Branch on <code>code</code>;
<code>type</code> is the address of the code's section on this page.</p>
${PROBLEM_CODES.map((code) => section(code, 'h2'))}`);
  const pages = new Map(PROBLEM_CODES.map((code) => [code as string, page(`${code}: ${TITLES[code]}`,
    html`${section(code, 'h1')}<p><a href="${PROBLEM_PATH}">All error codes</a></p>`)]));
  const send = (res: express.Response, text: string) => {
    res.setHeader('Cache-Control', 'public, max-age=3600');
    res.setHeader('Content-Security-Policy', CSP);
    res.type('html').send(text);
  };
  app.get(PROBLEM_PATH, (_req, res) => send(res, index));
  app.get(`${PROBLEM_PATH}/:code`, (req, res) => {
    const text = pages.get(String(req.params.code));
    if (text !== undefined) return send(res, text);
    // Documentation needs no key, so neither does its not-found answer.
    const problem = new ApiError('not_found', `No such error code; the codes are listed at ${PROBLEM_PATH}.`).toProblem();
    res.status(404).type('application/problem+json').send(JSON.stringify(resolveProblemType(problem, baseUrlOf(res))));
  });
}
