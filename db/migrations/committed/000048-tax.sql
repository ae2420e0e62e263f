--! Previous: sha1:6fd1f64a8338ae68455df2bef639d3381e8329c7
--! Hash: sha1:b60a4102f0257cd3cc2f1841e2f4335d831321c4
--! Message: tax

--! split: 1-current.sql
-- Enter migration here

--! split: 30-tax.sql
-- Tax (issue 30 item 5; docs/decisions/tax.md): tax rates per country in the catalog,
-- the buyer's billing details from checkout, tax lines on every invoice (one
-- computation: billing.invoice_tax), EU reverse charge, proportional tax on credit
-- notes, MRR and revenue net of tax, and the tax settings read (GET /v1/tax-settings).

-- ---- tables ----------------------------------------------------------------------------------

-- The tax a community charges per buyer country (ISO 3166-1 alpha-2), one rate each,
-- set by `billing catalog apply` (the file's tax_rates, matched by country). rate_ppm:
-- parts per million, exact (20% = 200000, 8.875% = 88750); inclusive: the prices
-- already hold the tax (it is the part of them), else it is added on top; name: what
-- invoices call it (VAT, GST, Sales tax). An inactive rate is kept but not charged.
-- billing.invoice_tax (functions/46-tax.sql) reads it for every invoice the service
-- computes; an invoice keeps a copy of what it charged (its tax_lines).
create table if not exists billing.tax_rates (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('txr'),
  country text collate "C" not null check (country ~ '^[A-Z]{2}$'),
  name text not null check (length(name) between 1 and 40 and name !~ '[[:cntrl:]]'),
  rate_ppm integer not null check (rate_ppm between 0 and 1000000),
  inclusive boolean not null default false,
  active boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  unique (community_id, country)
);

alter table billing.tax_rates enable row level security;

alter table billing.tax_rates force row level security;

drop policy if exists tenant on billing.tax_rates;

create policy tenant on billing.tax_rates
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));

drop policy if exists owner_access on billing.tax_rates;

create policy owner_access on billing.tax_rates to current_user using (true) with check (true);

grant select on billing.tax_rates to billing_api;

-- The buyer's billing details (issue 30 item 5; docs/decisions/tax.md): name, postal
-- address as printed lines, country (ISO 3166-1 alpha-2: the country that decides the
-- tax of its invoices) and tax id (a VAT id makes an EU business buyer reverse
-- charged), as the last checkout gave them (the link, the sandbox page or Stripe's
-- customer_details), replaced together. Personal data: never in events or logs; each
-- invoice keeps a copy of what it was computed with (billing.invoices.buyer_*).
alter table billing.members add column if not exists billing_name text;

alter table billing.members add column if not exists billing_address_lines text[];

alter table billing.members add column if not exists billing_country text;

alter table billing.members add column if not exists billing_tax_id text;

alter table billing.members drop constraint if exists members_billing_valid;

alter table billing.members add constraint members_billing_valid check (
  (billing_name is null or length(billing_name) between 1 and 200)
  and (billing_address_lines is null or (cardinality(billing_address_lines) <= 6
    and coalesce(length(array_to_string(billing_address_lines, '')), 0) <= 600))
  and (billing_country is null or billing_country ~ '^[A-Z]{2}$')
  and (billing_tax_id is null or length(billing_tax_id) between 1 and 50));

-- The buyer's billing details given for this checkout (POST /v1/checkout-links
-- customer_name, customer_address_lines, customer_country, customer_tax_id, or the
-- sandbox page's billing details form): they become the member's at completion, before
-- its first invoice is taxed (docs/decisions/tax.md). Same rules as the member's.
alter table billing.checkout_sessions add column if not exists customer_name text;

alter table billing.checkout_sessions add column if not exists customer_address_lines text[];

alter table billing.checkout_sessions add column if not exists customer_country text;

alter table billing.checkout_sessions add column if not exists customer_tax_id text;

alter table billing.checkout_sessions drop constraint if exists checkout_sessions_customer_valid;

alter table billing.checkout_sessions add constraint checkout_sessions_customer_valid check (
  (customer_name is null or length(customer_name) between 1 and 200)
  and (customer_address_lines is null or (cardinality(customer_address_lines) <= 6
    and coalesce(length(array_to_string(customer_address_lines, '')), 0) <= 600))
  and (customer_country is null or customer_country ~ '^[A-Z]{2}$')
  and (customer_tax_id is null or length(customer_tax_id) between 1 and 50));

-- Operator SQL logins read checkout_sessions column by column (10-tenancy.sql).
grant select (customer_name, customer_address_lines, customer_country, customer_tax_id) on billing.checkout_sessions to billing_operator;

-- ---- the tax computation (functions/46-tax.sql), before the constraints that call it ------------

-- Tax lines: [{name, country, rate_ppm, inclusive, taxable_cents, amount_cents}]. name
-- as printed; country the ISO 3166-1 alpha-2 code whose rate applied (null when a
-- provider did not say); rate_ppm parts per million (null when a provider did not say);
-- inclusive: part of the invoice lines' amounts, else added to the total; taxable_cents
-- what it was computed on (null when unknown); amount_cents >= 0. plpgsql: it runs in a
-- CHECK constraint on every invoice row written (as billing.invoice_lines_valid).
create or replace function billing.invoice_tax_lines_valid(p_lines jsonb) returns boolean
  language plpgsql immutable parallel safe
as $$
begin
  if p_lines is null then
    return null;
  end if;
  if jsonb_typeof(p_lines) <> 'array' then
    return false;
  end if;
  return not exists (
    select 1 from jsonb_array_elements(p_lines) l
    where jsonb_typeof(l) <> 'object'
      or jsonb_typeof(l->'name') <> 'string' or length(l->>'name') not between 1 and 40
      or jsonb_typeof(l->'inclusive') <> 'boolean'
      or jsonb_typeof(l->'amount_cents') <> 'number' or (l->>'amount_cents') !~ '^[0-9]+$'
      or (l->'country' is not null and jsonb_typeof(l->'country') <> 'null' and coalesce(l->>'country', '') !~ '^[A-Z]{2}$')
      or (l->'rate_ppm' is not null and jsonb_typeof(l->'rate_ppm') <> 'null'
          and (coalesce(l->>'rate_ppm', '') !~ '^[0-9]+$' or (l->>'rate_ppm')::bigint > 1000000))
      or (l->'taxable_cents' is not null and jsonb_typeof(l->'taxable_cents') <> 'null'
          and coalesce(l->>'taxable_cents', '') !~ '^-?[0-9]+$'));
end
$$;

-- The sum of the tax lines: all of them (p_inclusive null), the inclusive or the
-- exclusive ones.
create or replace function billing.invoice_tax_sum(p_lines jsonb, p_inclusive boolean) returns bigint
  language plpgsql immutable parallel safe
as $$
begin
  return (select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
          from jsonb_array_elements(p_lines) l
          where p_inclusive is null or (l->>'inclusive')::boolean = p_inclusive);
end
$$;

-- The inclusive rate of a set of tax lines (ppm): the sum of the inclusive lines' rates
-- (a provider's line without a rate counts as 0).
create or replace function billing.invoice_tax_inclusive_ppm(p_lines jsonb) returns integer
  language plpgsql immutable parallel safe
as $$
begin
  return least(1000000, (select coalesce(sum((l->>'rate_ppm')::bigint), 0)
    from jsonb_array_elements(p_lines) l
    where (l->>'inclusive')::boolean and jsonb_typeof(l->'rate_ppm') = 'number'))::integer;
end
$$;

-- The EU member states (ISO 3166-1 alpha-2; Greece is GR, its VAT ids start EL).
create or replace function billing.eu_member(p_country text) returns boolean
  language sql immutable parallel safe
as $$
  select p_country = any (array['AT', 'BE', 'BG', 'CY', 'CZ', 'DE', 'DK', 'EE', 'ES', 'FI', 'FR', 'GR', 'HR', 'HU',
    'IE', 'IT', 'LT', 'LU', 'LV', 'MT', 'NL', 'PL', 'PT', 'RO', 'SE', 'SI', 'SK'])
$$;

-- Does p_tax_id look like a VAT id of member state p_country? Its prefix must be that
-- country's (EL for GR) and the rest the country's format (VIES's published formats),
-- spaces, dots and dashes aside. A format check only: whether the id is registered is
-- VIES's to say, which needs the network. One expression (no FROM), so it is inlined.
create or replace function billing.eu_vat_id_valid(p_country text, p_tax_id text) returns boolean
  language sql immutable parallel safe
as $$
  select coalesce(upper(regexp_replace(coalesce(p_tax_id, ''), '[ .-]', '', 'g')) ~ ('^' || case p_country
      when 'AT' then 'ATU[0-9]{8}'
      when 'BE' then 'BE[01][0-9]{9}'
      when 'BG' then 'BG[0-9]{9,10}'
      when 'CY' then 'CY[0-9]{8}[A-Z]'
      when 'CZ' then 'CZ[0-9]{8,10}'
      when 'DE' then 'DE[0-9]{9}'
      when 'DK' then 'DK[0-9]{8}'
      when 'EE' then 'EE[0-9]{9}'
      when 'ES' then 'ES[0-9A-Z][0-9]{7}[0-9A-Z]'
      when 'FI' then 'FI[0-9]{8}'
      when 'FR' then 'FR[0-9A-HJ-NP-Z]{2}[0-9]{9}'
      when 'GR' then 'EL[0-9]{9}'
      when 'HR' then 'HR[0-9]{11}'
      when 'HU' then 'HU[0-9]{8}'
      when 'IE' then 'IE([0-9]{7}[A-W][A-I]?|[0-9][A-Z+*][0-9]{5}[A-W])'
      when 'IT' then 'IT[0-9]{11}'
      when 'LT' then 'LT([0-9]{9}|[0-9]{12})'
      when 'LU' then 'LU[0-9]{8}'
      when 'LV' then 'LV[0-9]{11}'
      when 'MT' then 'MT[0-9]{8}'
      when 'NL' then 'NL[0-9]{9}B[0-9]{2}'
      when 'PL' then 'PL[0-9]{10}'
      when 'PT' then 'PT[0-9]{9}'
      when 'RO' then 'RO[0-9]{2,10}'
      when 'SE' then 'SE[0-9]{10}01'
      when 'SI' then 'SI[0-9]{8}'
      when 'SK' then 'SK[0-9]{10}' end || '$'), false)
$$;

-- The EU's B2B rule (Directive 2006/112/EC, Articles 44 and 196): a seller established
-- in one member state selling to a business in another (a buyer with a VAT id of that
-- state) charges no VAT; the buyer accounts for it.
create or replace function billing.reverse_charge_applies(p_seller_country text, p_buyer_country text, p_buyer_tax_id text)
  returns boolean language sql immutable parallel safe
as $$
  select coalesce(billing.eu_member(p_seller_country) and billing.eu_member(p_buyer_country)
    and p_buyer_country <> p_seller_country and billing.eu_vat_id_valid(p_buyer_country, p_buyer_tax_id), false)
$$;

-- The legal mention a reverse-charged invoice carries (JSON tax_note, the PDF).
create or replace function billing.reverse_charge_note() returns text
  language sql immutable parallel safe
as $$ select 'Reverse charge: VAT to be accounted for by the recipient, Article 196 Directive 2006/112/EC.'::text $$;

-- A member's billing details as billing.invoice_tax takes them: {name, address_lines,
-- country, tax_id} (nulls and [] when unknown).
create or replace function billing.member_billing(p_community_id text, p_member_id text) returns jsonb
  language plpgsql stable
as $$
begin
  return coalesce((select jsonb_build_object('name', m.billing_name,
      'address_lines', to_jsonb(coalesce(m.billing_address_lines, '{}'::text[])),
      'country', m.billing_country, 'tax_id', m.billing_tax_id)
    from billing.members m where m.community_id = p_community_id and m.id = p_member_id),
    '{"name": null, "address_lines": [], "country": null, "tax_id": null}'::jsonb);
end
$$;

-- The tax of an invoice with lines p_lines for a buyer (billing details p_buyer), of
-- community p_community: the one computation every invoice the service writes goes
-- through (checkout, renewal, plan change, resume, one-time purchase: billing.invoice_open;
-- a batch of renewals: billing.renew_batch; the sandbox page's preview). The rules
-- (docs/decisions/tax.md):
--   - the buyer's country decides (their billing details, from checkout); unknown, the
--     seller's (the community's country) does; neither known, no tax;
--   - an EU business buyer in another member state than the seller, with a VAT id of
--     their state, is reverse charged: no tax, the legal mention;
--   - else the community's active rate for that country, if any: inclusive, the tax is
--     the part of the amount (amount * rate / (1 + rate)); exclusive, it is added
--     (amount * rate); computed once per invoice on what it charges (its lines after
--     discounts and credit), rounded half away from zero to the minor unit;
--   - a provider's own tax (p_given: Stripe's, {tax_lines, reverse_charge, buyer_country,
--     buyer_tax_id}) is taken as it charged it.
-- Answers {tax_lines, tax_cents, tax_exclusive_cents, tax_country, reverse_charge,
-- buyer_name, buyer_address_lines, buyer_country, buyer_tax_id, seller_country, seller_tax_id}.
create or replace function billing.invoice_tax(p_community text, p_buyer jsonb, p_lines jsonb, p_given jsonb default null)
  returns jsonb language plpgsql stable
