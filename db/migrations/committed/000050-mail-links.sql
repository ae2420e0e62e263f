--! Previous: sha1:91e4624124a5f7beac055e6058e8785d4195909f
--! Hash: sha1:ba77339f1015f5b1533e96a58e810b835b5e2927
--! Message: mail links

--! split: 1-current.sql
-- Enter migration here

--! split: 40-mail-links.sql
-- Issue 30: the receipt links its invoice's PDF, the refund notice the invoice with its
-- credit note, through a member-facing signed link (docs/decisions/mail-invoice-links.md);
-- members unsubscribe from optional mail (the trial and yearly renewal reminders) by a
-- signed link or RFC 8058 one-click, and the worker skips what they left
-- (docs/decisions/mail-unsubscribe.md).

-- tables/10-tenancy.sql
alter table billing.communities add column if not exists mail_templates_required text[] not null default '{}';
grant select, update (mail_templates_off, mail_templates_required) on billing.communities to billing_writer;

-- tables/65-mail.sql
alter table billing.mail_messages drop constraint if exists mail_messages_status_check;
alter table billing.mail_messages add constraint mail_messages_status_check
  check (status in ('queued', 'sending', 'sent', 'failed', 'kept', 'skipped'));
alter table billing.mail_messages add column if not exists unsubscribable boolean not null default false;
-- operators' SQL logins read mail_messages column by column (operator_grant_reads)
grant select (unsubscribable) on billing.mail_messages to billing_operator;

create table if not exists billing.mail_unsubscribes (
  community_id text collate "C" not null references billing.communities on delete cascade,
  member_id text collate "C" not null,
  template text not null,
  created_at timestamptz not null default now(),
  primary key (community_id, member_id, template),
  foreign key (community_id, member_id) references billing.members on delete cascade
);
alter table billing.mail_unsubscribes enable row level security;
alter table billing.mail_unsubscribes force row level security;
drop policy if exists tenant on billing.mail_unsubscribes;
create policy tenant on billing.mail_unsubscribes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.mail_unsubscribes;
create policy owner_access on billing.mail_unsubscribes to current_user using (true) with check (true);
drop policy if exists member_fence on billing.mail_unsubscribes;
create policy member_fence on billing.mail_unsubscribes as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));
grant select on billing.mail_unsubscribes to billing_api;
revoke insert, update, delete on billing.mail_unsubscribes from billing_api;

-- functions/65-mail.sql: what changed, restated whole
-- The templates, with the event type that causes each and whether it is transactional:
-- a receipt, a payment or refund notice, the end of a subscription, a price change and
-- the access bought are always sent, without an unsubscribe link. The reminders of a
-- trial's end and a yearly renewal are optional: they carry a signed unsubscribe link
-- and List-Unsubscribe headers, unless the community marks them required
-- (communities.mail_templates_required), as some jurisdictions' auto-renewal laws ask.
-- docs/decisions/mail-unsubscribe.md.
create or replace function billing.mail_templates() returns table (template text, event_type text, transactional boolean, title text)
  language sql immutable parallel safe
as $$
  values ('receipt', 'invoice.paid', true, 'Receipt (invoice paid)'),
    ('payment_failed', 'invoice.payment_failed', true, 'Payment failed'),
    ('refund_issued', 'invoice.refunded', true, 'Refund issued'),
    ('subscription_ended', 'subscription.cancelled', true, 'Subscription ended'),
    -- reminders (billing_private.mail_reminders)
    ('trial_ending', 'reminder: a trial ends within 3 days', false, 'Trial ending in 3 days'),
    ('renewal_upcoming', 'reminder: a yearly renewal within 7 days', false, 'Yearly renewal in 7 days'),
    ('price_change', 'reminder: a price migration (billing plans migrate) marks the subscription', true, 'Price change notice'),
    ('access_granted', 'member.entitlement.granted', true, 'Access granted (how to link Discord or Telegram)')
$$;

grant execute on function billing.mail_templates() to billing_api;

-- Whether a member may unsubscribe from a template of the community: not transactional
-- and not marked required by the community. False for an unknown template.
create or replace function billing.mail_optional(p_community billing.communities, p_template text) returns boolean
  language sql stable parallel safe
as $$
  select coalesce((select not t.transactional from billing.mail_templates() t where t.template = p_template), false)
    and not (p_template = any (p_community.mail_templates_required))
