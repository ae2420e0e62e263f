// Dashboard test helpers: an executor on the test app's pools, operator sign-in links.
import { createServices } from '../../src/app';
import { Executor } from '../../src/operations/executor';
import type { TestApp } from './app';

export function createExecutor(app: TestApp): Executor {
  return new Executor(app.api, app.config, createServices(app.config));
}

import type { Page } from 'playwright-core';
import { inviteOperator, signInLink } from '../../src/domain/operators/operator-accounts';
import type { OperatorRole } from '../../src/core/scopes';

/**
 * Every browser test signs in from 127.0.0.1, and the suite's files share one database:
 * the sign-in throttle's bucket of that address (10 a minute, 15-operators.sql) would
 * refuse the eleventh sign-in of a fast run with 429 and fail whichever test made it.
 * A browser sign-in starts with that bucket full; the throttle has its own tests (other
 * addresses, test/dashboard/operator-sessions.test.ts).
 */
export async function refillBrowserSignIns(app: TestApp): Promise<void> {
  await app.owner.query(`delete from billing_private.rate_buckets where bucket = 'signin-ip:127.0.0.1'`);
}

/** Invites an operator and signs the page in through the one-time link. */
export async function signInAs(page: Page, app: TestApp, communityId: string, role: OperatorRole, email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.com`): Promise<string> {
  const invitation = await inviteOperator(app.owner, communityId, email, role);
  await refillBrowserSignIns(app);
  await page.goto(signInLink(app.url, invitation.token));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL('**/dashboard/account');
  return email;
}