as $$
declare
  v_seller_country text;
  v_seller_tax_id text;
  v_buyer_country text := nullif(p_buyer->>'country', '');
  v_buyer_tax_id text := nullif(p_buyer->>'tax_id', '');
  v_country text;
  v_base bigint := greatest(0, billing.invoice_lines_sum(p_lines, null));
  v_rate billing.tax_rates;
  v_reverse boolean := false;
  v_amount bigint;
  v_lines jsonb := '[]';
begin
  select c.country, c.tax_id into v_seller_country, v_seller_tax_id from billing.communities c where c.id = p_community;
  if p_given is not null then
    v_lines := coalesce(p_given->'tax_lines', '[]');
    v_reverse := coalesce((p_given->>'reverse_charge')::boolean, false);
    v_buyer_country := coalesce(nullif(p_given->>'buyer_country', ''), v_buyer_country);
    v_buyer_tax_id := coalesce(nullif(p_given->>'buyer_tax_id', ''), v_buyer_tax_id);
    v_country := case when jsonb_array_length(v_lines) > 0 or v_reverse
      then coalesce((select min(l->>'country') from jsonb_array_elements(v_lines) l), v_buyer_country) end;
  else
    v_country := coalesce(v_buyer_country, v_seller_country);
    select * into v_rate from billing.tax_rates r
    where r.community_id = p_community and r.country = v_country and r.active;
    if billing.reverse_charge_applies(v_seller_country, v_buyer_country, v_buyer_tax_id) then
      v_reverse := true;
      v_lines := jsonb_build_array(jsonb_build_object('name', coalesce(v_rate.name, 'VAT'), 'country', v_buyer_country,
        'rate_ppm', 0, 'inclusive', false, 'taxable_cents', v_base, 'amount_cents', 0));
    elsif v_rate.id is not null then
      v_amount := case when v_rate.inclusive
        then round(v_base::numeric * v_rate.rate_ppm / (1000000 + v_rate.rate_ppm))
        else round(v_base::numeric * v_rate.rate_ppm / 1000000) end;
      v_lines := jsonb_build_array(jsonb_build_object('name', v_rate.name, 'country', v_rate.country,
        'rate_ppm', v_rate.rate_ppm, 'inclusive', v_rate.inclusive,
        'taxable_cents', case when v_rate.inclusive then v_base - v_amount else v_base end, 'amount_cents', v_amount));
    else
      v_country := null;
    end if;
  end if;
  return jsonb_build_object(
    'tax_lines', v_lines,
    'tax_cents', billing.invoice_tax_sum(v_lines, null),
    'tax_exclusive_cents', billing.invoice_tax_sum(v_lines, false),
    'tax_country', v_country,
    'reverse_charge', v_reverse,
    'buyer_name', nullif(p_buyer->>'name', ''),
    'buyer_address_lines', coalesce(p_buyer->'address_lines', '[]'),
    'buyer_country', v_buyer_country,
    'buyer_tax_id', v_buyer_tax_id,
    'seller_country', v_seller_country,
    'seller_tax_id', v_seller_tax_id);
end
$$;

-- _550_subscription_tax: a subscription keeps the inclusive rate its newest invoice
-- charged (0: exclusive, reverse charged or none), which its MRR leaves out of its price
-- (analytics.subscription_mrr). Decided before writing: most invoices change nothing,
-- and an update of no row would still fire the subscriptions' statement triggers.
create or replace function billing.tg_invoices__subscription_tax() returns trigger
  language plpgsql
as $$
declare
  v_communities text[];
  v_ids text[];
  v_ppms integer[];
begin
  select array_agg(x.community_id), array_agg(x.subscription_id), array_agg(x.ppm)
    into v_communities, v_ids, v_ppms
  from (select distinct on (n.community_id, n.subscription_id) n.community_id, n.subscription_id,
          case when n.reverse_charge then 0 else billing.invoice_tax_inclusive_ppm(n.tax_lines) end as ppm
        from new_rows n where n.subscription_id is not null
        order by n.community_id, n.subscription_id, n.created_at desc, n.id desc) x
  -- One index probe per subscription (a lateral per row), never a join the planner may
  -- turn into a scan of the community's subscriptions.
  cross join lateral (select s.tax_inclusive_ppm from billing.subscriptions s
                      where s.community_id = x.community_id and s.id = x.subscription_id offset 0) s
  where s.tax_inclusive_ppm <> x.ppm;
  if v_ids is null then
    return null;
  end if;
  update billing.subscriptions s set tax_inclusive_ppm = u.ppm
  from unnest(v_communities, v_ids, v_ppms) as u(community_id, id, ppm)
  where s.community_id = u.community_id and s.id = u.id;
  return null;
end
$$;

-- ---- the tax settings (GET /v1/tax-settings; the dashboard's Settings page) --------------------
create or replace function billing.tax_rate_json(p_r billing.tax_rates) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_r.id, 'country', p_r.country, 'name', p_r.name, 'rate_ppm', p_r.rate_ppm,
    'inclusive', p_r.inclusive, 'active', p_r.active, 'updated_at', billing.iso(p_r.updated_at))
$$;

-- What the community's invoices say of it and how they are taxed: the seller (the
-- community's legal fields), its tax rates by country, and whether Stripe computes the
-- tax of its Stripe checkouts (payment_provider.automatic_tax).
create or replace function billing_api.tax_settings_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_com billing.communities;
begin
  select * into v_com from billing.communities c where c.id = billing.current_community_id();
  return jsonb_build_object(
    'seller', jsonb_build_object('name', v_com.name, 'legal_name', v_com.legal_name,
      'address_lines', to_jsonb(coalesce(v_com.address_lines, '{}'::text[])), 'country', v_com.country, 'tax_id', v_com.tax_id,
      'eu_vat_id_valid', case when billing.eu_member(v_com.country) then billing.eu_vat_id_valid(v_com.country, v_com.tax_id) end),
    'rates', coalesce((select jsonb_agg(billing.tax_rate_json(r) order by r.country) from billing.tax_rates r
      where r.community_id = v_com.id), '[]'),
    'stripe_automatic_tax', v_com.payment_provider = 'stripe' and coalesce((v_com.payment_config->>'automatic_tax')::boolean, false));
end
$$;

-- ---- grants (execute is opt-in: 00-foundation.sql) --------------------------------------------
-- The API role reads invoices (their CHECK constraints), previews a checkout's tax
-- (billing.checkout_json) and reads the settings; writing invoices stays owner-only.
grant execute on function billing.invoice_tax_lines_valid(jsonb) to billing_api;

grant execute on function billing.invoice_tax_sum(jsonb, boolean) to billing_api;

grant execute on function billing.invoice_tax_inclusive_ppm(jsonb) to billing_api;

grant execute on function billing.eu_member(text) to billing_api;

grant execute on function billing.eu_vat_id_valid(text, text) to billing_api;

grant execute on function billing.reverse_charge_applies(text, text, text) to billing_api;

grant execute on function billing.reverse_charge_note() to billing_api;

grant execute on function billing.member_billing(text, text) to billing_api;

grant execute on function billing.invoice_tax(text, jsonb, jsonb, jsonb) to billing_api;

grant execute on function billing.tax_rate_json(billing.tax_rates) to billing_api;

grant execute on function billing_api.tax_settings_get(jsonb) to billing_api;

-- The inclusive tax rate (parts per million) its last invoice charged: the tax inside
-- price_cents, which its MRR leaves out (analytics.subscription_mrr; docs/decisions/tax.md).
-- 0 when its tax is added on top, reverse charged or none. Kept by the invoices'
-- _550_subscription_tax trigger (functions/46-tax.sql).
alter table billing.subscriptions add column if not exists tax_inclusive_ppm integer not null default 0;

alter table billing.subscriptions drop constraint if exists subscriptions_tax_inclusive_ppm_check;

alter table billing.subscriptions add constraint subscriptions_tax_inclusive_ppm_check check (tax_inclusive_ppm between 0 and 1000000);