$$;

grant execute on function billing.mail_optional(billing.communities,text) to billing_api;

-- One message: {subject, text, html} from a template, the community and the event's
-- data (plus link_codes for access_granted; "unsubscribe": true for an optional
-- message, which then ends with an unsubscribe link). Pure: the dashboard's preview
-- calls it with sample data.
create or replace function billing.mail_render(p_community_name text, p_template text, p_data jsonb)
  returns jsonb language plpgsql immutable parallel safe
as $$
declare
  v_inv jsonb := p_data->'invoice';
  v_amount text;
  v_ref text;
  v_subject text;
  v_lines text[] := '{}';
  v_html text[] := '{}';
  v_code jsonb;
  v_name text := p_community_name;
  e_name text := billing.html_escape(p_community_name);
begin
  if p_template in ('receipt', 'payment_failed') then
    v_ref := coalesce(v_inv->>'number', v_inv->>'id');
    if p_template = 'receipt' then
      v_amount := billing.money_text((v_inv->>'amount_paid_cents')::bigint, v_inv->>'currency');
      v_subject := 'Receipt from ' || v_name || ': ' || v_amount;
      v_lines := array['Thank you for your payment to ' || v_name || '.', '',
        'Amount paid: ' || v_amount, 'Invoice: ' || v_ref,
        'Paid on: ' || coalesce(left(v_inv->>'paid_at', 10), '')]
        || coalesce((select array_agg('  ' || (l->>'description') || ': ' || billing.money_text((l->>'amount_cents')::bigint, v_inv->>'currency'))
             from jsonb_array_elements(v_inv->'lines') l), '{}')
        || array['', 'Download the invoice (PDF): {{invoice_pdf_url:' || (v_inv->>'id') || '}}',
          'Manage your subscription and payment method: {{portal_url}}'];
      v_html := array['<p>Thank you for your payment to ' || e_name || '.</p>',
        '<table><tr><th align="left">Amount paid</th><td>' || billing.html_escape(v_amount) || '</td></tr>',
        '<tr><th align="left">Invoice</th><td>' || billing.html_escape(v_ref) || '</td></tr>',
        '<tr><th align="left">Paid on</th><td>' || billing.html_escape(left(v_inv->>'paid_at', 10)) || '</td></tr></table>',
        '<ul>' || coalesce((select string_agg('<li>' || billing.html_escape(l->>'description') || ': '
          || billing.html_escape(billing.money_text((l->>'amount_cents')::bigint, v_inv->>'currency')) || '</li>', '')
          from jsonb_array_elements(v_inv->'lines') l), '') || '</ul>',
        '<p><a href="{{invoice_pdf_url:' || billing.html_escape(v_inv->>'id') || '}}">Download the invoice (PDF)</a></p>',
        '<p><a href="{{portal_url}}">Manage your subscription and payment method</a></p>'];
    else
      v_amount := billing.money_text((v_inv->>'total_cents')::bigint - (v_inv->>'amount_paid_cents')::bigint, v_inv->>'currency');
      v_subject := 'Payment failed: ' || v_amount || ' to ' || v_name;
      v_lines := array['We could not collect ' || v_amount || ' for invoice ' || v_ref || ' from your card.',
        case when v_inv->>'next_attempt_at' is not null
          then 'We will try again on ' || replace(left(v_inv->>'next_attempt_at', 16), 'T', ' ') || ' UTC.'
          else 'That was the last attempt: the subscription ends unless the invoice is paid.' end, '',
        'Change your card: {{portal_url}}'];
      v_html := array['<p>We could not collect <strong>' || billing.html_escape(v_amount) || '</strong> for invoice '
        || billing.html_escape(v_ref) || ' from your card.</p>',
        '<p>' || billing.html_escape(case when v_inv->>'next_attempt_at' is not null
          then 'We will try again on ' || replace(left(v_inv->>'next_attempt_at', 16), 'T', ' ') || ' UTC.'
          else 'That was the last attempt: the subscription ends unless the invoice is paid.' end) || '</p>',
        '<p><a href="{{portal_url}}">Change your card</a></p>'];
    end if;
  elsif p_template = 'refund_issued' then
    v_amount := billing.money_text((p_data->'refund'->>'amount_cents')::bigint, v_inv->>'currency');
    v_ref := coalesce(v_inv->>'number', v_inv->>'id');
    v_subject := 'Refund from ' || v_name || ': ' || v_amount;
    v_lines := array['We refunded ' || v_amount || ' of invoice ' || v_ref || '.',
      'Credit note: ' || coalesce(p_data->'refund'->>'credit_note_number', '-'),
      'The money returns to the card you paid with; your bank may take a few days to show it.', '']
      -- the invoice's PDF lists its credit notes
      || case when p_data->'refund'->>'credit_note_number' is not null
        then array['The invoice with its credit note (PDF): {{invoice_pdf_url:' || (v_inv->>'id') || '}}'] else '{}' end
      || array['Your membership: {{portal_url}}'];
    v_html := array['<p>We refunded <strong>' || billing.html_escape(v_amount) || '</strong> of invoice ' || billing.html_escape(v_ref) || '.</p>',
      '<p>Credit note: ' || billing.html_escape(coalesce(p_data->'refund'->>'credit_note_number', '-')) || '</p>',
      '<p>The money returns to the card you paid with; your bank may take a few days to show it.</p>']
      || case when p_data->'refund'->>'credit_note_number' is not null
        then array['<p><a href="{{invoice_pdf_url:' || billing.html_escape(v_inv->>'id') || '}}">The invoice with its credit note (PDF)</a></p>'] else '{}' end
      || array['<p><a href="{{portal_url}}">Your membership</a></p>'];
  elsif p_template = 'subscription_ended' then
    v_subject := 'Your ' || coalesce(p_data->'subscription'->>'tier_name', 'subscription') || ' subscription at ' || v_name || ' has ended';
    v_lines := array['Your subscription to ' || coalesce(p_data->'subscription'->>'tier_name', 'the community')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '') || ' has ended, and with it the access it gave.',
      '', 'You are welcome back at any time. Your membership: {{portal_url}}'];
    v_html := array['<p>Your subscription to <strong>' || billing.html_escape(coalesce(p_data->'subscription'->>'tier_name', 'the community'))
      || '</strong>' || billing.html_escape(coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '')) || ' has ended, and with it the access it gave.</p>',
      '<p>You are welcome back at any time. <a href="{{portal_url}}">Your membership</a></p>'];
  elsif p_template in ('trial_ending', 'renewal_upcoming') then
    v_amount := billing.money_text((p_data->'subscription'->>'amount_cents')::bigint, p_data->'subscription'->>'currency');
    v_ref := coalesce(p_data->'subscription'->>'tier_name', 'your subscription')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '');
    if p_template = 'trial_ending' then
      v_subject := 'Your free trial at ' || v_name || ' ends on ' || left(p_data->'subscription'->>'current_period_end', 10);
      v_lines := array['Your free trial of ' || v_ref || ' ends on ' || replace(left(p_data->'subscription'->>'current_period_end', 16), 'T', ' ') || ' UTC.',
        'Unless you cancel before then, your card will be charged ' || v_amount || ' and the subscription renews until you cancel.'];
    else
      v_subject := 'Your ' || v_ref || ' subscription at ' || v_name || ' renews on ' || left(p_data->'subscription'->>'current_period_end', 10);
      v_lines := array['Your yearly subscription to ' || v_ref || ' renews on ' || replace(left(p_data->'subscription'->>'current_period_end', 16), 'T', ' ') || ' UTC.',
        'Your card will be charged ' || v_amount || ' for the next year unless you cancel before then.'];
    end if;
    v_html := array['<p>' || billing.html_escape(v_lines[1]) || '</p>', '<p>' || billing.html_escape(v_lines[2]) || '</p>',
      '<p><a href="{{portal_url}}">Cancel or change your plan</a></p>'];
    v_lines := v_lines || array['', 'Cancel or change your plan: {{portal_url}}'];
  elsif p_template = 'price_change' then
    v_ref := coalesce(p_data->'subscription'->>'tier_name', 'your subscription')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '');
    v_amount := billing.money_text((p_data->'migration'->>'price_cents')::bigint, p_data->'migration'->>'currency');
    v_subject := 'A price change for your ' || v_ref || ' subscription at ' || v_name;
    v_lines := array['The price of ' || v_ref || ' changes from '
        || billing.money_text((p_data->'subscription'->>'amount_cents')::bigint, p_data->'subscription'->>'currency')
        || ' to ' || v_amount || ' per ' || coalesce(p_data->'subscription'->>'interval', 'period') || '.',
      'It applies from your first renewal on or after ' || left(p_data->'migration'->>'notice_ends_at', 10)
        || '; until then you pay what you pay today. You may cancel before then.'];
    v_html := array['<p>' || billing.html_escape(v_lines[1]) || '</p>', '<p>' || billing.html_escape(v_lines[2]) || '</p>',
      '<p><a href="{{portal_url}}">Cancel or change your plan</a></p>'];
    v_lines := v_lines || array['', 'Cancel or change your plan: {{portal_url}}'];
  elsif p_template = 'access_granted' then
    v_subject := 'Your access to ' || coalesce(p_data->'entitlement'->>'name', 'your membership') || ' at ' || v_name;
    v_lines := array['You now have access to ' || coalesce(p_data->'entitlement'->>'name', 'your membership') || ' at ' || v_name || '.'];
    v_html := array['<p>You now have access to <strong>' || billing.html_escape(coalesce(p_data->'entitlement'->>'name', 'your membership'))
      || '</strong> at ' || e_name || '.</p>'];
    for v_code in select c from jsonb_array_elements(coalesce(p_data->'link_codes', '[]')) c loop
      if v_code->>'platform' = 'discord' then
        v_lines := v_lines || ('To link your Discord account, use the /link command in the server with the code ' || (v_code->>'code') || '.');
      else
        v_lines := v_lines || ('To link your Telegram account, send /start ' || (v_code->>'code') || ' to the community''s bot.');
      end if;
      v_html := v_html || ('<p>Link your ' || case when v_code->>'platform' = 'discord' then 'Discord account: use <code>/link</code> in the server with the code'
        else 'Telegram account: send <code>/start</code> to the community''s bot with the code' end
        || ' <strong>' || billing.html_escape(v_code->>'code') || '</strong>.</p>');
    end loop;
    if jsonb_array_length(coalesce(p_data->'link_codes', '[]')) > 0 then
      v_lines := v_lines || ('The code works once, until ' || replace(left(p_data->'link_codes'->0->>'expires_at', 16), 'T', ' ') || ' UTC.'::text);
    end if;
    v_lines := v_lines || array['', 'Your membership: {{portal_url}}'];
    v_html := v_html || '<p><a href="{{portal_url}}">Your membership</a></p>'::text;
  else
    perform billing.raise('BL422', 'Unknown mail template ' || p_template || '.', 'template');
  end if;
  return jsonb_build_object('subject', v_subject,
    'text', 'Hello,' || E'\n\n' || array_to_string(v_lines, E'\n') || E'\n\n' || '-- ' || E'\n' || v_name || E'\n'
      || case when (p_data->>'unsubscribe')::boolean
        then E'\nYou may stop these emails (receipts and payment notices still come): {{unsubscribe_url}}\n' else '' end,
    'html', '<!doctype html><html><body style="font-family:sans-serif"><p>Hello,</p>' || array_to_string(v_html, '')
      || '<p>&mdash; ' || e_name || '</p>'
      || case when (p_data->>'unsubscribe')::boolean
        then '<p style="font-size:small;color:#555">Receipts and payment notices still come. <a href="{{unsubscribe_url}}">Unsubscribe from these emails</a></p>' else '' end
      || '</body></html>');
