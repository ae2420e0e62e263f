--! Previous: sha1:f5e1a1c24a46dbc162d12fdf439feb7709ef1539
--! Hash: sha1:61c5a4c51c0454563026605423be5a2542bd0eeb
--! Message: reports

--! split: 1-current.sql
-- Enter migration here

--! split: 5-reports.sql
-- Reports operators ask for (issue 31 item 5; docs/decisions/reports.md): revenue,
-- cohorts and churn, ARPU and LTV, trial conversion and payment recovery, defined once
-- in views of the analytics schema (functions/48-reports.sql, new), read by the API's
-- GET /v1/analytics/... operations and exposed to GraphQL (functions/95-graphql.sql).
--! Included functions/48-reports.sql
-- functions/48-reports.sql, safely replaced (create or replace; a migration may
-- --!include it): the reports operators ask for (issue 31 item 5), views of the
-- analytics schema and the billing_api reads of GET /v1/analytics/revenue, cohorts,
-- churn, member-value, trial-conversion and payment-recovery (JSON and CSV). Also:
-- functions/48-analytics.sql (MRR, its movements), tables/48-analytics.sql.
--
-- Each figure is defined here once, in a security_invoker view (RLS fences the
-- community: an operator's SQL login, GraphQL's billing_graphql views and the API read
-- the same rows); the API functions only filter them by period and fill the empty
-- ones. Days and months are UTC dates of the community's clock (billing.now()), as MRR's
-- are. What each figure means: docs/decisions/reports.md; test/analytics/
-- reports-recompute.test.ts recomputes every one of them in TypeScript from the rows.

-- Revenue per day and currency, net of tax (the tax collected is the tax office's; MRR
-- leaves it out too): gross is what paid invoices collected (every charge is an
-- invoice: subscriptions, plan changes, one-time purchases), less their tax, dated by
-- paid_at; refunds are the credit notes, less the tax they credit, dated when refunded;
-- net = gross - refunds. Every day with any.
create or replace view analytics.revenue_report_daily with (security_invoker = true) as
  select r.community_id, r.day, r.currency,
    sum(r.gross)::bigint as gross_cents, sum(r.refunds)::bigint as refunds_cents,
    sum(r.gross - r.refunds)::bigint as net_cents,
    sum(r.paid)::bigint as paid_invoices, sum(r.refunded)::bigint as refunds
  from (
    select i.community_id, (i.paid_at at time zone 'UTC')::date as day, i.currency,
      i.amount_paid_cents - i.tax_cents as gross, 0::bigint as refunds, 1 as paid, 0 as refunded
    from billing.invoices i where i.status = 'paid' and i.amount_paid_cents > 0
    union all
    select n.community_id, (n.created_at at time zone 'UTC')::date, n.currency,
      0, n.amount_cents - n.tax_cents, 0, 1
    from billing.credit_notes n
  ) r
  group by r.community_id, r.day, r.currency;

-- The same per calendar month (month: its first day), every month with any.
create or replace view analytics.revenue_report_monthly with (security_invoker = true) as
  select d.community_id, date_trunc('month', d.day::timestamp)::date as month, d.currency,
    sum(d.gross_cents)::bigint as gross_cents, sum(d.refunds_cents)::bigint as refunds_cents,
    sum(d.net_cents)::bigint as net_cents, sum(d.paid_invoices)::bigint as paid_invoices,
    sum(d.refunds)::bigint as refunds
  from analytics.revenue_report_daily d
  group by d.community_id, date_trunc('month', d.day::timestamp)::date, d.currency;

