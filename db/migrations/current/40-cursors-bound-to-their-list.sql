-- Issue 27 item 9: a list cursor names the list and the filters that issued it
-- (docs/decisions/cursors-bound-to-their-list.md). billing.encode_cursor reads them from
-- the transaction (app.cursor_list, app.cursor_filters); op_dispatch sets them from a
-- list's input. Fixtures: 00-foundation.sql, 98-dispatch.sql.

create or replace function billing.encode_cursor(p_id text) returns text
  language sql stable parallel safe
as $$
  select translate(encode(convert_to(jsonb_build_object('id', p_id,
    'list', nullif(current_setting('app.cursor_list', true), ''),
    'filters', nullif(current_setting('app.cursor_filters', true), ''))::text, 'UTF8'), 'base64'), E'+/=\n', '-_')
$$;

--!include 98-dispatch.sql
