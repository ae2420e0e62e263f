--! Previous: sha1:05540d58af76807cf91d649cdd863072ee4e444b
--! Hash: sha1:030c71cabad094d0d59c99e6c2da3f87ceb410c0
--! Message: Subscribers keep their price

--! split: 1-current.sql
-- Enter migration here

--! split: 10-price-changes.sql
-- Issue 26 item 1: a price edit never re-prices existing subscribers
-- (docs/decisions/price-changes-keep-existing-subscribers.md). The delta of
-- 40-subscriptions.sql (price_cents, price_migration_id, billing.price_migrations, the
-- price trigger, plan_price_migrate, the subscription object's amount_cents),
-- 46-invoices.sql (renewals, proration and resumes charge price_cents; a due price
-- migration applies at renewal), 80-checkout.sql (a checkout's subscription keeps the
-- price its buyer was shown) and 48-analytics.sql (MRR from price_cents).


alter table billing.subscriptions add column if not exists price_cents integer;
update billing.subscriptions s set price_cents = p.amount_cents
from billing.plans p where p.community_id = s.community_id and p.id = s.plan_id and s.price_cents is null;
alter table billing.subscriptions alter column price_cents set not null;
alter table billing.subscriptions drop constraint if exists subscriptions_price_cents_check;
alter table billing.subscriptions add constraint subscriptions_price_cents_check check (price_cents >= 0);
alter table billing.subscriptions add column if not exists price_migration_id text collate "C";
comment on column billing.subscriptions.price_cents is
  'What each period of this subscription is charged before discounts (minor units): the plan''s price when it started or moved to that plan; a plan price edit changes it only through a price migration (billing.price_migrations).';

create table if not exists billing.price_migrations (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pmig'),
  plan_id text collate "C" not null,
  price_cents integer not null check (price_cents >= 0),
  currency text not null,
  notice_days integer not null check (notice_days between 0 and 3650),
  notice_ends_at timestamptz not null,
  subscriptions integer not null default 0 check (subscriptions >= 0),
  created_at timestamptz not null,
  primary key (community_id, id),
  foreign key (community_id, plan_id) references billing.plans on delete cascade
);
create index if not exists price_migrations_plan on billing.price_migrations (community_id, plan_id, id);
alter table billing.price_migrations enable row level security;
alter table billing.price_migrations force row level security;
drop policy if exists tenant on billing.price_migrations;
create policy tenant on billing.price_migrations
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.price_migrations;
create policy owner_access on billing.price_migrations to current_user using (true) with check (true);
grant select on billing.price_migrations to billing_api;
grant select on billing.price_migrations to billing_operator;

alter table billing.subscriptions drop constraint if exists subscriptions_price_migration_fk;
alter table billing.subscriptions add constraint subscriptions_price_migration_fk
  foreign key (community_id, price_migration_id) references billing.price_migrations on delete set null (price_migration_id);
create index if not exists subscriptions_price_migration on billing.subscriptions (community_id, price_migration_id)
  where price_migration_id is not null;

-- A subscription's price is set by the database at every door: from its plan when an
-- insert gives none (a checkout gives the amount its buyer was shown), and from the new
-- plan when plan_id changes (a switch now, a scheduled switch at renewal, Stripe's
-- state) unless the same statement sets it; a move to another plan drops a pending
-- price migration of the old one.
create or replace function billing.tg_subscriptions__price() returns trigger
  language plpgsql
as $$
begin
  if tg_op = 'INSERT' or new.price_cents is not distinct from old.price_cents then
    select p.amount_cents into new.price_cents from billing.plans p
    where p.community_id = new.community_id and p.id = new.plan_id;
  end if;
  if tg_op = 'UPDATE' then
    new.price_migration_id := null;
  end if;
  return new;
end
$$;

drop trigger if exists _050_price_insert on billing.subscriptions;
create trigger _050_price_insert before insert on billing.subscriptions
  for each row when (new.price_cents is null) execute function billing.tg_subscriptions__price();
drop trigger if exists _050_price_plan on billing.subscriptions;
create trigger _050_price_plan before update of plan_id on billing.subscriptions
  for each row when (old.plan_id is distinct from new.plan_id) execute function billing.tg_subscriptions__price();

create or replace function billing.price_migration_json(p_mig billing.price_migrations) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', p_mig.id, 'plan_id', p_mig.plan_id, 'price_cents', p_mig.price_cents,
    'currency', p_mig.currency, 'notice_days', p_mig.notice_days, 'notice_ends_at', billing.iso(p_mig.notice_ends_at),
    'subscriptions', p_mig.subscriptions,
    'pending_subscriptions', (select count(*)::integer from billing.subscriptions s
      where s.community_id = p_mig.community_id and s.price_migration_id = p_mig.id and s.status <> 'cancelled'),
    'created_at', billing.iso(p_mig.created_at))
$$;

create or replace function billing.plan_price_migrate(p_community_id text, p_plan_id text, p_notice_days integer)
  returns jsonb language plpgsql volatile
