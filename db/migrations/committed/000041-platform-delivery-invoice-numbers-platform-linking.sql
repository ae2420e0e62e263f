--! Previous: sha1:37f212125bb7c08c74b1c0c6ce2524fb194f1e07
--! Hash: sha1:0d633d7f279ad95c621b79ab9e7fa1a44822bab4
--! Message: platform delivery, invoice numbers, platform linking

--! split: 1-current.sql
-- Enter migration here

--! split: 10-platform-delivery.sql
-- Benefit delivery (issue 29 item 2): deliveries, the platform action log, the
-- member's delivery job queued by the ledger's triggers, delivery in member entitlements.

create table if not exists billing.benefit_deliveries (
  community_id text collate "C" not null,
  member_id text collate "C" not null,
  platform_config_id text collate "C" not null,
  type text not null,
  value text not null,
  want text not null check (want in ('present', 'absent')),
  status text not null check (status in ('pending', 'delivered', 'failed', 'action_required')),
  applied_uid text,
  error text,
  state jsonb not null default '{}',
  attempts integer not null default 0,
  updated_at timestamptz not null default now(),
  primary key (community_id, member_id, platform_config_id, type, value),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, platform_config_id) references billing.platform_configs on delete cascade
);
create index if not exists benefit_deliveries_config on billing.benefit_deliveries (community_id, platform_config_id, status);
alter table billing.benefit_deliveries enable row level security;
alter table billing.benefit_deliveries force row level security;
drop policy if exists tenant on billing.benefit_deliveries;
create policy tenant on billing.benefit_deliveries
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.benefit_deliveries;
create policy owner_access on billing.benefit_deliveries to current_user using (true) with check (true);
grant select on billing.benefit_deliveries to billing_api;
revoke insert, update, delete on billing.benefit_deliveries from billing_api;
drop policy if exists member_fence on billing.benefit_deliveries;
create policy member_fence on billing.benefit_deliveries as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));

create table if not exists billing.platform_actions (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('pact'),
  member_id text collate "C" not null,
  platform_config_id text collate "C" not null,
  action text not null,
  target text not null,
  outcome text not null check (outcome in ('ok', 'retry', 'action_required')),
  status_code integer,
  error text,
  created_at timestamptz not null default now(),
  primary key (community_id, id),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, platform_config_id) references billing.platform_configs on delete cascade
);
create index if not exists platform_actions_config on billing.platform_actions (community_id, platform_config_id, id);
create index if not exists platform_actions_member on billing.platform_actions (community_id, member_id, id);
alter table billing.platform_actions enable row level security;
alter table billing.platform_actions force row level security;
drop policy if exists tenant on billing.platform_actions;
create policy tenant on billing.platform_actions
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.platform_actions;
create policy owner_access on billing.platform_actions to current_user using (true) with check (true);
grant select on billing.platform_actions to billing_api;
revoke insert, update, delete on billing.platform_actions from billing_api;
drop policy if exists member_fence on billing.platform_actions;
create policy member_fence on billing.platform_actions as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));

--! Included functions/55-platform-delivery.sql
-- functions/55-platform-delivery.sql, safely replaced (create or replace; a migration
-- may --!include it): the functions and execute grants of 55-platform-delivery. Also:
-- tables/55-platform-delivery.sql.
--

-- Queues one delivery job per member (graphile-worker job key deliver:<community>:<member>):
-- a job not yet started is replaced and runs now (a change after a failed attempt is
-- retried at once); a running one is left to finish and a new one follows it. The job
-- reads the member's state when it runs, so one job covers every change before it.
create or replace function billing_private.enqueue_deliveries(p_communities text[], p_members text[])
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if coalesce(cardinality(p_members), 0) = 0 then
    return;
  end if;
  perform graphile_worker.add_jobs(array(
    select row('platform_deliveries__apply', json_build_object('community_id', x.c, 'member_id', x.m), null, null,
      null, 'deliver:' || x.c || ':' || x.m, null, null)::graphile_worker.job_spec
    from (select distinct c, m from unnest(p_communities, p_members) as u(c, m)) x));
end
$$;

