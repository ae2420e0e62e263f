// What every dashboard page is given: the pools and config, and the operations run
// with the signed-in session as the credential (Caller.session), so the database
// applies the community, the role's scopes and the tenant policies exactly as for an
// API key. A page mounts its GET and its form POSTs on the dashboard's router.
import type { Request, Response, Router } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { dashboardOperation } from '../operations';
import type { Executor, Outcome, RawInput } from '../operations/executor';
import { Json, problemPage } from './dashboard-layout';

export interface DashboardDeps { executor: Executor; api: pg.Pool; config: Config }

export interface DashboardContext {
  api: pg.Pool;
  config: Config;
  /** Runs an operation as the signed-in operator. */
  run(req: Request, name: string, input?: RawInput): Promise<Outcome>;
  /** Runs a read; on a problem answers its page and returns null. */
  read<T = Json>(req: Request, res: Response, name: string, input?: RawInput): Promise<T | null>;
  /** Runs an action from a form and redirects to back?done=notice, or shows the problem. */
  act(req: Request, res: Response, name: string, input: RawInput, back: string, notice: string): Promise<void>;
}

/** A page: mounts its routes (paths relative to /dashboard). */
export type MountPage = (router: Router, ctx: DashboardContext) => void;

export function dashboardContext(deps: DashboardDeps): DashboardContext {
  const { executor, api, config } = deps;

  async function run(req: Request, name: string, input: RawInput = {}): Promise<Outcome> {
    return executor.run(dashboardOperation(name), req.signed!.caller, input);
  }

  async function read<T = Json>(req: Request, res: Response, name: string, input: RawInput = {}): Promise<T | null> {
    const out = await run(req, name, input);
    if (out.problem) { problemPage(req, res, out, '/dashboard'); return null; }
    return out.body as T;
  }

  async function act(req: Request, res: Response, name: string, input: RawInput, back: string, notice: string) {
    const out = await run(req, name, input);
    if (out.problem) return problemPage(req, res, out, back);
    res.redirect(303, `${back}${back.includes('?') ? '&' : '?'}done=${notice}`);
  }

  return { api, config, run, read, act };
}
