--! Previous: sha1:82cb421a073c8ac915dc6b27aeb40f72a1e63db4
--! Hash: sha1:529d4c48b264d31de031612860f9357d83fc045a
--! Message: Renewals of a batch write their invoices paid at once

--! split: 1-current.sql
--! Included 46-invoices.sql
-- Money: invoices and payment attempts (every charge is an invoice: checkout,
-- trial start, renewal, plan change, one-time purchase; every attempt to collect it
-- is a payment attempt), the sandbox's cards, renewals and dunning retries, immediate
-- plan changes paid before they apply, and Stripe invoices mirrored from invoice.*
-- events. The sums are CHECK constraints on the invoice row (its lines are a jsonb
-- array validated by billing.invoice_lines_valid), a finalized invoice is immutable,
-- and a unique index lets an invoice be paid once.
--
-- Access follows money (50-ledger.sql): a past_due subscription grants only while one
-- of its open invoices still has a retry scheduled (billing.subscription_retry_open);
-- the last failed retry ends the subscription (cancellation_reason payment_failed)
-- and the ledger revokes with reason payment_failed.

-- ---- invoices ---------------------------------------------------------------------------

-- Lines: [{type, description, amount_cents, period_start, period_end, plan_id?}].
-- plan lines charge (>= 0), discount lines credit (<= 0), proration lines either way.
-- plpgsql, not sql, here and below: these run in CHECK constraints on every invoice
-- row written, and a SQL function with a subquery cannot be inlined, so it was planned
-- again on every call (0.1 to 0.3 ms each); plpgsql keeps its plans for the session.
create or replace function billing.invoice_lines_valid(p_lines jsonb) returns boolean
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
      or l->>'type' is null or l->>'type' not in ('plan', 'proration', 'discount')
      or jsonb_typeof(l->'description') <> 'string' or length(l->>'description') = 0
      or jsonb_typeof(l->'amount_cents') <> 'number' or (l->>'amount_cents') !~ '^-?[0-9]+$'
      or (l->>'type' = 'plan' and (l->>'amount_cents')::bigint < 0)
      or (l->>'type' = 'discount' and (l->>'amount_cents')::bigint > 0));
end
$$;

-- Sum of the lines of the given kinds (all when p_types is null).
create or replace function billing.invoice_lines_sum(p_lines jsonb, p_types text[]) returns bigint
  language plpgsql immutable parallel safe
as $$
begin
  return (select coalesce(sum((l->>'amount_cents')::bigint), 0)::bigint
          from jsonb_array_elements(p_lines) l
          where p_types is null or l->>'type' = any (p_types));
end
$$;

create table if not exists billing.invoices (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('inv'),
  member_id text collate "C" not null,
  subscription_id text collate "C",
  purchase_id text collate "C",
  checkout_id text collate "C",
  status text not null check (status in ('draft', 'open', 'paid', 'void', 'uncollectible')),
  billing_reason text not null
    check (billing_reason in ('subscription_create', 'subscription_cycle', 'subscription_update', 'purchase')),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  lines jsonb not null default '[]' check (billing.invoice_lines_valid(lines)),
  subtotal_cents bigint not null,
  discount_cents bigint not null check (discount_cents >= 0),
  total_cents bigint not null check (total_cents >= 0),
  amount_paid_cents bigint not null default 0 check (amount_paid_cents >= 0),
  amount_refunded_cents bigint not null default 0 check (amount_refunded_cents >= 0),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  next_attempt_at timestamptz,
  period_start timestamptz,
  period_end timestamptz,
  paid_at timestamptz,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  provider_updated_at timestamptz,
  created_at timestamptz not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, subscription_id) references billing.subscriptions on delete cascade,
  foreign key (community_id, purchase_id) references billing.purchases on delete cascade,
  -- What it is for: one subscription or one purchase.
  constraint invoices_one_owner check (num_nonnulls(subscription_id, purchase_id) = 1),
  -- The sums: lines add up to the subtotal, the discount and the total.
  constraint invoices_subtotal_is_lines check (subtotal_cents = billing.invoice_lines_sum(lines, array['plan', 'proration'])),
  constraint invoices_discount_is_lines check (discount_cents = -billing.invoice_lines_sum(lines, array['discount'])),
  constraint invoices_total check (total_cents = subtotal_cents - discount_cents),
  -- Paid means paid in full, once, at a time; nothing else has money on it.
  constraint invoices_paid_in_full check ((status = 'paid') = (paid_at is not null)
    and (status = 'paid' or amount_paid_cents = 0)
    and (status <> 'paid' or amount_paid_cents = total_cents)),
  constraint invoices_refund_at_most_paid check (amount_refunded_cents <= amount_paid_cents),
  -- Only an open invoice is retried.
  constraint invoices_retry_only_open check (next_attempt_at is null or status = 'open'),
  constraint invoices_period check (period_end is null or period_start <= period_end)
);
create index if not exists invoices_member on billing.invoices (community_id, member_id, id);
create index if not exists invoices_subscription on billing.invoices (community_id, subscription_id, id);
create index if not exists invoices_status on billing.invoices (community_id, status, id);
create index if not exists invoices_retry on billing.invoices (community_id, next_attempt_at)
  where status = 'open' and next_attempt_at is not null;
create unique index if not exists invoices_provider_ref on billing.invoices (community_id, provider_ref)
  where provider_ref is not null;

alter table billing.invoices enable row level security;
alter table billing.invoices force row level security;
drop policy if exists tenant on billing.invoices;
create policy tenant on billing.invoices
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.invoices;
create policy owner_access on billing.invoices to current_user using (true) with check (true);
grant select on billing.invoices to billing_api;

-- A finalized invoice keeps its amounts and lines (Stripe: finalized invoices are
-- immutable); a paid, void or uncollectible one never returns to open.
create or replace function billing.tg_invoices__immutable() returns trigger
  language plpgsql
as $$
begin
  if old.status <> 'draft' and (new.lines is distinct from old.lines or new.subtotal_cents <> old.subtotal_cents
      or new.discount_cents <> old.discount_cents or new.total_cents <> old.total_cents
      or new.currency <> old.currency or new.member_id <> old.member_id
      or new.subscription_id is distinct from old.subscription_id or new.purchase_id is distinct from old.purchase_id) then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is finalized: its lines and amounts cannot change.';
  end if;
  if old.status in ('paid', 'void', 'uncollectible') and new.status <> old.status then
    raise exception using errcode = 'BL409', message = 'Invoice ' || old.id || ' is ' || old.status || ' and cannot become ' || new.status || '.';
  end if;
  new.updated_at := now();
  return new;
