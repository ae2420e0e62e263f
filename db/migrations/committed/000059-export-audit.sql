--! Previous: sha1:61c5a4c51c0454563026605423be5a2542bd0eeb
--! Hash: sha1:df248b804c4570fbf56aa15475fd3bab3f5c8f99
--! Message: export audit

--! split: 1-current.sql
-- Enter migration here

--! split: 2-export-audit.sql
-- A member's data export is recorded in the audit log (issue 31's "Done when": each
-- step readable there), as a line of its own without the data.
alter table billing.audit_log drop constraint if exists audit_log_operation_check;
alter table billing.audit_log add constraint audit_log_operation_check
  check (operation in ('insert', 'update', 'delete', 'export')) not valid;
alter table billing.audit_log validate constraint audit_log_operation_check;

create or replace function billing_private.audit_export(p_table text, p_row_id text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_actor jsonb := billing_private.audit_actor();
begin
  insert into billing.audit_log (community_id, actor_type, actor_id, key_id, request_id, table_name, row_id, operation)
  values (billing.current_community_id(), v_actor->>'type', v_actor->>'id', v_actor->>'key_id', v_actor->>'request_id',
    p_table, p_row_id, 'export');
end
$$;

grant execute on function billing_private.audit_export(text, text) to billing_api;
revoke execute on function billing_private.audit_wanted() from billing_operator;

create or replace function billing_api.member_export(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_c text := billing.current_community_id();
  v_id text := p_args->>'id';
  v_m billing.members;
  -- how a JSON text names the member: its id as a string value
  v_named text := '"' || (p_args->>'id') || '"';
begin
  select * into v_m from billing.members m where m.community_id = v_c and m.id = v_id;
  if v_m.id is null then
    perform billing.raise('BL404', 'No member ' || v_id || '.');
  end if;
  -- the export is in the audit log, by whom, without its data
  perform billing_private.audit_export('members', v_id);
  return jsonb_build_object(
    'format', 'member-export/1',
    'exported_at', billing.iso(now()),
    'community', (select jsonb_build_object('id', c.id, 'name', c.name) from billing.communities c where c.id = v_c),
    'member', billing.member_export_json(v_m),
    'subscriptions', coalesce((select jsonb_agg(billing.subscription_json(s) order by s.id)
      from billing.subscriptions s where s.community_id = v_c and s.member_id = v_id), '[]'),
    'purchases', coalesce((select jsonb_agg(billing.purchase_json(p) order by p.id)
      from billing.purchases p where p.community_id = v_c and p.member_id = v_id), '[]'),
    'grants', coalesce((select jsonb_agg(billing.grant_json(g) order by g.id)
      from billing.grants g where g.community_id = v_c and g.member_id = v_id), '[]'),
    'invoices', coalesce((select jsonb_agg(billing.invoice_json(i) order by i.id)
      from billing.invoices i where i.community_id = v_c and i.member_id = v_id), '[]'),
    -- the buyer's name and address each invoice was made out to (the PDF prints them)
    'invoice_buyers', coalesce((select jsonb_agg(jsonb_build_object('invoice_id', i.id, 'buyer_name', i.buyer_name,
        'buyer_address_lines', to_jsonb(coalesce(i.buyer_address_lines, '{}'::text[]))) order by i.id)
      from billing.invoices i where i.community_id = v_c and i.member_id = v_id), '[]'),
    'credit_notes', coalesce((select jsonb_agg(billing.credit_note_json(cn) order by cn.id)
      from billing.credit_notes cn join billing.invoices i on i.community_id = cn.community_id and i.id = cn.invoice_id
      where cn.community_id = v_c and i.member_id = v_id), '[]'),
    'payment_attempts', coalesce((select jsonb_agg(jsonb_build_object('id', a.id, 'invoice_id', a.invoice_id, 'status', a.status,
        'amount_cents', a.amount_cents, 'failure_message', a.failure_message, 'provider', a.provider,
        'attempted_at', billing.iso(a.attempted_at)) order by a.id)
      from billing.payment_attempts a join billing.invoices i on i.community_id = a.community_id and i.id = a.invoice_id
      where a.community_id = v_c and i.member_id = v_id), '[]'),
    'entitlements', coalesce((select jsonb_agg(billing.member_entitlement_json(me)
        || jsonb_build_object('identities', me.identities, 'updated_at', billing.iso(me.updated_at)) order by me.id)
      from billing.member_entitlements me where me.community_id = v_c and me.member_id = v_id), '[]'),
    'benefit_deliveries', coalesce((select jsonb_agg(jsonb_build_object('platform_config_id', d.platform_config_id,
        'type', d.type, 'value', d.value, 'want', d.want, 'status', d.status, 'applied_uid', d.applied_uid,
        'error', d.error, 'attempts', d.attempts, 'updated_at', billing.iso(d.updated_at))
        order by d.platform_config_id, d.type, d.value)
      from billing.benefit_deliveries d where d.community_id = v_c and d.member_id = v_id), '[]'),
    'platform_actions', coalesce((select jsonb_agg(jsonb_build_object('id', a.id, 'platform_config_id', a.platform_config_id,
        'action', a.action, 'target', a.target, 'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error,
        'created_at', billing.iso(a.created_at)) order by a.id)
      from billing.platform_actions a where a.community_id = v_c and a.member_id = v_id), '[]'),
    'mail_messages', coalesce((select jsonb_agg(billing.mail_message_json(mm, false) order by mm.id)
      from billing.mail_messages mm where mm.community_id = v_c and mm.member_id = v_id), '[]'),
    'mail_unsubscribes', coalesce((select jsonb_agg(jsonb_build_object('template', u.template,
        'created_at', billing.iso(u.created_at)) order by u.template)
      from billing.mail_unsubscribes u where u.community_id = v_c and u.member_id = v_id), '[]'),
    'link_codes', coalesce((select jsonb_agg(jsonb_build_object('id', lc.id, 'intended_platform', lc.intended_platform,
        'expires_at', billing.iso(lc.expires_at), 'redeemed_at', billing.iso(lc.redeemed_at),
        'invalidated_at', billing.iso(lc.invalidated_at), 'created_at', billing.iso(lc.created_at)) order by lc.id)
      from billing.link_codes lc where lc.community_id = v_c and lc.member_id = v_id), '[]'),
    'checkout_sessions', coalesce((select jsonb_agg(jsonb_build_object('id', cs.id, 'status', cs.status,
        'tier_id', cs.tier_id, 'plan_id', cs.plan_id, 'amount_cents', cs.amount_cents, 'discount_cents', cs.discount_cents,
        'currency', cs.currency, 'subject_kind', cs.subject_kind, 'provider', cs.provider,
        'client_reference_id', cs.client_reference_id, 'return_url', cs.return_url,
        'subscription_id', cs.subscription_id, 'purchase_id', cs.purchase_id,
        'customer_email', cs.customer_email, 'customer_name', cs.customer_name,
        'customer_address_lines', to_jsonb(coalesce(cs.customer_address_lines, '{}'::text[])),
        'customer_country', cs.customer_country, 'customer_tax_id', cs.customer_tax_id,
        'expires_at', billing.iso(cs.expires_at), 'completed_at', billing.iso(cs.completed_at),
        'created_at', billing.iso(cs.created_at)) order by cs.id)
      from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = v_id), '[]'),
    'discount_redemptions', coalesce((select jsonb_agg(jsonb_build_object('discount_id', r.discount_id,
        'checkout_id', r.checkout_id, 'status', r.status, 'created_at', billing.iso(r.created_at)) order by r.created_at, r.checkout_id)
      from billing.discount_redemptions r where r.community_id = v_c and r.member_id = v_id), '[]'),
    'events', coalesce((select jsonb_agg(billing.event_json(e) order by e.id)
      from billing.events e where e.community_id = v_c and strpos(e.data::text, v_named) > 0), '[]'));
end
$$;
