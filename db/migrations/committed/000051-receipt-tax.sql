--! Previous: sha1:ba77339f1015f5b1533e96a58e810b835b5e2927
--! Hash: sha1:846aab2eefa93e909814166e44e2ca6ec1b09004
--! Message: receipt tax

--! split: 1-current.sql
-- Enter migration here

--! split: 62-receipt-tax.sql
-- The receipt names its tax lines and a reverse charge's mention.

-- A tax line as a receipt names it: "VAT 19% (DE)", "(included)" when the price held it.
create or replace function billing.mail_tax_label(p_line jsonb) returns text
  language plpgsql immutable parallel safe
as $$
begin
  return (p_line->>'name')
    || coalesce(' ' || trim_scale(round((p_line->>'rate_ppm')::numeric / 10000, 4))::text || '%', '')
    || coalesce(' (' || (p_line->>'country') || ')', '')
    || case when (p_line->>'inclusive')::boolean then ' (included)' else '' end;
end
$$;

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
        -- its tax (issue 30 item 5): added, or included in the lines above
        || coalesce((select array_agg('  ' || billing.mail_tax_label(t) || ': '
             || billing.money_text((t->>'amount_cents')::bigint, v_inv->>'currency'))
             from jsonb_array_elements(v_inv->'tax_lines') t), '{}')
        || case when v_inv->>'tax_note' is not null then array[v_inv->>'tax_note'] else '{}' end
        || array['', 'Download the invoice (PDF): {{invoice_pdf_url:' || (v_inv->>'id') || '}}',
          'Manage your subscription and payment method: {{portal_url}}'];
      v_html := array['<p>Thank you for your payment to ' || e_name || '.</p>',
        '<table><tr><th align="left">Amount paid</th><td>' || billing.html_escape(v_amount) || '</td></tr>',
        '<tr><th align="left">Invoice</th><td>' || billing.html_escape(v_ref) || '</td></tr>',
        '<tr><th align="left">Paid on</th><td>' || billing.html_escape(left(v_inv->>'paid_at', 10)) || '</td></tr></table>',
        '<ul>' || coalesce((select string_agg('<li>' || billing.html_escape(l->>'description') || ': '
          || billing.html_escape(billing.money_text((l->>'amount_cents')::bigint, v_inv->>'currency')) || '</li>', '')
          from jsonb_array_elements(v_inv->'lines') l), '')
        || coalesce((select string_agg('<li>' || billing.html_escape(billing.mail_tax_label(t)) || ': '
          || billing.html_escape(billing.money_text((t->>'amount_cents')::bigint, v_inv->>'currency')) || '</li>', '')
          from jsonb_array_elements(v_inv->'tax_lines') t), '') || '</ul>'
        || coalesce('<p>' || billing.html_escape(v_inv->>'tax_note') || '</p>', ''),
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

grant execute on function billing.mail_tax_label(jsonb) to billing_api;
