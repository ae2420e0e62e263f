// A local Stripe-compatible HTTP server for the Stripe adapter's tests: the real SDK
// talks to it through its host/port/protocol options. It implements the few endpoints
// the adapter calls, records every request (form fields flattened as the SDK sends
// them, e.g. "line_items[0][price]"), and signs webhook payloads the way Stripe does
// (stripe.webhooks.generateTestHeaderString).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

export interface RecordedRequest {
  method: string;
  path: string;
  form: Record<string, string>;
  idempotencyKey: string | null;
  /** The secret key the SDK sent (Authorization: Bearer ...): which account was used. */
  apiKey: string | null;
}

type Obj = Record<string, unknown>;

export const WEBHOOK_SECRET = 'whsec_test_secret_for_the_mock';
export const SECRET_KEY = 'sk_test_mock';

/** Turns flattened form keys ("a[b][0][c]") back into nested objects and arrays. */
export function unflatten(form: Record<string, string>): Obj {
  const root: Obj = {};
  for (const [key, value] of Object.entries(form)) {
    const parts = key.replace(/\]/g, '').split('[');
    let node: Obj = root;
    parts.forEach((part, i) => {
      if (i === parts.length - 1) { node[part] = value; return; }
      const nextIsIndex = /^\d+$/.test(parts[i + 1]);
      node[part] ??= nextIsIndex ? [] : {};
      node = node[part] as Obj;
    });
  }
  return root;
}

const now = () => Math.floor(Date.now() / 1000);

export interface StripeMock {
  port: number;
  requests: RecordedRequest[];
  subscriptions: Map<string, Obj>;
  /** Refunds created through POST /v1/refunds, oldest first. */
  refunds: Obj[];
  /** Env for startApp: keys and the SDK's host/port/protocol. */
  env: Record<string, string>;
  /** A Stripe subscription object as the API returns it (also stored for GET). */
  subscription(opts: { id: string; customer?: string; price: string; status?: string; metadata?: Record<string, string>;
    periodStart?: number; periodEnd?: number; cancelAtPeriodEnd?: boolean; trialEnd?: number | null; declines?: boolean }): Obj;
  /** A signed webhook: body and Stripe-Signature header. */
  signedEvent(type: string, object: Obj, opts?: { id?: string; created?: number; secret?: string }): { payload: string; header: string; id: string };
  requestsTo(method: string, pathPrefix: string): RecordedRequest[];
  close(): Promise<void>;
}