-- The months the monthly reports cover: from the month of the community's first MRR
-- movement, paid invoice, trial end or failed payment to the current one (community
-- clock); last_day is the month's last day, or today for the current month.
create or replace view analytics.report_months with (security_invoker = true) as
  select c.id as community_id, m::date as month,
    least((m + interval '1 month' - interval '1 day')::date, t.today) as last_day
  from billing.communities c
  cross join lateral (select (billing.community_now(c.id) at time zone 'UTC')::date as today offset 0) t
  cross join lateral (select least(
      (select min(mm.day) from billing.mrr_movements mm where mm.community_id = c.id),
      (select min((i.paid_at at time zone 'UTC')::date) from billing.invoices i
        where i.community_id = c.id and i.status = 'paid'),
      (select min((s.trial_end at time zone 'UTC')::date) from billing.subscriptions s
        where s.community_id = c.id and s.trial_end is not null),
      (select min((a.attempted_at at time zone 'UTC')::date) from billing.payment_attempts a
        where a.community_id = c.id and a.status = 'failed')) as first_day offset 0) f
  cross join lateral generate_series(date_trunc('month', f.first_day::timestamp),
    date_trunc('month', t.today::timestamp), interval '1 month') m
  where f.first_day is not null and f.first_day <= t.today;

-- A member is paying at the end of a day when one of its subscriptions bills then: the
-- recorded MRR movements (billing.mrr_movements, the one history of who bills; a
-- trial does not bill) up to that day start more subscriptions of it billing than they
-- stop. Per report month: whether each member that ever billed by its last day was
-- paying at the month's start (the end of the day before) and at its end (last_day).
create or replace view analytics.member_months with (security_invoker = true) as
  select rm.community_id, rm.month, b.member_id,
    coalesce(sum(b.delta) filter (where b.day < rm.month), 0) > 0 as paying_at_start,
    sum(b.delta) > 0 as paying_at_end
  from analytics.report_months rm
  join (select mm.community_id, mm.member_id, mm.day, sum(mm.to_billing::int - mm.from_billing::int) as delta
        from billing.mrr_movements mm group by mm.community_id, mm.member_id, mm.day) b
    on b.community_id = rm.community_id and b.day <= rm.last_day
  group by rm.community_id, rm.month, b.member_id;

-- A member's cohort: the month (UTC) its first subscription started billing (its first
-- MRR movement that starts billing; a trial counts from its end, when it bills).
create or replace view analytics.member_cohorts with (security_invoker = true) as
  select mm.community_id, mm.member_id, date_trunc('month', min(mm.day)::timestamp)::date as cohort_month,
    min(mm.day) as first_paying_day
  from billing.mrr_movements mm
  where mm.to_billing and not mm.from_billing
  group by mm.community_id, mm.member_id;

-- Retention by monthly cohort: for each cohort and each month since (0 = the cohort's
-- own), how many of its members were paying at the month's end (today for the current
-- month), and that share of the cohort. churned = members - retained.
create or replace view analytics.cohort_retention with (security_invoker = true) as
  select c.community_id, c.cohort_month, rm.month,
    ((extract(year from rm.month) - extract(year from c.cohort_month)) * 12
      + extract(month from rm.month) - extract(month from c.cohort_month))::integer as month_offset,
    count(*)::bigint as members,
    count(*) filter (where mo.paying_at_end)::bigint as retained,
    count(*) filter (where not coalesce(mo.paying_at_end, false))::bigint as churned,
    round(count(*) filter (where mo.paying_at_end)::numeric / count(*), 4) as retention_rate
  from analytics.member_cohorts c
  join analytics.report_months rm on rm.community_id = c.community_id and rm.month >= c.cohort_month
  left join analytics.member_months mo on mo.community_id = c.community_id and mo.month = rm.month
    and mo.member_id = c.member_id
  group by c.community_id, c.cohort_month, rm.month;