-- Statement-level over the ledger's transition tables: members whose active benefits,
-- status or identities changed (rows without benefits, before or after, never reach a
-- platform).
create or replace function billing_private.tg_member_entitlements__deliveries() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_c text[];
  v_m text[];
begin
  if tg_op = 'INSERT' then
    select array_agg(n.community_id), array_agg(n.member_id) into v_c, v_m
    from new_rows n where n.benefits <> '[]';
  else
    select array_agg(n.community_id), array_agg(n.member_id) into v_c, v_m
    from new_rows n join old_rows o on o.community_id = n.community_id and o.id = n.id
    where (n.benefits <> '[]' or o.benefits <> '[]')
      and (n.status, n.benefits, n.identities) is distinct from (o.status, o.benefits, o.identities);
  end if;
  perform billing_private.enqueue_deliveries(v_c, v_m);
  return null;
end
$$;

-- What the member's delivery job has to make true, one item per benefit the member
-- has (want present) or the platform may still hold (a stored row, want absent):
-- the platform, its settings and bot token ciphertext, the member's identity on it
-- now (uid) and the user the platform holds it for (applied_uid), the names of the
-- entitlements giving it (for the audit log), and the stored state. For the worker
-- (billing_worker), any community.
create or replace function billing_private.platform_delivery_plan(p_community_id text, p_member_id text)
  returns jsonb language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return coalesce((
    with desired as (
      select b->>'platform_config_id' as pcfg, b->>'type' as type, b->>'value' as value,
        string_agg(distinct e.name, ', ') as names
      from billing.member_entitlements me
      cross join lateral jsonb_array_elements(me.benefits) b
      join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
      where me.community_id = p_community_id and me.member_id = p_member_id and me.status = 'active'
      group by 1, 2, 3
    ), stored as (
      select d.* from billing.benefit_deliveries d
      where d.community_id = p_community_id and d.member_id = p_member_id
    ), items as (
      select coalesce(d.pcfg, s.platform_config_id) as pcfg, coalesce(d.type, s.type) as type,
        coalesce(d.value, s.value) as value, d.names,
        case when d.pcfg is null then 'absent' else 'present' end as want,
        s.status, s.applied_uid, s.state, s.attempts
      from desired d
      full join stored s on s.platform_config_id = d.pcfg and s.type = d.type and s.value = d.value
    )
    select jsonb_agg(jsonb_build_object(
      'platform_config_id', i.pcfg, 'platform', pc.platform, 'settings', pc.settings,
      'type', i.type, 'value', i.value, 'want', i.want, 'entitlements', i.names,
      'status', i.status, 'applied_uid', i.applied_uid, 'state', coalesce(i.state, '{}'),
      'attempts', coalesce(i.attempts, 0), 'uid', mi.platform_uid, 'token', ps.ciphertext,
      'community_name', c.name)
      order by i.pcfg, i.want, i.type, i.value)
    from items i
    join billing.platform_configs pc on pc.community_id = p_community_id and pc.id = i.pcfg
    join billing.communities c on c.id = p_community_id
    left join billing.member_identities mi
      on mi.community_id = p_community_id and mi.member_id = p_member_id and mi.platform = pc.platform
    left join billing_private.platform_secrets ps
      on ps.community_id = p_community_id and ps.platform_config_id = i.pcfg and ps.name = 'bot_token'
  ), '[]');
end
$$;

