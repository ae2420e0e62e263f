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
  idempotent?: boolean;
  /**
   * Examples for the OpenAPI document; when absent they are generated from the
   * schemas (src/http/openapi.ts). Give one when the generated value would mislead.
   */
  examples?: { request?: Record<string, unknown>; response?: unknown };
  /** billing_api function taking the merged input as jsonb: one round trip. */
  sql?: string;
  handler?: (ctx: OpContext, input: Record<string, unknown>) => Promise<unknown>;
}

export function defineOperation<T extends Operation>(op: T): T {
  if (!op.sql === !op.handler) throw new Error(`operation ${op.name} needs exactly one of sql or handler`);
  return op;
}
