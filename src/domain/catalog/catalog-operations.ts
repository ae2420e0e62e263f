// The catalog as a `billing catalog apply` file, for the dashboard's catalog page
// (billing_api.catalog_file, 20-catalog.sql): keys as stored, inactive tiers and plans
// included, no secrets. A dashboard operation (src/operations/index.ts): not under /v1.
import { defineOperation, Operation } from '../operation';
import { catalogSchema } from './catalog-file';

export const catalogDashboardOperations: Operation[] = [
  defineOperation({
    name: 'get_catalog_file',
    method: 'GET',
    path: '/dashboard/catalog/file',
    scope: 'plans:read',
    tag: 'Catalog',
    summary: 'The community\'s catalog as a file for `billing catalog apply` (plans:read and discounts:read)',
    response: catalogSchema,
    sql: 'catalog_file',
  }),
];
