// The names of the API's resource shapes. The OpenAPI document (src/http/openapi.ts)
// emits each of these zod schemas once, under components/schemas/<Name>, and refers to
// it by $ref wherever an operation's response holds it, so a client generator
// (openapi-typescript, @hey-api/openapi-ts, openapi-generator) makes one named type per
// resource instead of an anonymous copy per operation. The schemas themselves stay in
// their resource's <resource>-schema.ts: a field added there appears in the named
// component. A resource shape that a response holds and that has no name here is
// inlined where it appears. See docs/decisions/openapi-named-schemas.md.
import type { z } from 'zod';
import { analyticsSummary } from './analytics/analytics-operations';
import { auditEntry } from './audit/audit-schema';
import { catalog, catalogDiscount, catalogEntitlement, catalogPlan, catalogPlanChange, catalogPlatform, catalogTier, pricePreview } from './catalog/catalog-schema';
import { checkoutLink } from './checkout/checkout-schema';
import { discount } from './discounts/discount-schema';
import { entitlementBenefit, entitlementSource, memberEntitlement } from './entitlements/entitlement-schema';
import { eventEnvelopeSchema } from './events/event-schema';
import { grant } from './grants/grant-schema';
import { invoice, invoiceCreditNote, invoiceLine, invoiceTaxLine, refund } from './invoices/invoice-schema';
import { externalSubject, identity, member } from './members/member-schema';
import { memberErasure, memberExport } from './members/member-privacy-schema';
import { billingPlan, tier } from './plans/plan-schema';
import { purchase } from './purchases/purchase-schema';
import { subscription, switchOption } from './subscriptions/subscription-schema';
import { taxRate, taxSettings } from './tax/tax-schema';
import { testPingResult, webhookAttempt, webhookDelivery, webhookEndpoint, webhookEndpointWithSecret } from './webhooks/webhook-schema';

/** Component name -> the zod schema it names (the output shape, as responses carry it). */
export const NAMED_SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  Tier: tier,
  Plan: billingPlan,
  Member: member,
  Identity: identity,
  ExternalSubject: externalSubject,
  MemberExport: memberExport,
  MemberErasure: memberErasure,
  Subscription: subscription,
  SwitchOption: switchOption,
  Purchase: purchase,
  Invoice: invoice,
  InvoiceLine: invoiceLine,
  CreditNote: invoiceCreditNote,
  TaxLine: invoiceTaxLine,
  TaxRate: taxRate,
  TaxSettings: taxSettings,
  Refund: refund,
  Grant: grant,
  Discount: discount,
  MemberEntitlement: memberEntitlement,
  EntitlementSource: entitlementSource,
  EntitlementBenefit: entitlementBenefit,
  Event: eventEnvelopeSchema,
  CheckoutLink: checkoutLink,
  AnalyticsSummary: analyticsSummary,
  WebhookEndpoint: webhookEndpoint,
  WebhookEndpointWithSecret: webhookEndpointWithSecret,
  WebhookDelivery: webhookDelivery,
  WebhookAttempt: webhookAttempt,
  WebhookTestResult: testPingResult,
  AuditEntry: auditEntry,
  Catalog: catalog,
  CatalogTier: catalogTier,
  CatalogPlan: catalogPlan,
  CatalogPlanChange: catalogPlanChange,
  CatalogEntitlement: catalogEntitlement,
  CatalogDiscount: catalogDiscount,
  CatalogPlatform: catalogPlatform,
  PricePreview: pricePreview,
};