-- Records what the member's job did. p_results: one object per item it acted on
-- {platform_config_id, type, value, want, status, applied_uid, error, state} and
-- p_actions the calls it made {platform_config_id, action, target, outcome,
-- status_code, error}. A benefit no longer wanted and no longer held goes.
create or replace function billing_private.platform_delivery_record(p_community_id text, p_member_id text,
  p_results jsonb, p_actions jsonb)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  insert into billing.benefit_deliveries as d (community_id, member_id, platform_config_id, type, value, want,
    status, applied_uid, error, state, attempts, updated_at)
  select p_community_id, p_member_id, r->>'platform_config_id', r->>'type', r->>'value', r->>'want',
    r->>'status', r->>'applied_uid', r->>'error', coalesce(r->'state', '{}'),
    case when r->>'status' = 'delivered' then 0 else 1 end, now()
  from jsonb_array_elements(p_results) r
  where exists (select 1 from billing.platform_configs pc
                where pc.community_id = p_community_id and pc.id = r->>'platform_config_id')
  on conflict (community_id, member_id, platform_config_id, type, value) do update set
    want = excluded.want, status = excluded.status, applied_uid = excluded.applied_uid, error = excluded.error,
    state = excluded.state, updated_at = now(),
    attempts = case when excluded.status = 'delivered' then 0 else d.attempts + 1 end;
  delete from billing.benefit_deliveries d
  where d.community_id = p_community_id and d.member_id = p_member_id
    and d.want = 'absent' and d.status = 'delivered' and d.applied_uid is null;
  insert into billing.platform_actions (community_id, member_id, platform_config_id, action, target, outcome,
    status_code, error)
  select p_community_id, p_member_id, a->>'platform_config_id', a->>'action', a->>'target', a->>'outcome',
    (a->>'status_code')::integer, a->>'error'
  from jsonb_array_elements(p_actions) a
  where exists (select 1 from billing.platform_configs pc
                where pc.community_id = p_community_id and pc.id = a->>'platform_config_id');
end
$$;

-- A member entitlement's benefits, each with its delivery {status, updated_at, error}:
-- the stored row's while the member has the benefit, pending before the first
-- attempt. The ledger stays the authority: this says only what the platform holds.
create or replace function billing.benefits_with_delivery(p_community_id text, p_member_id text, p_benefits jsonb)
  returns jsonb language plpgsql stable
as $$
begin
  if p_benefits = '[]' then
    return p_benefits;
  end if;
  return (
    select jsonb_agg(b || jsonb_build_object('delivery', case when d.member_id is null or d.want <> 'present'
        then jsonb_build_object('status', 'pending', 'updated_at', null, 'error', null)
        else jsonb_build_object('status', d.status, 'updated_at', billing.iso(d.updated_at), 'error', d.error) end)
      order by o)
    from jsonb_array_elements(p_benefits) with ordinality as x(b, o)
    left join billing.benefit_deliveries d
      on d.community_id = p_community_id and d.member_id = p_member_id
     and d.platform_config_id = b->>'platform_config_id' and d.type = b->>'type' and d.value = b->>'value');
end
$$;

revoke execute on function billing_private.enqueue_deliveries(text[], text[]) from public;
revoke execute on function billing_private.platform_delivery_plan(text, text) from public;
revoke execute on function billing_private.platform_delivery_record(text, text, jsonb, jsonb) from public;
grant execute on function billing_private.platform_delivery_plan(text, text) to billing_worker;
grant execute on function billing_private.platform_delivery_record(text, text, jsonb, jsonb) to billing_worker;
grant execute on function billing.benefits_with_delivery(text, text, jsonb) to billing_api;
--! EndIncluded functions/55-platform-delivery.sql

create or replace function billing_api.member_entitlements_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
begin
  if not exists (select 1 from billing.members m
                 where m.community_id = billing.current_community_id() and m.id = p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  -- Each benefit with its delivery on the platform (55-platform-delivery.sql).
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(billing.member_entitlement_json(me, e)
      || jsonb_build_object('benefits', billing.benefits_with_delivery(me.community_id, me.member_id, me.benefits))
      order by me.id)
    from billing.member_entitlements me
    join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where me.community_id = billing.current_community_id() and me.member_id = p_args->>'id'
      and me.status = 'active'), '[]'));
end
$$;

drop trigger if exists _700_deliveries_insert on billing.member_entitlements;
drop trigger if exists _700_deliveries_update on billing.member_entitlements;
create trigger _700_deliveries_insert after insert on billing.member_entitlements
  referencing new table as new_rows
  for each statement execute function billing_private.tg_member_entitlements__deliveries();
create trigger _700_deliveries_update after update on billing.member_entitlements
  referencing old table as old_rows new table as new_rows
  for each statement execute function billing_private.tg_member_entitlements__deliveries();