end
$$;

grant execute on function billing.mail_render(text,text,jsonb) to billing_api;

-- _800_mail: the events of a statement that cause mail become messages (at most one
-- per event and template: on conflict nothing; one access email per member and
-- statement), to members with an email, unless the community
-- turned the template off; then one job per community queues their sending. A receipt
-- is for money taken: a paid invoice of 0 (a trial's start) sends none. A message of an
-- optional template (billing.mail_optional) is marked unsubscribable and carries the
-- unsubscribe link.
create or replace function billing_private.tg_events__mail() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
begin
  if not exists (select 1 from new_events e where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded',
      'subscription.cancelled', 'member.entitlement.granted')) then
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
  ), due as materialized (
    -- materialized: only these rows (members with an email, templates on) reach the
    -- lateral below, which makes link codes
    select d.*, m.email, c.name as community_name, billing.mail_optional(c, d.template) as optional
    from (select * from invoice_due union all select * from access_due) d
    join billing.members m on m.community_id = d.community_id and m.id = d.member_id and m.email is not null
    join billing.communities c on c.id = d.community_id and not (d.template = any (c.mail_templates_off))
  ), made as (
    insert into billing.mail_messages (community_id, member_id, template, event_id, to_address, subject, text_body, html_body, unsubscribable)
    select d.community_id, d.member_id, d.template, d.event_id, d.email, r.msg->>'subject', r.msg->>'text', r.msg->>'html', d.optional
    from due d
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


-- Reminders, which no event announces: a trial ending within 3 days and a yearly
-- subscription renewing within 7, by each community's clock, and the notice of a price
-- migration (which emits nothing when scheduled), to members with an email, once per
-- subscription and date or migration (ref). Run by the worker's cron (mail_messages__remind)
-- or by hand (p_community_id: one community). Subscriptions are reached through
-- subscriptions_period_end, bounded by the earliest and latest community clocks.
create or replace function billing_private.mail_reminders(p_community_id text default null) returns integer
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
  v_made integer;
  v_lo timestamptz;
  v_hi timestamptz;
begin
  select now() + min(c.clock_offset), now() + max(c.clock_offset) + interval '7 days' into v_lo, v_hi
  from billing.communities c where p_community_id is null or c.id = p_community_id;
  with due as (
    select s.community_id, s.member_id, k.template,
      k.template || ':' || s.id || ':' || billing.iso(s.current_period_end) as ref,
      jsonb_build_object('subscription', billing.subscription_json(s)) as data
    from billing.subscriptions s
    join billing.communities c on c.id = s.community_id
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    cross join lateral (select case
      when s.status = 'trialing' and s.trial_end is not null and s.cancel_at is null
        and s.current_period_end <= now() + c.clock_offset + interval '3 days' then 'trial_ending'
      when s.status = 'active' and p.interval = 'year' and s.cancel_at is null then 'renewal_upcoming' end as template) k
    where s.status in ('active', 'trialing', 'past_due', 'cancelling')
      and s.current_period_end > v_lo and s.current_period_end <= v_hi
      and (p_community_id is null or s.community_id = p_community_id)
      and s.current_period_end > now() + c.clock_offset
      and s.current_period_end <= now() + c.clock_offset + interval '7 days'
      and k.template is not null
      and not (k.template = any (c.mail_templates_off))
      and not exists (select 1 from billing.mail_messages mm where mm.community_id = s.community_id
        and mm.ref = k.template || ':' || s.id || ':' || billing.iso(s.current_period_end) and mm.template = k.template)
  ), price_due as (
    -- a price migration's notice, once per subscription and migration
    select s.community_id, s.member_id, 'price_change' as template, 'price_change:' || s.id || ':' || s.price_migration_id as ref,
      jsonb_build_object('subscription', billing.subscription_json(s), 'migration', jsonb_build_object(
        'price_cents', pm.price_cents, 'currency', pm.currency, 'notice_ends_at', billing.iso(pm.notice_ends_at))) as data
    from billing.subscriptions s
    join billing.price_migrations pm on pm.community_id = s.community_id and pm.id = s.price_migration_id
    join billing.communities c on c.id = s.community_id
    where s.price_migration_id is not null and s.status <> 'cancelled'
      and (p_community_id is null or s.community_id = p_community_id)
      and not ('price_change' = any (c.mail_templates_off))
      and not exists (select 1 from billing.mail_messages mm where mm.community_id = s.community_id
        and mm.ref = 'price_change:' || s.id || ':' || s.price_migration_id and mm.template = 'price_change')
  ), made as (
    insert into billing.mail_messages (community_id, member_id, template, ref, to_address, subject, text_body, html_body, unsubscribable)
    select d.community_id, d.member_id, d.template, d.ref, m.email, r.msg->>'subject', r.msg->>'text', r.msg->>'html',
      billing.mail_optional(c, d.template)
    from (select * from due union all select * from price_due) d
    join billing.members m on m.community_id = d.community_id and m.id = d.member_id and m.email is not null
    join billing.communities c on c.id = d.community_id
    cross join lateral (select billing.mail_render(c.name, d.template,
      d.data || jsonb_build_object('unsubscribe', billing.mail_optional(c, d.template))) as msg) r
    order by d.community_id, d.ref
    on conflict (community_id, ref, template) do nothing
    returning community_id, id
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids)), coalesce(sum(cardinality(ids)), 0)
  into v_payloads, v_made
  from (select community_id, array_agg(id order by id) as ids from made group by community_id) g;
  perform billing_private.add_job('mail_messages__send', v_payloads);
  return v_made;
