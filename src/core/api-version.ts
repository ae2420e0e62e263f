// The API version (spec: "Versioning"). SQL answers the same string from
// billing.api_version() for event envelopes; test/core/sql-agreement.test.ts holds the
// two equal.
export const API_VERSION = '2026-08';