--! split: 20-invoice-numbers.sql
-- Issue 30 item 4, "Numbers a tax office accepts" (docs/decisions/invoice-numbers.md):
-- every finalized invoice gets a number (2026-000042), gapless per community and series
-- (a counter row written in the numbering transaction, not a sequence); each refund a
-- credit note with its own sequence (CN-2026-000001) naming its invoice. Invoice JSON
-- gains number and credit_notes, refunds credit_note_number (additive). Changed
-- functions restated whole; the fixtures hold the same text.

-- ---- tables (tables/10-tenancy.sql, tables/46-invoices.sql) ----------------------------
-- The series of the community's invoice numbers (46-invoices.sql, docs/decisions/invoice-numbers.md):
-- null numbers each calendar year apart (2026-000042); an operator sets a series of
-- their own with SQL (update billing.communities set invoice_series = 'A' ...). A new
-- series starts at 1; numbers already given never change.
alter table billing.communities add column if not exists invoice_series text;
alter table billing.communities drop constraint if exists communities_invoice_series_valid;
alter table billing.communities add constraint communities_invoice_series_valid
  check (invoice_series ~ '^[A-Za-z0-9][A-Za-z0-9/_.-]{0,19}$');

-- The number a tax office accepts (issue 30; docs/decisions/invoice-numbers.md): given
-- when the invoice is finalized (written open or paid; a draft has none) by
-- _050_number, gapless per community and series (billing_private.number_counters,
-- below), and kept for good, void or not (_100_immutable).
alter table billing.invoices add column if not exists number text;
-- Its credit notes as the invoice shows them ([{id, number, refund_id, amount_cents, created_at}],
-- oldest first): a copy written with each refund (billing.invoice_record_refund), so
-- billing.invoice_json stays one expression, as dispute does.
alter table billing.invoices add column if not exists credit_notes jsonb not null default '[]';
create unique index if not exists invoices_number on billing.invoices (community_id, number);

-- The last number given per community, kind and series: a row updated in the
-- transaction that numbers a document (billing_private.number_next), so a rollback
-- gives the number back and concurrent transactions of a community wait for each other
-- (a sequence would leave gaps on rollback). Owner only.
create table if not exists billing_private.number_counters (
  community_id text collate "C" not null references billing.communities on delete cascade,
  kind text not null check (kind in ('invoice', 'credit_note')),
  series text collate "C" not null,
  last_number bigint not null check (last_number > 0),
  primary key (community_id, kind, series)
);
alter table billing_private.number_counters enable row level security;
alter table billing_private.number_counters force row level security;
drop policy if exists owner_only on billing_private.number_counters;
create policy owner_only on billing_private.number_counters using (true);

-- A refund's credit note (every refund has one: billing.invoice_record_refund), numbered
-- in its own sequence (CN-2026-000001) and naming the invoice it credits.
create table if not exists billing.credit_notes (
  community_id text collate "C" not null,
  id text collate "C" not null default billing.gen_id('cn'),
  invoice_id text collate "C" not null,
  refund_id text collate "C" not null,
  number text not null,
  amount_cents bigint not null check (amount_cents > 0),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  created_at timestamptz not null,
  primary key (community_id, id),
  foreign key (community_id, invoice_id) references billing.invoices on delete cascade,
  foreign key (community_id, refund_id) references billing.refunds on delete cascade
);
create unique index if not exists credit_notes_number on billing.credit_notes (community_id, number);
create unique index if not exists credit_notes_refund on billing.credit_notes (community_id, refund_id);
create index if not exists credit_notes_invoice on billing.credit_notes (community_id, invoice_id, id);
alter table billing.credit_notes enable row level security;
alter table billing.credit_notes force row level security;
drop policy if exists tenant on billing.credit_notes;
create policy tenant on billing.credit_notes
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.credit_notes;
create policy owner_access on billing.credit_notes to current_user using (true) with check (true);
grant select on billing.credit_notes to billing_api;

-- ---- functions (functions/46-invoices.sql, 46-refunds-and-disputes.sql, 46-renewals.sql) ----

-- The next number of a community's kind ('invoice', 'credit_note') and series: the
-- counter row is written in the caller's transaction, so its rollback (or a rolled back
-- savepoint) gives the number back, and a second transaction of the community waits
-- on the row until the first ends: gapless, never duplicated. Owner only.
create or replace function billing_private.number_next(p_community text, p_kind text, p_series text) returns bigint
  language plpgsql volatile