-- Churn per month (customer churn, as Baremetrics' user churn): of the members paying
-- at the month's start, those not paying at its end (today for the current month);
-- churn_rate = churned / paying_at_start, null when none paid at the start. A member who
-- stops and comes back within the month did not churn; one who joins and leaves in it
-- is not counted (not paying at the start).
create or replace view analytics.churn_monthly with (security_invoker = true) as
  select rm.community_id, rm.month,
    count(mo.member_id) filter (where mo.paying_at_start)::bigint as paying_at_start,
    count(mo.member_id) filter (where mo.paying_at_start and not mo.paying_at_end)::bigint as churned,
    count(mo.member_id) filter (where mo.paying_at_end)::bigint as paying_at_end,
    round(count(mo.member_id) filter (where mo.paying_at_start and not mo.paying_at_end)::numeric
      / nullif(count(mo.member_id) filter (where mo.paying_at_start), 0), 4) as churn_rate
  from analytics.report_months rm
  left join analytics.member_months mo on mo.community_id = rm.community_id and mo.month = rm.month
  group by rm.community_id, rm.month;

-- Average revenue per member (ARPU) and lifetime value per month and currency: ARPU =
-- the month's net revenue (analytics.revenue_report_monthly) / the members who paid an
-- invoice in it (paying_members: distinct members with a paid invoice of more than 0 in
-- that currency); LTV = ARPU / the month's churn rate (analytics.churn_monthly, exact,
-- not the rounded figure), as Baremetrics and Stripe's estimate do: the revenue of a
-- member who stays 1 / churn months. Null when no member paid, or none churned (an
-- unbounded lifetime is no figure). Every month with revenue.
create or replace view analytics.member_value_monthly with (security_invoker = true) as
  select r.community_id, r.month, r.currency, r.net_cents, p.paying_members,
    round(r.net_cents::numeric / nullif(p.paying_members, 0))::bigint as arpu_cents,
    ch.churn_rate,
    round(r.net_cents::numeric / nullif(p.paying_members, 0)
      / nullif(ch.churned::numeric / nullif(ch.paying_at_start, 0), 0))::bigint as ltv_cents
  from analytics.revenue_report_monthly r
  left join lateral (select count(distinct i.member_id)::bigint as paying_members
    from billing.invoices i
    where i.community_id = r.community_id and i.currency = r.currency and i.status = 'paid'
      and i.amount_paid_cents > 0
      and i.paid_at >= (r.month::timestamp at time zone 'UTC')
      and i.paid_at < ((r.month + interval '1 month')::timestamp at time zone 'UTC')) p on true
  left join analytics.churn_monthly ch on ch.community_id = r.community_id and ch.month = r.month;

-- Trial conversion per month of the trials' end: a trial is a subscription with a
-- trial_end; it ended when that is past by the community's clock (a trial cancelled
-- early ends then too, unconverted); it converted when one of its invoices of more than
-- 0 was paid at or after the trial's end (the first charge, at once or after dunning).
create or replace view analytics.trial_conversion_monthly with (security_invoker = true) as
  select t.community_id, t.month, count(*)::bigint as trials_ended,
    count(*) filter (where t.converted)::bigint as converted,
    round(count(*) filter (where t.converted)::numeric / count(*), 4) as conversion_rate
  from (
    select s.community_id, date_trunc('month', (s.trial_end at time zone 'UTC'))::date as month,
      exists (select 1 from billing.invoices i where i.community_id = s.community_id and i.subscription_id = s.id
        and i.status = 'paid' and i.amount_paid_cents > 0 and i.paid_at >= s.trial_end) as converted
    from billing.subscriptions s
    where s.trial_end is not null and s.trial_end <= billing.community_now(s.community_id)
  ) t
  group by t.community_id, t.month;

-- Failed-payment recovery per month of the first failure: invoices with a failed
-- payment attempt; recovered: paid since (a dunning retry, or the member's own payment,
-- before the dunning gave up: after that the invoice is uncollectible and is never
-- paid); lost: uncollectible or void; pending: still open (retries ahead).
-- recovery_rate = recovered / failed_invoices; recovered_cents in its currency.
create or replace view analytics.payment_recovery_monthly with (security_invoker = true) as
  select f.community_id, f.month, f.currency, count(*)::bigint as failed_invoices,
    count(*) filter (where f.status = 'paid')::bigint as recovered,
    count(*) filter (where f.status in ('uncollectible', 'void'))::bigint as lost,
    count(*) filter (where f.status in ('open', 'draft'))::bigint as pending,
    coalesce(sum(f.amount_paid_cents) filter (where f.status = 'paid'), 0)::bigint as recovered_cents,
    round(count(*) filter (where f.status = 'paid')::numeric / count(*), 4) as recovery_rate
  from (
    select i.community_id, i.currency, i.status, i.amount_paid_cents,
      date_trunc('month', (a.first_failed_at at time zone 'UTC'))::date as month
    from billing.invoices i
    cross join lateral (select min(pa.attempted_at) as first_failed_at from billing.payment_attempts pa
      where pa.community_id = i.community_id and pa.invoice_id = i.id and pa.status = 'failed') a
    where a.first_failed_at is not null
  ) f
  group by f.community_id, f.month, f.currency;

