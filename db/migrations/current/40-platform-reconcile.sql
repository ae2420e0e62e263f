-- Issue 29, platform delivery finished: benefit types a platform cannot carry out are
-- refused (docs/decisions/benefit-types.md).

-- The benefit types each platform carries out (src/platforms/delivery.ts BENEFIT_TYPES):
-- Discord a role or a channel, Telegram a chat. Returns the problem or null. Held by
-- the _100_benefit_type triggers beside billing.entitlement_benefits and
-- billing.platform_configs for every door; the value's format is checked by
-- `billing catalog apply` only (docs/decisions/benefit-types.md).
create or replace function billing.benefit_type_problem(p_platform text, p_type text) returns text
  language sql immutable parallel safe
  set search_path = pg_catalog, pg_temp
as $$
  select case
    when p_platform = 'discord' and p_type in ('role', 'channel') then null
    when p_platform = 'telegram' and p_type = 'chat' then null
    else format('A %s connection cannot carry out a benefit of type "%s" (it can: %s).', p_platform, p_type,
      case p_platform when 'discord' then '"role", "channel"' when 'telegram' then '"chat"' else 'none' end)
  end
$$;

-- New or changed benefits, and connections whose platform changed: the type must be one
-- the platform carries out. Rows already stored are not checked again.
create or replace function billing.tg_entitlement_benefits__type() returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_problem text;
begin
  select billing.benefit_type_problem(pc.platform, new.type) into v_problem
  from billing.platform_configs pc where pc.community_id = new.community_id and pc.id = new.platform_config_id;
  if v_problem is not null then
    raise exception using errcode = 'check_violation', message = v_problem, detail = 'type';
  end if;
  return null;
end
$$;

create or replace function billing.tg_platform_configs__benefit_types() returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_problem text;
begin
  select billing.benefit_type_problem(new.platform, b.type) into v_problem
  from billing.entitlement_benefits b
  where b.community_id = new.community_id and b.platform_config_id = new.id
    and billing.benefit_type_problem(new.platform, b.type) is not null
  limit 1;
  if v_problem is not null then
    raise exception using errcode = 'check_violation', message = v_problem, detail = 'platform';
  end if;
  return null;
end
$$;

drop trigger if exists _100_benefit_type on billing.platform_configs;
create constraint trigger _100_benefit_type after update of platform on billing.platform_configs
  for each row when (old.platform is distinct from new.platform)
  execute function billing.tg_platform_configs__benefit_types();
drop trigger if exists _100_benefit_type on billing.entitlement_benefits;
create constraint trigger _100_benefit_type after insert or update of type, platform_config_id
  on billing.entitlement_benefits for each row execute function billing.tg_entitlement_benefits__type();

-- kick_on_revoke: a Discord connection's setting (docs/decisions/platform-reconcile.md).
-- What a connection's settings may hold, per platform (issue 29): Discord a server
-- (guild_id, a snowflake) and the application's public_key (64 hex digits, to verify
-- interactions) and kick_on_revoke ("true": a member whose last benefit on the server is
-- revoked is removed from it); Telegram a chat (chat_id, an integer or @channelname). The bot token
-- is a secret: never here (the API role and operator logins read this table), but
-- encrypted in billing_private.platform_secrets. Returns the first problem, naming
-- the field, or null; `billing catalog apply` shows it as it is.
create or replace function billing.platform_settings_problem(p_platform text, p_settings jsonb) returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed text[] := case p_platform when 'discord' then array['guild_id', 'public_key', 'client_id', 'kick_on_revoke']
                                      when 'telegram' then array['chat_id'] else array[]::text[] end;
  v_key text;
  v_value jsonb;