-- Tax (issue 30 item 5; docs/decisions/tax.md), written with the invoice by
-- billing.invoice_open / billing.renew_batch from billing.invoice_tax (functions/46-tax.sql)
-- and kept with its lines: tax_lines [{name, country, rate_ppm, inclusive, taxable_cents,
-- amount_cents}] (an inclusive one is part of the lines' amounts, an exclusive one is
-- added to the total), tax_cents their sum; tax_country the country whose rate applied;
-- reverse_charge an EU business buyer's (no tax, the legal mention printed). The
-- parties as the tax was computed with them: the buyer's billing details and the
-- seller's country and tax id (the PDF prints them; JSON shows countries and tax ids only).
alter table billing.invoices add column if not exists tax_lines jsonb not null default '[]';

alter table billing.invoices add column if not exists tax_cents bigint not null default 0;

alter table billing.invoices add column if not exists tax_country text;

alter table billing.invoices add column if not exists reverse_charge boolean not null default false;

alter table billing.invoices add column if not exists buyer_name text;

alter table billing.invoices add column if not exists buyer_address_lines text[];

alter table billing.invoices add column if not exists buyer_country text;

alter table billing.invoices add column if not exists buyer_tax_id text;

alter table billing.invoices add column if not exists seller_country text;

alter table billing.invoices add column if not exists seller_tax_id text;

alter table billing.invoices drop constraint if exists invoices_tax_lines_valid;

alter table billing.invoices add constraint invoices_tax_lines_valid check (billing.invoice_tax_lines_valid(tax_lines));

-- The tax is its lines; the total adds the exclusive ones (an inclusive tax is inside
-- the lines already); a reverse-charged invoice carries none.
alter table billing.invoices drop constraint if exists invoices_tax_is_lines;

alter table billing.invoices add constraint invoices_tax_is_lines check (tax_cents = billing.invoice_tax_sum(tax_lines, null));

alter table billing.invoices drop constraint if exists invoices_total;

alter table billing.invoices add constraint invoices_total
  check (total_cents = subtotal_cents - discount_cents + billing.invoice_tax_sum(tax_lines, false));

alter table billing.invoices drop constraint if exists invoices_reverse_charge_untaxed;

alter table billing.invoices add constraint invoices_reverse_charge_untaxed check (not reverse_charge or tax_cents = 0);

alter table billing.invoices drop constraint if exists invoices_parties_valid;

alter table billing.invoices add constraint invoices_parties_valid check (
  (tax_country is null or tax_country ~ '^[A-Z]{2}$')
  and (buyer_country is null or buyer_country ~ '^[A-Z]{2}$')
  and (seller_country is null or seller_country ~ '^[A-Z]{2}$'));

-- (from 46-tax.sql) The inclusive tax rate a subscription's last invoice charged is kept
-- on the subscription (tax_inclusive_ppm), so its MRR excludes the tax inside its price.
drop trigger if exists _550_subscription_tax on billing.invoices;

create trigger _550_subscription_tax after insert on billing.invoices
  referencing new table as new_rows
  for each statement execute function billing.tg_invoices__subscription_tax();

-- The tax it credits (issue 30 item 5): the invoice's tax in proportion to what was
-- refunded, rounded so the credit notes of a fully refunded invoice add up to its tax
-- exactly (billing.invoice_record_refund).
alter table billing.credit_notes add column if not exists tax_cents bigint not null default 0;

alter table billing.credit_notes drop constraint if exists credit_notes_tax_at_most_amount;

alter table billing.credit_notes add constraint credit_notes_tax_at_most_amount check (tax_cents between 0 and amount_cents);

-- ---- invoices: tax in their JSON, their writing and their PDF (functions/46-*.sql) -----------------

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
      or (new.buyer_name, new.buyer_address_lines, new.buyer_country, new.buyer_tax_id, new.seller_country, new.seller_tax_id)
         is distinct from (old.buyer_name, old.buyer_address_lines, old.buyer_country, old.buyer_tax_id, old.seller_country, old.seller_tax_id)) then
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

-- A credit note as its invoice lists it (billing.invoices.credit_notes).
create or replace function billing.credit_note_json(p_cn billing.credit_notes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_cn.id, 'number', p_cn.number, 'refund_id', p_cn.refund_id,
    'amount_cents', p_cn.amount_cents, 'tax_cents', p_cn.tax_cents, 'created_at', billing.iso(p_cn.created_at))
$$;

create or replace function billing.invoice_json(p_inv billing.invoices) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_inv.id,
    'number', p_inv.number,
    'status', p_inv.status,
    'billing_reason', p_inv.billing_reason,
    'member_id', p_inv.member_id,
    'subscription_id', p_inv.subscription_id,
    'purchase_id', p_inv.purchase_id,
    'currency', p_inv.currency,
    'subtotal_cents', p_inv.subtotal_cents,
    'discount_cents', p_inv.discount_cents,
    'total_cents', p_inv.total_cents,
    'amount_paid_cents', p_inv.amount_paid_cents,
    'amount_refunded_cents', p_inv.amount_refunded_cents,
    'lines', p_inv.lines,
    'period_start', billing.iso(p_inv.period_start),
    'period_end', billing.iso(p_inv.period_end),
    'attempt_count', p_inv.attempt_count,
    'next_attempt_at', billing.iso(p_inv.next_attempt_at),
    'paid_at', billing.iso(p_inv.paid_at),
    'created_at', billing.iso(p_inv.created_at),
    'dispute', p_inv.dispute,
    'credit_notes', p_inv.credit_notes,
    -- tax (issue 30 item 5; docs/decisions/tax.md): the buyer's name and address stay
    -- out (personal data, in events too); the PDF prints them.
    'tax_cents', p_inv.tax_cents,
    'total_excluding_tax_cents', p_inv.total_cents - p_inv.tax_cents,
    'tax_lines', p_inv.tax_lines,
    'tax_country', p_inv.tax_country,
    'reverse_charge', p_inv.reverse_charge,
    'tax_note', case when p_inv.reverse_charge then billing.reverse_charge_note() end,
    'buyer_country', p_inv.buyer_country,
    'buyer_tax_id', p_inv.buyer_tax_id,
    'seller_country', p_inv.seller_country,
    'seller_tax_id', p_inv.seller_tax_id)
$$;