end
$$;
drop trigger if exists _100_immutable on billing.invoices;
create trigger _100_immutable before update on billing.invoices
  for each row execute function billing.tg_invoices__immutable();

-- ---- payment attempts ------------------------------------------------------------------

create table if not exists billing.payment_attempts (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pay'),
  invoice_id text collate "C" not null,
  status text not null check (status in ('succeeded', 'failed')),
  amount_cents bigint not null check (amount_cents >= 0),
  failure_message text,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  attempted_at timestamptz not null,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade,
  constraint payment_attempts_failure_explained check ((status = 'failed') = (failure_message is not null))
);
-- Nothing is paid twice: one succeeded attempt per invoice.
create unique index if not exists payment_attempts_one_success on billing.payment_attempts (community_id, invoice_id)
  where status = 'succeeded';
create index if not exists payment_attempts_invoice on billing.payment_attempts (community_id, invoice_id, id);

alter table billing.payment_attempts enable row level security;
alter table billing.payment_attempts force row level security;
drop policy if exists tenant on billing.payment_attempts;
create policy tenant on billing.payment_attempts
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.payment_attempts;
create policy owner_access on billing.payment_attempts to current_user using (true) with check (true);
grant select on billing.payment_attempts to billing_api;

-- ---- the sandbox's cards -----------------------------------------------------------------

-- Whether a sandbox subscription's future charges decline (billing sandbox decline /
-- accept); no row: they succeed.
create table if not exists billing.sandbox_cards (
  community_id text collate "C" not null,
  subscription_id text collate "C" not null,
  declines boolean not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, subscription_id),
  foreign key (community_id, subscription_id) references billing.subscriptions on delete cascade
);
alter table billing.sandbox_cards enable row level security;
alter table billing.sandbox_cards force row level security;
drop policy if exists tenant on billing.sandbox_cards;
create policy tenant on billing.sandbox_cards
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.sandbox_cards;
create policy owner_access on billing.sandbox_cards to current_user using (true) with check (true);
grant select on billing.sandbox_cards to billing_api;

-- ---- JSON --------------------------------------------------------------------------------

create or replace function billing.invoice_json(p_inv billing.invoices) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_inv.id,
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
    'created_at', billing.iso(p_inv.created_at))
$$;

-- ---- events and the ledger ------------------------------------------------------------------

-- invoice.created when it is written; invoice.paid when it becomes paid;
-- invoice.payment_failed for each failed attempt. A change of a subscription's open
-- invoice (paid, retry scheduled or given up) can change its access: the member's
-- ledger is refreshed with the event as trigger.
-- Statement-level, over the transition tables: a statement that writes many invoices
-- (the renewals of a batch, billing.renew_batch) writes all their events in one insert,
-- in invoice id order, then refreshes the ledgers; a one-row statement does exactly
-- what a row trigger did.
drop trigger if exists _500_outbox_and_ledger on billing.invoices;
drop function if exists billing.tg_invoices__outbox_and_ledger();

-- Only a past_due subscription's access depends on its invoices (sandbox dunning
-- changes the subscription itself first; this serves mirrored Stripe invoices).
create or replace function billing.invoices_ledger_refresh(p_changed billing.invoices[], p_event_ids text[])
  returns void language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
begin
  -- In the arrays' order (invoice id order).
  for k in 1 .. coalesce(cardinality(p_changed), 0) loop
    v_inv := p_changed[k];
    if v_inv.subscription_id is not null
       and exists (select 1 from billing.subscriptions s where s.community_id = v_inv.community_id
                   and s.id = v_inv.subscription_id and s.status = 'past_due') then
      perform billing.ledger_refresh_member(v_inv.community_id, v_inv.member_id,
        case when v_inv.status = 'paid' then 'invoice_paid'
             when v_inv.status = 'open' and v_inv.next_attempt_at is not null then 'payment_retry_scheduled'
             else 'payment_failed' end, p_event_ids[k]);
    end if;
  end loop;
end
$$;

create or replace function billing.tg_invoices__outbox_and_ledger_insert() returns trigger
  language plpgsql
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
drop trigger if exists _500_outbox_and_ledger_insert on billing.invoices;
create trigger _500_outbox_and_ledger_insert after insert on billing.invoices
  referencing new table as new_rows
  for each statement execute function billing.tg_invoices__outbox_and_ledger_insert();
drop trigger if exists _500_outbox_and_ledger_update on billing.invoices;
create trigger _500_outbox_and_ledger_update after update on billing.invoices
  referencing old table as old_rows new table as new_rows
  for each statement execute function billing.tg_invoices__outbox_and_ledger_update();

-- Which sources grant (the rule of 50-ledger.sql, with money): a past_due subscription
-- only while one of its open invoices still has a retry scheduled.
-- This one and the next: plpgsql, not sql (a SQL function with a subquery is planned
-- again on every call; the ledger calls them per subscription).
create or replace function billing.subscription_retry_open(p_community_id text, p_subscription_id text) returns boolean
  language plpgsql stable
as $$
begin
  return exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is not null);
end
$$;

-- An open invoice of the subscription has no retry left (a cancelling subscription
-- whose renewal failed keeps access only while a retry is scheduled).
create or replace function billing.subscription_unpaid(p_community_id text, p_subscription_id text) returns boolean
  language plpgsql stable
as $$
begin
  return exists (select 1 from billing.invoices i
    where i.community_id = p_community_id and i.subscription_id = p_subscription_id
      and i.status = 'open' and i.next_attempt_at is null);
end
$$;

-- ---- writing and collecting invoices ------------------------------------------------------------

-- Periods keep the billing anchor: the end of the period after p_end is the first
-- anchor + n intervals later than p_end (31 Jan + 1 month = 28 Feb, + 2 months = 31 Mar).
-- Calendar arithmetic in UTC, whatever the session's TimeZone: 31 Jan + 1 month is
-- 28 Feb at the same UTC time of day on every server.
create or replace function billing.add_utc(p_ts timestamptz, p_interval interval) returns timestamptz
  language sql immutable parallel safe
as $$ select ((p_ts at time zone 'UTC') + p_interval) at time zone 'UTC' $$;

