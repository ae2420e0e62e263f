-- Bulk seed for the read benchmark (run as a superuser owner; :'community', :members
-- and :events are set by run.ts: 100,000 and 1,000,000 unless BENCH_MEMBERS/BENCH_EVENTS).
-- Triggers are off (session_replication_role = replica): the ledger rows are
-- generated in bulk below exactly as the ledger would hold them.
set session_replication_role = replica;
set synchronous_commit = off;

insert into billing.tiers (community_id, key, name, rank) values
  (:'community', 'silver', 'Silver', 1), (:'community', 'gold', 'Gold', 2), (:'community', 'platinum', 'Platinum', 3);
insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
select t.community_id, t.id, t.key || '-' || i.interval, t.name || ' ' || i.interval || 'ly',
  (t.rank * 500) * case when i.interval = 'year' then 10 else 1 end, 'usd', i.interval
from billing.tiers t cross join (values ('month'), ('year')) i(interval)
where t.community_id = :'community';
insert into billing.entitlements (community_id, key, name) values (:'community', 'chat', 'Chat'), (:'community', 'vip', 'VIP room');
insert into billing.tier_entitlements (community_id, tier_id, entitlement_id)
select t.community_id, t.id, e.id from billing.tiers t join billing.entitlements e on e.community_id = t.community_id
where t.community_id = :'community' and (e.key = 'chat' or t.key <> 'silver');
insert into billing.platform_configs (community_id, key, platform, name, settings) values (:'community', 'discord-main', 'discord', 'Main server', '{"guild_id": "1"}');
insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value)
select e.community_id, e.id, pc.id, 'role', e.key from billing.entitlements e
join billing.platform_configs pc on pc.community_id = e.community_id where e.community_id = :'community';

create temp table bm as
  select g, billing.gen_id('mem') as id from generate_series(1, :members) g order by g;
insert into billing.members (community_id, id, created_at)
select :'community', id, now() - (:members - g) * interval '1 minute' from bm order by g;
insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
select :'community', id, 'discord', 'd' || g, 'user' || g from bm;
insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
select :'community', id, 'app', 'u' || g from bm where g % 2 = 0;

-- Two subscriptions per member: an old cancelled one, then a current one.
create temp table plan_pick as
  select row_number() over (order by p.id) - 1 as n, p.id, p.tier_id from billing.plans p where p.community_id = :'community';
create temp table bs as
  select b.g, k, billing.gen_id('sub') as id, pp.id as plan_id, pp.tier_id,
    case when k = 1 then 'cancelled'
         when b.g % 10 < 7 then 'active' when b.g % 10 = 7 then 'trialing'
         when b.g % 10 = 8 then 'past_due' else 'cancelling' end as status
  from generate_series(1, 2) k cross join bm b
  join plan_pick pp on pp.n = (b.g + k) % 6
  order by k, b.g;
-- price_cents by hand: the seed runs without triggers (billing.tg_subscriptions__price).
insert into billing.subscriptions (community_id, id, member_id, plan_id, status, current_period_start,
  current_period_end, cancelled_at, created_at, price_cents)
select :'community', s.id, b.id, s.plan_id, s.status, now() - interval '10 days', now() + interval '20 days',
  case when s.status in ('cancelled', 'cancelling') then now() - interval '5 days' end,
  now() - (2 * :members - (s.k - 1) * :members - s.g) * interval '30 seconds',
  (select p.amount_cents from billing.plans p where p.community_id = :'community' and p.id = s.plan_id)
from bs s join bm b on b.g = s.g order by s.id;

-- The ledger, in bulk: one active row per (member, entitlement of the current subscription's tier).
insert into billing.member_entitlements (community_id, member_id, entitlement_id, status, revision, sources,
  benefits, granted_at)
select :'community', b.id, te.entitlement_id, 'active', 1,
  jsonb_build_array(jsonb_build_object('type', 'subscription', 'id', s.id, 'status', s.status, 'tier_id', s.tier_id,
    'plan_id', s.plan_id, 'client_reference_id', null, 'valid_until', billing.iso(now() + interval '20 days'))),
  jsonb_build_array(jsonb_build_object('platform', 'discord', 'platform_config_id', eb.platform_config_id,
    'type', eb.type, 'value', eb.value)),
  now() - interval '10 days'
from bs s join bm b on b.g = s.g
join billing.tier_entitlements te on te.community_id = :'community' and te.tier_id = s.tier_id
join billing.entitlement_benefits eb on eb.community_id = :'community' and eb.entitlement_id = te.entitlement_id
where s.k = 2;

insert into billing.events (community_id, id, type, created_at, data)
select :'community', billing.gen_id('evt'), 'member.entitlement.granted', now() - (:events - g) * interval '1 second',
  jsonb_build_object('member', jsonb_build_object('id', 'mem_' || g), 'reason', 'activation')
from generate_series(1, :events) g;

set session_replication_role = origin;
-- The display name and search text the members' triggers keep (30-members.sql).
update billing.members m set (display_name, search_text) =
  (select p.display_name, p.search_text from billing.member_people(m.community_id, m.id, m.email) p)
where m.community_id = :'community';
analyze;
-- The overview's rollup (48-analytics.sql) from the subscriptions written above, as the
-- triggers would have kept it.
select billing_private.analytics_rebuild(:'community');
