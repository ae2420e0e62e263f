-- PgBouncer in transaction mode (issue 32 item 2): billing_app becomes billing_api at
-- login by its own default, not by a startup option (docs/decisions/pgbouncer-transaction-mode.md).
alter role billing_app set role = 'billing_api';