-- Writes a finalized (open) invoice from its lines: the sums follow from the lines, the
-- tax from billing.invoice_tax (the buyer's billing details as the member holds them now;
-- p_tax: a provider's own tax, as it charged it), the total from both.
drop function if exists billing.invoice_open(text, text, text, text, text, jsonb, timestamptz, timestamptz, text, timestamptz, text, text);

create or replace function billing.invoice_open(p_sub_id text, p_pur_id text, p_member_id text, p_reason text,
  p_currency text, p_lines jsonb, p_start timestamptz, p_end timestamptz, p_provider text, p_at timestamptz,
  p_checkout_id text default null, p_provider_ref text default null, p_tax jsonb default null)
  returns billing.invoices language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_community text := billing.current_community_id();
  v_subtotal bigint := billing.invoice_lines_sum(p_lines, array['plan', 'proration']);
  v_discount bigint := -billing.invoice_lines_sum(p_lines, array['discount']);
  v_tax jsonb := billing.invoice_tax(v_community, billing.member_billing(v_community, p_member_id), p_lines, p_tax);
begin
  insert into billing.invoices (community_id, member_id, subscription_id, purchase_id, checkout_id, status,
    billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, period_start, period_end,
    provider, provider_ref, created_at, tax_lines, tax_cents, tax_country, reverse_charge,
    buyer_name, buyer_address_lines, buyer_country, buyer_tax_id, seller_country, seller_tax_id)
  values (v_community, p_member_id, p_sub_id, p_pur_id, p_checkout_id, 'open', p_reason,
    p_currency, p_lines, v_subtotal, v_discount, v_subtotal - v_discount + (v_tax->>'tax_exclusive_cents')::bigint,
    p_start, p_end, p_provider, p_provider_ref, p_at, v_tax->'tax_lines', (v_tax->>'tax_cents')::bigint,
    v_tax->>'tax_country', (v_tax->>'reverse_charge')::boolean, v_tax->>'buyer_name',
    nullif(array(select jsonb_array_elements_text(v_tax->'buyer_address_lines')), '{}'), v_tax->>'buyer_country',
    v_tax->>'buyer_tax_id', v_tax->>'seller_country', v_tax->>'seller_tax_id')
  returning * into v_inv;
  return v_inv;
end
$$;

-- What the invoice's PDF prints (GET /v1/invoices/{id}/pdf; docs/decisions/invoice-pdf.md):
-- the invoice (with its tax lines and the reverse charge's mention), the seller (the
-- community's legal fields; its country and tax id as the invoice was taxed with them),
-- the buyer (the member as the API shows it, with the billing details the invoice was
-- taxed for; an invoice from before tax existed shows the member's current ones) and how
-- it was paid. RLS and the portal's member_fence keep it to the caller's community and
-- member: another's invoice is a 404.
create or replace function billing_api.invoices_document(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
  v_com billing.communities;
  v_now jsonb;
  v_taxed boolean;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  select * into v_com from billing.communities c where c.id = v_inv.community_id;
  v_taxed := v_inv.buyer_name is not null or v_inv.buyer_address_lines is not null or v_inv.buyer_country is not null
    or v_inv.buyer_tax_id is not null or v_inv.seller_country is not null or v_inv.seller_tax_id is not null;
  v_now := billing.member_billing(v_inv.community_id, v_inv.member_id);
  return jsonb_build_object(
    'invoice', billing.invoice_json(v_inv),
    'seller', jsonb_build_object(
      'name', v_com.name,
      'legal_name', v_com.legal_name,
      'address_lines', to_jsonb(coalesce(v_com.address_lines, '{}'::text[])),
      'country', case when v_taxed then v_inv.seller_country else v_com.country end,
      'tax_id', case when v_taxed then v_inv.seller_tax_id else v_com.tax_id end),
    'buyer', billing.member_json(v_inv.community_id, v_inv.member_id) || case when v_taxed
      then jsonb_build_object('name', v_inv.buyer_name, 'address_lines', to_jsonb(coalesce(v_inv.buyer_address_lines, '{}'::text[])),
        'country', v_inv.buyer_country, 'tax_id', v_inv.buyer_tax_id)
      else v_now end,
    'payment_method', case when v_inv.status = 'paid' then v_inv.provider end,
    'tax_lines', v_inv.tax_lines);
end
$$;

-- Renews, in a few statements for the whole set, those of p_ids (subscriptions of the
-- current community, locked by the caller) whose next step at p_now is a renewal that
-- is paid and leaves them current: active or trialing sandbox subscriptions whose
-- period ended, whose card does not decline (or the invoice is free) and whose new
-- period ends after p_now. Each gets what billing.subscription_advance would give it:
-- one invoice for the new period (billing.renewal_terms), paid by one succeeded
-- attempt at the period end, then the subscription moved on; the statement-level
-- triggers write invoice.created, invoice.paid, subscription.updated and the ledger's
-- events, in the transaction. Returns the ids it renewed; the others are left to
-- billing.subscription_advance (declines and dunning, cancellations, resumes,
-- periods more than one interval behind).
create or replace function billing.renew_batch(p_ids text[], p_now timestamptz) returns text[]
  language plpgsql volatile
as $$
declare
  v_community text := billing.current_community_id();
  v_subs text[];
  v_ctids tid[];
  v_n integer;
  v_done integer;
begin
  -- The batch's terms, in a table of the session (emptied at commit).
  if to_regclass('pg_temp.renew_batch_terms') is null then
    create temporary table renew_batch_terms (
      subscription_id text collate "C" primary key, member_id text collate "C", at timestamptz, provider text,
      t billing.renewal_terms, subtotal_cents bigint, discount_cents bigint, invoice_id text collate "C",
      tax jsonb, total_cents bigint
    ) on commit delete rows;
  end if;
  -- Each renewal's tax (billing.invoice_tax, as billing.invoice_open computes it) and
  -- total: added to the table a session made with an earlier version of this function.
  if not exists (select 1 from pg_attribute a where a.attrelid = 'pg_temp.renew_batch_terms'::regclass
                 and a.attname = 'tax' and not a.attisdropped) then
    alter table renew_batch_terms add column tax jsonb, add column total_cents bigint;
  end if;
  delete from renew_batch_terms;
  insert into renew_batch_terms (subscription_id, member_id, at, provider, t, subtotal_cents, discount_cents, tax, total_cents)
  select r.id, r.member_id, r.current_period_end, r.provider, r.t, r.subtotal, r.discount, r.tax,
    r.subtotal - r.discount + (r.tax->>'tax_exclusive_cents')::bigint
  from (
    select r.id, r.member_id, r.current_period_end, r.provider, r.t,
      billing.invoice_lines_sum((r.t).lines, array['plan', 'proration']) as subtotal,
      -billing.invoice_lines_sum((r.t).lines, array['discount']) as discount,
      billing.invoice_tax(v_community, billing.member_billing(v_community, r.member_id), (r.t).lines) as tax
    -- One index probe per id (the lateral subquery runs per element): a scan of the
    -- community's subscriptions per batch made a storm of n renewals cost n^2.
    from unnest(p_ids) x(id)
    cross join lateral (select s.*, billing.renewal_terms(s, s.current_period_end) as t
          from billing.subscriptions s
          where s.community_id = v_community and s.id = x.id and s.provider = 'sandbox'
            and s.status in ('active', 'trialing') and s.current_period_end <= p_now
          offset 0) r
    where (r.t).period_end > p_now
      and (billing.invoice_lines_sum((r.t).lines, null) = 0
           or not coalesce((select c.declines from billing.sandbox_cards c
                            where c.community_id = v_community and c.subscription_id = r.id), false))) r;
  -- Row counts for the planner (a temporary table has no statistics of its own).
  analyze renew_batch_terms;
  -- The invoices (billing.invoice_open), then their payments (billing.invoice_mark_paid).
  -- The invoices written paid, with their one succeeded attempt: what billing.invoice_open
  -- then billing.invoice_mark_paid write, in one insert each (the insert trigger writes
  -- invoice.created and invoice.paid as those two steps would; a second pass over every
  -- invoice to mark it paid was a fifth of a storm's time).
  -- Their numbers (docs/decisions/invoice-numbers.md) taken as one block per series, in
  -- subscription order: numbered a row at a time by _050_number, the counter row got a
  -- new version per invoice in one transaction, and each step walked them all (n^2).
  with blocks as (
    insert into billing_private.number_counters as k (community_id, kind, series, last_number)
    select v_community, 'invoice', billing_private.number_series(v_community, b.at), count(*)
    from renew_batch_terms b
    group by 3
    on conflict (community_id, kind, series) do update set last_number = k.last_number + excluded.last_number
    returning k.series, k.last_number
  ), numbered as (
    select b.*, billing_private.number_text(x.series, x.last_number - count(*) over (partition by x.series)
      + row_number() over (partition by x.series order by b.subscription_id)) as number
    from renew_batch_terms b
    join blocks x on x.series = billing_private.number_series(v_community, b.at)
  ), ins as (
    insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
      subtotal_cents, discount_cents, total_cents, amount_paid_cents, attempt_count, paid_at,
      period_start, period_end, provider, created_at, number, tax_lines, tax_cents, tax_country, reverse_charge,
      buyer_name, buyer_address_lines, buyer_country, buyer_tax_id, seller_country, seller_tax_id)
    select v_community, b.member_id, b.subscription_id, 'paid', 'subscription_cycle', (b.t).currency, (b.t).lines,
      b.subtotal_cents, b.discount_cents, b.total_cents, b.total_cents, 1, b.at,
      b.at, (b.t).period_end, b.provider, b.at, b.number, b.tax->'tax_lines', (b.tax->>'tax_cents')::bigint,
      b.tax->>'tax_country', (b.tax->>'reverse_charge')::boolean, b.tax->>'buyer_name',
      nullif(array(select jsonb_array_elements_text(b.tax->'buyer_address_lines')), '{}'), b.tax->>'buyer_country',
      b.tax->>'buyer_tax_id', b.tax->>'seller_country', b.tax->>'seller_tax_id'
    from numbered b
    order by b.subscription_id
    returning id, subscription_id
  )
  update renew_batch_terms b set invoice_id = ins.id from ins where ins.subscription_id = b.subscription_id;
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, provider_ref, attempted_at)
  select v_community, b.invoice_id, 'succeeded', b.total_cents, b.provider,
    'sandbox_ch_' || substr(md5(b.invoice_id || b.at::text), 1, 16), b.at
  from renew_batch_terms b
  order by b.invoice_id;
  -- The subscriptions found by their keys, one index probe each, and updated by their
  -- ctid alone (a TID scan): joined by the planner they were a scan of every
  -- subscription of the community per batch, on statistics a storm makes stale, so a
  -- storm of n renewals cost n^2. The ctids are read just before the statement, of rows
  -- the caller locked, and the count is checked: a ctid whose row changed since would
  -- find nothing and fail the batch, never touch another row.
  select array_agg(p.ctid), count(*), array_agg(b.subscription_id order by b.subscription_id) into v_ctids, v_n, v_subs
  from renew_batch_terms b
  cross join lateral (select s.ctid from billing.subscriptions s
                      where s.community_id = v_community and s.id = b.subscription_id offset 0) p;
  update billing.subscriptions s set
    status = 'active', plan_id = (b.t).plan_id, scheduled_plan_id = null, scheduled_at = null,
    price_cents = (b.t).price_cents, price_migration_id = (b.t).price_migration_id,
    current_period_start = b.at, current_period_end = (b.t).period_end, billing_anchor = (b.t).anchor,
    credit_cents = s.credit_cents - greatest((b.t).credit_cents, 0),
    trial_end = case when s.status = 'trialing' then coalesce(s.trial_end, b.at) else s.trial_end end,
    updated_at = now()
  from renew_batch_terms b
  where s.ctid = any (v_ctids) and s.id = b.subscription_id;
  get diagnostics v_done = row_count;
  if v_done <> v_n then
    raise exception 'renew_batch: % of % subscriptions renewed', v_done, v_n;
  end if;
  return coalesce(v_subs, '{}');
end
$$;

-- Applies a Stripe invoice (already mapped to our terms by the adapter) to the
-- invoice with that provider_ref, creating it on first sight. p_state:
--   provider_ref, subscription_ref, status, billing_reason, currency, lines [{type,
--   description, amount_cents, period_start, period_end}], total_cents,
--   attempt_count, next_attempt_at, paid_at, created_at, period_start, period_end,
--   provider_updated_at, failed (true for invoice.payment_failed), payment_ref, tax
--   ({tax_lines, reverse_charge, buyer_country, buyer_tax_id}: the tax Stripe charged,
--   taken as it is by billing.invoice_tax; none when absent).
-- A finalized invoice keeps its lines; a paid, void or uncollectible one keeps its
-- status; a state older than the last one applied changes nothing. Returns the
-- invoice id, or null when no subscription has that subscription_ref yet.
create or replace function billing.apply_provider_invoice(p_state jsonb) returns text
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_inv billing.invoices;
  v_at timestamptz := (p_state->>'provider_updated_at')::timestamptz;
  v_status text := p_state->>'status';
  v_lines jsonb := coalesce(p_state->'lines', '[]');
  v_gap bigint;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_state->>'subscription_ref';
  if v_sub.id is null then
    return null;
  end if;
  select * into v_inv from billing.invoices i
  where i.community_id = v_sub.community_id and i.provider_ref = p_state->>'provider_ref' for update;
  if v_inv.id is null then
    -- What the lines and the tax Stripe added do not explain (Stripe's discounts, other
    -- charges) becomes one line, so the invoice always adds up to Stripe's total.
    v_gap := (p_state->>'total_cents')::bigint - billing.invoice_lines_sum(v_lines, null)
      - billing.invoice_tax_sum(coalesce(p_state->'tax'->'tax_lines', '[]'), false);
    if v_gap < 0 then
      v_lines := v_lines || jsonb_build_object('type', 'discount', 'description', 'Discount', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    elsif v_gap > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'plan', 'description', 'Other charges', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id,
      coalesce(nullif(p_state->>'billing_reason', ''), 'subscription_cycle'), p_state->>'currency', v_lines,
      (p_state->>'period_start')::timestamptz, (p_state->>'period_end')::timestamptz, 'stripe',
      coalesce((p_state->>'created_at')::timestamptz, v_at), null, p_state->>'provider_ref',
      coalesce(p_state->'tax', '{"tax_lines": []}'));
    update billing.invoices i set provider_updated_at = v_at where i.community_id = v_inv.community_id and i.id = v_inv.id
    returning * into v_inv;
  elsif v_inv.status in ('paid', 'void', 'uncollectible')
        or (v_inv.provider_updated_at is not null and v_at < v_inv.provider_updated_at) then
    return v_inv.id;
  end if;
  if v_status = 'paid' then
    perform billing.invoice_mark_paid(v_inv, coalesce((p_state->>'paid_at')::timestamptz, v_at), p_state->>'payment_ref');
  elsif coalesce((p_state->>'failed')::boolean, false) then
    perform billing.invoice_mark_failed(v_inv, v_at, 'The payment failed (Stripe).', (p_state->>'next_attempt_at')::timestamptz);
  elsif v_status in ('void', 'uncollectible') then
    update billing.invoices i set status = v_status, next_attempt_at = null
    where i.community_id = v_inv.community_id and i.id = v_inv.id;
  elsif p_state ? 'next_attempt_at' then
    update billing.invoices i set next_attempt_at = (p_state->>'next_attempt_at')::timestamptz
    where i.community_id = v_inv.community_id and i.id = v_inv.id
      and i.next_attempt_at is distinct from (p_state->>'next_attempt_at')::timestamptz;
  end if;
  update billing.invoices i set provider_updated_at = greatest(i.provider_updated_at, v_at)
  where i.community_id = v_inv.community_id and i.id = v_inv.id;
  return v_inv.id;
end
$$;

-- Records a refund of a paid invoice (all that is left to refund when p_amount is
-- null): amount_refunded_cents never exceeds amount_paid_cents (a constraint), and a
-- provider refund already recorded (same provider_ref) is not counted twice. With
-- p_revoke the covered subscription or purchase ends now. Every refund gets its credit
-- note (billing.credit_notes), numbered in the community's credit note sequence
-- (CN-<series>-NNNNNN, docs/decisions/invoice-numbers.md) and listed on the invoice.
-- It credits the invoice's tax in proportion (docs/decisions/tax.md): what the refunds
-- so far credit is the tax times the share refunded, rounded, and each credit note
-- carries its step, so a refund in parts credits in all exactly the tax of a full one.
-- Returns {invoice, refund}; the refund carries credit_note_number.
create or replace function billing.invoice_record_refund(p_invoice_id text, p_amount bigint, p_revoke boolean,
  p_provider_ref text default null) returns jsonb
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_re billing.refunds;
  v_cn billing.credit_notes;
  v_series text;
  v_left bigint;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_invoice_id for update;
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || coalesce(p_invoice_id, '') || '.');
  end if;
  if p_provider_ref is not null then
    select * into v_re from billing.refunds r where r.community_id = v_inv.community_id and r.provider_ref = p_provider_ref;
    if v_re.id is not null then
      select * into v_cn from billing.credit_notes cn where cn.community_id = v_re.community_id and cn.refund_id = v_re.id;
      return jsonb_build_object('invoice', billing.invoice_json(v_inv),
        'refund', billing.refund_json(v_re) || jsonb_build_object('credit_note_number', v_cn.number), 'duplicate', true);
    end if;
  end if;
  if v_inv.status <> 'paid' then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is ' || v_inv.status || ': only a paid invoice can be refunded.');
  end if;
  v_left := v_inv.amount_paid_cents - v_inv.amount_refunded_cents;
  if v_left <= 0 then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is already fully refunded.');
  elsif p_amount is not null and (p_amount <= 0 or p_amount > v_left) then
    perform billing.raise('BL422', 'amount_cents must be between 1 and ' || v_left || ', what is left to refund on invoice '
      || v_inv.id || '.', 'amount_cents');
  end if;
  insert into billing.refunds (community_id, invoice_id, amount_cents, revoke_access, provider, provider_ref, created_at)
  values (v_inv.community_id, v_inv.id, coalesce(p_amount, v_left), coalesce(p_revoke, false), v_inv.provider, p_provider_ref, billing.now())
  returning * into v_re;
  v_series := 'CN-' || billing_private.number_series(v_re.community_id, v_re.created_at);
  insert into billing.credit_notes (community_id, invoice_id, refund_id, number, amount_cents, currency, created_at, tax_cents)
  values (v_re.community_id, v_inv.id, v_re.id,
    billing_private.number_text(v_series, billing_private.number_next(v_re.community_id, 'credit_note', v_series)),
    v_re.amount_cents, v_inv.currency, v_re.created_at,
    round(v_inv.tax_cents::numeric * (v_inv.amount_refunded_cents + v_re.amount_cents) / v_inv.amount_paid_cents)
      - round(v_inv.tax_cents::numeric * v_inv.amount_refunded_cents / v_inv.amount_paid_cents))
  returning * into v_cn;
  update billing.invoices i set amount_refunded_cents = i.amount_refunded_cents + v_re.amount_cents,
    credit_notes = i.credit_notes || jsonb_build_array(billing.credit_note_json(v_cn))
  where i.community_id = v_inv.community_id and i.id = v_inv.id returning * into v_inv;
  if coalesce(p_revoke, false) then
    perform billing.invoice_end_access(v_inv, 'refunded');
  end if;
  perform billing.emit_event(v_inv.community_id, 'invoice.refunded', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re) || jsonb_build_object('credit_note_number', v_cn.number)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv),
    'refund', billing.refund_json(v_re) || jsonb_build_object('credit_note_number', v_cn.number), 'duplicate', false);