as $$
declare
  v_n bigint;
begin
  insert into billing_private.number_counters as k (community_id, kind, series, last_number)
  values (p_community, p_kind, p_series, 1)
  on conflict (community_id, kind, series) do update set last_number = k.last_number + 1
  returning k.last_number into v_n;
  return v_n;
end
$$;

-- The series a document dated p_at belongs to: the community's own (invoice_series),
-- or the year of p_at (UTC; p_at is on the community's clock, billing.now()).
create or replace function billing_private.number_series(p_community text, p_at timestamptz) returns text
  language plpgsql stable
as $$
declare
  v_series text;
begin
  select c.invoice_series into v_series from billing.communities c where c.id = p_community;
  return coalesce(v_series, to_char(p_at at time zone 'UTC', 'YYYY'));
end
$$;

-- A number as printed: the series, a dash, at least six digits (2026-000042).
create or replace function billing_private.number_text(p_series text, p_n bigint) returns text
  language sql immutable
as $$
  select p_series || '-' || lpad(p_n::text, greatest(6, length(p_n::text)), '0')
$$;

-- _050_number: an invoice is numbered as it is finalized (written open or paid, or a
-- draft leaving draft), in the series of its date (created_at).
create or replace function billing.tg_invoices__number() returns trigger
  language plpgsql
as $$
declare
  v_series text := billing_private.number_series(new.community_id, new.created_at);
begin
  new.number := billing_private.number_text(v_series, billing_private.number_next(new.community_id, 'invoice', v_series));
  return new;
end
$$;

-- A credit note as its invoice lists it (billing.invoices.credit_notes).
create or replace function billing.credit_note_json(p_cn billing.credit_notes) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object('id', p_cn.id, 'number', p_cn.number, 'refund_id', p_cn.refund_id,
    'amount_cents', p_cn.amount_cents, 'created_at', billing.iso(p_cn.created_at))
$$;

-- What was finalized or refunded before numbering existed, numbered once by the
-- migration that added it: invoices in date order (created_at, id) per series, then
-- each refund's credit note in its date order, each counter moved on to match.
create or replace function billing_private.number_backfill() returns void
  language plpgsql volatile
as $$
begin
  with todo as (
    select i.community_id, i.id,
      row_number() over (partition by i.community_id, billing_private.number_series(i.community_id, i.created_at)
                         order by i.created_at, i.id) as k,
      billing_private.number_series(i.community_id, i.created_at) as series
    from billing.invoices i
    where i.number is null and i.status <> 'draft'
  ), numbered as (
    select t.community_id, t.id, t.series, coalesce(c.last_number, 0) + t.k as n
    from todo t
    left join billing_private.number_counters c on c.community_id = t.community_id and c.kind = 'invoice' and c.series = t.series
  ), counters as (
    insert into billing_private.number_counters as c (community_id, kind, series, last_number)
    select n.community_id, 'invoice', n.series, max(n.n) from numbered n group by n.community_id, n.series
    on conflict (community_id, kind, series) do update set last_number = excluded.last_number
  )
  update billing.invoices i set number = billing_private.number_text(n.series, n.n)
  from numbered n where i.community_id = n.community_id and i.id = n.id;

  with todo as (
    select r.community_id, r.id, r.invoice_id, r.amount_cents, r.created_at,
      row_number() over (partition by r.community_id, 'CN-' || billing_private.number_series(r.community_id, r.created_at)
                         order by r.created_at, r.id) as k,
      'CN-' || billing_private.number_series(r.community_id, r.created_at) as series
    from billing.refunds r
    where not exists (select 1 from billing.credit_notes cn where cn.community_id = r.community_id and cn.refund_id = r.id)
  ), numbered as (
    select t.*, coalesce(c.last_number, 0) + t.k as n
    from todo t
    left join billing_private.number_counters c on c.community_id = t.community_id and c.kind = 'credit_note' and c.series = t.series
  ), counters as (
    insert into billing_private.number_counters as c (community_id, kind, series, last_number)
    select n.community_id, 'credit_note', n.series, max(n.n) from numbered n group by n.community_id, n.series
    on conflict (community_id, kind, series) do update set last_number = excluded.last_number
  )
  insert into billing.credit_notes (community_id, invoice_id, refund_id, number, amount_cents, currency, created_at)
  select n.community_id, n.invoice_id, n.id, billing_private.number_text(n.series, n.n), n.amount_cents, i.currency, n.created_at
  from numbered n join billing.invoices i on i.community_id = n.community_id and i.id = n.invoice_id
  order by n.community_id, n.created_at, n.id;

  update billing.invoices i set credit_notes = x.notes
  from (select cn.community_id, cn.invoice_id, jsonb_agg(billing.credit_note_json(cn) order by cn.created_at, cn.id) as notes
        from billing.credit_notes cn group by cn.community_id, cn.invoice_id) x
  where i.community_id = x.community_id and i.id = x.invoice_id and i.credit_notes is distinct from x.notes;
end
$$;

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
    'credit_notes', p_inv.credit_notes)