end
$$;

grant execute on function billing_private.mail_reminders(text) to billing_worker;

-- its answer gains unsubscribable: replaced, not altered
drop function if exists billing_private.mail_claim(text, text[]);
-- The worker's door: claims the queued messages among p_ids (and those a dead worker
-- left sending for ten minutes), counting the attempt, and answers what to send with
-- the community's sender settings. Messages already sent, kept, failed or skipped are
-- not answered again: a job that runs twice sends nothing twice. An unsubscribable
-- message whose member unsubscribed from its template, still optional for the
-- community, is skipped instead: recorded, never sent.
create or replace function billing_private.mail_claim(p_community_id text, p_ids text[])
  returns table (id text, member_id text, template text, to_address text, subject text, text_body text,
    html_body text, attempts integer, sender_name text, reply_to text, community_name text, unsubscribable boolean)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  update billing.mail_messages mm set status = 'skipped', claimed_at = null
  where mm.community_id = p_community_id and mm.id = any (p_ids)
    and mm.id in (select x.id from billing.mail_messages x
      join billing.communities co on co.id = x.community_id
      where x.community_id = p_community_id and x.id = any (p_ids) and x.unsubscribable
        and (x.status = 'queued' or (x.status = 'sending' and x.claimed_at < now() - interval '10 minutes'))
        and billing.mail_optional(co, x.template)
        and exists (select 1 from billing.mail_unsubscribes u
          where u.community_id = x.community_id and u.member_id = x.member_id and u.template = x.template)
      for update of x skip locked);
  return query
  with claimed as (
    update billing.mail_messages mm set status = 'sending', attempts = mm.attempts + 1, claimed_at = now()
    where mm.community_id = p_community_id and mm.id = any (p_ids)
      and mm.id in (select x.id from billing.mail_messages x
        where x.community_id = p_community_id and x.id = any (p_ids)
          and (x.status = 'queued' or (x.status = 'sending' and x.claimed_at < now() - interval '10 minutes'))
        for update skip locked)
    returning mm.*
  )
  select c2.id, c2.member_id, c2.template, c2.to_address, c2.subject, c2.text_body, c2.html_body, c2.attempts,
    coalesce(co.mail_sender_name, co.name), co.mail_reply_to, co.name, c2.unsubscribable
  from claimed c2 join billing.communities co on co.id = c2.community_id
  order by c2.id;
