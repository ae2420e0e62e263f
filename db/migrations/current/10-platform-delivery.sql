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

--!include functions/55-platform-delivery.sql

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

