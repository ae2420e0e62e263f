--! Previous: sha1:0d633d7f279ad95c621b79ab9e7fa1a44822bab4
--! Hash: sha1:9a3be95a36ff243239ffe9eac545ef96464ef688
--! Message: connect discord, reconcile, delivery views, mail, invoice pdf

--! split: 1-current.sql
-- Enter migration here

--! split: 15-discord-connect.sql
-- Connect Discord (issue 29 item 3): a Discord connection's client_id setting and
-- its OAuth2 client secret, stored encrypted beside the bot token.
alter table billing_private.platform_secrets drop constraint if exists platform_secrets_name_check;
alter table billing_private.platform_secrets add constraint platform_secrets_name_check
  check (name in ('bot_token', 'client_secret'));

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

create or replace function billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_r jsonb;
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
  v_r := billing.member_identity_attach(v_lc.member_id, p_platform, p_platform_uid, p_username);
  if v_r->>'outcome' = 'linked' then
    update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  end if;
  return v_r;
end
$$;

create or replace function billing.member_identity_attach(p_member_id text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_owner text;
begin
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_platform and i.platform_uid = p_platform_uid;
  if v_owner is not null and v_owner <> p_member_id then
    return jsonb_build_object('outcome', 'identity_taken');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = p_member_id and i.platform = p_platform) then
      return jsonb_build_object('outcome', 'member_has_identity', 'member_id', p_member_id);
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (billing.current_community_id(), p_member_id, p_platform, p_platform_uid, p_username);
  end if;
  return jsonb_build_object('outcome', 'linked', 'member_id', p_member_id, 'new_identity', v_owner is null);
end
$$;

create or replace function billing.platform_checkout_connect(p_platform_config_id text, p_checkout_id text,
  p_token_sha256 bytea, p_platform_uid text, p_username text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_member text;
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = 'discord') then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  select cs.member_id into v_member from billing.checkout_sessions cs
  where cs.id = p_checkout_id and cs.access_token_sha256 = p_token_sha256;
  if v_member is null then
    return jsonb_build_object('outcome', 'no_checkout');
  end if;
  return billing.member_identity_attach(v_member, 'discord', p_platform_uid, p_username);
end
$$;

grant execute on function billing.platform_checkout_connect(text,text,bytea,text,text) to billing_api;
grant execute on function billing.member_identity_attach(text,text,text,text) to billing_writer;
grant create on schema billing to billing_writer;
alter function billing.platform_checkout_connect(text,text,bytea,text,text) owner to billing_writer;
revoke create on schema billing from billing_writer;

--! split: 40-platform-reconcile.sql
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

--! split: 50-platform-views.sql
-- Issue 29 item 5: deliveries shown to people. The retry operation (55-platform-delivery),
-- the dashboard's Platforms page reads (96-dashboard), deliveries in GraphQL (95-graphql),
-- the member's benefits in the portal (82-member-portal).

-- An operator's retry (POST /v1/members/{id}/deliveries/retry): queues the member's
-- delivery job now, as a change of the member would (same job key, so a job waiting out
-- its backoff runs at once). The job acts on every benefit not yet delivered; what is
-- delivered already is left alone, so a retry is harmless however often it is sent.
-- billing_private.enqueue_deliveries takes any community: this is billing_api's one door
-- to it, for a member of the current community only (false when there is none).
create or replace function billing_private.member_deliveries_enqueue(p_member_id text)
  returns boolean language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_cid text := billing.current_community_id();
begin
  if v_cid is null or not exists (select 1 from billing.members m where m.community_id = v_cid and m.id = p_member_id) then
    return false;
  end if;
  perform billing_private.enqueue_deliveries(array[v_cid], array[p_member_id]);
  return true;
end
$$;

-- The retry operation: queues the job and answers the member's entitlements with each
-- benefit's delivery as it stands now (the job runs after the commit).
create or replace function billing_api.member_deliveries_retry(p_args jsonb) returns jsonb
  language plpgsql volatile
as $$
begin
  if not billing_private.member_deliveries_enqueue(p_args->>'id') then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return billing_api.member_entitlements_list(p_args);
end
$$;

revoke execute on function billing_private.member_deliveries_enqueue(text) from public;
grant execute on function billing_private.member_deliveries_enqueue(text) to billing_api;
grant execute on function billing_api.member_deliveries_retry(jsonb) to billing_api;

