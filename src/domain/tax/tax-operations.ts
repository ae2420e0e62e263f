// GET /v1/tax-settings: how the community's invoices are taxed (docs/decisions/tax.md).
// Read only: the settings are part of the catalog file (`billing catalog apply`), so
// they are written in one place.
import { defineOperation, Operation } from '../operation';
import { taxSettings } from './tax-schema';

export const taxOperations: Operation[] = [
  defineOperation({
    name: 'get_tax_settings',
    method: 'GET',
    path: '/v1/tax-settings',
    scope: 'plans:read',
    tag: 'Plans',
    summary: 'How the community\'s invoices are taxed',
    description: 'The seller its invoices name (legal name, address, country, tax id), its tax rates by buyer country '
      + '(name, rate in parts per million, inclusive or exclusive), and whether Stripe computes the tax of Stripe checkouts. '
      + 'Set with the catalog file (seller, tax_rates, payment_provider.automatic_tax) through `billing catalog apply`.',
    response: taxSettings,
    sql: 'tax_settings_get',
  }),
];
