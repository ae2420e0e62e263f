--! Previous: sha1:9a3be95a36ff243239ffe9eac545ef96464ef688
--! Hash: sha1:9382dd7a7f5059336e4cd123910a6fa1347b912d
--! Message: connect discord from the member portal

--! split: 1-current.sql
-- Enter migration here

--! split: 10-portal-connect.sql
-- Connect Discord from the member portal (issue 29 item 3).
create or replace function billing.platform_member_connect(p_platform_config_id text, p_member_id text,
  p_platform_uid text, p_username text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if billing.current_community_id() is null or not exists (select 1 from billing.platform_configs pc
      where pc.id = p_platform_config_id and pc.platform = 'discord') then
    return jsonb_build_object('outcome', 'no_connection');
  end if;
  if not exists (select 1 from billing.members m where m.id = p_member_id) then
    return jsonb_build_object('outcome', 'no_member');
  end if;
  return billing.member_identity_attach(p_member_id, 'discord', p_platform_uid, p_username);
end
$$;
grant execute on function billing.platform_member_connect(text,text,text,text) to billing_api;
grant create on schema billing to billing_writer;
alter function billing.platform_member_connect(text,text,text,text) owner to billing_writer;
revoke create on schema billing from billing_writer;