grant select on analytics.revenue_report_daily, analytics.revenue_report_monthly, analytics.report_months,
  analytics.member_months, analytics.member_cohorts, analytics.cohort_retention, analytics.churn_monthly,
  analytics.member_value_monthly, analytics.trial_conversion_monthly, analytics.payment_recovery_monthly
  to billing_api, billing_operator;

-- ---- the API's reads (GET /v1/analytics/...; the CSV twins read the same) --------------
--
-- The period asked (from, to: dates; the month of each for the monthly reports) with
-- its defaults: the 30 days to today, or the 12 months to this one (community clock,
-- UTC). A daily report covers at most 366 days.
create or replace function billing.analytics_period(p_args jsonb, p_monthly boolean, out v_from date, out v_to date)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_today date := (billing.now() at time zone 'UTC')::date;
begin
  v_to := coalesce((p_args->>'to')::date, v_today);
  if p_monthly then
    v_to := date_trunc('month', v_to::timestamp)::date;
    v_from := coalesce(date_trunc('month', (p_args->>'from')::date::timestamp)::date, (v_to - interval '11 months')::date);
  else
    v_from := coalesce((p_args->>'from')::date, v_to - 29);
    if v_to - v_from > 365 then
      perform billing.raise('BL422', 'from: a daily report covers at most 366 days; ask for granularity=month for longer.', 'from');
    end if;
  end if;
  if v_from > v_to then
    perform billing.raise('BL422', 'from: must not be after to.', 'from');
  end if;
end
$$;

