--! Previous: sha1:74edfbc67cef99c22ac58375e5ba6c7f4a7afbc6
--! Hash: sha1:d021dd48e228d628ac787cba9475ca25c166910d
--! Message: privacy

--! split: 1-current.sql
-- Enter migration here

--! split: 80-privacy.sql
-- Issue 31 item 4: a member's data exported and erased (docs/decisions/member-export.md,
-- member-erasure.md, member-privacy-scopes.md). billing.members.erased_at; the triggers
-- that keep an erased member empty; invoices that drop a consumer's name and address
-- once their member is erased; the signed links of mail closed to an erased member; the
-- member.erased event type; the scopes members:export and members:erase; the audit
-- log's triggers on grants hiding their note, which erasure removes;
-- GET /v1/members/{id}/export (billing_api.member_export) and POST
-- /v1/members/{id}/erase (billing_api.member_erase). Fixtures: functions/30-member-privacy.sql
-- and the tables beside which each trigger stands.

-- ---- the column (tables/30-members.sql) ----
alter table billing.members add column if not exists erased_at timestamptz;

-- ---- functions (functions/30-member-privacy.sql, whole) ----

-- ---- export ----------------------------------------------------------------------------

-- GET /v1/members/{id}/export (members:export): everything the service holds about one
-- member, as one JSON document (format member-export/1). Runs as the API role, so the
-- tenant policies fence it like every read. Events are those whose data names the
-- member's id (a scan of the community's events: an export is rare). Mail messages are
-- listed without their bodies (a rendering of data the export holds already) and link
-- codes without the code (a credential, not data about the member).
create or replace function billing_api.member_export(p_args jsonb) returns jsonb
  language plpgsql stable
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

-- The member's own row in the export: every column, the identities and external
-- subjects with when they were linked, the billing details together.
create or replace function billing.member_export_json(p_m billing.members) returns jsonb
  language plpgsql stable
as $$
begin
  return jsonb_build_object(
    'id', p_m.id, 'created_at', billing.iso(p_m.created_at), 'updated_at', billing.iso(p_m.updated_at),
    'erased_at', billing.iso(p_m.erased_at), 'email', p_m.email, 'display_name', p_m.display_name,
    'note', p_m.note, 'tags', to_jsonb(p_m.tags),
    'identities', coalesce((select jsonb_agg(jsonb_build_object('platform', i.platform, 'platform_uid', i.platform_uid,
        'username', i.username, 'created_at', billing.iso(i.created_at)) order by i.platform, i.platform_uid)
      from billing.member_identities i where i.community_id = p_m.community_id and i.member_id = p_m.id), '[]'),
    'external_subjects', coalesce((select jsonb_agg(jsonb_build_object('namespace', x.namespace,
        'external_user_id', x.external_user_id, 'created_at', billing.iso(x.created_at)) order by x.namespace, x.external_user_id)
      from billing.external_subjects x where x.community_id = p_m.community_id and x.member_id = p_m.id), '[]'),
    'billing_details', jsonb_build_object('name', p_m.billing_name,
      'address_lines', to_jsonb(coalesce(p_m.billing_address_lines, '{}'::text[])),
      'country', p_m.billing_country, 'tax_id', p_m.billing_tax_id),
    'provider_customers', coalesce((select jsonb_agg(jsonb_build_object('provider', pc.provider,
        'customer_ref', pc.customer_ref, 'created_at', billing.iso(pc.created_at)) order by pc.provider)
      from billing.member_provider_customers pc where pc.community_id = p_m.community_id and pc.member_id = p_m.id), '[]'));
end
$$;

-- ---- erasure -----------------------------------------------------------------------------

-- Whether a JSON value holds, anywhere, a string equal (case-insensitively) to one of
-- p_secrets (lowercase).
create or replace function billing_private.json_mentions(p_value jsonb, p_secrets text[]) returns boolean
  language plpgsql immutable parallel safe
