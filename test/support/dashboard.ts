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

/** Invites an operator and signs the page in through the one-time link. */
export async function signInAs(page: Page, app: TestApp, communityId: string, role: OperatorRole, email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.com`): Promise<string> {
  const invitation = await inviteOperator(app.owner, communityId, email, role);
  await page.goto(signInLink(app.url, invitation.token));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL('**/dashboard/account');
  return email;
}