export async function startStripeMock(): Promise<StripeMock> {
  const requests: RecordedRequest[] = [];
  const subscriptions = new Map<string, Obj>();
  const refunds: Obj[] = [];
  const schedules = new Map<string, Obj>();
  let seq = 0;
  // Ids unique across mocks: test files share one database (and its provider_events).
  const tag = Math.random().toString(36).slice(2, 8);
  const id = (prefix: string) => `${prefix}_mock${tag}${++seq}`;
  const stripe = new Stripe(SECRET_KEY);

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${++seq}` });
    res.end(JSON.stringify(body));
  };
  const notFound = (res: http.ServerResponse, what: string) =>
    json(res, 404, { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such ${what}` } });

  const route = (method: string, path: string, form: Record<string, string>, res: http.ServerResponse) => {
    const body = unflatten(form);
    let m: RegExpExecArray | null;
    if (method === 'POST' && path === '/v1/coupons') {
      return json(res, 200, { id: id('co'), object: 'coupon', ...body });
    }
    if (method === 'POST' && path === '/v1/checkout/sessions') {
      const sid = id('cs_test');
      return json(res, 200, { id: sid, object: 'checkout.session', url: `https://checkout.stripe.test/c/pay/${sid}`,
        expires_at: now() + 86400, status: 'open', payment_status: 'unpaid', ...body });
    }
    if (method === 'POST' && path === '/v1/billing_portal/sessions') {
      const pid = id('bps');
      return json(res, 200, { id: pid, object: 'billing_portal.session', url: `https://billing.stripe.test/p/session/${pid}`, ...body });
    }
    if (method === 'POST' && path === '/v1/refunds') {
      const refund = { id: id('re'), object: 'refund', status: 'succeeded', amount: Number(form.amount), payment_intent: form.payment_intent ?? null,
        charge: form.charge ?? null, metadata: (body.metadata as Obj) ?? {} };
      refunds.push(refund);
      return json(res, 200, refund);
    }
    if ((m = /^\/v1\/subscriptions\/([^/]+)$/.exec(path))) {
      const sub = subscriptions.get(m[1]);
      if (!sub) return notFound(res, `subscription: '${m[1]}'`);
      if (method === 'DELETE') {
        Object.assign(sub, { status: 'canceled', ended_at: now(), canceled_at: now() });
        return json(res, 200, sub);
      }
      if (method === 'POST' && form.pause_collection !== undefined) sub.pause_collection = form.pause_collection === '' ? null : body.pause_collection;
      if (method === 'POST') {
        if (form.cancel_at_period_end !== undefined && sub.schedule) {
          // As Stripe: a subscription a schedule manages takes no cancelation change.
          return json(res, 400, { error: { type: 'invalid_request_error', message: `The subscription is managed by the subscription schedule \`${String(sub.schedule)}\`, and updating any cancelation behavior directly is not allowed. Please update the schedule instead.` } });
        }
        if (form.cancel_at_period_end !== undefined) sub.cancel_at_period_end = form.cancel_at_period_end === 'true';
        const items = body.items as Obj[] | undefined;
        if (items?.[0]?.price && form.payment_behavior === 'pending_if_incomplete' && sub.declines) {
          // The proration invoice was not paid: the change stays pending (Stripe's pending_update).
          return json(res, 200, { ...sub, pending_update: { subscription_items: items, expires_at: now() + 82800 } });
        }
        if (items?.[0]?.price) {
          const item = (sub.items as { data: Obj[] }).data[0];
          item.price = { id: items[0].price, object: 'price' };
        }
      }
      return json(res, 200, sub);
    }
    if (method === 'POST' && path === '/v1/subscription_schedules') {
      const sched = { id: id('sub_sched'), object: 'subscription_schedule', subscription: form.from_subscription,
        phases: [{ start_date: now() - 3600, end_date: now() + 86400 * 20 }], status: 'active' };
      schedules.set(sched.id, sched);
      const sub = subscriptions.get(form.from_subscription);
      if (sub) sub.schedule = sched.id;
      return json(res, 200, sched);
    }
    if ((m = /^\/v1\/subscription_schedules\/([^/]+)(\/release)?$/.exec(path))) {
      const sched = schedules.get(m[1]);
      if (!sched) return notFound(res, `subscription_schedule: '${m[1]}'`);
      if (method === 'POST' && m[2]) {
        sched.status = 'released';
        const sub = subscriptions.get(String(sched.subscription));
        if (sub) sub.schedule = null;
      } else if (method === 'POST') {
        Object.assign(sched, body);
      }
      return json(res, 200, sched);
    }
    return json(res, 404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${path})` } });
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const raw = req.method === 'GET' ? url.search.slice(1) : Buffer.concat(chunks).toString('utf8');
      const form = Object.fromEntries(new URLSearchParams(raw));
      const header = req.headers['idempotency-key'];
      const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
      requests.push({ method: req.method ?? 'GET', path: url.pathname, form, idempotencyKey: typeof header === 'string' ? header : null,
        apiKey: auth ? auth[1] : null });
      route(req.method ?? 'GET', url.pathname, form, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    port,
    requests,
    subscriptions,
    refunds,
    env: {
      STRIPE_SECRET_KEY: SECRET_KEY,
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      STRIPE_API_HOST: '127.0.0.1',
      STRIPE_API_PORT: String(port),
      STRIPE_API_PROTOCOL: 'http',
    },
    subscription(opts) {
      const start = opts.periodStart ?? now();
      const end = opts.periodEnd ?? start + 30 * 86400;
      const sub: Obj = {
        id: opts.id, object: 'subscription', status: opts.status ?? 'active', customer: opts.customer ?? 'cus_mock',
        cancel_at_period_end: opts.cancelAtPeriodEnd ?? false, cancel_at: null, canceled_at: null, ended_at: null,
        trial_end: opts.trialEnd ?? null, schedule: null, metadata: opts.metadata ?? {}, pending_update: null,
        ...(opts.declines ? { declines: true } : {}),
        items: { object: 'list', data: [{ id: `si_${opts.id}`, object: 'subscription_item', price: { id: opts.price, object: 'price' },
          current_period_start: start, current_period_end: end }] },
      };
      subscriptions.set(opts.id, sub);
      return sub;
    },
    signedEvent(type, object, opts = {}) {
      const eventId = opts.id ?? id('evt');
      const payload = JSON.stringify({ id: eventId, object: 'event', type, created: opts.created ?? now(), api_version: '2025-01-01',
        livemode: false, pending_webhooks: 1, request: { id: null, idempotency_key: null }, data: { object } });
      return { payload, header: stripe.webhooks.generateTestHeaderString({ payload, secret: opts.secret ?? WEBHOOK_SECRET }), id: eventId };
    },
    requestsTo(method, pathPrefix) {
      return requests.filter((r) => r.method === method && r.path.startsWith(pathPrefix));
    },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** Posts a signed webhook to the service. */
export async function deliver(baseUrl: string, communityId: string, event: { payload: string; header: string }, header = event.header) {
  const res = await fetch(`${baseUrl}/webhooks/stripe/${communityId}`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': header }, body: event.payload,
  });
  return { status: res.status, body: await res.json().catch(() => null) as Obj | null };
}