begin
  if p_settings is null or jsonb_typeof(p_settings) <> 'object' then
    return 'settings: expected an object';
  end if;
  if p_settings ? 'bot_token' then
    return 'settings.bot_token: a bot token is stored encrypted (billing_private.platform_secrets), never in settings';
  end if;
  if p_settings ? 'client_secret' then
    return 'settings.client_secret: a client secret is stored encrypted (billing_private.platform_secrets), never in settings';
  end if;
  for v_key, v_value in select e.key, e.value from jsonb_each(p_settings) e order by e.key loop
    if not (v_key = any (v_allowed)) then
      return format('settings.%s: unknown setting for %s (expected %s, and bot_token%s)', v_key, p_platform,
        array_to_string(v_allowed, ', '), case p_platform when 'discord' then ', client_secret' else '' end);
    end if;
    if jsonb_typeof(v_value) <> 'string' then
      return format('settings.%s: expected a string', v_key);
    end if;
  end loop;
  if p_platform = 'discord' then
    if not p_settings ? 'guild_id' then
      return 'settings.guild_id: required (the Discord server id)';
    end if;
    if p_settings->>'guild_id' !~ '^[1-9][0-9]{0,19}$' then
      return 'settings.guild_id: expected a Discord snowflake (the server id: digits, e.g. "1234567890123456789")';
    end if;
    if p_settings ? 'public_key' and p_settings->>'public_key' !~ '^[0-9a-fA-F]{64}$' then
      return 'settings.public_key: expected the application''s public key (64 hexadecimal digits)';
    end if;
    if p_settings ? 'client_id' and p_settings->>'client_id' !~ '^[1-9][0-9]{0,19}$' then
      return 'settings.client_id: expected the application''s id (its OAuth2 client id: digits)';
    end if;
    if p_settings ? 'kick_on_revoke' and p_settings->>'kick_on_revoke' not in ('true', 'false') then
      return 'settings.kick_on_revoke: expected "true" or "false" (remove the member from the server when their last benefit on it is revoked)';
    end if;
  elsif p_platform = 'telegram' then
    if not p_settings ? 'chat_id' then
      return 'settings.chat_id: required (the Telegram chat: its id or @channelname)';
    end if;
    if p_settings->>'chat_id' !~ '^(-?[1-9][0-9]{0,15}|@[A-Za-z][A-Za-z0-9_]{4,31})$' then
      return 'settings.chat_id: expected a Telegram chat id (an integer, e.g. "-1001234567890") or a public @channelname';
    end if;
  end if;
  return null;
end
$$;
grant execute on function billing.platform_settings_problem(text, jsonb) to billing_api;

-- Reconciliation (docs/decisions/platform-reconcile.md).
alter table billing.platform_actions alter column member_id drop not null;