create or replace function billing.next_period_end(p_anchor timestamptz, p_interval text, p_end timestamptz)
  returns timestamptz language plpgsql stable
as $$
declare
  v_months integer := case p_interval when 'month' then 1 when 'year' then 12 end;
  v_n integer;
begin
  if v_months is null then
    return null;
  end if;
  v_n := greatest(1, ((extract(year from p_end at time zone 'UTC') - extract(year from p_anchor at time zone 'UTC')) * 12
    + extract(month from p_end at time zone 'UTC') - extract(month from p_anchor at time zone 'UTC'))::integer / v_months);
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) > p_end and v_n > 1 loop
    v_n := v_n - 1;
  end loop;
  while billing.add_utc(p_anchor, make_interval(months => v_months * v_n)) <= p_end loop
    v_n := v_n + 1;
  end loop;
  return billing.add_utc(p_anchor, make_interval(months => v_months * v_n));
end
$$;

create or replace function billing.plan_line(p_plan billing.plans, p_amount bigint, p_start timestamptz,
  p_end timestamptz, p_description text default null) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('type', 'plan',
    'description', coalesce(p_description, coalesce(t.name, 'Plan') || coalesce(' (' || p_plan.name || ')', '')
      || case p_plan.interval when 'month' then ', 1 month' when 'year' then ', 1 year' else '' end),
    'amount_cents', p_amount, 'plan_id', p_plan.id,
    'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
  from (select 1) one
  left join billing.tiers t on t.community_id = p_plan.community_id and t.id = p_plan.tier_id
$$;

create or replace function billing.discount_line(p_code text, p_amount bigint, p_start timestamptz, p_end timestamptz)
  returns jsonb language sql immutable
as $$
  select jsonb_build_object('type', 'discount', 'description', 'Discount ' || coalesce(p_code, ''),
    'amount_cents', -p_amount, 'period_start', billing.iso(p_start), 'period_end', billing.iso(p_end))
$$;

-- The discount a subscription's discount code gives on an invoice for a period
-- starting at p_start: once on the first invoice that charges, repeating while the
-- period starts within duration_months of the subscription's start, forever always.
create or replace function billing.subscription_discount_cents(p_sub billing.subscriptions, p_amount bigint,
  p_start timestamptz) returns bigint
  language plpgsql stable
as $$
declare
  v_d billing.discount_codes;
begin
  if p_sub.discount_id is null or p_amount <= 0 then
    return 0;
  end if;
  select * into v_d from billing.discount_codes d where d.community_id = p_sub.community_id and d.id = p_sub.discount_id;
  if v_d.id is null then
    return 0;
  end if;
  if v_d.duration = 'once' and exists (select 1 from billing.invoices i
      where i.community_id = p_sub.community_id and i.subscription_id = p_sub.id and i.discount_cents > 0) then
    return 0;
  elsif v_d.duration = 'repeating'
      and p_start >= billing.add_utc(p_sub.created_at, make_interval(months => coalesce(v_d.duration_months, 1))) then
    return 0;
  end if;
  return least(p_amount, case v_d.value_type when 'percent' then round(p_amount * v_d.percent_off / 100)::bigint
                              else coalesce(v_d.amount_off_cents, 0) end);
end
$$;

-- Writes a finalized (open) invoice from its lines; the sums follow from the lines.
create or replace function billing.invoice_open(p_sub_id text, p_pur_id text, p_member_id text, p_reason text,
  p_currency text, p_lines jsonb, p_start timestamptz, p_end timestamptz, p_provider text, p_at timestamptz,
  p_checkout_id text default null, p_provider_ref text default null)
  returns billing.invoices language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_subtotal bigint := billing.invoice_lines_sum(p_lines, array['plan', 'proration']);
  v_discount bigint := -billing.invoice_lines_sum(p_lines, array['discount']);
begin
  insert into billing.invoices (community_id, member_id, subscription_id, purchase_id, checkout_id, status,
    billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, period_start, period_end,
    provider, provider_ref, created_at)
  values (billing.current_community_id(), p_member_id, p_sub_id, p_pur_id, p_checkout_id, 'open', p_reason,
    p_currency, p_lines, v_subtotal, v_discount, v_subtotal - v_discount, p_start, p_end, p_provider,
    p_provider_ref, p_at)
  returning * into v_inv;
  return v_inv;
end
$$;

-- Records a successful collection: the attempt, then the invoice paid in full.
create or replace function billing.invoice_mark_paid(p_inv billing.invoices, p_at timestamptz,
  p_provider_ref text default null) returns billing.invoices
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
begin
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, provider_ref, attempted_at)
  values (p_inv.community_id, p_inv.id, 'succeeded', p_inv.total_cents, p_inv.provider, p_provider_ref, p_at);
  update billing.invoices i set status = 'paid', amount_paid_cents = i.total_cents, paid_at = p_at,
    attempt_count = i.attempt_count + 1, next_attempt_at = null
  where i.community_id = p_inv.community_id and i.id = p_inv.id
  returning * into v_inv;
  return v_inv;
end
$$;

-- Records a failed collection and schedules the next retry (null: none left).
create or replace function billing.invoice_mark_failed(p_inv billing.invoices, p_at timestamptz,
  p_message text, p_next_attempt_at timestamptz) returns billing.invoices
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
begin
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, failure_message, provider, attempted_at)
  values (p_inv.community_id, p_inv.id, 'failed', p_inv.total_cents, p_message, p_inv.provider, p_at);
  update billing.invoices i set attempt_count = i.attempt_count + 1, next_attempt_at = p_next_attempt_at
  where i.community_id = p_inv.community_id and i.id = p_inv.id
  returning * into v_inv;
  return v_inv;
end
$$;

-- The sandbox's card for a subscription: true when the charge goes through.
create or replace function billing.sandbox_charge_succeeds(p_inv billing.invoices) returns boolean
  language sql stable
as $$
  select p_inv.total_cents = 0 or not coalesce((select c.declines from billing.sandbox_cards c
    where c.community_id = p_inv.community_id and c.subscription_id = p_inv.subscription_id), false)
$$;

-- When the retry after failed attempt number p_attempt is due (null: no retry left).
create or replace function billing.dunning_next_attempt(p_community_id text, p_due timestamptz, p_attempt integer)
  returns timestamptz language sql stable
as $$
  select p_due + make_interval(days => (c.dunning->'retry_days'->>(p_attempt - 1))::integer)
  from billing.communities c where c.id = p_community_id
