--! Previous: sha1:005d4fcabe65d83a1c87ae609941adf40abfb6cf
--! Hash: sha1:8d63bf6403f5e4f14c6c3d6dc89fb49f294b8479
--! Message: renewal-tax-once

--! split: 1-current.sql
-- billing.renew_batch computes each renewal's tax once: its terms' subquery is kept
-- from being pulled up into the insert (offset 0), where the tax's two uses (the tax
-- and the total) each called billing.invoice_tax. The function is rewritten from its
-- own definition (the change only, not the function restated).
do $$
declare
  v_def text := pg_get_functiondef('billing.renew_batch(text[], timestamptz)'::regprocedure);
  v_old text := E'where c.community_id = v_community and c.subscription_id = r.id), false))) r;\n';
  v_new text := E'where c.community_id = v_community and c.subscription_id = r.id), false))\n'
    || E'    -- Not pulled up into the insert, where the tax''s two uses each called invoice_tax.\n'
    || E'    offset 0) r;\n';
begin
  if position(v_new in v_def) > 0 then
    return;  -- already done (this file runs again where it was applied)
  end if;
  if position(v_old in v_def) = 0 then
    raise exception 'billing.renew_batch: the terms subquery was not found';
  end if;
  execute replace(v_def, v_old, v_new);
end
$$;