-- Revenue per day or month: every period of the range for each currency with revenue
-- in it (0 where none), oldest first.
create or replace function billing_api.analytics_revenue(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_month boolean := coalesce(p_args->>'granularity', 'day') = 'month';
  v_from date;
  v_to date;
  v_rows jsonb;
begin
  select p.v_from, p.v_to into v_from, v_to from billing.analytics_period(p_args, v_month) p;
  with r as (
    select d.day as period, d.currency, d.gross_cents, d.refunds_cents, d.net_cents, d.paid_invoices, d.refunds
    from analytics.revenue_report_daily d where not v_month and d.day between v_from and v_to
    union all
    select m.month, m.currency, m.gross_cents, m.refunds_cents, m.net_cents, m.paid_invoices, m.refunds
    from analytics.revenue_report_monthly m where v_month and m.month between v_from and v_to)
  select coalesce(jsonb_agg(jsonb_build_object('period', to_char(g.p, 'YYYY-MM-DD'), 'currency', c.currency,
      'gross_cents', coalesce(r.gross_cents, 0), 'refunds_cents', coalesce(r.refunds_cents, 0),
      'net_cents', coalesce(r.net_cents, 0), 'paid_invoices', coalesce(r.paid_invoices, 0),
      'refunds', coalesce(r.refunds, 0)) order by g.p, c.currency), '[]')
    into v_rows
  from generate_series(v_from::timestamp, v_to::timestamp, case when v_month then interval '1 month' else interval '1 day' end) g(p)
  cross join (select distinct r.currency from r) c
  left join r on r.period = g.p::date and r.currency = c.currency;
  return jsonb_build_object('granularity', case when v_month then 'month' else 'day' end,
    'from', to_char(v_from, 'YYYY-MM-DD'), 'to', to_char(v_to, 'YYYY-MM-DD'), 'data', v_rows);
end
$$;

-- Retention of the cohorts of the months asked, each with every month since.
create or replace function billing_api.analytics_cohorts(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_from date;
  v_to date;
begin
  select p.v_from, p.v_to into v_from, v_to from billing.analytics_period(p_args, true) p;
  return jsonb_build_object('from', to_char(v_from, 'YYYY-MM-DD'), 'to', to_char(v_to, 'YYYY-MM-DD'), 'data',
    (select coalesce(jsonb_agg(jsonb_build_object('cohort', to_char(c.cohort_month, 'YYYY-MM-DD'),
        'month', to_char(c.month, 'YYYY-MM-DD'), 'month_offset', c.month_offset, 'members', c.members,
        'retained', c.retained, 'churned', c.churned, 'retention_rate', c.retention_rate)
        order by c.cohort_month, c.month), '[]')
     from analytics.cohort_retention c where c.cohort_month between v_from and v_to));
end
$$;

-- Churn, ARPU and LTV, trial conversion, payment recovery: one row per month asked
-- (per currency for the money ones), oldest first.
create or replace function billing_api.analytics_churn(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_from date;
  v_to date;
begin
  select p.v_from, p.v_to into v_from, v_to from billing.analytics_period(p_args, true) p;
  return jsonb_build_object('from', to_char(v_from, 'YYYY-MM-DD'), 'to', to_char(v_to, 'YYYY-MM-DD'), 'data',
    (select coalesce(jsonb_agg(jsonb_build_object('month', to_char(c.month, 'YYYY-MM-DD'),
        'paying_at_start', c.paying_at_start, 'churned', c.churned, 'paying_at_end', c.paying_at_end,
        'churn_rate', c.churn_rate) order by c.month), '[]')
     from analytics.churn_monthly c where c.month between v_from and v_to));
end
$$;

create or replace function billing_api.analytics_member_value(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_from date;
  v_to date;
begin
  select p.v_from, p.v_to into v_from, v_to from billing.analytics_period(p_args, true) p;
  return jsonb_build_object('from', to_char(v_from, 'YYYY-MM-DD'), 'to', to_char(v_to, 'YYYY-MM-DD'), 'data',
    (select coalesce(jsonb_agg(jsonb_build_object('month', to_char(v.month, 'YYYY-MM-DD'), 'currency', v.currency,
        'net_cents', v.net_cents, 'paying_members', v.paying_members, 'arpu_cents', v.arpu_cents,
        'churn_rate', v.churn_rate, 'ltv_cents', v.ltv_cents) order by v.month, v.currency), '[]')
     from analytics.member_value_monthly v where v.month between v_from and v_to));
end
$$;

create or replace function billing_api.analytics_trial_conversion(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_from date;
  v_to date;
begin
  select p.v_from, p.v_to into v_from, v_to from billing.analytics_period(p_args, true) p;
  return jsonb_build_object('from', to_char(v_from, 'YYYY-MM-DD'), 'to', to_char(v_to, 'YYYY-MM-DD'), 'data',
    (select coalesce(jsonb_agg(jsonb_build_object('month', to_char(t.month, 'YYYY-MM-DD'),
        'trials_ended', t.trials_ended, 'converted', t.converted, 'conversion_rate', t.conversion_rate)
        order by t.month), '[]')
     from analytics.trial_conversion_monthly t where t.month between v_from and v_to));
end
$$;

create or replace function billing_api.analytics_payment_recovery(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_from date;
  v_to date;
begin
  select p.v_from, p.v_to into v_from, v_to from billing.analytics_period(p_args, true) p;
  return jsonb_build_object('from', to_char(v_from, 'YYYY-MM-DD'), 'to', to_char(v_to, 'YYYY-MM-DD'), 'data',
    (select coalesce(jsonb_agg(jsonb_build_object('month', to_char(r.month, 'YYYY-MM-DD'), 'currency', r.currency,
        'failed_invoices', r.failed_invoices, 'recovered', r.recovered, 'lost', r.lost, 'pending', r.pending,
        'recovered_cents', r.recovered_cents, 'recovery_rate', r.recovery_rate) order by r.month, r.currency), '[]')
     from analytics.payment_recovery_monthly r where r.month between v_from and v_to));
end
$$;

-- ---- execute rights (opt-in: see 00-foundation.sql) --------------------------------------

grant execute on function billing.analytics_period(jsonb, boolean) to billing_api;
grant execute on function billing_api.analytics_revenue(jsonb), billing_api.analytics_cohorts(jsonb),
  billing_api.analytics_churn(jsonb), billing_api.analytics_member_value(jsonb),
  billing_api.analytics_trial_conversion(jsonb), billing_api.analytics_payment_recovery(jsonb) to billing_api;
--! EndIncluded functions/48-reports.sql
-- The reports (48-reports.sql; docs/decisions/reports.md).
create or replace view billing_graphql.revenue_report_daily with (security_invoker = true, security_barrier = false) as
  select r.day, r.currency, r.gross_cents, r.refunds_cents, r.net_cents, r.paid_invoices, r.refunds
  from analytics.revenue_report_daily r
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.revenue_report_daily is E'@primaryKey day,currency\n@scope analytics:read\n@behavior -insert -update -delete\nRevenue per day and currency, net of tax: gross (paid invoices), refunds (credit notes) and net. Needs analytics:read.';

create or replace view billing_graphql.revenue_report_monthly with (security_invoker = true, security_barrier = false) as
  select r.month, r.currency, r.gross_cents, r.refunds_cents, r.net_cents, r.paid_invoices, r.refunds
  from analytics.revenue_report_monthly r
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.revenue_report_monthly is E'@primaryKey month,currency\n@scope analytics:read\n@behavior -insert -update -delete\nRevenue per calendar month and currency, net of tax: gross, refunds and net. Needs analytics:read.';

create or replace view billing_graphql.cohort_retention with (security_invoker = true, security_barrier = false) as
  select c.cohort_month, c.month, c.month_offset, c.members, c.retained, c.churned, c.retention_rate
  from analytics.cohort_retention c
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.cohort_retention is E'@primaryKey cohort_month,month\n@scope analytics:read\n@behavior -insert -update -delete\nRetention by monthly cohort (members by the month they first paid): members paying at each month''s end. Needs analytics:read.';

create or replace view billing_graphql.churn_monthly with (security_invoker = true, security_barrier = false) as
  select c.month, c.paying_at_start, c.churned, c.paying_at_end, c.churn_rate
  from analytics.churn_monthly c
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.churn_monthly is E'@primaryKey month\n@scope analytics:read\n@behavior -insert -update -delete\nMember churn per month: members paying at its start who were not at its end. Needs analytics:read.';

create or replace view billing_graphql.member_value_monthly with (security_invoker = true, security_barrier = false) as
  select v.month, v.currency, v.net_cents, v.paying_members, v.arpu_cents, v.churn_rate, v.ltv_cents
  from analytics.member_value_monthly v
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.member_value_monthly is E'@primaryKey month,currency\n@scope analytics:read\n@behavior -insert -update -delete\nAverage revenue per paying member (ARPU) and lifetime value (ARPU / churn rate) per month and currency. Needs analytics:read.';

create or replace view billing_graphql.trial_conversion_monthly with (security_invoker = true, security_barrier = false) as
  select t.month, t.trials_ended, t.converted, t.conversion_rate
  from analytics.trial_conversion_monthly t
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.trial_conversion_monthly is E'@primaryKey month\n@scope analytics:read\n@behavior -insert -update -delete\nTrials ended per month and how many were paid after. Needs analytics:read.';

create or replace view billing_graphql.payment_recovery_monthly with (security_invoker = true, security_barrier = false) as
  select r.month, r.currency, r.failed_invoices, r.recovered, r.lost, r.pending, r.recovered_cents, r.recovery_rate
  from analytics.payment_recovery_monthly r
  where (select billing.has_scope('analytics:read'));
comment on view billing_graphql.payment_recovery_monthly is E'@primaryKey month,currency\n@scope analytics:read\n@behavior -insert -update -delete\nInvoices whose payment failed, per month of the first failure, and how many were paid since. Needs analytics:read.';

grant select on all tables in schema billing_graphql to billing_api;
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