$$;

-- Collects an open sandbox invoice at p_at: paid, or failed with the next retry
-- scheduled by the community's dunning settings. Returns the invoice.
create or replace function billing.sandbox_collect(p_inv billing.invoices, p_at timestamptz) returns billing.invoices
  language plpgsql volatile
as $$
begin
  if billing.sandbox_charge_succeeds(p_inv) then
    return billing.invoice_mark_paid(p_inv, p_at, 'sandbox_ch_' || substr(md5(p_inv.id || p_at::text), 1, 16));
  end if;
  return billing.invoice_mark_failed(p_inv, p_at, 'Your card was declined (sandbox).',
    billing.dunning_next_attempt(p_inv.community_id, p_inv.created_at, p_inv.attempt_count + 1));
end
$$;

-- ---- sandbox time: renewals and retries -------------------------------------------------------

-- What renewing a subscription at its period end p_at charges and where it leads: the
-- plan (a scheduled switch applies), the billing anchor (a trial's end, or a scheduled
-- switch to another interval, starts a new one), the next period end, the invoice's
-- currency and lines (the plan; the discount code's share; credit left from a plan
-- change, which pays what it can) and the credit used. One place for both ways of
-- renewing: one subscription at a time (billing.subscription_advance) and a batch
-- (billing.renew_batch).
do $$
begin
  if not exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace
                 where n.nspname = 'billing' and t.typname = 'renewal_terms') then
    create type billing.renewal_terms as (plan_id text, anchor timestamptz, period_end timestamptz,
      currency text, lines jsonb, credit_cents bigint);
  end if;
end
$$;

create or replace function billing.renewal_terms(p_sub billing.subscriptions, p_at timestamptz)
  returns billing.renewal_terms language plpgsql stable
as $$
declare
  v_plan billing.plans;
  v_t billing.renewal_terms;
  v_discount bigint;
  v_code text;
begin
  select * into v_plan from billing.plans p
  where p.community_id = p_sub.community_id and p.id = coalesce(p_sub.scheduled_plan_id, p_sub.plan_id);
  v_t.plan_id := v_plan.id;
  v_t.currency := v_plan.currency;
  v_t.anchor := case when p_sub.status = 'trialing' or p_sub.billing_anchor is null
                       or v_plan.id <> p_sub.plan_id and v_plan.interval is distinct from
                         (select p.interval from billing.plans p where p.community_id = p_sub.community_id and p.id = p_sub.plan_id)
                     then p_at else p_sub.billing_anchor end;
  v_t.period_end := billing.next_period_end(v_t.anchor, v_plan.interval, p_at);
  v_discount := billing.subscription_discount_cents(p_sub, v_plan.amount_cents, p_at);
  v_t.lines := jsonb_build_array(billing.plan_line(v_plan, v_plan.amount_cents, p_at, v_t.period_end));
  if v_discount > 0 then
    select d.code into v_code from billing.discount_codes d where d.community_id = p_sub.community_id and d.id = p_sub.discount_id;
    v_t.lines := v_t.lines || billing.discount_line(v_code, v_discount, p_at, v_t.period_end);
  end if;
  v_t.credit_cents := least(p_sub.credit_cents, v_plan.amount_cents - v_discount);
  if v_t.credit_cents > 0 then
    v_t.lines := v_t.lines || jsonb_build_object('type', 'proration', 'description', 'Credit from an earlier plan change',
      'amount_cents', -v_t.credit_cents, 'period_start', billing.iso(p_at), 'period_end', billing.iso(v_t.period_end));
  end if;
  return v_t;
end
$$;


-- Moves one sandbox subscription through everything due at p_now, in time order:
-- a cancelling one ends at its period end; an active or trialing one renews (the
-- period keeps its anchor; a scheduled switch applies) with an invoice collected at
create or replace function billing.subscription_advance(p_sub_id text, p_now timestamptz) returns integer
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_inv billing.invoices;
  v_at timestamptz;
  v_terms billing.renewal_terms;
  v_steps integer := 0;