-- Reconciliation (docs/decisions/platform-reconcile.md): the connections it goes
-- through, of one community or of all (the worker's cron): those with a benefit.
create or replace function billing_private.platform_reconcile_targets(p_community_id text)
  returns table (community_id text, platform_config_id text)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select pc.community_id, pc.id from billing.platform_configs pc
  where (p_community_id is null or pc.community_id = p_community_id)
    and exists (select 1 from billing.entitlement_benefits b
                where b.community_id = pc.community_id and b.platform_config_id = pc.id)
  order by 1, 2
$$;

-- One connection as a reconciliation reads it: its platform, settings, bot token
-- ciphertext and the distinct benefits (type, value) of its entitlements; null when
-- there is no such connection.
create or replace function billing_private.platform_reconcile_connection(p_community_id text, p_platform_config_id text)
  returns jsonb language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('community_id', pc.community_id, 'platform_config_id', pc.id, 'platform', pc.platform,
    'settings', pc.settings, 'token', ps.ciphertext,
    'benefits', coalesce((select jsonb_agg(distinct jsonb_build_object('type', b.type, 'value', b.value))
                          from billing.entitlement_benefits b
                          where b.community_id = pc.community_id and b.platform_config_id = pc.id), '[]'))
  from billing.platform_configs pc
  left join billing_private.platform_secrets ps
    on ps.community_id = pc.community_id and ps.platform_config_id = pc.id and ps.name = 'bot_token'
  where pc.community_id = p_community_id and pc.id = p_platform_config_id
$$;

-- What a reconciliation saw on the platform, compared with the ledger and repaired by
-- the delivery path. p_observed: [{uid, held: [value, ...]}], the platform users seen
-- and which of p_values (benefits of type p_type on the connection) each holds;
-- p_complete: the observation covers every user (a channel's overwrites), so an
-- entitled member not in it holds nothing. A member whose active benefit the platform
-- does not hold: a delivered row becomes pending. A linked member holding one they are
-- not entitled to: a row records it as held by that user (want absent, pending). Both
-- queue the member's delivery job. Users linked to no member of the community holding
-- one are returned ({uid, value}) for the caller to remove and log. Returns
-- {missing, held_without_entitlement, members_queued, unlinked}.
create or replace function billing_private.platform_reconcile_observed(p_community_id text, p_platform_config_id text,
  p_type text, p_values text[], p_complete boolean, p_observed jsonb)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_platform text;
  v_members text[];
  v_result jsonb;
begin
  select pc.platform into v_platform from billing.platform_configs pc
  where pc.community_id = p_community_id and pc.id = p_platform_config_id;
  if v_platform is null then
    return jsonb_build_object('missing', 0, 'held_without_entitlement', 0, 'members_queued', 0, 'unlinked', '[]'::jsonb);
  end if;
  with obs as (
    select o->>'uid' as uid, array(select jsonb_array_elements_text(o->'held')) as held
    from jsonb_array_elements(p_observed) o
  ), linked as (
    select mi.platform_uid as uid, mi.member_id
    from billing.member_identities mi
    where mi.community_id = p_community_id and mi.platform = v_platform
      and (p_complete or mi.platform_uid in (select uid from obs))
  ), wanted as (
    select distinct l.uid, l.member_id, b->>'value' as value
    from linked l
    join billing.member_entitlements me on me.community_id = p_community_id and me.member_id = l.member_id and me.status = 'active'
    cross join lateral jsonb_array_elements(me.benefits) b
    where b->>'platform_config_id' = p_platform_config_id and b->>'type' = p_type and b->>'value' = any (p_values)
  ), held as (
    select obs.uid, h.value from obs cross join lateral unnest(obs.held) h(value) where h.value = any (p_values)
  ), drift as (
    select 'missing' as kind, w.member_id, w.uid, w.value from wanted w
    where not exists (select 1 from held h where h.uid = w.uid and h.value = w.value)
    union all
    select case when l.member_id is null then 'unlinked' else 'extra' end, l.member_id, h.uid, h.value
    from held h
    left join linked l on l.uid = h.uid
    where not exists (select 1 from wanted w where w.uid = h.uid and w.value = h.value)
  ), pending as (
    -- (the two writes run whether or not the query below reads them)
    update billing.benefit_deliveries d set status = 'pending', updated_at = now()
    from drift r
    where r.kind = 'missing' and d.community_id = p_community_id and d.member_id = r.member_id
      and d.platform_config_id = p_platform_config_id and d.type = p_type and d.value = r.value and d.status = 'delivered'
    returning d.member_id
  ), held_rows as (
    insert into billing.benefit_deliveries as d (community_id, member_id, platform_config_id, type, value, want, status, applied_uid)
    select p_community_id, r.member_id, p_platform_config_id, p_type, r.value, 'absent', 'pending', r.uid
    from drift r where r.kind = 'extra'
    on conflict (community_id, member_id, platform_config_id, type, value) do update set
      applied_uid = excluded.applied_uid, status = 'pending', updated_at = now()
    returning d.member_id
  )
  select jsonb_build_object(
      'missing', count(*) filter (where kind = 'missing'),
      'held_without_entitlement', count(*) filter (where kind = 'extra'),
      'members_queued', count(distinct member_id) filter (where kind in ('missing', 'extra')),
      'unlinked', coalesce(jsonb_agg(jsonb_build_object('uid', uid, 'value', value) order by uid, value)
                             filter (where kind = 'unlinked'), '[]')),
    array_agg(distinct member_id) filter (where kind in ('missing', 'extra'))
  into v_result, v_members
  from drift;
  perform billing_private.enqueue_deliveries(array_fill(p_community_id, array[coalesce(cardinality(v_members), 0)]), v_members);
  return v_result;
end
$$;

-- The worker's hourly cron: one reconciliation job per connection (of one community,
-- or of all: null), job key reconcile:<community>:<connection> (one not started yet
-- is replaced). Returns how many were queued.
create or replace function billing_private.platform_reconcile_enqueue(p_community_id text)
  returns integer language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_jobs graphile_worker.job_spec[];
begin
  v_jobs := array(
    select row('platform_connections__reconcile',
      json_build_object('community_id', t.community_id, 'platform_config_id', t.platform_config_id),
      null, null, 3, 'reconcile:' || t.community_id || ':' || t.platform_config_id, null, null)::graphile_worker.job_spec
    from billing_private.platform_reconcile_targets(p_community_id) t);
  if cardinality(v_jobs) > 0 then
    perform graphile_worker.add_jobs(v_jobs);
  end if;
  return cardinality(v_jobs);
end
$$;

-- Linked members who once had a benefit (an inactive ledger row of an entitlement
-- carrying it) and have no active one giving it: who may still be in a Telegram chat,
-- which cannot be listed. Paged by member id after p_after.
create or replace function billing_private.platform_reconcile_former(p_community_id text, p_platform_config_id text,
  p_type text, p_value text, p_after text, p_limit integer)
  returns jsonb language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(jsonb_build_object('member_id', x.member_id, 'uid', x.platform_uid) order by x.member_id), '[]')
  from (
    select mi.member_id, mi.platform_uid
    from billing.member_identities mi
    join billing.platform_configs pc on pc.community_id = mi.community_id and pc.id = p_platform_config_id and pc.platform = mi.platform
    where mi.community_id = p_community_id and mi.member_id > coalesce(p_after, '')
      and exists (select 1 from billing.member_entitlements me
                  join billing.entitlement_benefits b on b.community_id = me.community_id and b.entitlement_id = me.entitlement_id
                  where me.community_id = p_community_id and me.member_id = mi.member_id and me.status = 'inactive'
                    and b.platform_config_id = p_platform_config_id and b.type = p_type and b.value = p_value)
      and not exists (select 1 from billing.member_entitlements me
                      cross join lateral jsonb_array_elements(me.benefits) bb
                      where me.community_id = p_community_id and me.member_id = mi.member_id and me.status = 'active'
                        and bb->>'platform_config_id' = p_platform_config_id and bb->>'type' = p_type and bb->>'value' = p_value)
    order by mi.member_id
    limit p_limit
  ) x
