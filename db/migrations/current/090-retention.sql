-- Retention: the worker purges what has outlived its use (hourly, billing__purge_expired).
--   idempotency records      after expires_at (24 hours)
--   link codes, portal URLs  a day after they expired (by the community's clock)
--   webhook attempts         after p_delivery_retention (30 days); finished deliveries too
--   rate buckets             idle for an hour (a purged bucket is simply full again)
create or replace function billing_private.purge_expired(p_delivery_retention interval default '30 days')
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_idempotency integer;
  v_link_codes integer;
  v_portal integer;
  v_attempts integer;
  v_deliveries integer;
  v_buckets integer;
begin
  delete from billing.idempotency_keys where expires_at <= now();
  get diagnostics v_idempotency = row_count;
  delete from billing.link_codes l
  where l.expires_at <= billing.community_now(l.community_id) - interval '1 day';
  get diagnostics v_link_codes = row_count;
  delete from billing.portal_sessions p
  where p.expires_at <= billing.community_now(p.community_id) - interval '1 day';
  get diagnostics v_portal = row_count;
  delete from billing.webhook_attempts a
  where a.started_at < now() - p_delivery_retention;
  get diagnostics v_attempts = row_count;
  delete from billing.webhook_deliveries d
  where d.status <> 'pending' and d.updated_at < now() - p_delivery_retention;
  get diagnostics v_deliveries = row_count;
  delete from billing_private.rate_buckets b where b.updated_at < now() - interval '1 hour';
  get diagnostics v_buckets = row_count;
  return jsonb_build_object('idempotency_keys', v_idempotency, 'link_codes', v_link_codes,
    'portal_sessions', v_portal, 'webhook_attempts', v_attempts, 'webhook_deliveries', v_deliveries,
    'rate_buckets', v_buckets);
end
$$;
revoke all on function billing_private.purge_expired(interval) from public;
