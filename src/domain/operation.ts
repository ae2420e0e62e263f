// What an operation is. Each API capability is defined once, in its resource's folder
// under src/domain/: its name, scope, input schemas (zod) and either a SQL function
// (billing_api.<sql>, run in the same round trip as authentication) or a handler.
// src/operations/ collects them (the registry) and runs them (the executor); REST
// routes, the OpenAPI document and MCP tools are generated from them.
import { z } from 'zod';
import type pg from 'pg';
import type { Config } from '../core/config';
import type { OperatorScope, Scope } from '../core/scopes';
import type { WebhookService } from '../webhooks';
import type { PaymentServices } from './checkout/payment-port';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** Process-wide collaborators of handlers, built once by the composition root (src/app.ts). */
export interface Services {
  payments: PaymentServices;
  webhooks: WebhookService;
}

/** What a handler may use: the request's transaction (tenant and scopes already set). */
export interface OpContext {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** Calls billing_api.<fn>(args) in the request's transaction and returns its jsonb. */
  call<T = unknown>(fn: string, args: unknown): Promise<T>;
  communityId: string;
  keyId: string;
  config: Config;
  baseUrl: string;
  services: Services;
  /**
   * Runs fn after the transaction commits and the connection is released; its value
   * becomes the response body. For slow outside work (not for idempotent operations).
   */
  afterCommit(fn: () => Promise<unknown>): void;
}

/** What sealing an idempotent answer may use: the caller's community and the services. */
export interface SealContext {
  communityId: string;
  services: Services;
}

type AnyObject = z.ZodObject<z.ZodRawShape>;

export interface Operation {
  name: string;
  method: Method;
  path: string;
  scope: Scope | OperatorScope | null;
  summary: string;
  description?: string;
  tag: string;
  params?: AnyObject;
  query?: AnyObject;
  body?: AnyObject;
  response?: z.ZodType;
  status?: number;
  /**
   * Honours Idempotency-Key: a retry with the same key replays the first answer.
   * Every POST, PATCH and DELETE says either this or idempotencyRefused
   * (test/operations/idempotency-everywhere.test.ts holds it).
   */
  idempotent?: boolean;
  /**
   * Why an Idempotency-Key cannot apply here: a request that sends one answers 400
   * invalid_request with this reason (docs/decisions/idempotency-on-every-write.md).
   */
  idempotencyRefused?: string;
  /**
   * For an idempotent answer that holds a secret shown once: what the idempotency
   * record keeps instead of the answer (the secret encrypted), and how a replay gets
   * the answer back. Nothing readable there is a live credential.
   */
  idempotencySeal?: {
    seal(result: unknown, ctx: SealContext): unknown;
    unseal(stored: unknown, ctx: SealContext): unknown;
  };
  /**
   * Examples for the OpenAPI document; when absent they are generated from the
   * schemas (src/http/openapi.ts). Give one when the generated value would mislead.
   */
  examples?: { request?: Record<string, unknown>; response?: unknown };
  /**
   * The answer is a document, not JSON (GET /v1/invoices/{id}/pdf): the operation's
   * data (SQL's JSON, as `response` would be) rendered into `mediaType` by the executor
   * after the gate answered, so every door (REST, the pages) serves the same bytes.
   * Not an MCP tool (docs/decisions/invoice-pdf.md).
   */
  document?: DocumentRenderer;
  /** billing_api function taking the merged input as jsonb: one round trip. */
  sql?: string;
  handler?: (ctx: OpContext, input: Record<string, unknown>) => Promise<unknown>;
}

/** A rendered document: its bytes, media type and the file name a download takes. */
export interface RenderedDocument {
  mediaType: string;
  filename: string;
  bytes: Uint8Array;
}

export interface DocumentRenderer {
  mediaType: 'application/pdf' | 'text/csv';
  /** What the OpenAPI document says the bytes are. */
  description: string;
  render(data: unknown): Promise<RenderedDocument>;
}

export function defineOperation<T extends Operation>(op: T): T {
  if (!op.sql === !op.handler) throw new Error(`operation ${op.name} needs exactly one of sql or handler`);
  if (op.idempotent && op.idempotencyRefused !== undefined) throw new Error(`operation ${op.name} cannot both honour and refuse Idempotency-Key`);
  // The executor seals a handler's answer; a SQL operation's record is written in SQL.
  if (op.idempotencySeal && !(op.idempotent && op.handler)) throw new Error(`operation ${op.name}: idempotencySeal needs an idempotent handler`);
  if (op.document && op.response) throw new Error(`operation ${op.name}: a document answers no JSON response`);
  return op;
}