end
$$;

-- What switching a subscription to p_args.plan_id would do now: an immediate switch's
-- proration (billing.switch_proration, the rule the switch applies) with its tax
-- (billing.invoice_tax, as its invoice will compute it: due_now_cents includes a tax
-- added on top) or, for a downgrade, the date it is scheduled for. 409 / 422 as the
-- switch itself (billing.switch_validate).
create or replace function billing_api.subscription_switch_preview(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_group text;
  v_q record;
  v_tax jsonb;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_args->>'id';
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_args->>'id', '') || '.');
  end if;
  v_group := billing.switch_validate(v_sub, p_args->>'plan_id');
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_args->>'plan_id';
  if v_group = 'downgrades' then
    return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'period_end',
      'applies_at', billing.iso(v_sub.current_period_end), 'currency', v_new.currency,
      'charge_cents', 0, 'credit_cents', 0, 'tax_cents', 0, 'tax_lines', '[]'::jsonb, 'due_now_cents', 0,
      'period_end', billing.iso(v_sub.current_period_end));
  end if;
  select * into v_q from billing.switch_proration(v_sub, v_old, v_new, billing.now());
  v_tax := billing.invoice_tax(v_sub.community_id, billing.member_billing(v_sub.community_id, v_sub.member_id),
    jsonb_build_array(jsonb_build_object('type', 'proration', 'description', 'preview', 'amount_cents', v_q.charge_cents - v_q.applied_cents)));
  return jsonb_build_object('subscription_id', v_sub.id, 'plan_id', v_new.id, 'applies', 'now',
    'applies_at', billing.iso(billing.now()), 'currency', v_new.currency,
    'charge_cents', v_q.charge_cents, 'credit_cents', v_q.applied_cents,
    'tax_cents', (v_tax->>'tax_cents')::bigint, 'tax_lines', v_tax->'tax_lines',
    'due_now_cents', v_q.charge_cents - v_q.applied_cents + (v_tax->>'tax_exclusive_cents')::bigint, 'period_end', billing.iso(v_q.period_end));
end
$$;

-- ---- checkout: the buyer's billing details and the tax preview (functions/80-checkout.sql) -----------

-- Input: tier_id, plan_id?, subject, client_reference_id?, return_url?, discount_code?,
-- and from the handler provider_ready (false for a stripe community without keys).
-- Records an open checkout; the handler then asks the provider for its url.
create or replace function billing_api.checkout_create(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
  v_tier billing.tiers;
  v_plan billing.plans;
  v_provider text;
  v_subject jsonb := p_args->'subject';
  v_kind text;
  v_member text;
  v_disc record;
  v_cs billing.checkout_sessions;
  v_token text := billing.random_token();
  v_plans integer;
  v_details text;
begin
  select * into v_tier from billing.tiers t where t.id = p_args->>'tier_id' and t.active;
  if v_tier.id is null then
    perform billing.raise('BL404', 'No active tier ' || (p_args->>'tier_id') || '.');
  end if;
  select c.payment_provider into v_provider from billing.communities c where c.id = v_cid;
  if v_provider is null or not coalesce((p_args->>'provider_ready')::boolean, true) then
    raise exception using errcode = 'BLPCI', message = 'This community has no active payment provider.';
  end if;
  select count(*) into v_plans from billing.plans p where p.tier_id = v_tier.id and p.active;
  if p_args->>'plan_id' is not null then
    select * into v_plan from billing.plans p where p.id = p_args->>'plan_id' and p.tier_id = v_tier.id and p.active;
    if v_plan.id is null then
      perform billing.raise('BL422', 'plan_id is not an active plan of tier ' || v_tier.id || '.', 'plan_id');
    end if;
  elsif v_plans > 1 then
    raise exception using errcode = 'BLPRQ', message = 'This tier has several active plans: send plan_id.', detail = 'plan_id';
  elsif v_plans = 0 then
    perform billing.raise('BL404', 'Tier ' || v_tier.id || ' has no active plan.');
  else
    select * into v_plan from billing.plans p where p.tier_id = v_tier.id and p.active;
  end if;

  v_kind := case when v_subject ? 'member_id' then 'member' when v_subject ? 'external' then 'external' else 'platform' end;
  if v_kind = 'platform' and not exists (select 1 from billing.platform_configs pc where pc.platform = v_subject->>'platform') then
    raise exception using errcode = 'BLPNC', message = 'No ' || (v_subject->>'platform') || ' platform is connected to this community.',
      detail = 'subject.platform';
  end if;
  if p_args->>'return_url' is not null and v_kind <> 'external' then
    perform billing.raise('BL422', 'return_url is only allowed for operator (external) subjects.', 'return_url');
  end if;

  v_member := billing.checkout_member(v_subject);
  perform billing.check_eligible(v_member, v_tier, v_plan);

  if p_args->>'customer_email' is not null and not billing.email_valid(btrim(p_args->>'customer_email')) then
    perform billing.raise('BL422', 'customer_email is not a valid email address.', 'customer_email');
  end if;
  v_details := billing.checkout_details_problem(p_args);
  if v_details is not null then
    perform billing.raise('BL422', v_details, split_part(v_details, ':', 1));
  end if;
  insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency,
    client_reference_id, return_url, subject_kind, provider, expires_at, access_token_sha256, customer_email,
    customer_name, customer_address_lines, customer_country, customer_tax_id)
  values (v_cid, v_member, v_tier.id, v_plan.id, v_plan.amount_cents, v_plan.currency,
    p_args->>'client_reference_id', p_args->>'return_url', v_kind, v_provider,
    billing.now() + billing.checkout_lifetime(), sha256(convert_to(v_token, 'UTF8')),
    nullif(btrim(p_args->>'customer_email'), ''),
    nullif(btrim(p_args->>'customer_name'), ''),
    nullif(array(select btrim(l) from jsonb_array_elements_text(coalesce(p_args->'customer_address_lines', '[]')) l
                 where btrim(l) <> ''), '{}'),
    upper(nullif(btrim(p_args->>'customer_country'), '')),
    nullif(btrim(p_args->>'customer_tax_id'), ''))
  returning * into v_cs;

  if p_args->>'discount_code' is not null then
    select * into v_disc from billing.checkout_discount(p_args->>'discount_code', v_member, v_tier.id, v_plan);
    update billing.checkout_sessions set discount_id = v_disc.discount_id, discount_cents = v_disc.discount_cents
    where id = v_cs.id returning * into v_cs;
    insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status)
    values (v_cid, v_disc.discount_id, v_cs.id, v_member, 'pending');
  end if;

  -- The clear token leaves the database once, here, for the provider to build the url.
  return billing.checkout_json(v_cs) || jsonb_build_object('access_token', v_token);
