// The operator dashboard (/dashboard): server-rendered pages over the operations
// registry, one file per page under pages/. A signed-in request runs operations with
// its session as the credential (dashboard-context.ts), so the pages hold no rule.
// Forms post back with a CSRF token (dashboard-session.ts); every answer is escaped
// HTML (dashboard-layout.ts); a refused or invalid action shows the problem's detail
// with its status.
import express from 'express';
import { mountAssets } from './dashboard-assets';
import { dashboardContext, DashboardDeps, MountPage } from './dashboard-context';
import { notFound } from './dashboard-layout';
import { requireSession } from './dashboard-session';
import { mountAccount } from './pages/account-page';
import { mountCatalog } from './pages/catalog-page';
import { mountEvents } from './pages/events-page';
import { mountInvoices } from './pages/invoices-page';
import { mountKeys } from './pages/keys-page';
import { mountMail } from './pages/mail-page';
import { mountAudit } from './pages/audit-page';
import { mountMembers } from './pages/members-page';
import { mountMemberPrivacy } from './pages/member-privacy-page';
import { mountOperators } from './pages/operators-page';
import { mountOverview } from './pages/overview-page';
import { mountReports } from './pages/reports-page';
import { mountPlatforms } from './pages/platforms-page';
import { mountPurchases } from './pages/purchases-page';
import { mountSecondFactor } from './pages/second-factor-page';
import { mountSettings } from './pages/settings-page';
import { mountSignIn } from './pages/sign-in-page';
import { mountSubscriptions } from './pages/subscriptions-page';
import { mountWebhooks } from './pages/webhooks-page';

/** The pages behind a session, in the navigation's order. */
const SIGNED_PAGES: MountPage[] = [
  mountSecondFactor, mountAccount, mountOverview, mountReports, mountSubscriptions, mountPurchases, mountInvoices, mountMembers,
  mountMemberPrivacy,
  mountCatalog, mountKeys, mountWebhooks, mountEvents, mountOperators,
  mountPlatforms,
  mountMail,
  mountSettings,
  mountAudit,
];

export function mountDashboard(app: express.Express, deps: DashboardDeps): void {
  const ctx = dashboardContext(deps);
  const router = express.Router();
  router.use((_req, res, next) => {
    res.setHeader('Content-Security-Policy',
      "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'same-origin');
    next();
  });
  router.use(express.urlencoded({ extended: false, limit: '50kb' }));

  mountAssets(router);
  mountSignIn(router, ctx);
  router.use(requireSession(deps.api));
  for (const mount of SIGNED_PAGES) mount(router, ctx);
  router.use(notFound);

  app.use('/dashboard', router);
}
