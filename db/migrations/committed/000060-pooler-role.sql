--! Previous: sha1:df248b804c4570fbf56aa15475fd3bab3f5c8f99
--! Hash: sha1:ce60787f31bae5ba860c17d271d930c4ce3b45c9
--! Message: pooler role

--! split: 1-current.sql
-- Enter migration here

--! split: 2-pooler-role.sql
-- PgBouncer in transaction mode (issue 32 item 2): billing_app becomes billing_api at
-- login by its own default, not by a startup option (docs/decisions/pgbouncer-transaction-mode.md).
alter role billing_app set role = 'billing_api';