as $$
begin
  return exists (select 1 from jsonb_path_query(p_value, 'strict $.**') v
    where jsonb_typeof(v) = 'string' and lower(v #>> '{}') = any (p_secrets));
end
$$;

-- A JSON value with the erased member's personal data taken out: in an object that is
-- the member (its id is p_member_id: an API answer kept for a replay) the personal
-- fields are emptied, and any note (free text about them) goes; an element of an `identities` or `external_subjects` array (a
-- member object's, a ledger row's snapshot) that mentions one of p_secrets goes; any
-- other string equal to one becomes null. Everything else (ids, amounts, statuses,
-- times) stays, so an event keeps its shape and still says what happened.
create or replace function billing_private.json_redact(p_value jsonb, p_secrets text[], p_member_id text) returns jsonb
  language plpgsql immutable parallel safe
as $$
declare
  v_out jsonb;
begin
  case jsonb_typeof(p_value)
  when 'object' then
    select coalesce(jsonb_object_agg(j.k, case
        when j.k in ('identities', 'external_subjects') and jsonb_typeof(j.v) = 'array' then
          coalesce((select jsonb_agg(billing_private.json_redact(x.e, p_secrets, p_member_id) order by x.o)
                    from jsonb_array_elements(j.v) with ordinality x(e, o)
                    where not billing_private.json_mentions(x.e, p_secrets)
                      and not (p_value->>'id' is not distinct from p_member_id)), '[]')
        when p_value->>'id' is not distinct from p_member_id and j.k in ('email', 'display_name') then 'null'::jsonb
        -- free text operators wrote about them (the member's note, a grant's)
        when j.k = 'note' and jsonb_typeof(j.v) = 'string' then 'null'::jsonb
        when p_value->>'id' is not distinct from p_member_id and j.k = 'tags' then '[]'::jsonb
        else billing_private.json_redact(j.v, p_secrets, p_member_id) end), '{}')
    into v_out from jsonb_each(p_value) j(k, v);
    return v_out;
  when 'array' then
    select coalesce(jsonb_agg(billing_private.json_redact(x.e, p_secrets, p_member_id) order by x.o), '[]')
    into v_out from jsonb_array_elements(p_value) with ordinality x(e, o);
    return v_out;
  when 'string' then
    return case when lower(p_value #>> '{}') = any (p_secrets) then 'null'::jsonb else p_value end;
  else
    return p_value;
  end case;
end
$$;

-- POST /v1/members/{id}/erase (members:erase), and `billing members erase`: the
-- member's personal data removed, their access ended, what the platforms hold for them
-- queued for removal, one member.erased event. docs/decisions/member-erasure.md says
-- what goes and what stays, and why. Owner rights (it writes tables the API role only
-- reads, and rewrites events), bound to the request's community explicitly.
-- p_provider_calls: whether the caller cancels the member's subscriptions at their
-- payment provider afterwards (the API's handler does; the CLI, which has no provider
-- client, does not: a live subscription at Stripe then refuses the erasure, 409).
-- Answers {erasure, provider}: erasure is the public answer, provider the subscriptions
-- (billing.subscription_provider, at 'now') the caller must cancel at Stripe. A member
-- erased already answers the same erasure with changed false and nothing to cancel.
create or replace function billing_private.member_erase(p_member_id text, p_provider_calls boolean)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text := billing.current_community_id();
  v_m billing.members;
  v_now timestamptz;
  v_secrets text[];
  v_named text := '"' || p_member_id || '"';
  v_sub billing.subscriptions;
  v_provider jsonb := '[]';
  v_subs integer := 0;
  v_grants integer := 0;
  v_purchases integer := 0;
  v_checkouts integer := 0;
  v_invoices integer := 0;
  v_events text[];
  v_redacted integer := 0;
  v_codes jsonb;
  v_id text;
begin
  if v_c is null then
    perform billing.raise('BL400', 'No community: erase a member as one community.');
  end if;
  select * into v_m from billing.members m where m.community_id = v_c and m.id = p_member_id for update;
  if v_m.id is null then
    perform billing.raise('BL404', 'No member ' || p_member_id || '.');
  end if;
  -- The discount codes whose member list names one of the member's identities: the
  -- operator's catalog (and its file), which an erasure does not edit.
  select coalesce(jsonb_agg(d.id::text order by d.id), '[]') into v_codes from billing.discount_codes d
  where d.community_id = v_c and exists (select 1 from jsonb_array_elements(d.members) dm
    join billing.member_identities i on i.community_id = v_c and i.member_id = p_member_id
      and i.platform = dm->>'platform' and i.platform_uid = dm->>'platform_uid');
  if v_m.erased_at is not null then
    return jsonb_build_object('erasure', jsonb_build_object('member_id', v_m.id, 'erased_at', billing.iso(v_m.erased_at),
      'changed', false, 'subscriptions_cancelled', 0, 'grants_revoked', 0, 'purchases_ended', 0, 'checkouts_expired', 0,
      'invoices_kept', (select count(*) from billing.invoices i where i.community_id = v_c and i.member_id = p_member_id),
      'events_redacted', 0, 'discount_codes_naming_member', v_codes), 'provider', '[]'::jsonb);
  end if;
  if not p_provider_calls and exists (select 1 from billing.subscriptions s where s.community_id = v_c
      and s.member_id = p_member_id and s.status <> 'cancelled' and s.provider <> 'sandbox') then
    perform billing.raise('BL409', 'Member ' || p_member_id || ' has a live subscription at its payment provider: '
      || 'erase them through the API or the dashboard, which cancel it there too.');
  end if;
  v_now := billing.now();

  -- What to look for in copies (events, idempotent answers): every personal value the
  -- member's rows hold, lowercase.
  select coalesce(array_agg(distinct lower(v)) filter (where v is not null and btrim(v) <> ''), '{}') into v_secrets
  from (
    select v_m.email union all select v_m.billing_name union all select v_m.billing_tax_id union all select v_m.note
    union all select unnest(v_m.billing_address_lines)
    union all select i.platform_uid from billing.member_identities i where i.community_id = v_c and i.member_id = p_member_id
    union all select i.username from billing.member_identities i where i.community_id = v_c and i.member_id = p_member_id
    union all select x.external_user_id from billing.external_subjects x where x.community_id = v_c and x.member_id = p_member_id
    union all select cs.customer_email from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select cs.customer_name from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select cs.customer_tax_id from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select unnest(cs.customer_address_lines) from billing.checkout_sessions cs where cs.community_id = v_c and cs.member_id = p_member_id
    union all select mm.to_address from billing.mail_messages mm where mm.community_id = v_c and mm.member_id = p_member_id
  ) x(v);

  -- The member's own columns emptied, in the statement that marks it erased (from then
  -- on _090_erased refuses them any personal data, and the people triggers of the
  -- identities deleted below find nothing to name it by).
  update billing.members m set erased_at = v_now, email = null, billing_name = null, billing_address_lines = null,
    billing_country = null, billing_tax_id = null, note = null, tags = '{}', updated_at = now()
  where m.community_id = v_c and m.id = p_member_id;

  -- Access ends now: subscriptions cancelled (no refund: what was paid for stays paid),
  -- grants revoked, purchases' access ended, open checkouts expired. Each change goes
  -- through its table's triggers: events, the ledger's revocations, the platforms' job.
  for v_sub in select * from billing.subscriptions s
      where s.community_id = v_c and s.member_id = p_member_id and s.status <> 'cancelled' order by s.id for update loop
    if v_sub.provider <> 'sandbox' then
      v_provider := v_provider || jsonb_build_array(billing.subscription_provider(v_sub) || '{"at": "now"}');
    end if;
    perform billing_private.subscription_cancel_now(v_sub.id);
    v_subs := v_subs + 1;
  end loop;
  update billing.grants g set revoked_at = v_now
  where g.community_id = v_c and g.member_id = p_member_id and g.revoked_at is null
    and billing.source_grants_access('grant', g.community_id, g.id, 'active', g.expires_at, v_now);
  get diagnostics v_grants = row_count;
  update billing.purchases p set access_expires_at = v_now
  where p.community_id = v_c and p.member_id = p_member_id
    and billing.source_grants_access('purchase', p.community_id, p.id, p.status, p.access_expires_at, v_now);
  get diagnostics v_purchases = row_count;
  for v_id in select cs.id from billing.checkout_sessions cs
      where cs.community_id = v_c and cs.member_id = p_member_id and cs.status = 'open' order by cs.id loop
    if billing.expire_checkout(v_id) then
      v_checkouts := v_checkouts + 1;
    end if;
  end loop;

  -- Who they are: identities and external subjects go (member.updated, and the ledger
  -- drops them from its snapshots).
  delete from billing.member_identities i where i.community_id = v_c and i.member_id = p_member_id;
  delete from billing.external_subjects x where x.community_id = v_c and x.member_id = p_member_id;
  -- The ledger rows' snapshots ({identities, external_subjects}) of who they were: the
  -- refresh updates an active row's, never an inactive one's, so the erasure rewrites
  -- them itself, as it rewrites the events (the one write of the ledger outside
  -- billing.ledger_refresh_each: no status, source or benefit changes).
  update billing.member_entitlements me set identities = billing_private.json_redact(me.identities, v_secrets, p_member_id)
  where me.community_id = v_c and me.member_id = p_member_id
    and me.identities is distinct from billing_private.json_redact(me.identities, v_secrets, p_member_id);
  update billing.grants g set note = null
  where g.community_id = v_c and g.member_id = p_member_id and g.note is not null;
  update billing.checkout_sessions cs set customer_email = null, customer_name = null, customer_address_lines = null,
    customer_country = null, customer_tax_id = null
  where cs.community_id = v_c and cs.member_id = p_member_id
    and num_nonnulls(cs.customer_email, cs.customer_name, cs.customer_address_lines, cs.customer_country, cs.customer_tax_id) > 0;

  -- What reaches them: mail keeps its record (template, subject, status, times) without
  -- address or body, and is never sent; their choices, codes and sessions go, so no
  -- signed link of theirs opens anything (the links' doors also check erased_at).
  update billing.mail_messages mm set to_address = '', text_body = '', html_body = '', last_error = null,
    status = case when mm.status in ('queued', 'sending') then 'skipped' else mm.status end, claimed_at = null
  where mm.community_id = v_c and mm.member_id = p_member_id;
  delete from billing.mail_unsubscribes u where u.community_id = v_c and u.member_id = p_member_id;
  delete from billing.link_codes lc where lc.community_id = v_c and lc.member_id = p_member_id;
  delete from billing_private.member_portal_sessions ps where ps.community_id = v_c and ps.member_id = p_member_id;
  delete from billing.portal_sessions ps where ps.community_id = v_c and ps.member_id = p_member_id;

  -- Invoices stay, with what the law requires of them: a business buyer's (a tax id, or
  -- reverse charged) keep name, address, country and tax id; a consumer's keep the
  -- country their tax followed, not their name and address.
  update billing.invoices i set buyer_name = null, buyer_address_lines = null
  where i.community_id = v_c and i.member_id = p_member_id and i.buyer_tax_id is null and not i.reverse_charge
    and (i.buyer_name is not null or i.buyer_address_lines is not null);
  get diagnostics v_invoices = row_count;

  perform billing.emit_event(v_c, 'member.erased', jsonb_build_object(
    'member', billing.member_json(v_c, p_member_id), 'erased_at', billing.iso(v_now)));

  -- Copies: the events naming the member (those this erasure wrote too, before any
  -- webhook reads them), their webhook attempts' excerpts of the receiver's answer, and
  -- the answers kept for Idempotency-Key replays.
  with named as (
    select e.id, billing_private.json_redact(e.data, v_secrets, p_member_id) as data from billing.events e
    where e.community_id = v_c and strpos(e.data::text, v_named) > 0
  ), changed as (
    update billing.events e set data = n.data from named n
    where e.community_id = v_c and e.id = n.id and e.data is distinct from n.data
    returning e.id
  )
  select count(*) into v_redacted from changed;
  update billing.idempotency_keys k set response_body = billing_private.json_redact(k.response_body, v_secrets, p_member_id)
  where k.community_id = v_c and strpos(k.response_body::text, v_named) > 0
    and k.response_body is distinct from billing_private.json_redact(k.response_body, v_secrets, p_member_id);
  select coalesce(array_agg(e.id), '{}') into v_events from billing.events e
  where e.community_id = v_c and strpos(e.data::text, v_named) > 0;
  update billing.webhook_attempts a set response_excerpt = null
  from billing.webhook_deliveries d
  where d.community_id = v_c and d.event_id = any (v_events) and a.community_id = v_c and a.delivery_id = d.id
    and a.response_excerpt is not null;

  return jsonb_build_object('erasure', jsonb_build_object('member_id', p_member_id, 'erased_at', billing.iso(v_now),
    'changed', true, 'subscriptions_cancelled', v_subs, 'grants_revoked', v_grants, 'purchases_ended', v_purchases,
    'checkouts_expired', v_checkouts,
    'invoices_kept', (select count(*) from billing.invoices i where i.community_id = v_c and i.member_id = p_member_id),
    'events_redacted', v_redacted, 'discount_codes_naming_member', v_codes), 'provider', v_provider);
end
$$;

-- The API's door: the handler (src/domain/members/privacy-operations.ts) cancels the
-- subscriptions it answers under provider at their provider, in the same transaction.
create or replace function billing_api.member_erase(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.member_erase(p_args->>'id', true);
end
$$;

-- ---- an erased member stays empty --------------------------------------------------------

-- BEFORE INSERT on the tables of what a member is, has or may open (identities, external
-- subjects, link codes, checkouts, portal sessions, grants): nothing new for an erased
-- member. A checkout naming their old identity creates a new member instead.
create or replace function billing.tg_member_rows__not_erased() returns trigger
  language plpgsql
as $$
begin
  if exists (select 1 from billing.members m
             where m.community_id = new.community_id and m.id = new.member_id and m.erased_at is not null) then
    raise exception using errcode = 'BL409', message = 'Member ' || new.member_id || ' was erased: nothing can be added to it.';
  end if;
  return new;
end
$$;

-- BEFORE UPDATE on billing.members, when an erased member would get personal data again
-- (or lose erased_at): refused.
create or replace function billing.tg_members__erased() returns trigger
  language plpgsql
as $$
begin
  raise exception using errcode = 'BL409', message = 'Member ' || old.id || ' was erased: its personal data cannot be set again.';
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

grant execute on function billing.member_export_json(billing.members) to billing_api;
grant execute on function billing_api.member_export(jsonb) to billing_api;
grant execute on function billing_api.member_erase(jsonb) to billing_api;
grant execute on function billing_private.member_erase(text, boolean) to billing_api;

-- ---- an erased member stays empty (tables/30-members.sql, 47-grants.sql, 80-checkout.sql) ----
drop trigger if exists _090_erased on billing.members;
create trigger _090_erased before update on billing.members
  for each row when (old.erased_at is not null and (new.erased_at is null or new.email is not null
    or new.billing_name is not null or new.billing_address_lines is not null or new.billing_country is not null
    or new.billing_tax_id is not null or new.note is not null or new.tags <> '{}'))
  execute function billing.tg_members__erased();
drop trigger if exists _050_not_erased on billing.member_identities;
create trigger _050_not_erased before insert on billing.member_identities
  for each row execute function billing.tg_member_rows__not_erased();
drop trigger if exists _050_not_erased on billing.external_subjects;
create trigger _050_not_erased before insert on billing.external_subjects
  for each row execute function billing.tg_member_rows__not_erased();
drop trigger if exists _050_not_erased on billing.grants;
create trigger _050_not_erased before insert on billing.grants
  for each row execute function billing.tg_member_rows__not_erased();
drop trigger if exists _050_not_erased on billing.checkout_sessions;
create trigger _050_not_erased before insert on billing.checkout_sessions
  for each row execute function billing.tg_member_rows__not_erased();
drop trigger if exists _050_not_erased on billing.portal_sessions;
create trigger _050_not_erased before insert on billing.portal_sessions
  for each row execute function billing.tg_member_rows__not_erased();
drop trigger if exists _050_not_erased on billing.link_codes;
create trigger _050_not_erased before insert on billing.link_codes
  for each row execute function billing.tg_member_rows__not_erased();

-- ---- the audit log hides a grant note, which erasure removes (tables/47-grants.sql) ----
drop trigger if exists _950_audit_insert on billing.grants;
create trigger _950_audit_insert after insert on billing.grants
  referencing new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'note');
drop trigger if exists _950_audit_update on billing.grants;
create trigger _950_audit_update after update on billing.grants
  referencing old table as old_rows new table as new_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'note');
drop trigger if exists _950_audit_delete on billing.grants;
create trigger _950_audit_delete after delete on billing.grants
  referencing old table as old_rows for each statement
  when (pg_catalog.current_setting('app.key_id', true) <> '' or pg_catalog.current_setting('app.actor', true) <> ''
    or (pg_catalog.pg_has_role(session_user, 'billing_operator', 'MEMBER')
        and not pg_catalog.pg_has_role(session_user, 'billing_owner_probe', 'MEMBER')))
  execute function billing_private.tg_audit('id', 'note');

-- ---- the event type (tables/60-events.sql) ----
insert into billing_private.event_types (type, description) values
  ('member.erased', 'A member''s personal data was erased and their access ended; the event names their id only.')
on conflict (type) do update set description = excluded.description;

-- ---- changed functions, restated whole ----
-- The API key scopes (src/core/scopes.ts; test/core/sql-agreement.test.ts keeps both equal).
create or replace function billing_private.api_key_scopes() returns text[]
  language sql immutable parallel safe
as $$
  select array['subscriptions:read', 'subscriptions:write', 'plans:read', 'members:read', 'members:write',
    'purchases:read', 'analytics:read', 'events:read', 'discounts:read', 'checkout:write',
    'webhooks:read', 'webhooks:write', 'invoices:read', 'invoices:write', 'audit:read', 'members:export', 'members:erase']
$$;

-- The member as the API answers it: the member object plus its email, display name,
-- the operators' note and tags. Events carry billing.member_json (none of them:
-- personal data never leaves in a webhook; docs/decisions/member-email.md,
-- member-notes.md).
create or replace function billing.member_api_json(p_community_id text, p_member_id text) returns jsonb
  language plpgsql stable parallel safe
