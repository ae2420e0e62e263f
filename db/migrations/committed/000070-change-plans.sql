--! Previous: sha1:97c46819f4216d4a12c1ab7f72bf2c7857cdf7ff
--! Hash: sha1:dc3c683a4c691162b04d457f651df643dfcde87d
--! Message: change plans

--! split: 1-current.sql
-- The mail trigger asks who gets mail before it starts the messages' statement; the
-- outbox triggers keep one plan a statement, so billing.events' foreign key check is
-- not planned again at every change (issue 28, single-row changes).

create or replace function billing_private.tg_events__mail() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_due jsonb;
  v_payloads json[];
begin
  if not exists (select 1 from new_events e where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded',
      'subscription.cancelled', 'member.entitlement.granted')) then
    return null;
  end if;
  -- Nobody to write to: most statements that grant access.
  if not exists (select 1 from new_events e
      join billing.members m on m.community_id = e.community_id
       and m.id = coalesce(e.data->'invoice'->>'member_id', e.data->'subscription'->>'member_id', e.data->'member'->>'id')
      where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded', 'subscription.cancelled',
        'member.entitlement.granted') and m.email is not null) then
    return null;
  end if;
  with invoice_due as (
    select e.community_id, e.id as event_id, t.template,
      coalesce(e.data->'invoice'->>'member_id', e.data->'subscription'->>'member_id') as member_id, e.data
    from new_events e
    join billing.mail_templates() t on t.event_type = e.type
    where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded', 'subscription.cancelled')
      and (e.type <> 'invoice.paid' or (e.data->'invoice'->>'amount_paid_cents')::bigint > 0)
  ), access_due as (
    -- One access email per member and statement (a tier of several entitlements grants
    -- them together), made from its first event and naming them all.
    select e.community_id, min(e.id) as event_id, 'access_granted' as template, e.data->'member'->>'id' as member_id,
      jsonb_build_object('entitlement', jsonb_build_object('name',
        string_agg(e.data->'entitlement'->>'name', ', ' order by e.data->'entitlement'->>'name'))) as data
    from new_events e
    where e.type = 'member.entitlement.granted'
    group by e.community_id, e.data->'member'->>'id'
  )
  select jsonb_agg(jsonb_build_object('community_id', d.community_id, 'event_id', d.event_id, 'template', d.template,
      'member_id', d.member_id, 'data', d.data, 'email', m.email, 'community_name', c.name,
      'optional', billing.mail_optional(c, d.template)))
  into v_due
  from (select * from invoice_due union all select * from access_due) d
  join billing.members m on m.community_id = d.community_id and m.id = d.member_id and m.email is not null
  join billing.communities c on c.id = d.community_id and not (d.template = any (c.mail_templates_off));
  if v_due is null then
    return null;
  end if;
  with made as (
    insert into billing.mail_messages (community_id, member_id, template, event_id, to_address, subject, text_body, html_body, unsubscribable)
    select d.community_id, d.member_id, d.template, d.event_id, d.email, r.msg->>'subject', r.msg->>'text', r.msg->>'html', d.optional
    from jsonb_to_recordset(v_due) as d(community_id text, event_id text, template text, member_id text, data jsonb,
      email text, community_name text, optional boolean)
    cross join lateral (select billing.mail_render(d.community_name, d.template, case when d.template = 'access_granted'
      then d.data || jsonb_build_object('link_codes', billing_private.mail_link_codes(d.community_id, d.member_id))
      else d.data end || jsonb_build_object('unsubscribe', d.optional)) as msg) r
    order by d.community_id, d.event_id, d.template
    on conflict (community_id, event_id, template) do nothing
    returning community_id, id
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids))
  into v_payloads
  from (select community_id, array_agg(id order by id) as ids from made group by community_id) g;
  perform billing_private.add_job('mail_messages__send', v_payloads);
  return null;
end
$$;

alter function billing.tg_subscriptions__outbox_and_ledger_insert() set plan_cache_mode = force_generic_plan;
alter function billing.tg_subscriptions__outbox_and_ledger_update() set plan_cache_mode = force_generic_plan;
alter function billing.tg_purchases__outbox_and_ledger_insert() set plan_cache_mode = force_generic_plan;
alter function billing.tg_invoices__outbox_and_ledger_insert() set plan_cache_mode = force_generic_plan;
alter function billing.tg_invoices__outbox_and_ledger_update() set plan_cache_mode = force_generic_plan;
