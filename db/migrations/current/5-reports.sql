-- Reports operators ask for (issue 31 item 5; docs/decisions/reports.md): revenue,
-- cohorts and churn, ARPU and LTV, trial conversion and payment recovery, defined once
-- in views of the analytics schema (functions/48-reports.sql, new), read by the API's
-- GET /v1/analytics/... operations and exposed to GraphQL (functions/95-graphql.sql).
--!include functions/48-reports.sql
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
--!include 98-dispatch.sql