end
$$;

grant execute on function billing_private.mail_claim(text,text[]) to billing_worker;

create or replace function billing.mail_message_json(p_m billing.mail_messages, p_full boolean) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', p_m.id, 'member_id', p_m.member_id, 'template', p_m.template,
    'event_id', p_m.event_id, 'ref', p_m.ref, 'to', p_m.to_address, 'subject', p_m.subject, 'status', p_m.status,
    'unsubscribable', p_m.unsubscribable,
    'attempts', p_m.attempts, 'last_error', p_m.last_error, 'created_at', billing.iso(p_m.created_at),
    'sent_at', billing.iso(p_m.sent_at))
    || case when p_full then jsonb_build_object('text', p_m.text_body, 'html', p_m.html_body) else '{}' end
$$;

grant execute on function billing.mail_message_json(billing.mail_messages,boolean) to billing_api;

-- The templates with their on/off state and a preview of each, rendered from sample data.
create or replace function billing_api.mail_templates_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_c billing.communities;
  v_sample jsonb := jsonb_build_object(
    'invoice', jsonb_build_object('id', 'inv_sample', 'number', to_char(billing.now(), 'YYYY') || '-000042',
      'currency', 'usd', 'total_cents', 1500, 'amount_paid_cents', 1500, 'paid_at', billing.iso(billing.now()),
      'next_attempt_at', billing.iso(billing.now() + interval '3 days'),
      'lines', jsonb_build_array(jsonb_build_object('description', 'Gold (monthly), 1 month', 'amount_cents', 1500))),
    'entitlement', jsonb_build_object('name', 'Gold'),
    'refund', jsonb_build_object('amount_cents', 500, 'credit_note_number', 'CN-' || to_char(billing.now(), 'YYYY') || '-000007'),
    'subscription', jsonb_build_object('tier_name', 'Gold', 'plan_name', 'Gold annual', 'amount_cents', 15000, 'currency', 'usd',
      'interval', 'year', 'current_period_end', billing.iso(billing.now() + interval '3 days')),
    'migration', jsonb_build_object('price_cents', 18000, 'currency', 'usd', 'notice_ends_at', billing.iso(billing.now() + interval '30 days')),
    'link_codes', jsonb_build_array(jsonb_build_object('platform', 'telegram', 'code', 'SAMPLE1234',
      'expires_at', billing.iso(billing.now() + interval '7 days'))));