as $$
begin
  return (select t.member || jsonb_build_object('email', m.email, 'display_name', m.display_name,
      'note', m.note, 'tags', to_jsonb(m.tags), 'erased_at', billing.iso(m.erased_at))
    from billing.members m, billing.member_object(m.community_id, m.id) t(member)
    where m.community_id = p_community_id and m.id = p_member_id);
end
$$;

-- A finalized invoice keeps its amounts and lines (Stripe: finalized invoices are
-- immutable); a paid, void or uncollectible one never returns to open.
create or replace function billing.tg_invoices__immutable() returns trigger
  language plpgsql
as $$
begin
  if old.status <> 'draft' and (new.lines is distinct from old.lines or new.subtotal_cents <> old.subtotal_cents
      or new.discount_cents <> old.discount_cents or new.total_cents <> old.total_cents
      or new.currency <> old.currency or new.member_id <> old.member_id
      or new.subscription_id is distinct from old.subscription_id or new.purchase_id is distinct from old.purchase_id
      -- its tax and the parties it was computed for (docs/decisions/tax.md)
      or new.tax_lines is distinct from old.tax_lines or new.tax_cents <> old.tax_cents
      or new.tax_country is distinct from old.tax_country or new.reverse_charge <> old.reverse_charge
      or (new.buyer_country, new.buyer_tax_id, new.seller_country, new.seller_tax_id)
         is distinct from (old.buyer_country, old.buyer_tax_id, old.seller_country, old.seller_tax_id)
      -- the buyer's name and address, except their removal from a consumer's invoice
      -- (no tax id, not reverse charged) once the member is erased: the law keeps them on
      -- a business buyer's invoice only (docs/decisions/member-erasure.md)
      or ((new.buyer_name, new.buyer_address_lines) is distinct from (old.buyer_name, old.buyer_address_lines)
          and not (new.buyer_name is null and new.buyer_address_lines is null and old.buyer_tax_id is null
                   and not old.reverse_charge
                   and exists (select 1 from billing.members m where m.community_id = old.community_id
                               and m.id = old.member_id and m.erased_at is not null)))) then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is finalized: its lines and amounts cannot change.';
  end if;
  -- A number, once given, is the invoice's for good (void included: a tax office
  -- expects every number of a series accounted for).
  if old.number is not null and new.number is distinct from old.number then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is numbered ' || old.number || ': its number cannot change.';
  end if;
  if old.status in ('paid', 'void', 'uncollectible') and new.status <> old.status then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is ' || old.status || ' and cannot become ' || new.status || '.';
  end if;
  new.updated_at := now();
  return new;