begin
  loop
    select * into v_sub from billing.subscriptions s
    where s.community_id = billing.current_community_id() and s.id = p_sub_id for update;
    exit when v_sub.id is null or v_steps >= 1000;
    -- A retry that is due comes first: past_due, or cancelling (cancelled at period
    -- end while a renewal was still unpaid; retries go on until the period ends).
    v_inv := null;
    if v_sub.status in ('past_due', 'cancelling') then
      select * into v_inv from billing.invoices i
      where i.community_id = v_sub.community_id and i.subscription_id = v_sub.id and i.status = 'open'
        and i.next_attempt_at is not null
      order by i.next_attempt_at limit 1 for update;
    end if;
    if v_inv.id is not null and v_inv.next_attempt_at <= p_now
       and (v_sub.status = 'past_due' or v_inv.next_attempt_at < v_sub.current_period_end) then
      v_at := v_inv.next_attempt_at;
      -- The subscription changes first, so access never flickers: a paid retry makes
      -- it active before its invoice stops being retried; a last failed retry ends it
      -- (the ledger revokes with reason payment_failed) before the invoice is given up.
      if billing.sandbox_charge_succeeds(v_inv) then
        update billing.subscriptions s set status = case when s.status = 'past_due' then 'active' else s.status end,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
        perform billing.sandbox_collect(v_inv, v_at);
      elsif billing.dunning_next_attempt(v_inv.community_id, v_inv.created_at, v_inv.attempt_count + 1) is not null then
        perform billing.sandbox_collect(v_inv, v_at);
      else
        -- The last retry failed: the community's final action (cancel).
        update billing.subscriptions s set status = 'cancelled', cancelled_at = v_at,
          cancellation_reason = 'payment_failed', cancel_at = null, scheduled_plan_id = null, scheduled_at = null,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
        v_inv := billing.sandbox_collect(v_inv, v_at);
        update billing.invoices i set status = 'uncollectible'
        where i.community_id = v_inv.community_id and i.id = v_inv.id;
      end if;
    elsif v_sub.status = 'past_due' then
      exit;
    elsif v_sub.status = 'paused' then
      -- Resumes by itself at paused_until (no invoices while paused).
      exit when v_sub.paused_until is null or v_sub.paused_until > p_now;
      perform billing.subscription_resume_at(v_sub.id, v_sub.paused_until);
    elsif v_sub.status in ('active', 'trialing', 'cancelling') and v_sub.current_period_end <= p_now then
      v_at := v_sub.current_period_end;
      if v_sub.status = 'cancelling' then
        update billing.subscriptions s set status = 'cancelled', cancelled_at = v_at, updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
      else
        v_terms := billing.renewal_terms(v_sub, v_at);
        v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_cycle', v_terms.currency,
          v_terms.lines, v_at, v_terms.period_end, v_sub.provider, v_at);
        v_inv := billing.sandbox_collect(v_inv, v_at);
        update billing.subscriptions s set
          status = case when v_inv.status = 'paid' then 'active' else 'past_due' end,
          plan_id = v_terms.plan_id, scheduled_plan_id = null, scheduled_at = null,
          current_period_start = v_at, current_period_end = v_terms.period_end, billing_anchor = v_terms.anchor,
          credit_cents = s.credit_cents - greatest(v_terms.credit_cents, 0),
          trial_end = case when s.status = 'trialing' then coalesce(s.trial_end, v_at) else s.trial_end end,
          updated_at = now()
        where s.community_id = v_sub.community_id and s.id = v_sub.id;
      end if;
    else
      exit;
    end if;
    v_steps := v_steps + 1;
  end loop;
  return v_steps;
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
      t billing.renewal_terms, subtotal_cents bigint, discount_cents bigint, invoice_id text collate "C"
    ) on commit delete rows;
  end if;
  delete from renew_batch_terms;
  insert into renew_batch_terms (subscription_id, member_id, at, provider, t, subtotal_cents, discount_cents)
  select r.id, r.member_id, r.current_period_end, r.provider, r.t,
    billing.invoice_lines_sum((r.t).lines, array['plan', 'proration']), -billing.invoice_lines_sum((r.t).lines, array['discount'])
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
                          where c.community_id = v_community and c.subscription_id = r.id), false));
  -- Row counts for the planner (a temporary table has no statistics of its own).
  analyze renew_batch_terms;
  -- The invoices (billing.invoice_open), then their payments (billing.invoice_mark_paid).
  -- The invoices written paid, with their one succeeded attempt: what billing.invoice_open
  -- then billing.invoice_mark_paid write, in one insert each (the insert trigger writes
  -- invoice.created and invoice.paid as those two steps would; a second pass over every
  -- invoice to mark it paid was a fifth of a storm's time).
  with ins as (
    insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
      subtotal_cents, discount_cents, total_cents, amount_paid_cents, attempt_count, paid_at,
      period_start, period_end, provider, created_at)
    select v_community, b.member_id, b.subscription_id, 'paid', 'subscription_cycle', (b.t).currency, (b.t).lines,
      b.subtotal_cents, b.discount_cents, b.subtotal_cents - b.discount_cents, b.subtotal_cents - b.discount_cents, 1, b.at,
      b.at, (b.t).period_end, b.provider, b.at
    from renew_batch_terms b
    order by b.subscription_id
    returning id, subscription_id
  )
  update renew_batch_terms b set invoice_id = ins.id from ins where ins.subscription_id = b.subscription_id;
  insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, provider_ref, attempted_at)
  select v_community, b.invoice_id, 'succeeded', b.subtotal_cents - b.discount_cents, b.provider,
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

-- ---- the sandbox's decline switch (CLI: billing sandbox decline / accept) -------------------------

create or replace function billing.sandbox_set_card(p_subscription_id text, p_declines boolean) returns jsonb
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || p_subscription_id || '.');
  elsif v_sub.provider <> 'sandbox' then
    perform billing.raise('BL409', 'Subscription ' || p_subscription_id || ' is not a sandbox subscription.');
  end if;
  insert into billing.sandbox_cards (community_id, subscription_id, declines) values (v_sub.community_id, v_sub.id, p_declines)
  on conflict (community_id, subscription_id) do update set declines = excluded.declines, updated_at = now();
  return jsonb_build_object('subscription_id', v_sub.id, 'declines', p_declines);
end
$$;

-- ---- the read API ---------------------------------------------------------------------------------

-- GET /v1/invoices: newest first, keyset by id; filters member_id, subscription_id, status.
create or replace function billing_api.invoices_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  perform billing.require_scope('invoices:read');
  select array_agg(i.id order by i.id desc), array_agg(billing.invoice_json(i) order by i.id desc)
    into v_ids, v_items
  from (select * from billing.invoices i
        where i.community_id = billing.current_community_id()
          and i.id < coalesce(p_args->>'cursor', chr(1114111))
          and (p_args->>'member_id' is null or i.member_id = p_args->>'member_id')
          and (p_args->>'subscription_id' is null or i.subscription_id = p_args->>'subscription_id')
          and (p_args->>'status' is null or i.status = p_args->>'status')
        order by i.id desc limit v_limit + 1) i;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.invoices_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
begin
  perform billing.require_scope('invoices:read');
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  return billing.invoice_json(v_inv);
end
$$;
-- ---- Stripe: invoices mirrored from invoice.* events ------------------------------------------

-- Applies a Stripe invoice (already mapped to our terms by the adapter) to the
-- invoice with that provider_ref, creating it on first sight. p_state:
--   provider_ref, subscription_ref, status, billing_reason, currency, lines [{type,
--   description, amount_cents, period_start, period_end}], total_cents,
--   attempt_count, next_attempt_at, paid_at, created_at, period_start, period_end,
--   provider_updated_at, failed (true for invoice.payment_failed), payment_ref.
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
    -- What the lines do not explain (Stripe's discounts, or tax) becomes one line, so
    -- the lines always add up to Stripe's total.
    v_gap := (p_state->>'total_cents')::bigint - billing.invoice_lines_sum(v_lines, null);
    if v_gap < 0 then
      v_lines := v_lines || jsonb_build_object('type', 'discount', 'description', 'Discount', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    elsif v_gap > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'plan', 'description', 'Tax and other charges', 'amount_cents', v_gap,
        'period_start', p_state->>'period_start', 'period_end', p_state->>'period_end');
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id,
      coalesce(nullif(p_state->>'billing_reason', ''), 'subscription_cycle'), p_state->>'currency', v_lines,
      (p_state->>'period_start')::timestamptz, (p_state->>'period_end')::timestamptz, 'stripe',
      coalesce((p_state->>'created_at')::timestamptz, v_at), null, p_state->>'provider_ref');
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

