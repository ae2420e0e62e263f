--! Previous: sha1:9458c26aa719ca8151631e16e0018137e0698b71
--! Hash: sha1:dd822c7d5a6d6e70cb2b8941db078cf4f3129155
--! Message: deltas no key

--! split: 1-current.sql
-- Enter migration here

--! split: 2-deltas-no-key.sql
-- analytics_deltas without a key again (migration 000062 gave it an identity column and
-- a primary key): every source change inserts delta rows, and the identity's sequence
-- draw and wider key cost about 1% of a single-row change. The key rule asks that keys
-- lead with community_id, and a table with none breaks no key; for a shard move by
-- logical replication (the compaction deletes rows) replica identity full serves
-- instead (docs/decisions/citus-key-rule.md).
alter table billing_private.analytics_deltas drop constraint if exists analytics_deltas_pkey;
alter table billing_private.analytics_deltas drop column if exists id;
create index if not exists analytics_deltas_community on billing_private.analytics_deltas (community_id, day);
alter table billing_private.analytics_deltas replica identity full;
