--! Previous: sha1:97c46819f4216d4a12c1ab7f72bf2c7857cdf7ff
--! Hash: sha1:446b686d531359322a3bf803724f0decef31166a
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

create or replace function billing.tg_subscriptions__outbox_and_ledger_insert() returns trigger
  language plpgsql
  -- One kept plan a statement, as in the ledger it calls: else the foreign key check of
  -- billing.events stays a custom plan, made again at every change, while communities
  -- holds one row (test/db/change-plans.test.ts)
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_communities text[];
  v_members text[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, 'subscription.created', jsonb_build_object(
      'subscription', billing.subscription_json(n, p, t) || jsonb_build_object('client_reference_id', n.client_reference_id),
      'previous_attributes', null)
    from new_rows n
    left join billing.plans p on p.community_id = n.community_id and p.id = n.plan_id
    left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    order by n.id
    returning id, data->'subscription'->>'id' as subscription_id
  )
  select array_agg(n.community_id order by n.id), array_agg(n.member_id order by n.id), array_agg(ev.id order by n.id)
  into v_communities, v_members, v_event_ids
  from new_rows n join ev on ev.subscription_id = n.id;
  if v_event_ids is not null then  -- a statement that inserted nothing fires this too
    perform billing.ledger_refresh_list(v_communities, v_members,
      array_fill('subscription_created'::text, array[cardinality(v_members)]), v_event_ids);
  end if;
  return null;
end
$$;

create or replace function billing.tg_subscriptions__outbox_and_ledger_update() returns trigger
  language plpgsql
  -- One kept plan a statement, as in the ledger it calls: else the foreign key check of
  -- billing.events stays a custom plan, made again at every change, while communities
  -- holds one row (test/db/change-plans.test.ts)
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_communities text[];
  v_members text[];
  v_old_members text[];
  v_reasons text[];
  v_event_ids text[];
begin
  with ch as (
    select n.community_id, n.id, n.member_id, o.member_id as old_member_id, j.new_json,
      -- the event's date, billing.community_now joined (the events' clock trigger then
      -- skips a call per row)
      now() + coalesce(co.clock_offset, '0'::interval) as at,
      billing.jsonb_changed(j.old_json - 'updated_at' - 'tier_name' - 'plan_name', j.new_json) as prev,
      case when n.status = 'cancelled' and o.status <> 'cancelled'
        then 'subscription.cancelled' else 'subscription.updated' end as type,
      case
        when n.status = 'cancelled' and n.cancellation_reason = 'payment_failed' then 'payment_failed'
        when n.status = 'cancelled' and n.cancellation_reason = 'refunded' then 'refunded'
        when n.status = 'cancelled' and n.cancellation_reason = 'payment_disputed' then 'disputed'
        when n.plan_id <> o.plan_id then 'plan_changed'
        when n.status = o.status then 'subscription_updated'
        when n.status = 'cancelled' then 'subscription_ended'
        when n.status = 'paused' then 'subscription_paused'
        when n.status = 'cancelling' then 'subscription_cancelling'
        when n.status = 'past_due' then 'payment_failed'
        when o.status in ('cancelled', 'paused') then 'subscription_activated'
        else 'subscription_updated' end as reason
    from new_rows n
    join old_rows o on o.community_id = n.community_id and o.id = n.id
    left join billing.communities co on co.id = n.community_id
    left join billing.plans np on np.community_id = n.community_id and np.id = n.plan_id
    left join billing.tiers nt on nt.community_id = np.community_id and nt.id = np.tier_id
    left join billing.plans op on op.community_id = o.community_id and op.id = o.plan_id
    left join billing.tiers ot on ot.community_id = op.community_id and ot.id = op.tier_id
    -- billing.subscription_event_json, with the plans and tiers joined once
    cross join lateral (select
      billing.subscription_json(n, np, nt) || jsonb_build_object('client_reference_id', n.client_reference_id) as new_json,
      billing.subscription_json(o, op, ot) || jsonb_build_object('client_reference_id', o.client_reference_id) as old_json) j
  ), ev as (
    insert into billing.events (community_id, type, created_at, data)
    select ch.community_id, ch.type, ch.at, jsonb_build_object('subscription', ch.new_json, 'previous_attributes', ch.prev)
    from ch
    where ch.prev <> '{}' -- nothing a consumer sees (nor a ledger source) changed
    order by ch.id
    returning id, data->'subscription'->>'id' as subscription_id
  )
  select array_agg(ch.community_id order by ch.id), array_agg(ch.member_id order by ch.id),
    array_agg(ch.old_member_id order by ch.id), array_agg(ch.reason order by ch.id), array_agg(ev.id order by ch.id)
  into v_communities, v_members, v_old_members, v_reasons, v_event_ids
  from ch join ev on ev.subscription_id = ch.id;
  -- The ledgers, row by row in id order (the member it left after the member it has).
  if v_event_ids is not null then
    perform billing.ledger_refresh_list(array_agg(v_communities[i] order by i, x.j), array_agg(x.m order by i, x.j),
      array_agg(v_reasons[i] order by i, x.j), array_agg(v_event_ids[i] order by i, x.j))
    from generate_subscripts(v_event_ids, 1) i
    cross join lateral (values (1, v_members[i]), (2, nullif(v_old_members[i], v_members[i]))) x(j, m)
    where x.m is not null;
  end if;
  return null;