-- Stripe's unpaid: retries are over, so the subscription's open invoices have no
-- retry left (and a past_due subscription no access).
create or replace function billing.provider_retries_exhausted(p_subscription_ref text) returns void
  language sql volatile
as $$
  update billing.invoices i set next_attempt_at = null
  from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.provider_ref = p_subscription_ref
    and i.community_id = s.community_id and i.subscription_id = s.id and i.status = 'open'
    and i.next_attempt_at is not null
$$;

-- ---- plan changes paid before they apply ---------------------------------------------------------



-- What an immediate switch of p_sub from plan p_old to p_new at p_now charges (the
-- proration rule below, written once: subscription_switch_now applies it and the
-- portal's preview shows it). credit: the unused time of the old plan; charge: the new
-- plan over the rest of the period, or a whole new period when the interval changes;
-- applied: the part of the credit set against the charge. Trialing: nothing.
create or replace function billing.switch_proration(p_sub billing.subscriptions, p_old billing.plans, p_new billing.plans,
  p_now timestamptz, out new_period boolean, out period_start timestamptz, out period_end timestamptz,
  out charge_cents bigint, out credit_cents bigint, out applied_cents bigint)
  language plpgsql stable
as $$
declare
  v_frac numeric;
begin
  v_frac := case when p_sub.current_period_end is null or p_sub.current_period_end <= p_sub.current_period_start then 0
                 else greatest(0, least(1, extract(epoch from (p_sub.current_period_end - p_now))
                   / extract(epoch from (p_sub.current_period_end - p_sub.current_period_start)))) end;
  new_period := p_sub.status <> 'trialing' and p_new.interval is distinct from p_old.interval;
  period_start := case when new_period then p_now else p_sub.current_period_start end;
  period_end := case when new_period then billing.add_utc(p_now, billing.plan_interval(p_new.interval)) else p_sub.current_period_end end;
  if p_sub.status = 'trialing' then
    charge_cents := 0;
    credit_cents := 0;
  else
    charge_cents := case when new_period then p_new.amount_cents else round(p_new.amount_cents * v_frac)::bigint end;
    credit_cents := round(p_old.amount_cents * v_frac)::bigint;
  end if;
  applied_cents := least(credit_cents, charge_cents);
end
$$;

-- An immediate switch (same tier or upgrade) of the current community's subscription
-- to p_plan_id, validated again here because the API role may call it. The
-- proration: credit for the unused time of the old plan, charge for the new plan over
-- the rest of the period; a change of interval starts a new period now (charge: the
-- whole new period). Credit beyond the charge is kept (credit_cents) for the next
-- renewals. A sandbox subscription's proration is invoiced and collected first, and
-- the switch applies only when that invoice is paid: a decline raises BLPAY
-- (payment_failed) and changes nothing. While trialing nothing is charged.
-- Stripe subscriptions: the plan changes here and Stripe invoices the proration (its
-- invoice.* events are mirrored), refused by the handler if Stripe cannot collect.
create or replace function billing_private.subscription_switch_now(p_subscription_id text, p_plan_id text)
  returns billing.subscriptions language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sub billing.subscriptions;
  v_old billing.plans;
  v_new billing.plans;
  v_now timestamptz := billing.now();
  v_new_period boolean;
  v_start timestamptz;
  v_end timestamptz;
  v_charge bigint;
  v_credit bigint;
  v_applied bigint;
  v_lines jsonb;
  v_inv billing.invoices;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_subscription_id for update;
  if v_sub.id is null then
    perform billing.raise('BL404', 'No subscription ' || coalesce(p_subscription_id, '') || '.');
  end if;
  perform billing.require_switchable(v_sub);
  if not exists (select 1 from jsonb_each(billing.switch_options(v_sub)) e(g, arr), jsonb_array_elements(arr) o
                 where g in ('same_tier', 'upgrades') and o->>'plan_id' = p_plan_id) then
    perform billing.raise('BL422', 'plan_id ' || coalesce(p_plan_id, '') || ' is not an immediate switch option of this subscription.', 'plan_id');
  end if;
  select * into v_old from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  select * into v_new from billing.plans p where p.community_id = v_sub.community_id and p.id = p_plan_id;
  select q.new_period, q.period_start, q.period_end, q.charge_cents, q.credit_cents, q.applied_cents
    into v_new_period, v_start, v_end, v_charge, v_credit, v_applied
  from billing.switch_proration(v_sub, v_old, v_new, v_now) q;
  if v_sub.provider = 'sandbox' and v_charge > 0 then
    v_lines := jsonb_build_array(jsonb_build_object('type', 'proration',
      'description', 'Remaining time on ' || coalesce(v_new.name, v_new.id), 'amount_cents', v_charge,
      'plan_id', v_new.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_end)));
    if v_applied > 0 then
      v_lines := v_lines || jsonb_build_object('type', 'proration',
        'description', 'Unused time on ' || coalesce(v_old.name, v_old.id), 'amount_cents', -v_applied,
        'plan_id', v_old.id, 'period_start', billing.iso(v_now), 'period_end', billing.iso(v_sub.current_period_end));
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_update', v_new.currency, v_lines,
      v_now, v_end, 'sandbox', v_now);
    if not billing.sandbox_charge_succeeds(v_inv) then
      raise exception using errcode = 'BLPAY',
        message = 'The payment of ' || v_inv.total_cents || ' ' || v_inv.currency
          || ' for this plan change was declined; the subscription is unchanged.';
    end if;
    perform billing.invoice_mark_paid(v_inv, v_now, 'sandbox_ch_' || substr(md5(v_inv.id), 1, 16));
  end if;
  update billing.subscriptions s set plan_id = v_new.id, scheduled_plan_id = null, scheduled_at = null,
    current_period_start = v_start, current_period_end = v_end,
    billing_anchor = case when v_new_period then v_start else s.billing_anchor end,
    credit_cents = s.credit_cents + case when s.provider = 'sandbox' then v_credit - v_applied else 0 end,
    proration_credit_cents = v_credit, proration_charge_cents = v_charge, prorated_at = v_now, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;

