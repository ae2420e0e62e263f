-- Bulk seed for the member search benchmark (run as the owner; :'community' is set):
-- 100,000 members, each with a Discord identity (username userN), a quarter with a
-- Telegram one, half with an external subject, a third with an email, some tagged,
-- one subscription each. Triggers are off (session_replication_role = replica): the
-- display name and search text the triggers keep are written in bulk at the end by
-- the same function they call (billing.member_people).
set session_replication_role = replica;
set synchronous_commit = off;

insert into billing.tiers (community_id, key, name, rank) values
  (:'community', 'silver', 'Silver', 1), (:'community', 'gold', 'Gold', 2), (:'community', 'platinum', 'Platinum', 3);
insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
select t.community_id, t.id, t.key || '-' || i.interval, t.name || ' ' || i.interval || 'ly',
  (t.rank * 500) * case when i.interval = 'year' then 10 else 1 end, 'usd', i.interval
from billing.tiers t cross join (values ('month'), ('year')) i(interval)
where t.community_id = :'community';

create temp table bm as
  select g, billing.gen_id('mem') as id from generate_series(1, 100000) g order by g;
insert into billing.members (community_id, id, created_at, email, tags)
select :'community', id, now() - (100000 - g) * interval '5 minutes',
  case when g % 3 = 0 then 'Person' || g || '@Example.org' end,
  case when g % 100 = 0 then '{vip}'::text[] when g % 10 = 1 then '{newsletter}'::text[] else '{}'::text[] end
from bm order by g;
insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
select :'community', id, 'discord', 'd' || g, 'user' || g from bm;
insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
select :'community', id, 'telegram', 't' || g, 'tg_' || g from bm where g % 4 = 0;
insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
select :'community', id, 'app', 'u' || g from bm where g % 2 = 0;

create temp table plan_pick as
  select row_number() over (order by p.id) - 1 as n, p.id from billing.plans p where p.community_id = :'community';
insert into billing.subscriptions (community_id, id, member_id, plan_id, status, current_period_start,
  current_period_end, created_at, price_cents)
select :'community', billing.gen_id('sub'), b.id, pp.id,
  case when b.g % 10 < 7 then 'active' when b.g % 10 = 7 then 'trialing' when b.g % 10 = 8 then 'past_due' else 'cancelled' end,
  now() - interval '10 days', now() + interval '20 days', now() - (100000 - b.g) * interval '5 minutes',
  (select p.amount_cents from billing.plans p where p.community_id = :'community' and p.id = pp.id)
from bm b join plan_pick pp on pp.n = b.g % 6 order by b.g;

set session_replication_role = origin;
update billing.members m set (display_name, search_text) =
  (select p.display_name, p.search_text from billing.member_people(m.community_id, m.id, m.email) p)
where m.community_id = :'community';
vacuum analyze billing.members;
analyze;