end
$$;

-- What is wrong with a checkout's billing details (p: customer_name,
-- customer_address_lines, customer_country, customer_tax_id), as "field: problem", or
-- null. The rules of the member's billing details (members_billing_valid), checked
-- first so the problem names the field.
create or replace function billing.checkout_details_problem(p jsonb) returns text
  language plpgsql immutable
as $$
begin
  if length(btrim(p->>'customer_name')) > 200 then
    return 'customer_name: expected at most 200 characters.';
  elsif p ? 'customer_address_lines' and jsonb_typeof(p->'customer_address_lines') = 'array' and (
      jsonb_array_length(p->'customer_address_lines') > 6
      or (select coalesce(sum(length(l)), 0) from jsonb_array_elements_text(p->'customer_address_lines') l) > 600) then
    return 'customer_address_lines: expected at most 6 lines of at most 600 characters in all.';
  elsif nullif(btrim(p->>'customer_country'), '') is not null and upper(btrim(p->>'customer_country')) !~ '^[A-Z]{2}$' then
    return 'customer_country: expected a two-letter ISO 3166-1 country code, e.g. "DE".';
  elsif length(btrim(p->>'customer_tax_id')) > 50 then
    return 'customer_tax_id: expected at most 50 characters.';
  end if;
  return null;
end
$$;

-- The sandbox checkout page's billing details form: the buyer's name, address lines,
-- country and tax id for this checkout (each empty one cleared), which decide its tax
-- (shown on the page at once) and become the member's when it is paid. Owner only: the
-- page runs in the checkout's community. BL422 names the field.
create or replace function billing.checkout_set_details(p_checkout_id text, p_details jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  v_cs billing.checkout_sessions;
  v_problem text := billing.checkout_details_problem(p_details);
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || coalesce(p_checkout_id, '') || '.');
  elsif v_cs.status <> 'open' or v_cs.expires_at <= billing.now() then
    perform billing.raise('BL409', 'This checkout is no longer open.');
  elsif v_problem is not null then
    perform billing.raise('BL422', v_problem, split_part(v_problem, ':', 1));
  end if;
  update billing.checkout_sessions cs set
    customer_name = nullif(btrim(p_details->>'customer_name'), ''),
    customer_address_lines = nullif(array(select btrim(l) from jsonb_array_elements_text(coalesce(p_details->'customer_address_lines', '[]')) l
                                          where btrim(l) <> ''), '{}'),
    customer_country = upper(nullif(btrim(p_details->>'customer_country'), '')),
    customer_tax_id = nullif(btrim(p_details->>'customer_tax_id'), '')
  where cs.community_id = v_cs.community_id and cs.id = v_cs.id returning * into v_cs;
  return billing.checkout_json(v_cs);
end
$$;

-- The billing details a checkout's invoices will be taxed for: those given for the
-- checkout (link or page), else the member's.
create or replace function billing.checkout_billing(p_cs billing.checkout_sessions) returns jsonb
  language plpgsql stable
as $$
begin
  if num_nonnulls(p_cs.customer_name, p_cs.customer_address_lines, p_cs.customer_country, p_cs.customer_tax_id) > 0 then
    return jsonb_build_object('name', p_cs.customer_name,
      'address_lines', to_jsonb(coalesce(p_cs.customer_address_lines, '{}'::text[])),
      'country', p_cs.customer_country, 'tax_id', p_cs.customer_tax_id);
  end if;
  return billing.member_billing(p_cs.community_id, p_cs.member_id);
end
$$;

-- Everything a provider adapter needs to present or pay a checkout. trial_days is the
-- buyer's (billing.member_trial_days): 0 on a tier they have had a trial of.
create or replace function billing.checkout_json(p_cs billing.checkout_sessions) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'checkout_id', p_cs.id, 'member_id', p_cs.member_id, 'status', p_cs.status,
    'provider', p_cs.provider, 'url', p_cs.url,
    'expires_at', billing.iso(p_cs.expires_at), 'expired', p_cs.status = 'expired' or (p_cs.status = 'open' and p_cs.expires_at <= billing.now()),
    'tier_id', t.id, 'tier_name', t.name, 'tier_kind', t.kind,
    'plan_id', p.id, 'plan_name', p.name, 'interval', p.interval,
    'trial_days', billing.member_trial_days(p_cs.community_id, p_cs.member_id, p, p_cs.id),
    'access_days', p.access_days, 'stripe_price_id', p.stripe_price_id,
    'amount_cents', p_cs.amount_cents, 'discount_cents', p_cs.discount_cents, 'currency', p_cs.currency,
    'discount_code', d.code, 'discount', case when d.id is null then null else jsonb_build_object(
      'id', d.id, 'value_type', d.value_type, 'percent_off', d.percent_off, 'amount_off_cents', d.amount_off_cents,
      'duration', d.duration, 'duration_months', d.duration_months) end,
    'client_reference_id', p_cs.client_reference_id, 'return_url', p_cs.return_url,
    'subscription_id', p_cs.subscription_id, 'purchase_id', p_cs.purchase_id,
    -- the sandbox page asks for an email when neither the link nor the member has one
    'needs_email', p_cs.customer_email is null and not exists (select 1 from billing.members m
      where m.community_id = p_cs.community_id and m.id = p_cs.member_id and m.email is not null),
    'customer_email', coalesce((select m.email from billing.members m
      where m.community_id = p_cs.community_id and m.id = p_cs.member_id), p_cs.customer_email),
    -- the billing details its tax follows (the page's form shows them), and the tax of
    -- a charge of the price less its discount (billing.invoice_tax, as its invoices
    -- will compute it): the page shows it on what is due today and at renewal
    'billing_details', b.details,
    'tax', billing.invoice_tax(p_cs.community_id, b.details, jsonb_build_array(jsonb_build_object('type', 'plan',
      'description', 'preview', 'amount_cents', p_cs.amount_cents - p_cs.discount_cents))),
    -- whether the community charges tax at all (an active rate): the page's Tax row
    'taxes', exists (select 1 from billing.tax_rates r where r.community_id = p_cs.community_id and r.active),
    -- Stripe computes the tax (payment_provider.automatic_tax of the catalog file)
    'stripe_automatic_tax', coalesce((select (c.payment_config->>'automatic_tax')::boolean from billing.communities c
      where c.id = p_cs.community_id and c.payment_provider = 'stripe'), false))
  from billing.plans p
  join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
  left join billing.discount_codes d on d.community_id = p_cs.community_id and d.id = p_cs.discount_id
  cross join lateral (select billing.checkout_billing(p_cs) as details) b
  where p.community_id = p_cs.community_id and p.id = p_cs.plan_id
$$;

-- Completes a checkout in the current community: creates the subscription (trialing
-- when the plan has trial days and the member has had no trial on its tier, else
-- active; period from billing.now()) or the
-- purchase (access_expires_at from access_days), marks the checkout completed and
-- redeems its discount. Idempotent: a completed checkout returns the same result.
-- p_details (from a provider): provider_ref, customer_ref, status, period_start,
-- period_end, trial_end, cancel_at, provider_updated_at (ISO), paid (true when the
-- provider has taken the money: no expiry or eligibility check then).
create or replace function billing.complete_checkout(p_checkout_id text, p_details jsonb default '{}')
  returns jsonb language plpgsql volatile
as $$
declare
  v_cs billing.checkout_sessions;
  v_plan billing.plans;
  v_tier billing.tiers;
  v_now timestamptz := billing.now();
  v_paid boolean := coalesce((p_details->>'paid')::boolean, false);
  v_sub billing.subscriptions;
  v_sub_id text;
  v_pur_id text;
  v_trial_end timestamptz;
  v_lines jsonb;
  v_code text;
  v_inv billing.invoices;