as $$
declare
  v_plan billing.plans;
  v_mig billing.price_migrations;
  v_ids text[];
  v_cleared integer;
begin
  perform set_config('app.community_id', p_community_id, true);
  if p_notice_days is null or p_notice_days < 0 or p_notice_days > 3650 then
    perform billing.raise('BL422', 'notice_days must be a whole number of days from 0 to 3650.', 'notice_days');
  end if;
  select * into v_plan from billing.plans p where p.community_id = p_community_id and (p.id = p_plan_id or p.key = p_plan_id)
  order by (p.id = p_plan_id) desc limit 1 for update;
  if v_plan.id is null then
    perform billing.raise('BL404', 'No plan ' || coalesce(p_plan_id, '') || ' in community ' || p_community_id || '.');
  end if;
  if v_plan.interval is null then
    perform billing.raise('BL409', 'Plan ' || v_plan.key || ' is one-time: it has no subscribers to migrate.');
  end if;
  insert into billing.price_migrations (community_id, plan_id, price_cents, currency, notice_days, notice_ends_at, created_at)
  values (p_community_id, v_plan.id, v_plan.amount_cents, v_plan.currency, p_notice_days,
    billing.now() + make_interval(days => p_notice_days), billing.now())
  returning * into v_mig;
  with moved as (
    update billing.subscriptions s set price_migration_id = v_mig.id
    where s.community_id = p_community_id and s.plan_id = v_plan.id and s.status <> 'cancelled'
      and s.price_cents <> v_plan.amount_cents
    returning s.id)
  select coalesce(array_agg(m.id order by m.id), '{}') into v_ids from moved m;
  update billing.subscriptions s set price_migration_id = null
  where s.community_id = p_community_id and s.plan_id = v_plan.id and s.price_migration_id is not null
    and s.price_migration_id <> v_mig.id;
  get diagnostics v_cleared = row_count;
  update billing.price_migrations m set subscriptions = cardinality(v_ids)
  where m.community_id = p_community_id and m.id = v_mig.id returning * into v_mig;
  return billing.price_migration_json(v_mig) || jsonb_build_object('plan_key', v_plan.key,
    'subscription_ids', to_jsonb(v_ids), 'cleared_subscriptions', v_cleared);
end
$$;

create or replace function billing.plan_price_subscribers(p_community_id text, p_plan_id text, p_limit integer)
  returns jsonb language sql stable
as $$
  select jsonb_build_object('subscriptions', count(*)::integer,
    'pending_migration', count(*) filter (where s.price_migration_id is not null)::integer,
    'subscription_ids', coalesce(to_jsonb((array_agg(s.id order by s.id))[1:p_limit]), '[]'))
  from billing.subscriptions s
  join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
  where s.community_id = p_community_id and s.plan_id = p_plan_id and s.status <> 'cancelled'
    and s.price_cents <> p.amount_cents
$$;

create or replace function billing.subscription_json(p_sub billing.subscriptions, p_plan billing.plans,
  p_tier billing.tiers) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p_sub.id,
    'status', p_sub.status,
    'plan_id', p_sub.plan_id,
    'plan_name', p_plan.name,
    'tier_id', p_plan.tier_id,
    'tier_name', p_tier.name,
    'member_id', p_sub.member_id,
    'amount_cents', p_sub.price_cents,
    'currency', p_plan.currency,
    'interval', p_plan.interval,
    'current_period_end', billing.iso(p_sub.current_period_end),
    'cancel_at', billing.iso(p_sub.cancel_at),
    'paused_until', billing.iso(p_sub.paused_until),
    'scheduled_plan_id', p_sub.scheduled_plan_id,
    'scheduled_at', billing.iso(p_sub.scheduled_at),
    'created_at', billing.iso(p_sub.created_at),
    'updated_at', billing.iso(p_sub.updated_at))
$$;

do $$
begin
  if not exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace
                 where n.nspname = 'billing' and t.typname = 'renewal_terms') then
    create type billing.renewal_terms as (plan_id text, anchor timestamptz, period_end timestamptz,
      currency text, lines jsonb, credit_cents bigint, price_cents integer, price_migration_id text);
  end if;
  -- The price the renewal charges and the price migration still pending after it.
  if not exists (select 1 from pg_attribute a where a.attrelid = 'billing.renewal_terms'::regclass
                 and a.attname = 'price_cents' and not a.attisdropped) then
    alter type billing.renewal_terms add attribute price_cents integer, add attribute price_migration_id text;
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
  v_price bigint;