end
$$;

-- The invoice's document (billing_api.invoices_document) for its own member only: null
-- when the member no longer exists or was erased, or the invoice is not (or no longer)
-- theirs, so a link outlives neither.
create or replace function billing_private.mail_invoice_document(p_community_id text, p_member_id text, p_invoice_id text)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from billing.invoices i
      join billing.members m on m.community_id = i.community_id and m.id = i.member_id and m.erased_at is null
      where i.community_id = p_community_id and i.id = p_invoice_id and i.member_id = p_member_id) then
    return null;
  end if;
  perform set_config('app.community_id', p_community_id, true);
  return billing_api.invoices_document(jsonb_build_object('id', p_invoice_id));
end
$$;

-- A member's choice for one template: read (p_subscribe null), unsubscribe (false) or
-- subscribe again (true). A template that is not optional for the community (transactional,
-- or marked required) records nothing. Answers {community_name, title, optional,
-- unsubscribed}, or null for an unknown or erased member or template: a link outlives no member.
create or replace function billing_private.mail_preference(p_community_id text, p_member_id text, p_template text,
  p_subscribe boolean default null) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c billing.communities;
  v_title text;
begin
  select c.* into v_c from billing.communities c
  where c.id = p_community_id and exists (select 1 from billing.members m where m.community_id = c.id and m.id = p_member_id
    and m.erased_at is null);
  select t.title into v_title from billing.mail_templates() t where t.template = p_template;
  if v_c.id is null or v_title is null then
    return null;
  end if;
  if p_subscribe is not null and billing.mail_optional(v_c, p_template) then
    if p_subscribe then
      delete from billing.mail_unsubscribes u
      where u.community_id = p_community_id and u.member_id = p_member_id and u.template = p_template;
    else
      insert into billing.mail_unsubscribes (community_id, member_id, template) values (p_community_id, p_member_id, p_template)
      on conflict do nothing;
    end if;
  end if;
  return jsonb_build_object('community_name', v_c.name, 'title', v_title, 'optional', billing.mail_optional(v_c, p_template),
    'unsubscribed', exists (select 1 from billing.mail_unsubscribes u
      where u.community_id = p_community_id and u.member_id = p_member_id and u.template = p_template));