-- ---- grants (execute is opt-in: 00-foundation.sql) --------------------------------------------------
-- The API role reads invoices, and its writes fire triggers and views that call these
-- with its rights; everything that writes money (invoice_open, the mark_* functions,
-- apply_due, apply_provider_invoice, sandbox_set_card) stays owner-only.
grant execute on function billing.invoice_lines_valid(jsonb) to billing_api;
grant execute on function billing.add_utc(timestamptz, interval) to billing_api;
grant execute on function billing.invoice_lines_sum(jsonb, text[]) to billing_api;
grant execute on function billing.invoice_json(billing.invoices) to billing_api;
grant execute on function billing.subscription_retry_open(text, text) to billing_api;
grant execute on function billing.subscription_unpaid(text, text) to billing_api;
grant execute on function billing.subscription_discount_cents(billing.subscriptions, bigint, timestamptz) to billing_api;
grant execute on function billing_api.invoices_list(jsonb) to billing_api;
grant execute on function billing_api.invoices_get(jsonb) to billing_api;
-- An immediate plan change: SECURITY DEFINER, it re-validates the option itself.
grant execute on function billing_private.subscription_switch_now(text, text) to billing_api;
grant execute on function billing.switch_proration(billing.subscriptions, billing.plans, billing.plans, timestamptz) to billing_api;

-- ---- refunds (POST /v1/invoices/{id}/refunds; Stripe charge.refunded) --------------------------

create table if not exists billing.refunds (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('re'),
  invoice_id text collate "C" not null,
  amount_cents bigint not null check (amount_cents > 0),
  revoke_access boolean not null default false,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  created_at timestamptz not null,
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade
);
create index if not exists refunds_invoice on billing.refunds (community_id, invoice_id, id);
-- A refund made in Stripe's dashboard arrives once, whatever the number of events.
create unique index if not exists refunds_provider_ref on billing.refunds (community_id, provider_ref) where provider_ref is not null;
alter table billing.refunds enable row level security;
alter table billing.refunds force row level security;
drop policy if exists tenant on billing.refunds;
create policy tenant on billing.refunds
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.refunds;
create policy owner_access on billing.refunds to current_user using (true) with check (true);
grant select on billing.refunds to billing_api;

-- ---- disputes (Stripe charge.dispute.*; billing sandbox dispute) ---------------------------------

create table if not exists billing.disputes (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('dp'),
  invoice_id text collate "C" not null,
  amount_cents bigint not null check (amount_cents >= 0),
  status text not null check (status in ('needs_response', 'under_review', 'won', 'lost')),
  reason text,
  provider text not null check (provider in ('sandbox', 'stripe')),
  provider_ref text,
  created_at timestamptz not null,
  updated_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade
);
create index if not exists disputes_invoice on billing.disputes (community_id, invoice_id);
create unique index if not exists disputes_provider_ref on billing.disputes (community_id, provider_ref) where provider_ref is not null;
alter table billing.disputes enable row level security;
alter table billing.disputes force row level security;
drop policy if exists tenant on billing.disputes;
create policy tenant on billing.disputes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.disputes;
create policy owner_access on billing.disputes to current_user using (true) with check (true);
grant select on billing.disputes to billing_api;

create or replace function billing.refund_json(p_re billing.refunds) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_re.id, 'invoice_id', p_re.invoice_id, 'amount_cents', p_re.amount_cents,
    'revoke_access', p_re.revoke_access, 'created_at', billing.iso(p_re.created_at))
$$;

create or replace function billing.dispute_json(p_dp billing.disputes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_dp.id, 'invoice_id', p_dp.invoice_id, 'amount_cents', p_dp.amount_cents,
    'status', p_dp.status, 'reason', p_dp.reason, 'created_at', billing.iso(p_dp.created_at))
$$;

-- Ends what an invoice paid for, at once: its subscription is cancelled now, its
-- purchase refunded or disputed. The ledger then revokes (reasons refunded /
-- disputed for subscriptions; purchase_refunded / purchase_updated for purchases).
create or replace function billing.invoice_end_access(p_inv billing.invoices, p_cause text) returns void
  language plpgsql volatile
as $$
begin
  if p_inv.subscription_id is not null then
    update billing.subscriptions s set status = 'cancelled', cancelled_at = billing.now(),
      cancellation_reason = case p_cause when 'disputed' then 'payment_disputed' else 'refunded' end,
      cancel_at = null, scheduled_plan_id = null, scheduled_at = null, updated_at = now()
    where s.community_id = p_inv.community_id and s.id = p_inv.subscription_id and s.status <> 'cancelled';
  else
    update billing.purchases pu set status = case p_cause when 'disputed' then 'disputed' else 'refunded' end
    where pu.community_id = p_inv.community_id and pu.id = p_inv.purchase_id and pu.status = 'completed';
  end if;
end
$$;

-- Records a refund of a paid invoice (all that is left to refund when p_amount is
-- null): amount_refunded_cents never exceeds amount_paid_cents (a constraint), and a
-- provider refund already recorded (same provider_ref) is not counted twice. With
-- p_revoke the covered subscription or purchase ends now. Returns {invoice, refund}.
create or replace function billing.invoice_record_refund(p_invoice_id text, p_amount bigint, p_revoke boolean,
  p_provider_ref text default null) returns jsonb
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_re billing.refunds;
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
      return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re), 'duplicate', true);
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
  update billing.invoices i set amount_refunded_cents = i.amount_refunded_cents + v_re.amount_cents
  where i.community_id = v_inv.community_id and i.id = v_inv.id returning * into v_inv;
  if coalesce(p_revoke, false) then
    perform billing.invoice_end_access(v_inv, 'refunded');
  end if;
  perform billing.emit_event(v_inv.community_id, 'invoice.refunded', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'refund', billing.refund_json(v_re), 'duplicate', false);
end
$$;