$$;

grant execute on function billing.credit_note_json(billing.credit_notes) to billing_api;

-- Records a refund of a paid invoice (all that is left to refund when p_amount is
-- null): amount_refunded_cents never exceeds amount_paid_cents (a constraint), and a
-- provider refund already recorded (same provider_ref) is not counted twice. With
-- p_revoke the covered subscription or purchase ends now. Every refund gets its credit
-- note (billing.credit_notes), numbered in the community's credit note sequence
-- (CN-<series>-NNNNNN, docs/decisions/invoice-numbers.md) and listed on the invoice.
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
  insert into billing.credit_notes (community_id, invoice_id, refund_id, number, amount_cents, currency, created_at)
  values (v_re.community_id, v_inv.id, v_re.id,
    billing_private.number_text(v_series, billing_private.number_next(v_re.community_id, 'credit_note', v_series)),
    v_re.amount_cents, v_inv.currency, v_re.created_at)
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
      period_start, period_end, provider, created_at, number)
    select v_community, b.member_id, b.subscription_id, 'paid', 'subscription_cycle', (b.t).currency, (b.t).lines,
      b.subtotal_cents, b.discount_cents, b.subtotal_cents - b.discount_cents, b.subtotal_cents - b.discount_cents, 1, b.at,
      b.at, (b.t).period_end, b.provider, b.at, b.number
    from numbered b
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

drop trigger if exists _050_number on billing.invoices;
create trigger _050_number before insert or update of status on billing.invoices
  for each row when (new.number is null and new.status <> 'draft')
  execute function billing.tg_invoices__number();

-- ---- GraphQL (functions/95-graphql.sql) ------------------------------------------------

create or replace view billing_graphql.invoices with (security_invoker = true, security_barrier = false) as
  select i.id, i.member_id, i.subscription_id, i.purchase_id, i.status, i.billing_reason, i.currency,
    i.lines, i.subtotal_cents, i.discount_cents, i.total_cents, i.amount_paid_cents,
    i.amount_refunded_cents, i.attempt_count, i.next_attempt_at, i.period_start, i.period_end,
    i.paid_at, i.created_at, i.updated_at, i.number
  from billing.invoices i
  where (select billing.has_scope('invoices:read'));
comment on column billing_graphql.invoices.number is E'The invoice number (2026-000042), gapless per community and series; null until finalized.';

-- Numbers for what was finalized or refunded before numbering existed, in date order
-- (billing_private.number_backfill); nothing to do on a new database.
select billing_private.number_backfill();

--! split: 30-platform-linking.sql
-- Issue 29 item 3: members link their own identities through the platforms' bots
-- (src/platforms/linking-routes.ts; docs/decisions/platform-linking.md).

-- tables/20-catalog.sql
create index if not exists platform_configs_id on billing.platform_configs (id);