begin
  select * into v_plan from billing.plans p
  where p.community_id = p_sub.community_id and p.id = coalesce(p_sub.scheduled_plan_id, p_sub.plan_id);
  v_t.plan_id := v_plan.id;
  v_t.price_cents := p_sub.price_cents;
  v_t.price_migration_id := p_sub.price_migration_id;
  if v_plan.id <> p_sub.plan_id then
    v_t.price_cents := v_plan.amount_cents;
    v_t.price_migration_id := null;
  elsif p_sub.price_migration_id is not null then
    select m.price_cents into v_price from billing.price_migrations m
    where m.community_id = p_sub.community_id and m.id = p_sub.price_migration_id and m.notice_ends_at <= p_at;
    if v_price is not null then
      v_t.price_cents := v_price;
      v_t.price_migration_id := null;
    end if;
  end if;
  v_price := v_t.price_cents;
  v_t.currency := v_plan.currency;
  v_t.anchor := case when p_sub.status = 'trialing' or p_sub.billing_anchor is null
                       or v_plan.id <> p_sub.plan_id and v_plan.interval is distinct from
                         (select p.interval from billing.plans p where p.community_id = p_sub.community_id and p.id = p_sub.plan_id)
                     then p_at else p_sub.billing_anchor end;
  v_t.period_end := billing.next_period_end(v_t.anchor, v_plan.interval, p_at);
  v_discount := billing.subscription_discount_cents(p_sub, v_price, p_at);
  v_t.lines := jsonb_build_array(billing.plan_line(v_plan, v_price, p_at, v_t.period_end));
  if v_discount > 0 then
    select d.code into v_code from billing.discount_codes d where d.community_id = p_sub.community_id and d.id = p_sub.discount_id;
    v_t.lines := v_t.lines || billing.discount_line(v_code, v_discount, p_at, v_t.period_end);
  end if;
  v_t.credit_cents := least(p_sub.credit_cents, v_price - v_discount);
  if v_t.credit_cents > 0 then
    v_t.lines := v_t.lines || jsonb_build_object('type', 'proration', 'description', 'Credit from an earlier plan change',
      'amount_cents', -v_t.credit_cents, 'period_start', billing.iso(p_at), 'period_end', billing.iso(v_t.period_end));
  end if;
  return v_t;
end
$$;

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
          price_cents = v_terms.price_cents, price_migration_id = v_terms.price_migration_id,
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
    -- The credit is for what the subscriber paid (their price), not the plan's price now.
    credit_cents := round(p_sub.price_cents * v_frac)::bigint;
  end if;
  applied_cents := least(credit_cents, charge_cents);
end
$$;

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
    v_discount := billing.subscription_discount_cents(v_sub, v_sub.price_cents, p_at);
    v_lines := jsonb_build_array(billing.plan_line(v_plan, v_sub.price_cents, p_at, v_end));
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

  if v_plan.interval is not null then
    if p_details->>'provider_ref' is not null then
      select s.id into v_sub_id from billing.subscriptions s
      where s.community_id = v_cs.community_id and s.provider_ref = p_details->>'provider_ref';
    end if;
    if v_sub_id is null then
      v_trial_end := coalesce((p_details->>'trial_end')::timestamptz,
        case when v_plan.trial_days > 0 and p_details->>'status' is null then v_now + make_interval(days => v_plan.trial_days) end);
      insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start,
        current_period_end, trial_end, cancel_at, client_reference_id, checkout_id, provider, provider_ref,
        provider_customer_ref, provider_updated_at, billing_anchor, discount_id, created_at, price_cents)
      values (v_cs.community_id, v_cs.member_id, v_plan.id,
        coalesce(p_details->>'status', case when v_trial_end is not null then 'trialing' else 'active' end),
        coalesce((p_details->>'period_start')::timestamptz, v_now),
        coalesce((p_details->>'period_end')::timestamptz, v_trial_end, billing.add_utc(v_now, billing.plan_interval(v_plan.interval))),
        v_trial_end, (p_details->>'cancel_at')::timestamptz, v_cs.client_reference_id, v_cs.id, v_cs.provider,
        p_details->>'provider_ref', p_details->>'customer_ref', (p_details->>'provider_updated_at')::timestamptz,
        coalesce(v_trial_end, (p_details->>'period_start')::timestamptz, v_now), v_cs.discount_id, v_now,
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
    v_inv := billing.invoice_open(null, v_pur_id, v_cs.member_id, 'purchase', v_cs.currency, v_lines, v_now, null,
      v_cs.provider, v_now, v_cs.id, case when v_cs.provider = 'stripe' then p_details->>'provider_ref' end);
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

create or replace view analytics.subscription_mrr with (security_invoker = true) as
  select s.community_id, s.id as subscription_id, s.member_id, s.status, p.id as plan_id, p.tier_id,
    p.currency,
    case when p.interval = 'year' then (s.price_cents - d.cents) / 12.0
         else (s.price_cents - d.cents)::numeric end as monthly_cents,
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
  where (n.status, n.plan_id, n.member_id, n.discount_id, n.created_at, n.trial_end, n.cancelled_at, n.cancel_requested_at, n.price_cents)
        is distinct from (o.status, o.plan_id, o.member_id, o.discount_id, o.created_at, o.trial_end, o.cancelled_at, o.cancel_requested_at, o.price_cents)
     or n.status in ('paused', 'cancelled', 'cancelling') and n.updated_at is distinct from o.updated_at
     or n.discount_id is not null and n.current_period_end is distinct from o.current_period_end;
  if v_ids is not null then
    perform billing_private.analytics_refresh(v_communities, v_ids);
  end if;
  return null;
end
$$;
