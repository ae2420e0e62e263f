// Dashboard test helpers: an executor on the test app's pools, operator sign-in links.
import { createServices } from '../../src/app';
import { Executor } from '../../src/operations/executor';
import type { TestApp } from './app';

export function createExecutor(app: TestApp): Executor {
  return new Executor(app.api, app.config, createServices(app.config));
}