begin
  select * into v_cs from billing.checkout_sessions cs
  where cs.community_id = billing.current_community_id() and cs.id = p_checkout_id for update;
  if v_cs.id is null then
    perform billing.raise('BL404', 'No checkout ' || p_checkout_id || '.');
  end if;
  if v_cs.status = 'completed' then
    return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
      'subscription_id', v_cs.subscription_id, 'purchase_id', v_cs.purchase_id, 'already_completed', true);
  end if;
  if not v_paid and (v_cs.status = 'expired' or v_cs.expires_at <= v_now) then
    perform billing.raise('BL409', 'Checkout ' || v_cs.id || ' has expired.');
  end if;
  select * into v_plan from billing.plans p where p.community_id = v_cs.community_id and p.id = v_cs.plan_id;
  select * into v_tier from billing.tiers t where t.community_id = v_cs.community_id and t.id = v_plan.tier_id;
  if not v_paid then
    -- One completion per member at a time: two checkouts of one buyer paid at once
    -- must not both pass the check and both subscribe (found by the concurrent money
    -- property test). The check runs after the lock, so it sees the other's commit.
    perform pg_advisory_xact_lock(hashtextextended(v_cs.community_id || ' member ' || v_cs.member_id, 5));
    perform billing.check_eligible(v_cs.member_id, v_tier, v_plan);
  end if;
  select d.code into v_code from billing.discount_codes d where d.community_id = v_cs.community_id and d.id = v_cs.discount_id;

  -- The buyer's email (the provider's page, else the checkout link's customer_email)
  -- becomes the member's when it has none, before the invoice is paid, so the receipt
  -- (65-mail.sql) has an address. An operator's address is never replaced.
  update billing.members m set email = v_email, updated_at = now()
  from (select coalesce(e.given, v_cs.customer_email) as v_email
        from (select nullif(btrim(p_details->>'customer_email'), '') as given) e) x
  where m.community_id = v_cs.community_id and m.id = v_cs.member_id and m.email is null
    and x.v_email is not null and billing.email_valid(x.v_email);

  -- The buyer's billing details (the provider's page, else those given for the
  -- checkout) become the member's, all four together, before the invoice is taxed: the
  -- last checkout's word is the buyer's current one (docs/decisions/tax.md).
  if num_nonnulls(nullif(p_details->>'customer_name', ''), nullif(p_details->>'customer_country', ''),
                  nullif(p_details->>'customer_tax_id', ''), p_details->'customer_address_lines') > 0 then
    update billing.members m set billing_name = left(nullif(btrim(p_details->>'customer_name'), ''), 200),
      billing_address_lines = nullif(array(select left(btrim(l), 100) from jsonb_array_elements_text(
        case when jsonb_typeof(p_details->'customer_address_lines') = 'array' then p_details->'customer_address_lines' else '[]' end) l
        where btrim(l) <> '' limit 6), '{}'),
      billing_country = case when upper(p_details->>'customer_country') ~ '^[A-Z]{2}$' then upper(p_details->>'customer_country') end,
      billing_tax_id = left(nullif(btrim(p_details->>'customer_tax_id'), ''), 50), updated_at = now()
    where m.community_id = v_cs.community_id and m.id = v_cs.member_id;
  elsif num_nonnulls(v_cs.customer_name, v_cs.customer_address_lines, v_cs.customer_country, v_cs.customer_tax_id) > 0 then
    update billing.members m set billing_name = v_cs.customer_name, billing_address_lines = v_cs.customer_address_lines,
      billing_country = v_cs.customer_country, billing_tax_id = v_cs.customer_tax_id, updated_at = now()
    where m.community_id = v_cs.community_id and m.id = v_cs.member_id
      and (m.billing_name, m.billing_address_lines, m.billing_country, m.billing_tax_id)
        is distinct from (v_cs.customer_name, v_cs.customer_address_lines, v_cs.customer_country, v_cs.customer_tax_id);
  end if;

  if v_plan.interval is not null then
    if p_details->>'provider_ref' is not null then
      select s.id into v_sub_id from billing.subscriptions s
      where s.community_id = v_cs.community_id and s.provider_ref = p_details->>'provider_ref';
    end if;
    if v_sub_id is null then
      v_trial_end := coalesce((p_details->>'trial_end')::timestamptz,
        case when billing.member_trial_days(v_cs.community_id, v_cs.member_id, v_plan) > 0 and p_details->>'status' is null
          then v_now + make_interval(days => v_plan.trial_days) end);
      insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start,
        current_period_end, trial_end, cancel_at, client_reference_id, checkout_id, provider, provider_ref,
        provider_customer_ref, provider_updated_at, billing_anchor, discount_id, created_at, trial_tier_id, price_cents)
      values (v_cs.community_id, v_cs.member_id, v_plan.id,
        coalesce(p_details->>'status', case when v_trial_end is not null then 'trialing' else 'active' end),
        coalesce((p_details->>'period_start')::timestamptz, v_now),
        coalesce((p_details->>'period_end')::timestamptz, v_trial_end, billing.add_utc(v_now, billing.plan_interval(v_plan.interval))),
        v_trial_end, (p_details->>'cancel_at')::timestamptz, v_cs.client_reference_id, v_cs.id, v_cs.provider,
        p_details->>'provider_ref', p_details->>'customer_ref', (p_details->>'provider_updated_at')::timestamptz,
        coalesce(v_trial_end, (p_details->>'period_start')::timestamptz, v_now), v_cs.discount_id, v_now,
        case when v_trial_end is not null then v_plan.tier_id end,
        -- the price its buyer was shown (docs/decisions/price-changes-keep-existing-subscribers.md)
        v_cs.amount_cents)
      returning * into v_sub;
      v_sub_id := v_sub.id;
      if v_cs.provider = 'sandbox' then
        if v_trial_end is not null then
          v_lines := jsonb_build_array(billing.plan_line(v_plan, 0, v_sub.current_period_start, v_trial_end,
            'Trial period for ' || v_tier.name || coalesce(' (' || v_plan.name || ')', '')));
        else
          v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_sub.current_period_start,
            v_sub.current_period_end));
          if v_cs.discount_cents > 0 then
            v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_sub.current_period_start,
              v_sub.current_period_end);
          end if;
        end if;
        v_inv := billing.invoice_open(v_sub.id, null, v_cs.member_id, 'subscription_create', v_cs.currency, v_lines,
          v_sub.current_period_start, v_sub.current_period_end, v_cs.provider, v_now, v_cs.id);
        perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
      end if;
    else
      update billing.subscriptions s set checkout_id = v_cs.id,
        client_reference_id = coalesce(s.client_reference_id, v_cs.client_reference_id),
        provider_customer_ref = coalesce(s.provider_customer_ref, p_details->>'customer_ref'),
        discount_id = coalesce(s.discount_id, v_cs.discount_id)
      where s.community_id = v_cs.community_id and s.id = v_sub_id
        and (s.checkout_id is distinct from v_cs.id or s.client_reference_id is null and v_cs.client_reference_id is not null
          or s.discount_id is null and v_cs.discount_id is not null);
    end if;
  else
    insert into billing.purchases (community_id, member_id, plan_id, status, amount_cents, currency,
      access_expires_at, paid_at, client_reference_id, checkout_id, provider_ref, created_at)
    values (v_cs.community_id, v_cs.member_id, v_plan.id, 'completed', v_cs.amount_cents - v_cs.discount_cents,
      v_cs.currency, case when v_plan.access_days is not null then v_now + make_interval(days => v_plan.access_days) end,
      v_now, v_cs.client_reference_id, v_cs.id, p_details->>'provider_ref', v_now)
    returning id into v_pur_id;
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_cs.amount_cents, v_now, null));
    if v_cs.discount_cents > 0 then
      v_lines := v_lines || billing.discount_line(v_code, v_cs.discount_cents, v_now, null);
    end if;
    -- Stripe's purchase is taxed as Stripe charged it (none unless it says so).
    v_inv := billing.invoice_open(null, v_pur_id, v_cs.member_id, 'purchase', v_cs.currency, v_lines, v_now, null,
      v_cs.provider, v_now, v_cs.id, case when v_cs.provider = 'stripe' then p_details->>'provider_ref' end,
      case when v_cs.provider = 'stripe' then coalesce(p_details->'tax', '{"tax_lines": []}') end);
    perform billing.invoice_mark_paid(v_inv, v_now, p_details->>'provider_ref');
  end if;

  if v_cs.provider = 'stripe' and p_details->>'customer_ref' is not null then
    insert into billing.member_provider_customers (community_id, member_id, provider, customer_ref)
    values (v_cs.community_id, v_cs.member_id, v_cs.provider, p_details->>'customer_ref')
    on conflict (community_id, member_id, provider) do nothing;
  end if;

  update billing.checkout_sessions cs set status = 'completed', completed_at = v_now,
    subscription_id = v_sub_id, purchase_id = v_pur_id
  where cs.community_id = v_cs.community_id and cs.id = v_cs.id;
  update billing.discount_redemptions r set status = 'redeemed'
  where r.community_id = v_cs.community_id and r.checkout_id = v_cs.id;

  return jsonb_build_object('checkout_id', v_cs.id, 'member_id', v_cs.member_id,
    'subscription_id', v_sub_id, 'purchase_id', v_pur_id, 'already_completed', false);
end
$$;

grant execute on function billing.checkout_billing(billing.checkout_sessions) to billing_api;

grant execute on function billing.checkout_details_problem(jsonb) to billing_api;

-- checkout_create is billing_writer's (80-checkout.sql): replaced by the owner, it stays so.
alter function billing_api.checkout_create(jsonb) owner to billing_writer;

-- ---- analytics net of tax (functions/48-analytics.sql) ---------------------------------------------

-- One row per subscription: what it bills per month, net of its discount as it stands
-- at its next renewal (billing.subscription_discount_cents, 46-invoices.sql), and the
-- interval in which it billed. This is the one definition of a subscription's MRR
-- contribution (monthly_cents while billing_now): analytics.mrr and mrr_by_tier sum it
-- now, and the MRR movements (billing.mrr_movements) record each change of it, which
-- analytics.mrr_daily and the movement views sum, so they agree by construction.
--   billing_now: active, past_due or cancelling (paid until period end). Trialing
--     subscriptions do not bill yet; paused and cancelled do not bill.
--   billing_from / billing_until: the dates of a subscription's first MRR movements
--     (billing.mrr_movements below), for a row that has none yet: it bills from its
--     creation or the end of its trial (never while it is still trialing) until it was
--     cancelled (cancelled_at, else the last update of a cancelled row); a paused one
--     stopped billing at its last update. Past days' MRR is the recorded movements',
--     never recomputed from these. analytics.churn reads them too.
--   monthly_cents: the subscription's own price (price_cents: what it is charged, which
--     a plan price edit does not change), annual ones /12 (unrounded; sums round once),
--     net of tax: a tax added on top was never in the price, and the inclusive tax its
--     last invoice charged (tax_inclusive_ppm) is taken out (docs/decisions/tax.md).
--   created_at, cancel_counted_at: what the activity figures count (the overview reads
--   every figure from this one view, billing_private.analytics_overview).
create or replace view analytics.subscription_mrr with (security_invoker = true) as
  select s.community_id, s.id as subscription_id, s.member_id, s.status, p.id as plan_id, p.tier_id,
    p.currency,
    case when p.interval = 'year' then (s.price_cents - d.cents) / 12.0
         else (s.price_cents - d.cents)::numeric end
      * case when s.tax_inclusive_ppm = 0 then 1 else 1000000.0 / (1000000 + s.tax_inclusive_ppm) end as monthly_cents,
    s.status in ('active', 'past_due', 'cancelling') as billing_now,
    case when s.status = 'trialing' then 'infinity'::timestamptz
         else greatest(s.created_at, coalesce(s.trial_end, s.created_at)) end as billing_from,
    case when s.status = 'cancelled' then coalesce(s.cancelled_at, s.updated_at)
         when s.status = 'paused' then s.updated_at end as billing_until,
    -- for the activity figures (analytics.recent_activity, daily_activity): its signup,
    -- and when a cancelling or cancelled one counts as a cancel
    s.created_at,
    case when s.status in ('cancelling', 'cancelled')
         then coalesce(s.cancel_requested_at, s.cancelled_at, s.updated_at) end as cancel_counted_at
  from billing.subscriptions s
  join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  -- Most subscriptions carry no discount: the function (a plpgsql call with the row)
  -- runs only for those that do (with 200,000 subscriptions, seconds otherwise).
  -- The discount of its next renewal, which is at its period end (billing.renewal_terms
  -- prices a renewal at current_period_end, even one the worker applies late): a
  -- function of the row alone, never of the time it is read, so the overview's rollup
  -- (analytics_facts below) keeps it exactly.
  cross join lateral (select case when s.discount_id is null then 0
    else billing.subscription_discount_cents(s, s.price_cents, s.current_period_end) end as cents) d;