-- POST /v1/invoices/{id}/refunds, the API's door (SECURITY DEFINER: the API role
-- writes no money table itself). p_provider_ref: the provider's refund id, when the
-- handler has already refunded through Stripe.
create or replace function billing_private.invoice_refund(p_invoice_id text, p_amount bigint, p_revoke boolean,
  p_provider_ref text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('invoices:write');
  return billing.invoice_record_refund(p_invoice_id, p_amount, p_revoke, p_provider_ref);
end
$$;

-- What the refund handler needs before calling the provider: the invoice, what is
-- left to refund and the provider's payment reference.
create or replace function billing_api.invoice_refund_prepare(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
begin
  perform billing.require_scope('invoices:write');
  select * into v_inv from billing.invoices i where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  return jsonb_build_object('invoice_id', v_inv.id, 'provider', v_inv.provider, 'status', v_inv.status,
    'currency', v_inv.currency, 'left_cents', v_inv.amount_paid_cents - v_inv.amount_refunded_cents,
    'payment_ref', (select a.provider_ref from billing.payment_attempts a
      where a.community_id = v_inv.community_id and a.invoice_id = v_inv.id and a.status = 'succeeded'));
end
$$;

create or replace function billing_api.invoice_refund(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  return billing_private.invoice_refund(p_args->>'id', (p_args->>'amount_cents')::bigint,
    coalesce((p_args->>'revoke_access')::boolean, false), p_args->>'provider_ref');
end
$$;

-- A dispute opened against an invoice's payment (Stripe charge.dispute.created;
-- billing sandbox dispute): the covered access ends at once (reason disputed). A
-- dispute that is later won restores nothing by itself (see docs/decisions.md).
create or replace function billing.invoice_record_dispute(p_invoice_id text, p_amount bigint, p_status text,
  p_reason text, p_provider_ref text) returns jsonb
  language plpgsql volatile
as $$
declare
  v_inv billing.invoices;
  v_dp billing.disputes;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_invoice_id for update;
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || coalesce(p_invoice_id, '') || '.');
  elsif v_inv.status <> 'paid' then
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is ' || v_inv.status || ': only a paid invoice can be disputed.');
  end if;
  if p_provider_ref is not null then
    select * into v_dp from billing.disputes d where d.community_id = v_inv.community_id and d.provider_ref = p_provider_ref for update;
  elsif exists (select 1 from billing.disputes d where d.community_id = v_inv.community_id and d.invoice_id = v_inv.id) then
    -- A payment is disputed once (the sandbox's disputes carry no provider id to tell them apart).
    perform billing.raise('BL409', 'Invoice ' || v_inv.id || ' is already disputed.');
  end if;
  if v_dp.id is not null then
    -- Later news of the same dispute: its status only.
    update billing.disputes d set status = coalesce(p_status, d.status), updated_at = now()
    where d.community_id = v_dp.community_id and d.id = v_dp.id returning * into v_dp;
    return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', true);
  end if;
  insert into billing.disputes (community_id, invoice_id, amount_cents, status, reason, provider, provider_ref, created_at)
  values (v_inv.community_id, v_inv.id, coalesce(p_amount, v_inv.amount_paid_cents), coalesce(p_status, 'needs_response'),
    p_reason, v_inv.provider, p_provider_ref, billing.now())
  returning * into v_dp;
  perform billing.invoice_end_access(v_inv, 'disputed');
  perform billing.emit_event(v_inv.community_id, 'invoice.disputed', jsonb_build_object(
    'invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp)));
  return jsonb_build_object('invoice', billing.invoice_json(v_inv), 'dispute', billing.dispute_json(v_dp), 'duplicate', false);
end
$$;

-- The invoice a Stripe charge or payment intent paid (refund and dispute events name those).
create or replace function billing.invoice_by_payment(p_payment_ref text) returns text
  language sql stable
as $$
  select coalesce(
    (select a.invoice_id from billing.payment_attempts a
     where a.community_id = billing.current_community_id() and a.provider_ref = p_payment_ref and a.status = 'succeeded' limit 1),
    (select i.id from billing.invoices i join billing.purchases pu on pu.community_id = i.community_id and pu.id = i.purchase_id
     where i.community_id = billing.current_community_id() and pu.provider_ref = p_payment_ref limit 1))
$$;

-- ---- pause and resume (sandbox money side) ------------------------------------------------------

-- A paused subscription resumes at p_at: the billing period restarts then (a new
-- anchor) with an invoice for the new period, collected at once; a decline leaves it
-- past_due with the community's retries.
create or replace function billing.subscription_resume_at(p_sub_id text, p_at timestamptz) returns billing.subscriptions
  language plpgsql volatile
as $$
declare
  v_sub billing.subscriptions;
  v_plan billing.plans;
  v_inv billing.invoices;
  v_end timestamptz;
  v_lines jsonb;
  v_discount bigint;
  v_code text;
begin
  select * into v_sub from billing.subscriptions s
  where s.community_id = billing.current_community_id() and s.id = p_sub_id for update;
  if v_sub.status <> 'paused' then
    perform billing.raise('BL409', 'Subscription ' || v_sub.id || ' is ' || v_sub.status || ', not paused: nothing to resume.');
  end if;
  select * into v_plan from billing.plans p where p.community_id = v_sub.community_id and p.id = v_sub.plan_id;
  v_end := billing.next_period_end(p_at, v_plan.interval, p_at);
  if v_sub.provider = 'sandbox' then
    v_discount := billing.subscription_discount_cents(v_sub, v_plan.amount_cents, p_at);
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_plan.amount_cents, p_at, v_end));
    if v_discount > 0 then
      select d.code into v_code from billing.discount_codes d where d.community_id = v_sub.community_id and d.id = v_sub.discount_id;
      v_lines := v_lines || billing.discount_line(v_code, v_discount, p_at, v_end);
    end if;
    v_inv := billing.invoice_open(v_sub.id, null, v_sub.member_id, 'subscription_cycle', v_plan.currency, v_lines,
      p_at, v_end, 'sandbox', p_at);
    v_inv := billing.sandbox_collect(v_inv, p_at);
  end if;
  update billing.subscriptions s set
    status = case when v_inv.id is null or v_inv.status = 'paid' then 'active' else 'past_due' end,
    paused_until = null, current_period_start = p_at, current_period_end = v_end, billing_anchor = p_at, updated_at = now()
  where s.community_id = v_sub.community_id and s.id = v_sub.id returning * into v_sub;
  return v_sub;
end
$$;

create or replace function billing_private.subscription_resume(p_subscription_id text) returns billing.subscriptions
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform billing.require_scope('subscriptions:write');
  return billing.subscription_resume_at(p_subscription_id, billing.now());
end
$$;

grant execute on function billing.refund_json(billing.refunds) to billing_api;
grant execute on function billing.dispute_json(billing.disputes) to billing_api;
grant execute on function billing_api.invoice_refund_prepare(jsonb) to billing_api;
grant execute on function billing_api.invoice_refund(jsonb) to billing_api;
grant execute on function billing_private.invoice_refund(text, bigint, boolean, text) to billing_api;
grant execute on function billing_private.subscription_resume(text) to billing_api;
--! EndIncluded 46-invoices.sql