-- functions/20-catalog.sql
-- Which community a platform's inbound request is for (POST /platforms/<platform>/<id>/...,
-- src/platforms/linking-routes.ts): the connection its URL names, found across
-- communities before the request is authenticated, with what authenticates it (Discord's
-- public key; Telegram's secret is derived from the ids). Nothing else of the community.
create or replace function billing_private.platform_config_inbound(p_platform_config_id text, p_platform text)
  returns table (community_id text, public_key text)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select pc.community_id, pc.settings->>'public_key' from billing.platform_configs pc
  where pc.id = p_platform_config_id and pc.platform = p_platform
$$;
revoke execute on function billing_private.platform_config_inbound(text, text) from public;
grant execute on function billing_private.platform_config_inbound(text, text) to billing_api;

-- functions/80-checkout.sql
-- The redemption itself, once, for both doors: the API (link_code_redeem, which raises)
-- and the platforms' bots (platform_link_redeem, which answers why not). The identity
-- joins the code's member; its insert's trigger (30-members.sql) emits member.updated and
-- refreshes the ledger. Runs with its caller's rights (billing_writer, bound to the
-- transaction's community by the tenant policies). Answers {outcome, member_id?}:
-- linked, unknown, used (redeemed or replaced), expired, wrong_platform, identity_taken
-- (the identity is another member's), member_has_identity (the member has another).
create or replace function billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_owner text;
begin
  select * into v_lc from billing.link_codes lc where lc.code = upper(p_code) for update;
  if v_lc.id is null then
    return jsonb_build_object('outcome', 'unknown');
  elsif v_lc.redeemed_at is not null or v_lc.invalidated_at is not null then
    return jsonb_build_object('outcome', 'used');
  elsif v_lc.expires_at <= billing.now() then
    return jsonb_build_object('outcome', 'expired');
  elsif v_lc.intended_platform <> p_platform then
    return jsonb_build_object('outcome', 'wrong_platform');
  end if;
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_platform and i.platform_uid = p_platform_uid;
  if v_owner is not null and v_owner <> v_lc.member_id then
    return jsonb_build_object('outcome', 'identity_taken');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = v_lc.member_id and i.platform = p_platform) then
      return jsonb_build_object('outcome', 'member_has_identity', 'member_id', v_lc.member_id);
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (v_cid, v_lc.member_id, p_platform, p_platform_uid, p_username);
  end if;
  update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  return jsonb_build_object('outcome', 'linked', 'member_id', v_lc.member_id, 'new_identity', v_owner is null);
end
$$;

-- A platform bot finishes the link through the API (POST /v1/link-codes/redeem): one
-- answer (404) for an unknown, used, expired or other platform's code, so codes cannot
-- be probed.
create or replace function billing_api.link_code_redeem(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_r jsonb := billing.link_code_apply(p_args->>'code', p_args->>'platform', p_args->>'platform_uid', p_args->>'username');
begin
  case v_r->>'outcome'
    when 'linked' then
      return billing.member_json(billing.current_community_id(), v_r->>'member_id');
    when 'identity_taken' then
      perform billing.raise('BL409', 'This ' || (p_args->>'platform') || ' identity belongs to another member.');
    when 'member_has_identity' then
      perform billing.raise('BL409', 'Member ' || (v_r->>'member_id') || ' already has another ' || (p_args->>'platform') || ' identity.');
    else
      perform billing.raise('BL404', 'No usable link code ' || (p_args->>'code') || ' for ' || (p_args->>'platform') || '.');
  end case;
  return null;
end
$$;

-- A platform's bot redeems a code for the user who sent it (src/platforms/linking-routes.ts:
-- Discord's /link command, Telegram's /start deep link), authenticated by the platform's
-- signature or secret rather than an API key. The caller sets the transaction's community
-- to the one owning the connection (billing_private.platform_config_inbound); the
-- connection must be visible there (RLS) and of this platform, and only that community's
-- codes and identities are reached. Answers link_code_apply's {outcome, member_id?}, or
-- {outcome: 'no_connection'}.
create or replace function billing.platform_link_redeem(p_platform_config_id text, p_platform text, p_platform_uid text,
  p_code text, p_username text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = p_platform) then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  return billing.link_code_apply(p_code, p_platform, p_platform_uid, p_username);
end
$$;

grant execute on function billing.platform_link_redeem(text,text,text,text,text) to billing_api;
grant execute on function billing.link_code_apply(text,text,text,text) to billing_writer;
grant create on schema billing to billing_writer;
alter function billing.platform_link_redeem(text,text,text,text,text) owner to billing_writer;
revoke create on schema billing from billing_writer;
