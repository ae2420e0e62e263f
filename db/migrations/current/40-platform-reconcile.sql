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