$$;

-- A reconciliation's own calls (a benefit removed from a platform user linked to no
-- member): the operator's log, billing.platform_actions, without a member.
create or replace function billing_private.platform_reconcile_log(p_community_id text, p_actions jsonb)
  returns void language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  insert into billing.platform_actions (community_id, member_id, platform_config_id, action, target, outcome, status_code, error)
  select p_community_id, null, a->>'platform_config_id', a->>'action', a->>'target', a->>'outcome',
    (a->>'status_code')::integer, a->>'error'
  from jsonb_array_elements(p_actions) a
  where exists (select 1 from billing.platform_configs pc
                where pc.community_id = p_community_id and pc.id = a->>'platform_config_id')
$$;

revoke execute on function billing_private.platform_reconcile_targets(text) from public;
revoke execute on function billing_private.platform_reconcile_connection(text, text) from public;
revoke execute on function billing_private.platform_reconcile_observed(text, text, text, text[], boolean, jsonb) from public;
revoke execute on function billing_private.platform_reconcile_former(text, text, text, text, text, integer) from public;
revoke execute on function billing_private.platform_reconcile_log(text, jsonb) from public;
grant execute on function billing_private.platform_reconcile_targets(text) to billing_worker;
grant execute on function billing_private.platform_reconcile_connection(text, text) to billing_worker;
grant execute on function billing_private.platform_reconcile_observed(text, text, text, text[], boolean, jsonb) to billing_worker;
grant execute on function billing_private.platform_reconcile_former(text, text, text, text, text, integer) to billing_worker;
grant execute on function billing_private.platform_reconcile_log(text, jsonb) to billing_worker;
revoke execute on function billing_private.platform_reconcile_enqueue(text) from public;
grant execute on function billing_private.platform_reconcile_enqueue(text) to billing_worker;

-- A delivery job lost when a worker locked the member's job while it was being replaced.
-- Queues one delivery job per member (graphile-worker job key deliver:<community>:<member>):
-- a job not yet started is replaced and runs now (a change after a failed attempt is
-- retried at once); a running one is left to finish and a new one follows it. The job
-- reads the member's state when it runs, so one job covers every change before it.
-- graphile-worker's add_jobs skips a spec whose job a worker locks between its two
-- statements (clearing the keys of locked jobs, then inserting "on conflict do update
-- where locked_at is null"): that job may have read the state before this change, so the
-- skipped specs are added again, and then get a job of their own.
create or replace function billing_private.enqueue_deliveries(p_communities text[], p_members text[])
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_specs graphile_worker.job_spec[];
  v_added text[];
begin
  if coalesce(cardinality(p_members), 0) = 0 then
    return;
  end if;
  v_specs := array(
    select row('platform_deliveries__apply', json_build_object('community_id', x.c, 'member_id', x.m), null, null,
      null, 'deliver:' || x.c || ':' || x.m, null, null)::graphile_worker.job_spec
    from (select distinct c, m from unnest(p_communities, p_members) as u(c, m)) x);
  for i in 1..5 loop
    select coalesce(array_agg(j.key), '{}') into v_added from graphile_worker.add_jobs(v_specs) j;
    v_specs := array(select s from unnest(v_specs) s where not (s.job_key = any (v_added)));
    exit when cardinality(v_specs) = 0;
  end loop;
end
$$;