begin
  select * into v_c from billing.communities c where c.id = billing.current_community_id();
  return jsonb_build_object('sender_name', coalesce(v_c.mail_sender_name, v_c.name), 'reply_to', v_c.mail_reply_to,
    'data', (select jsonb_agg(jsonb_build_object('template', t.template, 'event_type', t.event_type,
      'transactional', t.transactional, 'required', not billing.mail_optional(v_c, t.template),
      'title', t.title, 'enabled', not (t.template = any (v_c.mail_templates_off)),
      'preview', billing.mail_render(v_c.name, t.template,
        case when t.template = 'payment_failed' then jsonb_set(jsonb_set(v_sample, '{invoice,amount_paid_cents}', '0'), '{invoice,paid_at}', 'null')
        else v_sample end || jsonb_build_object('unsubscribe', billing.mail_optional(v_c, t.template)))) order by t.template)
      from billing.mail_templates() t));
end
$$;

grant execute on function billing_api.mail_templates_list(jsonb) to billing_api;

grant create on schema billing_api to billing_writer;
-- Turns a template on or off for the community (enabled), and marks an optional one
-- required or optional again (required: a transactional template is always required).
create or replace function billing_api.mail_template_set(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_template text := p_args->>'template';
  v_t record;
  v_c billing.communities;
begin
  select * into v_t from billing.mail_templates() t where t.template = v_template;
  if v_t.template is null then
    perform billing.raise('BL404', 'No mail template ' || v_template || '.');
  end if;
  if p_args->'enabled' is null and p_args->'required' is null then
    perform billing.raise('BL422', 'Give enabled, required or both.', 'enabled');
  end if;
  if v_t.transactional and not coalesce((p_args->>'required')::boolean, true) then
    perform billing.raise('BL422', v_template || ' is transactional: members cannot unsubscribe from it.', 'required');
  end if;
  update billing.communities c set
    mail_templates_off = case when p_args->'enabled' is null then c.mail_templates_off
      when (p_args->>'enabled')::boolean then array_remove(c.mail_templates_off, v_template)
      else array_append(array_remove(c.mail_templates_off, v_template), v_template) end,
    mail_templates_required = case when p_args->'required' is null or v_t.transactional then c.mail_templates_required
      when (p_args->>'required')::boolean then array_append(array_remove(c.mail_templates_required, v_template), v_template)
      else array_remove(c.mail_templates_required, v_template) end
  where c.id = billing.current_community_id()
  returning * into v_c;
  return jsonb_build_object('template', v_template, 'enabled', not (v_template = any (v_c.mail_templates_off)),
    'required', not billing.mail_optional(v_c, v_template));
end
$$;

grant execute on function billing_api.mail_template_set(jsonb) to billing_api;
alter function billing_api.mail_template_set(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;

-- the member's doors of signed links (owner only: no grant)
-- The invoice's document (billing_api.invoices_document) for its own member only: null
-- when the member no longer exists or the invoice is not (or no longer) theirs, so a
-- link outlives neither.
create or replace function billing_private.mail_invoice_document(p_community_id text, p_member_id text, p_invoice_id text)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from billing.invoices i
      join billing.members m on m.community_id = i.community_id and m.id = i.member_id
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
-- unsubscribed}, or null for an unknown member or template: a link outlives no member.
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
  where c.id = p_community_id and exists (select 1 from billing.members m where m.community_id = c.id and m.id = p_member_id);
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
