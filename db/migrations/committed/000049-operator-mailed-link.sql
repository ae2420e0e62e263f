--! Previous: sha1:b60a4102f0257cd3cc2f1841e2f4335d831321c4
--! Hash: sha1:91e4624124a5f7beac055e6058e8785d4195909f
--! Message: operator mailed link

--! split: 1-current.sql
-- Enter migration here

--! split: 20-operator-mailed-link.sql
-- Issue 27 item 6: a right password refused with link_required gets a one-time link
-- mailed to the account's own address (15-operators.sql).
-- A password sign-in refused with link_required (operator_sign_in_throttle: the account
-- has had too many failures, the address is new) still has its password checked, and
-- when it is right the service mails a one-time link to the account's own address: the
-- operator, not whoever typed the password, can use it. The browser is answered the
-- same either way. At most one such link per account every 10 minutes. Returns where
-- to send it, or null (wrong password, disabled account, a link sent lately).
create or replace function billing_private.operator_mailed_link(p_user_id text, p_derived text, p_link_sha256 text, p_ttl interval)
  returns jsonb language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user billing_private.operator_users;
begin
  select u.* into v_user from billing_private.operator_users u
  where u.id = p_user_id and u.disabled_at is null;
  if v_user.password_hash is null or p_derived is null
     or substring(v_user.password_hash from '[^$]*$') <> encode(sha256(decode(p_derived, 'base64')), 'base64') then
    return null;
  end if;
  if not (billing_private.take_token('signin-mail:' || v_user.id, 0.1, 1)->>'allowed')::boolean then
    return null;
  end if;
  insert into billing_private.operator_links (community_id, token_sha256, user_id, expires_at)
  values (v_user.community_id, p_link_sha256, v_user.id, now() + p_ttl);
  return jsonb_build_object('email', v_user.email,
    'community_name', (select c.name from billing.communities c where c.id = v_user.community_id));
end
$$;

grant execute on function billing_private.operator_mailed_link(text, text, text, interval) to billing_api;
