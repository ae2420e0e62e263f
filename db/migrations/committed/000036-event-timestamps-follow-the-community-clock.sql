--! Previous: sha1:8d7371b05b48841cc1c68b403d776bd6911bf0ef
--! Hash: sha1:2a6cb165641b9dd1666af84dded7e16a713ae3d1
--! Message: Event timestamps follow the community clock

--! split: 1-current.sql
-- Enter migration here

--! split: 80-first-start-and-clocks.sql
-- Issue 26 item 13 (f): an event's created_at follows the community's clock (the
-- sandbox test clock), as the invoices it reports do. Delta of 60-events.sql.
create or replace function billing.tg_events__community_clock() returns trigger
  language plpgsql
as $$
begin
  new.created_at := billing.community_now(new.community_id);
  return new;
end
$$;

drop trigger if exists _010_community_clock on billing.events;
create trigger _010_community_clock before insert on billing.events
  for each row execute function billing.tg_events__community_clock();