-- Paid invoices by day (UTC of paid_at) and currency: what was collected (tax
-- included: tax_cents says how much of it was tax), and what of it has since been
-- refunded.
create or replace view analytics.paid_invoices_daily with (security_invoker = true) as
  select i.community_id, (i.paid_at at time zone 'UTC')::date as day, i.currency,
    count(*)::bigint as invoices, sum(i.amount_paid_cents)::bigint as paid_cents,
    sum(i.amount_refunded_cents)::bigint as refunded_cents, sum(i.tax_cents)::bigint as tax_cents
  from billing.invoices i
  where i.status = 'paid'
  group by i.community_id, (i.paid_at at time zone 'UTC')::date, i.currency;

-- Revenue by day and currency, net of tax (the tax collected is the tax office's):
-- subscriptions from their paid invoices less their tax, one-time purchases from the
-- purchases (their own invoices are not counted twice; a purchase's price holds its
-- invoice's inclusive tax, which is taken out), gross of refunds.
create or replace view analytics.revenue_daily with (security_invoker = true) as
  select community_id, day, currency, sum(subscription_cents)::bigint as subscription_cents,
    sum(purchase_cents)::bigint as purchase_cents, sum(subscription_cents + purchase_cents)::bigint as total_cents
  from (
    select i.community_id, (i.paid_at at time zone 'UTC')::date as day, i.currency,
      i.amount_paid_cents - i.tax_cents as subscription_cents, 0::bigint as purchase_cents
    from billing.invoices i where i.status = 'paid' and i.subscription_id is not null
    union all
    -- (the inclusive tax: all of it but what the total adds, total - (subtotal - discount))
    select p.community_id, (p.paid_at at time zone 'UTC')::date, p.currency, 0,
      p.amount_cents - coalesce((select i.tax_cents - (i.total_cents - i.subtotal_cents + i.discount_cents) from billing.invoices i
        where i.community_id = p.community_id and i.purchase_id = p.id and i.status = 'paid' limit 1), 0)
    from billing.purchases p
  ) r
  group by community_id, day, currency;

-- Updates: only the rows where something the facts or the MRR read changed (a renewal
-- without a discount moves the period, which no figure reads). The columns are those of
-- analytics.subscription_mrr: updated_at for a paused, cancelled or cancelling row (when
-- it stopped billing, or its cancel when nothing else dates it), the period end for a
-- discounted one (the next renewal's discount). A column added to that view's definition
-- (a subscription's own locked price) must be named here too:
-- test/analytics/mrr-history.test.ts fails until it is. (Naming the columns that do not
-- matter instead, by comparing to_jsonb(row) minus them, cost 9 times as much per row of
-- a renewal batch.)
create or replace function billing_private.tg_subscriptions__analytics_update() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_communities text[];
  v_ids text[];
begin
  select array_agg(n.community_id), array_agg(n.id) into v_communities, v_ids
  from new_rows n
  join old_rows o on o.community_id = n.community_id and o.id = n.id
  where (n.status, n.plan_id, n.member_id, n.discount_id, n.created_at, n.trial_end, n.cancelled_at, n.cancel_requested_at, n.price_cents,
         n.tax_inclusive_ppm)
        is distinct from (o.status, o.plan_id, o.member_id, o.discount_id, o.created_at, o.trial_end, o.cancelled_at, o.cancel_requested_at, o.price_cents,
         o.tax_inclusive_ppm)
     or n.status in ('paused', 'cancelled', 'cancelling') and n.updated_at is distinct from o.updated_at
     or n.discount_id is not null and n.current_period_end is distinct from o.current_period_end;
  if v_ids is not null then
    perform billing_private.analytics_refresh(v_communities, v_ids);
  end if;
  return null;
end
$$;

grant select on analytics.paid_invoices_daily, analytics.revenue_daily to billing_api;
grant select on analytics.paid_invoices_daily, analytics.revenue_daily to billing_operator;

-- ---- GraphQL and the catalog file (functions/95-graphql.sql, functions/20-catalog.sql) --------------

create or replace view billing_graphql.invoices with (security_invoker = true, security_barrier = false) as
  select i.id, i.member_id, i.subscription_id, i.purchase_id, i.status, i.billing_reason, i.currency,
    i.lines, i.subtotal_cents, i.discount_cents, i.total_cents, i.amount_paid_cents,
    i.amount_refunded_cents, i.attempt_count, i.next_attempt_at, i.period_start, i.period_end,
    i.paid_at, i.created_at, i.updated_at, i.number,
    i.tax_cents, i.tax_lines, i.tax_country, i.reverse_charge, i.buyer_country, i.buyer_tax_id, i.seller_country, i.seller_tax_id
  from billing.invoices i
  where (select billing.has_scope('invoices:read'));

comment on column billing_graphql.invoices.tax_cents is E'@notNull\nThe tax it charged (minor units): the sum of its tax lines; an inclusive tax is part of the lines, an exclusive one is added to the total.';

comment on column billing_graphql.invoices.tax_lines is E'@notNull\nIts tax lines: [{name, country, rate_ppm, inclusive, taxable_cents, amount_cents}].';

comment on column billing_graphql.invoices.tax_country is E'The country whose tax rate applied (ISO 3166-1 alpha-2); null when none did.';

comment on column billing_graphql.invoices.reverse_charge is E'@notNull\nAn EU business buyer in another member state: no VAT, the buyer accounts for it.';

comment on column billing_graphql.invoices.buyer_country is E'The buyer\'s country as the invoice was taxed.';
comment on column billing_graphql.invoices.buyer_tax_id is E'The buyer\'s tax id (a VAT id) as given at checkout.';

comment on column billing_graphql.invoices.seller_country is E'The community\'s country when the invoice was taxed.';
comment on column billing_graphql.invoices.seller_tax_id is E'The community\'s tax id when the invoice was taxed.';

create or replace view billing_graphql.paid_invoices_daily with (security_invoker = true, security_barrier = false) as
  select p.day, p.currency, p.invoices, p.paid_cents, p.refunded_cents, p.tax_cents from analytics.paid_invoices_daily p
  where (select billing.has_scope('analytics:read'));

comment on view billing_graphql.revenue_daily is E'@primaryKey day,currency\n@scope analytics:read\n@behavior -insert -update -delete\nRevenue from subscriptions (paid invoices) and purchases by day, net of tax. Needs analytics:read.';

-- The catalog as a `billing catalog apply` file (src/domain/catalog/catalog-file.ts):
-- applied to any community it recreates this one's catalog, keys as stored: payment
-- provider and its settings, dunning, the seller its invoices name and its tax rates
-- (docs/decisions/tax.md), platforms, entitlements with their benefits,
-- tiers (inactive ones too) with their entitlements and plans, and the discount codes
-- that are not archived. Secrets are never in it (Stripe keys live encrypted in
-- billing_private.payment_secrets, which this does not read). Fields at their null are
-- left out, as a file would leave them. The dashboard's catalog page shows it
-- (get_catalog_file, a dashboard operation); test/cli/catalog-roundtrip.test.ts applies
-- an export to an empty community and exports that again.
create or replace function billing_api.catalog_file(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_community text := billing.current_community_id();
  v_out jsonb;
begin
  select jsonb_strip_nulls(jsonb_build_object(
    'payment_provider', case when c.payment_provider is not null
      then c.payment_config || jsonb_build_object('type', c.payment_provider) end,
    'dunning', case when c.dunning <> '{}' then c.dunning end,
    'seller', case when num_nonnulls(c.legal_name, c.address_lines, c.country, c.tax_id) > 0
      then jsonb_build_object('legal_name', c.legal_name, 'address_lines', to_jsonb(c.address_lines),
        'country', c.country, 'tax_id', c.tax_id) end,
    'tax_rates', (select jsonb_agg(jsonb_build_object('country', r.country, 'name', r.name, 'rate_ppm', r.rate_ppm,
        'inclusive', r.inclusive, 'active', r.active) order by r.country)
      from billing.tax_rates r where r.community_id = v_community),
    'platforms', (select jsonb_agg(jsonb_build_object('key', pc.key, 'platform', pc.platform, 'name', pc.name,
        'settings', case when pc.settings <> '{}' then pc.settings end) order by pc.key)
      from billing.platform_configs pc where pc.community_id = v_community),
    'entitlements', (select jsonb_agg(jsonb_build_object('key', e.key, 'name', e.name,
        'benefits', (select jsonb_agg(jsonb_build_object('platform', pc.key, 'type', b.type, 'value', b.value)
            order by pc.key, b.type, b.value)
          from billing.entitlement_benefits b
          join billing.platform_configs pc on pc.community_id = b.community_id and pc.id = b.platform_config_id
          where b.community_id = e.community_id and b.entitlement_id = e.id)) order by e.key)
      from billing.entitlements e where e.community_id = v_community),
    'tiers', (select jsonb_agg(jsonb_build_object('key', t.key, 'name', t.name, 'description', t.description,
        'kind', t.kind, 'billing_mode', t.billing_mode, 'rank', t.rank, 'active', t.active,
        'features', case when cardinality(t.features) > 0 then to_jsonb(t.features) end,
        'perks', case when t.perks <> '[]' then t.perks end,
        'entitlements', (select jsonb_agg(e.key order by e.key)
          from billing.tier_entitlements te
          join billing.entitlements e on e.community_id = te.community_id and e.id = te.entitlement_id
          where te.community_id = t.community_id and te.tier_id = t.id),
        'plans', (select jsonb_agg(jsonb_build_object('key', p.key, 'name', p.name, 'amount_cents', p.amount_cents,
            'currency', p.currency, 'interval', p.interval, 'trial_days', p.trial_days, 'access_days', p.access_days,
            'active', p.active, 'stripe_price_id', p.stripe_price_id) order by p.key)
          from billing.plans p where p.community_id = t.community_id and p.tier_id = t.id))
        order by t.rank, t.key)
      from billing.tiers t where t.community_id = v_community),
    'discounts', (select jsonb_agg(jsonb_build_object('code', d.code, 'name', d.name, 'value_type', d.value_type,
        'percent_off', d.percent_off, 'amount_off_cents', d.amount_off_cents, 'currency', d.currency,
        'duration', d.duration, 'duration_months', d.duration_months, 'use_limit', d.use_limit,
        'min_spend_cents', d.min_spend_cents, 'max_spend_cents', d.max_spend_cents,
        'starts_at', billing.iso(d.starts_at), 'expires_at', billing.iso(d.expires_at), 'is_active', d.is_active,
        'tiers', (select jsonb_agg(t.key order by t.key) from billing.tiers t
          where t.community_id = d.community_id and t.id = any (d.tier_ids)),
        'members', case when d.members <> '[]' then d.members end) order by lower(d.code))
      from billing.discount_codes d where d.community_id = v_community and d.archived_at is null)))
  into v_out
  from billing.communities c where c.id = v_community;
  return coalesce(v_out, '{}');
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
