// A real browser for the dashboard and portal tests: Chromium from @sparticuz/chromium
// (the binary ships inside the npm package) driven by playwright-core. One browser per
// test file (launch ~1 s); a fresh context (cookies) per test. axe-core checks a page
// for serious and critical accessibility violations.
import fs from 'node:fs';
import chromium from '@sparticuz/chromium';
import { Browser, BrowserContext, chromium as playwright, Page } from 'playwright-core';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

export async function launchBrowser(): Promise<Browser> {
  return playwright.launch({ executablePath: await chromium.executablePath(), args: ARGS });
}

export async function newPage(browser: Browser): Promise<{ context: BrowserContext; page: Page }> {
  // bypassCSP: axe-core is injected as an inline script, which the pages' CSP forbids.
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 }, bypassCSP: true });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  return { context, page };
}

const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation { id: string; impact: string | null; help: string; nodes: number }

/** The page's serious and critical axe-core violations (wcag2a, wcag2aa and best practices). */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  const result = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: unknown): Promise<{ violations: { id: string; impact: string | null; help: string; nodes: unknown[] }[] }> } }).axe;
    return axe.run(document, { resultTypes: ['violations'] });
  });
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
}