end
$$;

create or replace function billing.tg_purchases__outbox_and_ledger_insert() returns trigger
  language plpgsql
  -- One kept plan a statement, as in the ledger it calls: else the foreign key check of
  -- billing.events stays a custom plan, made again at every change, while communities
  -- holds one row (test/db/change-plans.test.ts)
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_communities text[];
  v_members text[];
  v_reasons text[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, 'purchase.created', jsonb_build_object(
      'purchase', billing.purchase_json(n, p, t) || jsonb_build_object('client_reference_id', n.client_reference_id),
      'previous_attributes', null)
    from new_rows n
    left join billing.plans p on p.community_id = n.community_id and p.id = n.plan_id
    left join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
    order by n.id
    returning id, data->'purchase'->>'id' as purchase_id
  )
  select array_agg(n.community_id order by n.id), array_agg(n.member_id order by n.id),
    array_agg(case when n.status = 'completed' then 'purchase_completed' else 'purchase_updated' end order by n.id),
    array_agg(ev.id order by n.id)
  into v_communities, v_members, v_reasons, v_event_ids
  from new_rows n join ev on ev.purchase_id = n.id;
  if v_event_ids is not null then  -- a statement that inserted nothing fires this too
    perform billing.ledger_refresh_list(v_communities, v_members, v_reasons, v_event_ids);
  end if;
  return null;
end
$$;

create or replace function billing.tg_invoices__outbox_and_ledger_insert() returns trigger
  language plpgsql
  -- One kept plan a statement, as in the ledger it calls: else the foreign key check of
  -- billing.events stays a custom plan, made again at every change, while communities
  -- holds one row (test/db/change-plans.test.ts)
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_changed billing.invoices[];
  v_event_ids text[];
begin
  -- An invoice written paid at once (the renewals of a batch, billing.renew_batch) gets
  -- the events of the two steps it stands for: invoice.created as it was finalized (open,
  -- nothing paid), then invoice.paid with what changed; all created, then all paid, each
  -- in invoice id order, as the two statements wrote them.
  with j as (
    select n.id, n.community_id, n.status, billing.invoice_json(n) as now_json
    from new_rows n
  ), j2 as (
    select j.*, case when j.status = 'paid'
        then j.now_json || jsonb_build_object('status', 'open', 'amount_paid_cents', 0, 'attempt_count', 0,
                                              'paid_at', null, 'next_attempt_at', null)
        else j.now_json end as created_json
    from j
  ), ev as (
    insert into billing.events (community_id, type, data)
    select x.community_id, x.type, x.data from (
      select j2.community_id, j2.id, 1 as step, 'invoice.created' as type,
        jsonb_build_object('invoice', j2.created_json, 'previous_attributes', null) as data
      from j2
      union all
      select j2.community_id, j2.id, 2, 'invoice.paid',
        jsonb_build_object('invoice', j2.now_json,
          'previous_attributes', billing.jsonb_changed(j2.created_json - 'lines', j2.now_json))
      from j2 where j2.status = 'paid') x
    order by x.step, x.id
    returning id, type, data->'invoice'->>'id' as invoice_id
  )
  -- The ledger's trigger event: the last one of each invoice.
  select array_agg(n order by n.id), array_agg(ev.id order by n.id) into v_changed, v_event_ids
  from new_rows n join ev on ev.invoice_id = n.id
    and ev.type = case when n.status = 'paid' then 'invoice.paid' else 'invoice.created' end
  where n.subscription_id is not null;
  if v_changed is not null then
    perform billing.invoices_ledger_refresh(v_changed, v_event_ids);
  end if;
  return null;
end
$$;

create or replace function billing.tg_invoices__outbox_and_ledger_update() returns trigger
  language plpgsql
  -- One kept plan a statement, as in the ledger it calls: else the foreign key check of
  -- billing.events stays a custom plan, made again at every change, while communities
  -- holds one row (test/db/change-plans.test.ts)
  set plan_cache_mode = force_generic_plan
as $$
declare
  v_changed billing.invoices[];
  v_event_ids text[];
begin
  with ev as (
    insert into billing.events (community_id, type, data)
    select n.community_id, t.type, jsonb_build_object('invoice', billing.invoice_json(n),
      'previous_attributes', billing.jsonb_changed(billing.invoice_json(o) - 'lines', billing.invoice_json(n)))
    from new_rows n
    join old_rows o on o.community_id = n.community_id and o.id = n.id
    cross join lateral (select case
        when n.status = 'paid' and o.status <> 'paid' then 'invoice.paid'
        when n.attempt_count > o.attempt_count and n.status <> 'paid' then 'invoice.payment_failed' end as type) t
    where t.type is not null
    order by n.id
    returning id, data->'invoice'->>'id' as invoice_id
  )
  select array_agg(n order by n.id), array_agg(ev.id order by n.id) into v_changed, v_event_ids
  from new_rows n
  join old_rows o on o.community_id = n.community_id and o.id = n.id
  left join ev on ev.invoice_id = n.id
  where n.subscription_id is not null
    and (n.status <> o.status or n.next_attempt_at is distinct from o.next_attempt_at);
  if v_changed is not null then
    perform billing.invoices_ledger_refresh(v_changed, v_event_ids);
  end if;
  return null;
end
$$;