end
$$;

--! Included 98-dispatch.sql
-- Operations run by name without dynamic SQL. billing.api_call (the request gate,
-- 10-tenancy.sql) runs billing_private.op_dispatch(op, args): a CASE
-- over every billing_api function taking (p_args jsonb) and returning jsonb, written by
-- the block below from the catalog when this file is applied. It is the last fixture,
-- so every operation exists then. A static call is planned once per session, where
-- EXECUTE parsed and planned 'select billing_api.x($1)' on every request: about 40 us
-- of the entitlement check's 220 us in the database (bench/RESULTS.md, issue 17).
--
-- An operation this CASE does not name yet (added or changed by a later migration
-- that did not include this file again) still runs, through op_dispatch_dynamic's
-- EXECUTE. test/db/op-dispatch.test.ts fails until this file is included again, so
-- a migration that adds an operation includes `--!include 98-dispatch.sql` too.
-- Invoker rights: the operation runs as the caller (billing_api), as before.
--
-- A list's input carries cursor_list and cursor_filters (src/operations/executor.ts
-- bindCursor): set for the transaction, billing.encode_cursor binds next_cursor to them.

create or replace function billing_private.op_dispatch_dynamic(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_out jsonb;
begin
  execute format('select billing_api.%I($1)', p_op) into v_out using p_args;
  return v_out;
end
$$;

do $do$
declare
  v_cases text;
begin
  select string_agg(format('    when %L then return billing_api.%I(p_args);', p.proname, p.proname), E'\n' order by p.proname)
  into v_cases
  from pg_proc p
  join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'billing_api' and p.prorettype = 'jsonb'::regtype
    and pg_get_function_identity_arguments(p.oid) = 'p_args jsonb';
  execute format($f$
create or replace function billing_private.op_dispatch(p_op text, p_args jsonb) returns jsonb
  language plpgsql volatile
as $b$
begin
  if p_args ? 'cursor_list' then
    perform set_config('app.cursor_list', p_args->>'cursor_list', true),
      set_config('app.cursor_filters', p_args->>'cursor_filters', true);
  end if;
  case p_op
%s
    else
      return billing_private.op_dispatch_dynamic(p_op, p_args);
  end case;
end
$b$$f$, coalesce(v_cases, '    when null then return null;'));
end
$do$;

grant execute on function billing_private.op_dispatch_dynamic(text, jsonb) to billing_api;
grant execute on function billing_private.op_dispatch(text, jsonb) to billing_api;
--! EndIncluded 98-dispatch.sql