-- The Platforms page (issue 29): each connection with its health. Whether a bot token
-- is stored, never the token (billing_private.platform_secret_ciphertext answers only
-- the current community's, and only whether it is null leaves here); the last call
-- that worked and the last that did not (billing.platform_actions); the benefits
-- waiting per status: the stored deliveries not delivered (a removal still to be made
-- counts too), and as pending the active ledger's benefits whose first job has not
-- recorded anything yet (billing.benefits_with_delivery shows them pending as well).
create or replace function billing_api.platform_connections_health(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_cid text := billing.current_community_id();
begin
  return jsonb_build_object('data', coalesce((
    with unrecorded as (
      select b->>'platform_config_id' as pcfg, count(*) as n
      from billing.member_entitlements me
      cross join lateral jsonb_array_elements(me.benefits) b
      where me.community_id = v_cid and me.status = 'active' and me.benefits <> '[]'
        and not exists (select 1 from billing.benefit_deliveries d
                        where d.community_id = me.community_id and d.member_id = me.member_id
                          and d.platform_config_id = b->>'platform_config_id' and d.type = b->>'type' and d.value = b->>'value')
      group by 1
    ), stored as (
      select d.platform_config_id as pcfg,
        count(*) filter (where d.status = 'pending') as pending,
        count(*) filter (where d.status = 'failed') as failed,
        count(*) filter (where d.status = 'action_required') as action_required
      from billing.benefit_deliveries d
      where d.community_id = v_cid
      group by 1
    )
    select jsonb_agg(jsonb_build_object(
      'id', pc.id, 'key', pc.key, 'name', pc.name, 'platform', pc.platform,
      'guild_id', pc.settings->>'guild_id', 'chat_id', pc.settings->>'chat_id',
      'bot_token_set', billing_private.platform_secret_ciphertext(pc.id, 'bot_token') is not null,
      'last_success', (select jsonb_build_object('at', billing.iso(a.created_at), 'action', a.action, 'target', a.target)
                       from billing.platform_actions a
                       where a.community_id = v_cid and a.platform_config_id = pc.id and a.outcome = 'ok'
                       order by a.id desc limit 1),
      'last_error', (select jsonb_build_object('at', billing.iso(a.created_at), 'action', a.action, 'target', a.target,
                       'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error)
                     from billing.platform_actions a
                     where a.community_id = v_cid and a.platform_config_id = pc.id and a.outcome <> 'ok'
                     order by a.id desc limit 1),
      'waiting', jsonb_build_object(
        'pending', coalesce(s.pending, 0) + coalesce(u.n, 0),
        'failed', coalesce(s.failed, 0),
        'action_required', coalesce(s.action_required, 0)))
      order by pc.key)
    from billing.platform_configs pc
    left join stored s on s.pcfg = pc.id
    left join unrecorded u on u.pcfg = pc.id
    where pc.community_id = v_cid), '[]'));
end
$$;

-- The Platforms page's log: the calls made to the platforms, newest first, optionally
-- of one connection (the indexes platform_actions_config and the primary key).
create or replace function billing_api.platform_actions_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_pcfg text := nullif(p_args->>'platform_config_id', '');
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(a.id order by a.id desc), array_agg(jsonb_build_object(
      'id', a.id, 'member_id', a.member_id, 'platform_config_id', a.platform_config_id, 'action', a.action,
      'target', a.target, 'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error,
      'created_at', billing.iso(a.created_at)) order by a.id desc)
    into v_ids, v_items
  from (select a.* from billing.platform_actions a
        where a.community_id = billing.current_community_id()
          and (v_pcfg is null or a.platform_config_id = v_pcfg)
          and a.id < coalesce(p_args->>'cursor', chr(1114111))
        order by a.id desc limit v_limit + 1) a;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

grant execute on function billing_api.platform_connections_health(jsonb) to billing_api;
grant execute on function billing_api.platform_actions_list(jsonb) to billing_api;

-- Benefit deliveries (members:read, as each benefit's delivery in GET
-- /v1/members/{id}/entitlements): what each platform was last made to hold, per member
-- and benefit (want absent: a removal not yet done). Not the job's state (a Telegram
-- invite link) nor the platform user it was applied to.
create or replace view billing_graphql.benefit_deliveries with (security_invoker = true, security_barrier = false) as
  select d.member_id, d.platform_config_id, d.type, d.value, d.want, d.status, d.error, d.updated_at
  from billing.benefit_deliveries d
  where (select billing.has_scope('members:read'));
comment on view billing_graphql.benefit_deliveries is E'@primaryKey member_id,platform_config_id,type,value\n@foreignKey (member_id) references billing_graphql.members (id)\n@scope members:read\n@behavior -insert -update -delete\nBenefit deliveries: what each platform (Discord, Telegram) was last made to hold for a member, with the status and the error an operator can act on. Needs members:read.';
comment on column billing_graphql.benefit_deliveries.member_id is E'@notNull';
comment on column billing_graphql.benefit_deliveries.platform_config_id is E'@notNull';
comment on column billing_graphql.benefit_deliveries.type is E'@notNull';
comment on column billing_graphql.benefit_deliveries.value is E'@notNull';
comment on column billing_graphql.benefit_deliveries.want is E'@notNull\n@enumValues present absent';
comment on column billing_graphql.benefit_deliveries.status is E'@notNull\n@enumValues pending delivered failed action_required';
comment on column billing_graphql.benefit_deliveries.updated_at is E'@notNull';

grant select on billing_graphql.benefit_deliveries to billing_api;

-- The member's own benefits in the portal (issue 29 item 2): each active entitlement's
-- benefits with their delivery (billing.benefits_with_delivery) and the connection's
-- name. The error only when it asks for an action (a failed call's reason is the
-- operator's business, retried anyway). A member portal session only: the member_fence
-- policies keep it to the member's rows, and without a member there is nothing of its own.
create or replace function billing_api.member_portal_benefits(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text := billing.current_member_id();
begin
  if v_member is null then
    perform billing.raise('BL404', 'Only a member portal session has benefits of its own.');
  end if;
  return jsonb_build_object('data', coalesce((
    select jsonb_agg(jsonb_build_object('key', e.key, 'name', e.name, 'benefits', (
        select coalesce(jsonb_agg(jsonb_build_object('platform', b->>'platform', 'connection', coalesce(pc.name, pc.key),
            'type', b->>'type', 'value', b->>'value', 'delivery', jsonb_build_object(
              'status', b->'delivery'->>'status', 'updated_at', b->'delivery'->'updated_at',
              'error', case when b->'delivery'->>'status' = 'action_required' then b->'delivery'->'error' else 'null' end))
            order by x.o), '[]')
        from jsonb_array_elements(billing.benefits_with_delivery(me.community_id, me.member_id, me.benefits)) with ordinality as x(b, o)
        left join billing.platform_configs pc on pc.community_id = me.community_id and pc.id = x.b->>'platform_config_id'))
      order by me.id)
    from billing.member_entitlements me
    join billing.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where me.community_id = billing.current_community_id() and me.member_id = v_member and me.status = 'active'), '[]'));
end
$$;

grant execute on function billing_api.member_portal_benefits(jsonb) to billing_api;

-- (op_dispatch: written once, at the end of this migration)

--! split: 60-mail.sql
-- Issue 30 items 1, 2: a member's email (30-members, 80-checkout) and mail to members
-- (65-mail): docs/decisions/member-email.md, docs/decisions/mail-outbox.md.

-- What 60-mail.sql (and the linking work) changed in functions/30-members.sql: those functions, restated whole.
create or replace function billing.email_valid(p_email text) returns boolean
  language sql immutable parallel safe
as $$
  select length(p_email) <= 254 and p_email ~ '^[^@\s<>(),;:"\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$'
$$;

create or replace function billing.member_api_json(p_community_id text, p_member_id text) returns jsonb
  language plpgsql stable parallel safe
as $$
begin
  return (select t.member || jsonb_build_object('email', m.email)
    from billing.members m, billing.member_object(m.community_id, m.id) t(member)
    where m.community_id = p_community_id and m.id = p_member_id);
end
$$;

create or replace function billing_api.members_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(m.id order by m.id desc), array_agg(billing.member_api_json(m.community_id, m.id) order by m.id desc)
    into v_ids, v_items
  from (select m.community_id, m.id from billing.members m
        where m.community_id = billing.current_community_id()
          and (p_args->>'email' is null or lower(m.email) = lower(p_args->>'email'))
          and m.id < coalesce(p_args->>'cursor', chr(1114111))
        order by m.id desc limit v_limit + 1) m;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.members_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_out jsonb;
begin
  v_out := billing.member_api_json(billing.current_community_id(), p_args->>'id');
  if v_out is null then
    perform billing.raise('BL404', 'No member ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;

create or replace function billing_api.members_lookup(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_member text;
begin
  v_member := billing.resolve_identity(p_args);
  if v_member is null then
    perform billing.raise('BL404', 'No member has this identity.');
  end if;
  return billing.member_api_json(billing.current_community_id(), v_member);
end
$$;

create or replace function billing_api.external_subjects_attach(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community text := billing.current_community_id();
  v_member_id text := p_args->>'id';
  v_namespace text := p_args->>'namespace';
  v_external text := p_args->>'external_user_id';
  v_owner text;
  v_current text;
begin
  perform 1 from billing.members m where m.community_id = v_community and m.id = v_member_id for update;
  if not found then
    perform billing.raise('BL404', 'No member ' || v_member_id || '.');
  end if;
  select x.member_id into v_owner from billing.external_subjects x
  where x.community_id = v_community and x.namespace = v_namespace and x.external_user_id = v_external;
  if v_owner = v_member_id then
    return billing.member_api_json(v_community, v_member_id);
  elsif v_owner is not null then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' is already mapped to another member.');
  end if;
  select x.external_user_id into v_current from billing.external_subjects x
  where x.community_id = v_community and x.member_id = v_member_id and x.namespace = v_namespace;
  if v_current is not null then
    perform billing.raise('BL409', 'Member ' || v_member_id || ' already has the external subject '
      || v_namespace || '/' || v_current || ' in namespace ' || v_namespace || '.');
  end if;
  begin
    insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
    values (v_community, v_member_id, v_namespace, v_external);
  exception when unique_violation then
    perform billing.raise('BL409', 'The external subject ' || v_namespace || '/' || v_external
      || ' was mapped concurrently.');
  end;
  return billing.member_api_json(v_community, v_member_id);
end
$$;

create or replace function billing_api.members_update(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community text := billing.current_community_id();
  v_member_id text := p_args->>'id';
  v_email text := nullif(btrim(p_args->>'email'), '');
begin
  if v_email is not null and not billing.email_valid(v_email) then
    perform billing.raise('BL422', 'email is not a valid email address.', 'email');
  end if;
  if p_args ? 'email' then
    update billing.members m set email = v_email, updated_at = now()
    where m.community_id = v_community and m.id = v_member_id and m.email is distinct from v_email;
  end if;
  if not exists (select 1 from billing.members m where m.community_id = v_community and m.id = v_member_id) then
    perform billing.raise('BL404', 'No member ' || v_member_id || '.');
  end if;
  return billing.member_api_json(v_community, v_member_id);
end
$$;

grant execute on function billing.member_api_json(text,text) to billing_api;
grant execute on function billing.email_valid(text) to billing_api, billing_writer;
grant execute on function billing_api.members_update(jsonb) to billing_api;
grant create on schema billing_api to billing_writer;
alter function billing_api.members_update(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;

alter table billing.members add column if not exists email text;
alter table billing.members drop constraint if exists members_email_valid;
alter table billing.members add constraint members_email_valid check (email is null or billing.email_valid(email));
create index if not exists members_email on billing.members (community_id, lower(email)) where email is not null;

alter table billing.checkout_sessions add column if not exists customer_email text
  check (customer_email is null or billing.email_valid(customer_email));

alter table billing.communities add column if not exists mail_sender_name text
  check (length(mail_sender_name) between 1 and 200 and mail_sender_name !~ '[\r\n<>"]');
alter table billing.communities add column if not exists mail_reply_to text
  check (mail_reply_to is null or billing.email_valid(mail_reply_to));
alter table billing.communities add column if not exists mail_templates_off text[] not null default '{}';
grant select, update (mail_templates_off) on billing.communities to billing_writer;

create table if not exists billing.mail_messages (
  community_id text collate "C" not null references billing.communities on delete cascade,
  id text collate "C" not null default billing.gen_id('msg'),
  member_id text collate "C" not null,
  template text not null,
  -- what caused it: an event, or for a reminder (no event) its key, e.g.
  -- trial:<subscription>:<trial end>
  event_id text collate "C",
  ref text,
  to_address text not null,
  subject text not null,
  text_body text not null,
  html_body text not null,
  status text not null default 'queued' check (status in ('queued', 'sending', 'sent', 'failed', 'kept')),
  attempts integer not null default 0,
  last_error text,
  claimed_at timestamptz,
  created_at timestamptz not null default now(),
  sent_at timestamptz,
  primary key (community_id, id),
  unique (community_id, event_id, template),
  unique (community_id, ref, template),
  constraint mail_messages_cause check (event_id is not null or ref is not null),
  foreign key (community_id, member_id) references billing.members on delete cascade,
  foreign key (community_id, event_id) references billing.events on delete cascade
);
alter table billing.mail_messages enable row level security;
alter table billing.mail_messages force row level security;
drop policy if exists tenant on billing.mail_messages;
create policy tenant on billing.mail_messages
  using (community_id = (select billing.current_community_id()))
  with check (community_id = (select billing.current_community_id()));
drop policy if exists owner_access on billing.mail_messages;
create policy owner_access on billing.mail_messages to current_user using (true) with check (true);
grant select on billing.mail_messages to billing_api;
revoke insert, update, delete on billing.mail_messages from billing_api;

-- (from 82-member-portal.sql) a portal session sees its own member's messages only
drop policy if exists member_fence on billing.mail_messages;
create policy member_fence on billing.mail_messages as restrictive to billing_api, billing_writer
  using ((select billing.current_member_id()) is null or member_id = (select billing.current_member_id()));

-- What 60-mail.sql (and the linking work) changed in functions/80-checkout.sql: those functions, restated whole.
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
  insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency,
    client_reference_id, return_url, subject_kind, provider, expires_at, access_token_sha256, customer_email)
  values (v_cid, v_member, v_tier.id, v_plan.id, v_plan.amount_cents, v_plan.currency,
    p_args->>'client_reference_id', p_args->>'return_url', v_kind, v_provider,
    billing.now() + billing.checkout_lifetime(), sha256(convert_to(v_token, 'UTF8')),
    nullif(btrim(p_args->>'customer_email'), ''))
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
      where m.community_id = p_cs.community_id and m.id = p_cs.member_id), p_cs.customer_email))
  from billing.plans p
  join billing.tiers t on t.community_id = p.community_id and t.id = p.tier_id
  left join billing.discount_codes d on d.community_id = p_cs.community_id and d.id = p_cs.discount_id
  where p.community_id = p_cs.community_id and p.id = p_cs.plan_id
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

  -- The buyer's email (the provider's page, else the checkout link's customer_email)
  -- becomes the member's when it has none, before the invoice is paid, so the receipt
  -- (65-mail.sql) has an address. An operator's address is never replaced.
  update billing.members m set email = v_email, updated_at = now()
  from (select coalesce(e.given, v_cs.customer_email) as v_email
        from (select nullif(btrim(p_details->>'customer_email'), '') as given) e) x
  where m.community_id = v_cs.community_id and m.id = v_cs.member_id and m.email is null
    and x.v_email is not null and billing.email_valid(x.v_email);

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

create or replace function billing.link_code_apply(p_code text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_cid text := billing.current_community_id();
  v_lc billing.link_codes;
  v_r jsonb;
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
  v_r := billing.member_identity_attach(v_lc.member_id, p_platform, p_platform_uid, p_username);
  if v_r->>'outcome' = 'linked' then
    update billing.link_codes set redeemed_at = billing.now() where community_id = v_cid and id = v_lc.id;
  end if;
  return v_r;
end
$$;

create or replace function billing.member_identity_attach(p_member_id text, p_platform text, p_platform_uid text, p_username text)
  returns jsonb
  language plpgsql volatile
as $$
declare
  v_owner text;
begin
  select i.member_id into v_owner from billing.member_identities i
  where i.platform = p_platform and i.platform_uid = p_platform_uid;
  if v_owner is not null and v_owner <> p_member_id then
    return jsonb_build_object('outcome', 'identity_taken');
  end if;
  if v_owner is null then
    if exists (select 1 from billing.member_identities i where i.member_id = p_member_id and i.platform = p_platform) then
      return jsonb_build_object('outcome', 'member_has_identity', 'member_id', p_member_id);
    end if;
    insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values (billing.current_community_id(), p_member_id, p_platform, p_platform_uid, p_username);
  end if;
  return jsonb_build_object('outcome', 'linked', 'member_id', p_member_id, 'new_identity', v_owner is null);
end
$$;

create or replace function billing.platform_checkout_connect(p_platform_config_id text, p_checkout_id text,
  p_token_sha256 bytea, p_platform_uid text, p_username text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_member text;
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = 'discord') then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  select cs.member_id into v_member from billing.checkout_sessions cs
  where cs.id = p_checkout_id and cs.access_token_sha256 = p_token_sha256;
  if v_member is null then
    return jsonb_build_object('outcome', 'no_checkout');
  end if;
  return billing.member_identity_attach(v_member, 'discord', p_platform_uid, p_username);
end
$$;

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
      return billing.member_api_json(billing.current_community_id(), v_r->>'member_id');
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

grant execute on function billing.platform_checkout_connect(text,text,bytea,text,text) to billing_api;
grant execute on function billing.member_identity_attach(text,text,text,text) to billing_writer;
grant create on schema billing to billing_writer;
alter function billing.platform_checkout_connect(text,text,bytea,text,text) owner to billing_writer;
revoke create on schema billing from billing_writer;
--! Included functions/65-mail.sql
-- functions/65-mail.sql, safely replaced (create or replace; a migration may
-- --!include it): the functions and execute grants of 65-mail. Also:
-- tables/65-mail.sql (the outbox), tables/10-tenancy.sql (the community's mail
-- columns), tables/60-events.sql (the _800_mail trigger).
--
-- Templates render here, in the event's transaction, into plain text and HTML in the
-- community's name. Links that must be signed with the deployment's key (which never
-- reaches the database) stand as placeholders ({{portal_url}}) that the worker and the
-- dashboard fill in (src/domain/mail/mail-links.ts). docs/decisions/mail-outbox.md.

-- Minor units as a decimal in the currency's own places, with its code: 1250 usd
-- "12.50 USD", 500 jpy "500 JPY", 1250 kwd "1.250 KWD" (the exponents of
-- src/core/money.ts, ISO 4217).
create or replace function billing.money_text(p_minor bigint, p_currency text) returns text
  language sql immutable parallel safe
as $$
  select case when d.digits = 0 then p_minor::text
    else (case when p_minor < 0 then '-' else '' end) || (abs(p_minor) / (10 ^ d.digits)::bigint)::text || '.'
      || lpad((abs(p_minor) % (10 ^ d.digits)::bigint)::text, d.digits, '0') end
    || ' ' || upper(p_currency)
  from (select case
    when upper(p_currency) in ('BIF','CLP','DJF','GNF','ISK','JPY','KMF','KRW','PYG','RWF','UGX','UYI','VND','VUV','XAF','XOF','XPF') then 0
    when upper(p_currency) in ('BHD','IQD','JOD','KWD','LYD','OMR','TND') then 3
    else 2 end as digits) d
$$;

create or replace function billing.html_escape(p_text text) returns text
  language sql immutable parallel safe
as $$
  select replace(replace(replace(replace(replace(coalesce(p_text, ''), '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '"', '&quot;'), '''', '&#39;')
$$;

-- The templates, with the event type that causes each and whether it is transactional
-- (a receipt, a payment notice, the access bought: no unsubscribe link; the others
-- carry a signed one).
create or replace function billing.mail_templates() returns table (template text, event_type text, transactional boolean, title text)
  language sql immutable parallel safe
as $$
  values ('receipt', 'invoice.paid', true, 'Receipt (invoice paid)'),
    ('payment_failed', 'invoice.payment_failed', true, 'Payment failed'),
    ('refund_issued', 'invoice.refunded', true, 'Refund issued'),
    ('subscription_ended', 'subscription.cancelled', true, 'Subscription ended'),
    -- reminders (billing_private.mail_reminders): notices auto-renewal laws ask for
    ('trial_ending', 'reminder: a trial ends within 3 days', true, 'Trial ending in 3 days'),
    ('renewal_upcoming', 'reminder: a yearly renewal within 7 days', true, 'Yearly renewal in 7 days'),
    ('price_change', 'reminder: a price migration (billing plans migrate) marks the subscription', true, 'Price change notice'),
    ('access_granted', 'member.entitlement.granted', true, 'Access granted (how to link Discord or Telegram)')
$$;

-- One message: {subject, text, html} from a template, the community and the event's
-- data (plus link_codes for access_granted). Pure: the dashboard's preview calls it
-- with sample data.
create or replace function billing.mail_render(p_community_name text, p_template text, p_data jsonb)
  returns jsonb language plpgsql immutable parallel safe
as $$
declare
  v_inv jsonb := p_data->'invoice';
  v_amount text;
  v_ref text;
  v_subject text;
  v_lines text[] := '{}';
  v_html text[] := '{}';
  v_code jsonb;
  v_name text := p_community_name;
  e_name text := billing.html_escape(p_community_name);
begin
  if p_template in ('receipt', 'payment_failed') then
    v_ref := coalesce(v_inv->>'number', v_inv->>'id');
    if p_template = 'receipt' then
      v_amount := billing.money_text((v_inv->>'amount_paid_cents')::bigint, v_inv->>'currency');
      v_subject := 'Receipt from ' || v_name || ': ' || v_amount;
      v_lines := array['Thank you for your payment to ' || v_name || '.', '',
        'Amount paid: ' || v_amount, 'Invoice: ' || v_ref,
        'Paid on: ' || coalesce(left(v_inv->>'paid_at', 10), '')]
        || coalesce((select array_agg('  ' || (l->>'description') || ': ' || billing.money_text((l->>'amount_cents')::bigint, v_inv->>'currency'))
             from jsonb_array_elements(v_inv->'lines') l), '{}')
        || array['', 'Manage your subscription and payment method: {{portal_url}}'];
      v_html := array['<p>Thank you for your payment to ' || e_name || '.</p>',
        '<table><tr><th align="left">Amount paid</th><td>' || billing.html_escape(v_amount) || '</td></tr>',
        '<tr><th align="left">Invoice</th><td>' || billing.html_escape(v_ref) || '</td></tr>',
        '<tr><th align="left">Paid on</th><td>' || billing.html_escape(left(v_inv->>'paid_at', 10)) || '</td></tr></table>',
        '<ul>' || coalesce((select string_agg('<li>' || billing.html_escape(l->>'description') || ': '
          || billing.html_escape(billing.money_text((l->>'amount_cents')::bigint, v_inv->>'currency')) || '</li>', '')
          from jsonb_array_elements(v_inv->'lines') l), '') || '</ul>',
        '<p><a href="{{portal_url}}">Manage your subscription and payment method</a></p>'];
    else
      v_amount := billing.money_text((v_inv->>'total_cents')::bigint - (v_inv->>'amount_paid_cents')::bigint, v_inv->>'currency');
      v_subject := 'Payment failed: ' || v_amount || ' to ' || v_name;
      v_lines := array['We could not collect ' || v_amount || ' for invoice ' || v_ref || ' from your card.',
        case when v_inv->>'next_attempt_at' is not null
          then 'We will try again on ' || replace(left(v_inv->>'next_attempt_at', 16), 'T', ' ') || ' UTC.'
          else 'That was the last attempt: the subscription ends unless the invoice is paid.' end, '',
        'Change your card: {{portal_url}}'];
      v_html := array['<p>We could not collect <strong>' || billing.html_escape(v_amount) || '</strong> for invoice '
        || billing.html_escape(v_ref) || ' from your card.</p>',
        '<p>' || billing.html_escape(case when v_inv->>'next_attempt_at' is not null
          then 'We will try again on ' || replace(left(v_inv->>'next_attempt_at', 16), 'T', ' ') || ' UTC.'
          else 'That was the last attempt: the subscription ends unless the invoice is paid.' end) || '</p>',
        '<p><a href="{{portal_url}}">Change your card</a></p>'];
    end if;
  elsif p_template = 'refund_issued' then
    v_amount := billing.money_text((p_data->'refund'->>'amount_cents')::bigint, v_inv->>'currency');
    v_ref := coalesce(v_inv->>'number', v_inv->>'id');
    v_subject := 'Refund from ' || v_name || ': ' || v_amount;
    v_lines := array['We refunded ' || v_amount || ' of invoice ' || v_ref || '.',
      'Credit note: ' || coalesce(p_data->'refund'->>'credit_note_number', '-'),
      'The money returns to the card you paid with; your bank may take a few days to show it.', '',
      'Your membership: {{portal_url}}'];
    v_html := array['<p>We refunded <strong>' || billing.html_escape(v_amount) || '</strong> of invoice ' || billing.html_escape(v_ref) || '.</p>',
      '<p>Credit note: ' || billing.html_escape(coalesce(p_data->'refund'->>'credit_note_number', '-')) || '</p>',
      '<p>The money returns to the card you paid with; your bank may take a few days to show it.</p>',
      '<p><a href="{{portal_url}}">Your membership</a></p>'];
  elsif p_template = 'subscription_ended' then
    v_subject := 'Your ' || coalesce(p_data->'subscription'->>'tier_name', 'subscription') || ' subscription at ' || v_name || ' has ended';
    v_lines := array['Your subscription to ' || coalesce(p_data->'subscription'->>'tier_name', 'the community')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '') || ' has ended, and with it the access it gave.',
      '', 'You are welcome back at any time. Your membership: {{portal_url}}'];
    v_html := array['<p>Your subscription to <strong>' || billing.html_escape(coalesce(p_data->'subscription'->>'tier_name', 'the community'))
      || '</strong>' || billing.html_escape(coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '')) || ' has ended, and with it the access it gave.</p>',
      '<p>You are welcome back at any time. <a href="{{portal_url}}">Your membership</a></p>'];
  elsif p_template in ('trial_ending', 'renewal_upcoming') then
    v_amount := billing.money_text((p_data->'subscription'->>'amount_cents')::bigint, p_data->'subscription'->>'currency');
    v_ref := coalesce(p_data->'subscription'->>'tier_name', 'your subscription')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '');
    if p_template = 'trial_ending' then
      v_subject := 'Your free trial at ' || v_name || ' ends on ' || left(p_data->'subscription'->>'current_period_end', 10);
      v_lines := array['Your free trial of ' || v_ref || ' ends on ' || replace(left(p_data->'subscription'->>'current_period_end', 16), 'T', ' ') || ' UTC.',
        'Unless you cancel before then, your card will be charged ' || v_amount || ' and the subscription renews until you cancel.'];
    else
      v_subject := 'Your ' || v_ref || ' subscription at ' || v_name || ' renews on ' || left(p_data->'subscription'->>'current_period_end', 10);
      v_lines := array['Your yearly subscription to ' || v_ref || ' renews on ' || replace(left(p_data->'subscription'->>'current_period_end', 16), 'T', ' ') || ' UTC.',
        'Your card will be charged ' || v_amount || ' for the next year unless you cancel before then.'];
    end if;
    v_html := array['<p>' || billing.html_escape(v_lines[1]) || '</p>', '<p>' || billing.html_escape(v_lines[2]) || '</p>',
      '<p><a href="{{portal_url}}">Cancel or change your plan</a></p>'];
    v_lines := v_lines || array['', 'Cancel or change your plan: {{portal_url}}'];
  elsif p_template = 'price_change' then
    v_ref := coalesce(p_data->'subscription'->>'tier_name', 'your subscription')
      || coalesce(' (' || (p_data->'subscription'->>'plan_name') || ')', '');
    v_amount := billing.money_text((p_data->'migration'->>'price_cents')::bigint, p_data->'migration'->>'currency');
    v_subject := 'A price change for your ' || v_ref || ' subscription at ' || v_name;
    v_lines := array['The price of ' || v_ref || ' changes from '
        || billing.money_text((p_data->'subscription'->>'amount_cents')::bigint, p_data->'subscription'->>'currency')
        || ' to ' || v_amount || ' per ' || coalesce(p_data->'subscription'->>'interval', 'period') || '.',
      'It applies from your first renewal on or after ' || left(p_data->'migration'->>'notice_ends_at', 10)
        || '; until then you pay what you pay today. You may cancel before then.'];
    v_html := array['<p>' || billing.html_escape(v_lines[1]) || '</p>', '<p>' || billing.html_escape(v_lines[2]) || '</p>',
      '<p><a href="{{portal_url}}">Cancel or change your plan</a></p>'];
    v_lines := v_lines || array['', 'Cancel or change your plan: {{portal_url}}'];
  elsif p_template = 'access_granted' then
    v_subject := 'Your access to ' || coalesce(p_data->'entitlement'->>'name', 'your membership') || ' at ' || v_name;
    v_lines := array['You now have access to ' || coalesce(p_data->'entitlement'->>'name', 'your membership') || ' at ' || v_name || '.'];
    v_html := array['<p>You now have access to <strong>' || billing.html_escape(coalesce(p_data->'entitlement'->>'name', 'your membership'))
      || '</strong> at ' || e_name || '.</p>'];
    for v_code in select c from jsonb_array_elements(coalesce(p_data->'link_codes', '[]')) c loop
      if v_code->>'platform' = 'discord' then
        v_lines := v_lines || ('To link your Discord account, use the /link command in the server with the code ' || (v_code->>'code') || '.');
      else
        v_lines := v_lines || ('To link your Telegram account, send /start ' || (v_code->>'code') || ' to the community''s bot.');
      end if;
      v_html := v_html || ('<p>Link your ' || case when v_code->>'platform' = 'discord' then 'Discord account: use <code>/link</code> in the server with the code'
        else 'Telegram account: send <code>/start</code> to the community''s bot with the code' end
        || ' <strong>' || billing.html_escape(v_code->>'code') || '</strong>.</p>');
    end loop;
    if jsonb_array_length(coalesce(p_data->'link_codes', '[]')) > 0 then
      v_lines := v_lines || ('The code works once, until ' || replace(left(p_data->'link_codes'->0->>'expires_at', 16), 'T', ' ') || ' UTC.'::text);
    end if;
    v_lines := v_lines || array['', 'Your membership: {{portal_url}}'];
    v_html := v_html || '<p><a href="{{portal_url}}">Your membership</a></p>'::text;
  else
    perform billing.raise('BL422', 'Unknown mail template ' || p_template || '.', 'template');
  end if;
  return jsonb_build_object('subject', v_subject,
    'text', 'Hello,' || E'\n\n' || array_to_string(v_lines, E'\n') || E'\n\n' || '-- ' || E'\n' || v_name || E'\n',
    'html', '<!doctype html><html><body style="font-family:sans-serif"><p>Hello,</p>' || array_to_string(v_html, '')
      || '<p>&mdash; ' || e_name || '</p></body></html>');
end
$$;

-- Link codes for the access email: one per platform the community has connected and
-- the member has not linked yet, valid seven days (a mailbox is read later than a bot
-- is answered). A code of that lifetime still valid for a day is reused; no code is
-- invalidated (an operator's fresh code from POST /v1/members/{id}/link-codes keeps
-- working).
create or replace function billing_private.mail_link_codes(p_community_id text, p_member_id text) returns jsonb
  language plpgsql volatile
as $$
declare
  v_platform text;
  v_out jsonb := '[]';
  v_lc billing.link_codes;
  v_now timestamptz := billing.community_now(p_community_id);
begin
  for v_platform in select distinct pc.platform from billing.platform_configs pc
    where pc.community_id = p_community_id
      and not exists (select 1 from billing.member_identities i where i.community_id = p_community_id
        and i.member_id = p_member_id and i.platform = pc.platform)
    order by 1 loop
    select * into v_lc from billing.link_codes lc
    where lc.community_id = p_community_id and lc.member_id = p_member_id and lc.intended_platform = v_platform
      and lc.redeemed_at is null and lc.invalidated_at is null and lc.expires_at > v_now + interval '1 day'
    order by lc.expires_at desc limit 1;
    if v_lc.id is null then
      insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at)
      values (p_community_id, p_member_id, upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 10)),
        v_platform, v_now + interval '7 days')
      returning * into v_lc;
    end if;
    v_out := v_out || jsonb_build_object('platform', v_platform, 'code', v_lc.code, 'expires_at', billing.iso(v_lc.expires_at));
    v_lc := null;
  end loop;
  return v_out;
end
$$;

-- _800_mail: the events of a statement that cause mail become messages (at most one
-- per event and template: on conflict nothing; one access email per member and
-- statement), to members with an email, unless the community
-- turned the template off; then one job per community queues their sending. A receipt
-- is for money taken: a paid invoice of 0 (a trial's start) sends none.
create or replace function billing_private.tg_events__mail() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
begin
  if not exists (select 1 from new_events e where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded',
      'subscription.cancelled', 'member.entitlement.granted')) then
    return null;
  end if;
  with invoice_due as (
    select e.community_id, e.id as event_id, t.template,
      coalesce(e.data->'invoice'->>'member_id', e.data->'subscription'->>'member_id') as member_id, e.data
    from new_events e
    join billing.mail_templates() t on t.event_type = e.type
    where e.type in ('invoice.paid', 'invoice.payment_failed', 'invoice.refunded', 'subscription.cancelled')
      and (e.type <> 'invoice.paid' or (e.data->'invoice'->>'amount_paid_cents')::bigint > 0)
  ), access_due as (
    -- One access email per member and statement (a tier of several entitlements grants
    -- them together), made from its first event and naming them all.
    select e.community_id, min(e.id) as event_id, 'access_granted' as template, e.data->'member'->>'id' as member_id,
      jsonb_build_object('entitlement', jsonb_build_object('name',
        string_agg(e.data->'entitlement'->>'name', ', ' order by e.data->'entitlement'->>'name'))) as data
    from new_events e
    where e.type = 'member.entitlement.granted'
    group by e.community_id, e.data->'member'->>'id'
  ), due as materialized (
    -- materialized: only these rows (members with an email, templates on) reach the
    -- lateral below, which makes link codes
    select d.*, m.email, c.name as community_name
    from (select * from invoice_due union all select * from access_due) d
    join billing.members m on m.community_id = d.community_id and m.id = d.member_id and m.email is not null
    join billing.communities c on c.id = d.community_id and not (d.template = any (c.mail_templates_off))
  ), made as (
    insert into billing.mail_messages (community_id, member_id, template, event_id, to_address, subject, text_body, html_body)
    select d.community_id, d.member_id, d.template, d.event_id, d.email, r.msg->>'subject', r.msg->>'text', r.msg->>'html'
    from due d
    cross join lateral (select billing.mail_render(d.community_name, d.template, case when d.template = 'access_granted'
      then d.data || jsonb_build_object('link_codes', billing_private.mail_link_codes(d.community_id, d.member_id))
      else d.data end) as msg) r
    order by d.community_id, d.event_id, d.template
    on conflict (community_id, event_id, template) do nothing
    returning community_id, id
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids))
  into v_payloads
  from (select community_id, array_agg(id order by id) as ids from made group by community_id) g;
  perform billing_private.add_job('mail_messages__send', v_payloads);
  return null;
end
$$;

-- Reminders, which no event announces: a trial ending within 3 days and a yearly
-- subscription renewing within 7, by each community's clock, and the notice of a price
-- migration (which emits nothing when scheduled), to members with an email, once per
-- subscription and date or migration (ref). Run by the worker's cron (mail_messages__remind)
-- or by hand (p_community_id: one community). Subscriptions are reached through
-- subscriptions_period_end, bounded by the earliest and latest community clocks.
create or replace function billing_private.mail_reminders(p_community_id text default null) returns integer
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payloads json[];
  v_made integer;
  v_lo timestamptz;
  v_hi timestamptz;
begin
  select now() + min(c.clock_offset), now() + max(c.clock_offset) + interval '7 days' into v_lo, v_hi
  from billing.communities c where p_community_id is null or c.id = p_community_id;
  with due as (
    select s.community_id, s.member_id, k.template,
      k.template || ':' || s.id || ':' || billing.iso(s.current_period_end) as ref,
      jsonb_build_object('subscription', billing.subscription_json(s)) as data
    from billing.subscriptions s
    join billing.communities c on c.id = s.community_id
    join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
    cross join lateral (select case
      when s.status = 'trialing' and s.trial_end is not null and s.cancel_at is null
        and s.current_period_end <= now() + c.clock_offset + interval '3 days' then 'trial_ending'
      when s.status = 'active' and p.interval = 'year' and s.cancel_at is null then 'renewal_upcoming' end as template) k
    where s.status in ('active', 'trialing', 'past_due', 'cancelling')
      and s.current_period_end > v_lo and s.current_period_end <= v_hi
      and (p_community_id is null or s.community_id = p_community_id)
      and s.current_period_end > now() + c.clock_offset
      and s.current_period_end <= now() + c.clock_offset + interval '7 days'
      and k.template is not null
      and not (k.template = any (c.mail_templates_off))
      and not exists (select 1 from billing.mail_messages mm where mm.community_id = s.community_id
        and mm.ref = k.template || ':' || s.id || ':' || billing.iso(s.current_period_end) and mm.template = k.template)
  ), price_due as (
    -- a price migration's notice, once per subscription and migration
    select s.community_id, s.member_id, 'price_change' as template, 'price_change:' || s.id || ':' || s.price_migration_id as ref,
      jsonb_build_object('subscription', billing.subscription_json(s), 'migration', jsonb_build_object(
        'price_cents', pm.price_cents, 'currency', pm.currency, 'notice_ends_at', billing.iso(pm.notice_ends_at))) as data
    from billing.subscriptions s
    join billing.price_migrations pm on pm.community_id = s.community_id and pm.id = s.price_migration_id
    join billing.communities c on c.id = s.community_id
    where s.price_migration_id is not null and s.status <> 'cancelled'
      and (p_community_id is null or s.community_id = p_community_id)
      and not ('price_change' = any (c.mail_templates_off))
      and not exists (select 1 from billing.mail_messages mm where mm.community_id = s.community_id
        and mm.ref = 'price_change:' || s.id || ':' || s.price_migration_id and mm.template = 'price_change')
  ), made as (
    insert into billing.mail_messages (community_id, member_id, template, ref, to_address, subject, text_body, html_body)
    select d.community_id, d.member_id, d.template, d.ref, m.email, r.msg->>'subject', r.msg->>'text', r.msg->>'html'
    from (select * from due union all select * from price_due) d
    join billing.members m on m.community_id = d.community_id and m.id = d.member_id and m.email is not null
    join billing.communities c on c.id = d.community_id
    cross join lateral (select billing.mail_render(c.name, d.template, d.data) as msg) r
    order by d.community_id, d.ref
    on conflict (community_id, ref, template) do nothing
    returning community_id, id
  )
  select array_agg(json_build_object('community_id', community_id, 'ids', ids)), coalesce(sum(cardinality(ids)), 0)
  into v_payloads, v_made
  from (select community_id, array_agg(id order by id) as ids from made group by community_id) g;
  perform billing_private.add_job('mail_messages__send', v_payloads);
  return v_made;
end
$$;

-- The worker's door: claims the queued messages among p_ids (and those a dead worker
-- left sending for ten minutes), counting the attempt, and answers what to send with
-- the community's sender settings. Messages already sent, kept or failed are not
-- answered again: a job that runs twice sends nothing twice.
create or replace function billing_private.mail_claim(p_community_id text, p_ids text[])
  returns table (id text, member_id text, template text, to_address text, subject text, text_body text,
    html_body text, attempts integer, sender_name text, reply_to text, community_name text)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  return query
  with claimed as (
    update billing.mail_messages mm set status = 'sending', attempts = mm.attempts + 1, claimed_at = now()
    where mm.community_id = p_community_id and mm.id = any (p_ids)
      and mm.id in (select x.id from billing.mail_messages x
        where x.community_id = p_community_id and x.id = any (p_ids)
          and (x.status = 'queued' or (x.status = 'sending' and x.claimed_at < now() - interval '10 minutes'))
        for update skip locked)
    returning mm.*
  )
  select c2.id, c2.member_id, c2.template, c2.to_address, c2.subject, c2.text_body, c2.html_body, c2.attempts,
    coalesce(co.mail_sender_name, co.name), co.mail_reply_to, co.name
  from claimed c2 join billing.communities co on co.id = c2.community_id
  order by c2.id;
end
$$;

-- The outcome of one message: sent, kept (no SMTP configured), failed (gave up), or
-- queued again for a retry with the error.
create or replace function billing_private.mail_record(p_community_id text, p_id text, p_status text, p_error text)
  returns void language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if p_status not in ('sent', 'kept', 'failed', 'queued') then
    raise exception 'mail_record: bad status %', p_status;
  end if;
  update billing.mail_messages mm set status = p_status, last_error = left(p_error, 500), claimed_at = null,
    sent_at = case when p_status = 'sent' then now() else mm.sent_at end
  where mm.community_id = p_community_id and mm.id = p_id;
end
$$;

-- ---- the dashboard's mail page (dashboardOperations: members:read, members:write) ------

create or replace function billing.mail_message_json(p_m billing.mail_messages, p_full boolean) returns jsonb
  language sql stable
as $$
  select jsonb_build_object('id', p_m.id, 'member_id', p_m.member_id, 'template', p_m.template,
    'event_id', p_m.event_id, 'ref', p_m.ref, 'to', p_m.to_address, 'subject', p_m.subject, 'status', p_m.status,
    'attempts', p_m.attempts, 'last_error', p_m.last_error, 'created_at', billing.iso(p_m.created_at),
    'sent_at', billing.iso(p_m.sent_at))
    || case when p_full then jsonb_build_object('text', p_m.text_body, 'html', p_m.html_body) else '{}' end
$$;

create or replace function billing_api.mail_messages_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_ids text[];
  v_items jsonb[];
begin
  select array_agg(m.id order by m.id desc), array_agg(billing.mail_message_json(m, false) order by m.id desc)
    into v_ids, v_items
  from (select * from billing.mail_messages m
        where m.community_id = billing.current_community_id()
          and m.id < coalesce(p_args->>'cursor', chr(1114111))
        order by m.id desc limit v_limit + 1) m;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

create or replace function billing_api.mail_messages_get(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_out jsonb;
begin
  select billing.mail_message_json(m, true) into v_out from billing.mail_messages m
  where m.community_id = billing.current_community_id() and m.id = p_args->>'id';
  if v_out is null then
    perform billing.raise('BL404', 'No mail message ' || (p_args->>'id') || '.');
  end if;
  return v_out;
end
$$;

-- The templates with their on/off state and a preview of each, rendered from sample data.
create or replace function billing_api.mail_templates_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_c billing.communities;
  v_sample jsonb := jsonb_build_object(
    'invoice', jsonb_build_object('id', 'inv_sample', 'number', to_char(billing.now(), 'YYYY') || '-000042',
      'currency', 'usd', 'total_cents', 1500, 'amount_paid_cents', 1500, 'paid_at', billing.iso(billing.now()),
      'next_attempt_at', billing.iso(billing.now() + interval '3 days'),
      'lines', jsonb_build_array(jsonb_build_object('description', 'Gold (monthly), 1 month', 'amount_cents', 1500))),
    'entitlement', jsonb_build_object('name', 'Gold'),
    'refund', jsonb_build_object('amount_cents', 500, 'credit_note_number', 'CN-' || to_char(billing.now(), 'YYYY') || '-000007'),
    'subscription', jsonb_build_object('tier_name', 'Gold', 'plan_name', 'Gold annual', 'amount_cents', 15000, 'currency', 'usd',
      'interval', 'year', 'current_period_end', billing.iso(billing.now() + interval '3 days')),
    'migration', jsonb_build_object('price_cents', 18000, 'currency', 'usd', 'notice_ends_at', billing.iso(billing.now() + interval '30 days')),
    'link_codes', jsonb_build_array(jsonb_build_object('platform', 'telegram', 'code', 'SAMPLE1234',
      'expires_at', billing.iso(billing.now() + interval '7 days'))));
begin
  select * into v_c from billing.communities c where c.id = billing.current_community_id();
  return jsonb_build_object('sender_name', coalesce(v_c.mail_sender_name, v_c.name), 'reply_to', v_c.mail_reply_to,
    'data', (select jsonb_agg(jsonb_build_object('template', t.template, 'event_type', t.event_type,
      'transactional', t.transactional, 'title', t.title, 'enabled', not (t.template = any (v_c.mail_templates_off)),
      'preview', billing.mail_render(v_c.name, t.template,
        case when t.template = 'payment_failed' then jsonb_set(jsonb_set(v_sample, '{invoice,amount_paid_cents}', '0'), '{invoice,paid_at}', 'null')
        else v_sample end)) order by t.template)
      from billing.mail_templates() t));
end
$$;

-- Turns a template on or off for the community.
create or replace function billing_api.mail_template_set(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_template text := p_args->>'template';
begin
  if not exists (select 1 from billing.mail_templates() t where t.template = v_template) then
    perform billing.raise('BL404', 'No mail template ' || v_template || '.');
  end if;
  update billing.communities c set mail_templates_off = case when (p_args->>'enabled')::boolean
      then array_remove(c.mail_templates_off, v_template)
      else array_append(array_remove(c.mail_templates_off, v_template), v_template) end
  where c.id = billing.current_community_id();
  return jsonb_build_object('template', v_template, 'enabled', (p_args->>'enabled')::boolean);
end
$$;

-- ---- execute rights ------------------------------------------------------------------------

grant execute on function billing.money_text(bigint,text) to billing_api;
grant execute on function billing.html_escape(text) to billing_api;
grant execute on function billing.mail_templates() to billing_api;
grant execute on function billing.mail_render(text,text,jsonb) to billing_api;
grant execute on function billing.mail_message_json(billing.mail_messages,boolean) to billing_api;
grant execute on function billing_api.mail_messages_list(jsonb) to billing_api;
grant execute on function billing_api.mail_messages_get(jsonb) to billing_api;
grant execute on function billing_api.mail_templates_list(jsonb) to billing_api;
grant execute on function billing_api.mail_template_set(jsonb) to billing_api;
-- What billing_worker calls (worker/tasks/mail_messages__send.ts).
grant execute on function billing_private.mail_claim(text,text[]) to billing_worker;
grant execute on function billing_private.mail_record(text,text,text,text) to billing_worker;
grant execute on function billing_private.mail_reminders(text) to billing_worker;

grant create on schema billing_api to billing_writer;
alter function billing_api.mail_template_set(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;
--! EndIncluded functions/65-mail.sql

drop trigger if exists _800_mail on billing.events;
create trigger _800_mail after insert on billing.events
  referencing new table as new_events
  for each statement execute function billing_private.tg_events__mail();

create or replace view billing_graphql.members with (security_invoker = true, security_barrier = false) as
  select m.id, m.created_at, m.updated_at, m.email
  from billing.members m
  where (select billing.has_scope('members:read'));
comment on column billing_graphql.members.email is E'The member\'s email (personal data), null when unknown.';

-- Operator SQL logins (10-tenancy.sql): the new column of a table with hidden columns,
-- and the mail bodies hidden (an access email holds a link code).
create or replace function billing_private.operator_hidden_columns() returns jsonb
  language sql immutable
as $$
  select '{"idempotency_keys": ["response_body"],
           "link_codes": ["code"],
           "checkout_sessions": ["url", "access_token", "access_token_sha256", "provider_ref"],
           "portal_sessions": ["url", "access_token", "access_token_sha256"],
           "mail_messages": ["text_body", "html_body"]}'::jsonb
$$;
grant select (customer_email) on billing.checkout_sessions to billing_operator;
revoke select on billing.mail_messages from billing_operator;
grant select (community_id, id, member_id, template, event_id, ref, to_address, subject, status, attempts, last_error,
  claimed_at, created_at, sent_at) on billing.mail_messages to billing_operator;

-- (op_dispatch: written once, at the end of this migration)

--! split: 70-invoice-pdf.sql
-- Invoices and receipts as PDF (issue 30 item 3; docs/decisions/invoice-pdf.md): the
-- community's legal fields (tables/10-tenancy.sql) and what the PDF prints
-- (functions/46-invoices.sql).

-- The seller as its invoices and receipts name it (the PDF, docs/decisions/invoice-pdf.md):
-- the legal name (else the display name), the postal address as printed lines, the
-- country (ISO 3166-1 alpha-2) and the tax id (VAT, GST, EIN ...). All optional;
-- an operator sets them with `billing communities set-legal` or SQL (update
-- billing.communities set legal_name = ...).
-- Printed as written: no format is checked beyond size and the country's two letters.
alter table billing.communities add column if not exists legal_name text;
alter table billing.communities add column if not exists address_lines text[];
alter table billing.communities add column if not exists country text;
alter table billing.communities add column if not exists tax_id text;
alter table billing.communities drop constraint if exists communities_legal_valid;
alter table billing.communities add constraint communities_legal_valid check (
  (legal_name is null or length(legal_name) between 1 and 200)
  and (address_lines is null or (cardinality(address_lines) <= 6
    and coalesce(length(array_to_string(address_lines, '')), 0) <= 600))
  and (country is null or country ~ '^[A-Z]{2}$')
  and (tax_id is null or length(tax_id) between 1 and 50));

-- What the invoice's PDF prints (GET /v1/invoices/{id}/pdf; docs/decisions/invoice-pdf.md):
-- the invoice, the seller (the community's legal fields), the buyer (the member as the
-- API shows it, under the slots a buyer's name, address and tax id will fill once
-- checkout records them), how it was paid, and its tax lines (none until tax rates
-- exist: the slot the PDF prints them from). RLS and the portal's member_fence keep
-- it to the caller's community and member: another's invoice is a 404.
create or replace function billing_api.invoices_document(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_inv billing.invoices;
  v_com billing.communities;
begin
  select * into v_inv from billing.invoices i
  where i.community_id = billing.current_community_id() and i.id = p_args->>'id';
  if v_inv.id is null then
    perform billing.raise('BL404', 'No invoice ' || (p_args->>'id') || '.');
  end if;
  select * into v_com from billing.communities c where c.id = v_inv.community_id;
  return jsonb_build_object(
    'invoice', billing.invoice_json(v_inv),
    'seller', jsonb_build_object(
      'name', v_com.name,
      'legal_name', v_com.legal_name,
      'address_lines', to_jsonb(coalesce(v_com.address_lines, '{}'::text[])),
      'country', v_com.country,
      'tax_id', v_com.tax_id),
    'buyer', jsonb_build_object('name', null, 'address_lines', '[]'::jsonb, 'country', null, 'tax_id', null)
      || billing.member_json(v_inv.community_id, v_inv.member_id),
    'payment_method', case when v_inv.status = 'paid' then v_inv.provider end,
    'tax_lines', '[]'::jsonb);
end
$$;
grant execute on function billing_api.invoices_document(jsonb) to billing_api;

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
