-- Invoices and receipts as PDF (issue 30 item 3; docs/decisions/invoice-pdf.md): the
-- community's legal fields (tables/10-tenancy.sql) and what the PDF prints
-- (functions/46-invoices.sql).

-- The seller as its invoices and receipts name it (the PDF, docs/decisions/invoice-pdf.md):
-- the legal name (else the display name), the postal address as printed lines, the
-- country (ISO 3166-1 alpha-2) and the tax id (VAT, GST, EIN ...). All optional;
-- an operator sets them with `billing communities set-legal` or SQL (update
-- billing.communities set legal_name = ...).
-- Printed as written: no format is checked beyond size and the country's two letters.
alter table billing.communities add column if not exists legal_name text;
alter table billing.communities add column if not exists address_lines text[];
alter table billing.communities add column if not exists country text;
alter table billing.communities add column if not exists tax_id text;
alter table billing.communities drop constraint if exists communities_legal_valid;
alter table billing.communities add constraint communities_legal_valid check (
  (legal_name is null or length(legal_name) between 1 and 200)
  and (address_lines is null or (cardinality(address_lines) <= 6
    and coalesce(length(array_to_string(address_lines, '')), 0) <= 600))
  and (country is null or country ~ '^[A-Z]{2}$')
  and (tax_id is null or length(tax_id) between 1 and 50));

-- What the invoice's PDF prints (GET /v1/invoices/{id}/pdf; docs/decisions/invoice-pdf.md):
-- the invoice, the seller (the community's legal fields), the buyer (the member as the
-- API shows it, under the slots a buyer's name, address and tax id will fill once
-- checkout records them), how it was paid, and its tax lines (none until tax rates
-- exist: the slot the PDF prints them from). RLS and the portal's member_fence keep
-- it to the caller's community and member: another's invoice is a 404.
create or replace function billing_api.invoices_document(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
  v_com billing.communities;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  select * into v_com from billing.communities c where c.id = v_inv.community_id;
  return jsonb_build_object(
    'invoice', billing.invoice_json(v_inv),
    'seller', jsonb_build_object(
      'name', v_com.name,
      'legal_name', v_com.legal_name,
      'address_lines', to_jsonb(coalesce(v_com.address_lines, '{}'::text[])),
      'country', v_com.country,
      'tax_id', v_com.tax_id),
    'buyer', jsonb_build_object('name', null, 'address_lines', '[]'::jsonb, 'country', null, 'tax_id', null)
      || billing.member_json(v_inv.community_id, v_inv.member_id),
    'payment_method', case when v_inv.status = 'paid' then v_inv.provider end,
    'tax_lines', '[]'::jsonb);
end
$$;
grant execute on function billing_api.invoices_document(jsonb) to billing_api;

--!include 98-dispatch.sql
