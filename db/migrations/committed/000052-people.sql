--! Previous: sha1:846aab2eefa93e909814166e44e2ca6ec1b09004
--! Hash: sha1:d4d7e87419a287dae9e314f3c0e883d4a6c55066
--! Message: people

--! split: 1-current.sql
-- Enter migration here

--! split: 70-people.sql
-- Issue 31 item 2, members as people: a display name, search (q) and filters on the
-- members list, the operators' note and tags (docs/decisions/member-display-name.md,
-- member-search.md, member-notes.md). Fixtures: tables/30-members.sql,
-- functions/30-members.sql, functions/95-graphql.sql.

create extension if not exists pg_trgm;

-- A note: 1 to 2000 characters, no control character but tab and line feed (the API
-- turns CR LF into LF first). What the API refuses before it gets here, kept by the
-- table's check constraint too.
create or replace function billing.member_note_valid(p_note text) returns boolean
  language sql immutable parallel safe
as $$
  select char_length(p_note) between 1 and 2000 and p_note !~ '[\x01-\x08\x0b-\x1f\x7f-\x9f]'
$$;

-- Tags: at most 20, distinct, each 1 to 40 characters, lowercase, without space, comma
-- or control character. The API normalises what an operator types (trimmed, NFC,
-- lowercase, spaces as "-"; src/domain/members/member-schema.ts) and refuses the rest.
create or replace function billing.member_tags_valid(p_tags text[]) returns boolean
  language sql immutable parallel safe
as $$
  select coalesce(cardinality(p_tags), 0) <= 20
    and not exists (select 1 from unnest(p_tags) t
                    where t is null or char_length(t) not between 1 and 40 or t <> lower(t) or t ~ '[[:space:][:cntrl:],]')
    and (select count(distinct t) from unnest(p_tags) t) = coalesce(cardinality(p_tags), 0)
$$;

-- What billing.members keeps about a member's links to show and find it by:
--   display_name: the Discord username, else the Telegram one (a platform without a
--     username is skipped), else the email, else the external user id of the first
--     external subject (by namespace); null when there is none of them.
--   search_text: the member id, email, each username and platform id, each external
--     user id, lowercased, one per line (a search never holds a line break, so it never
--     matches across two of them).
create or replace function billing.member_people(p_community_id text, p_member_id text, p_email text)
  returns table (display_name text, search_text text)
  language sql stable
as $$
  select coalesce(
      (select i.username from billing.member_identities i
       where i.community_id = p_community_id and i.member_id = p_member_id and btrim(i.username) <> ''
       order by array_position(array['discord', 'telegram'], i.platform), i.platform_uid limit 1),
      nullif(btrim(p_email), ''),
      (select x.external_user_id from billing.external_subjects x
       where x.community_id = p_community_id and x.member_id = p_member_id
       order by x.namespace, x.external_user_id limit 1)),
    lower(concat_ws(E'\n', p_member_id, p_email,
      (select string_agg(concat_ws(E'\n', i.username, i.platform_uid), E'\n' order by i.platform, i.platform_uid)
       from billing.member_identities i where i.community_id = p_community_id and i.member_id = p_member_id),
      (select string_agg(x.external_user_id, E'\n' order by x.namespace, x.external_user_id)
       from billing.external_subjects x where x.community_id = p_community_id and x.member_id = p_member_id)))
$$;

-- A member's identities or external subjects changed: its display name and search text
-- again. The row is locked first, then read in a statement of its own, so a link of the
-- same member committed meanwhile (which held the lock) is seen: two links racing never
-- leave the text of one of them.
create or replace function billing.member_people_refresh(p_community_id text, p_member_id text) returns void
  language plpgsql volatile
as $$
declare
  v_email text;
  v_name text;
  v_text text;
begin
  select m.email into v_email from billing.members m
  where m.community_id = p_community_id and m.id = p_member_id for no key update;
  if not found then
    return; -- the member itself is being deleted
  end if;
  select p.display_name, p.search_text into v_name, v_text from billing.member_people(p_community_id, p_member_id, v_email) p;
  update billing.members m set display_name = v_name, search_text = v_text
  where m.community_id = p_community_id and m.id = p_member_id
    and (m.display_name is distinct from v_name or m.search_text is distinct from v_text);
end
$$;

-- Before a member is written with a new email (or first written): its display name and
-- search text from its email and links.
create or replace function billing.tg_members__people() returns trigger
  language plpgsql
as $$
begin
  select p.display_name, p.search_text into new.display_name, new.search_text
  from billing.member_people(new.community_id, new.id, new.email) p;
  return new;
end
$$;

create or replace function billing.tg_member_identities__people() returns trigger
  language plpgsql
as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform billing.member_people_refresh(old.community_id, old.member_id);
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.member_id <> new.member_id) then
    perform billing.member_people_refresh(new.community_id, new.member_id);
  end if;
  return null;
end
$$;

create or replace function billing.tg_external_subjects__people() returns trigger
  language plpgsql
as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform billing.member_people_refresh(old.community_id, old.member_id);
  end if;
  if tg_op = 'INSERT' or (tg_op = 'UPDATE' and old.member_id <> new.member_id) then
    perform billing.member_people_refresh(new.community_id, new.member_id);
  end if;
  return null;
end
$$;

grant execute on function billing.member_note_valid(text) to billing_api, billing_writer;
grant execute on function billing.member_tags_valid(text[]) to billing_api, billing_writer;
grant execute on function billing.member_people(text,text,text) to billing_api;
grant execute on function billing.member_people_refresh(text,text) to billing_api;

alter table billing.members add column if not exists display_name text;
alter table billing.members add column if not exists search_text text not null default '';
alter table billing.members add column if not exists note text;
alter table billing.members add column if not exists tags text[] not null default '{}';
alter table billing.members drop constraint if exists members_note_valid;
alter table billing.members add constraint members_note_valid check (note is null or billing.member_note_valid(note));
alter table billing.members drop constraint if exists members_tags_valid;
alter table billing.members add constraint members_tags_valid check (billing.member_tags_valid(tags));
-- Substring search by trigrams (pg_trgm: a trusted extension, so the database's owner
-- may create it), tags by containment, the created range by date.
create index if not exists members_search on billing.members using gin (search_text gin_trgm_ops);
create index if not exists members_tags on billing.members using gin (tags);
create index if not exists members_created on billing.members (community_id, created_at);

drop trigger if exists _100_people on billing.members;
create trigger _100_people before insert or update of email on billing.members
  for each row execute function billing.tg_members__people();
drop trigger if exists _400_people on billing.member_identities;
create trigger _400_people after insert or update or delete on billing.member_identities
  for each row execute function billing.tg_member_identities__people();
drop trigger if exists _400_people on billing.external_subjects;
create trigger _400_people after insert or update or delete on billing.external_subjects
  for each row execute function billing.tg_external_subjects__people();

-- The members there are: their display name and search text once (the triggers keep
-- them from now on).
update billing.members m set display_name = p.display_name, search_text = p.search_text
from (select m2.community_id, m2.id, x.display_name, x.search_text
      from billing.members m2, billing.member_people(m2.community_id, m2.id, m2.email) x) p
where p.community_id = m.community_id and p.id = m.id
  and (m.display_name is distinct from p.display_name or m.search_text is distinct from p.search_text);

-- The member as the API answers it: the member object plus its email, display name,
-- the operators' note and tags. Events carry billing.member_json (none of them:
-- personal data never leaves in a webhook; docs/decisions/member-email.md,
-- member-notes.md).
create or replace function billing.member_api_json(p_community_id text, p_member_id text) returns jsonb
  language plpgsql stable parallel safe
as $$
begin
  return (select t.member || jsonb_build_object('email', m.email, 'display_name', m.display_name,
      'note', m.note, 'tags', to_jsonb(m.tags))
    from billing.members m, billing.member_object(m.community_id, m.id) t(member)
    where m.community_id = p_community_id and m.id = p_member_id);
end
$$;

-- The ids of a filtered page of GET /v1/members (docs/decisions/member-search.md), found
-- by the owner with the community (and a portal's member) fenced explicitly, like
-- member_entitlement_event_ids (96-dashboard.sql): under the tenant policy the planner
-- may use neither an index nor the statistics for a qual that is not leakproof (LIKE,
-- the tags' @>), so a search walked or sorted the whole community (80 to 360 ms at
-- 100,000 members). It reads the community's members and returns ids only; the page is
-- read again under the tenant policy (members_list).
--   q: a case-insensitive substring of search_text (%, _ and \ matched literally).
--   email (exact, case-insensitive), tag, created_after (inclusive), created_before
--     (exclusive); status, tier_id and plan_id: one subscription of the member has them all.
-- Two steps, so neither a common nor a rare filter costs the whole community: the
-- newest 2,000 members after the cursor are filtered in id order (a common filter
-- fills the page there); when that leaves the page short and there are older members,
-- every match among those is found by the best index for the filters (the trigram
-- index for q, the tags' GIN index, the subscriptions by status or plan) and the newest
-- taken. A search matching only old members thus costs its matches, not a walk of the
-- community (the planner, which assumes matches spread evenly, would walk).
create or replace function billing_private.members_search(p_args jsonb, p_limit integer) returns text[]
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community text := billing.current_community_id();
  v_member text := billing.current_member_id();
  v_cursor text := coalesce(p_args->>'cursor', chr(1114111));
  v_pattern text;
  v_where text := 'true';
  v_ids text[];
  v_edge text;
  v_seen integer;
  v_more text[];
begin
  if v_community is null then
    return '{}';
  end if;
  if p_args->>'q' is not null then
    v_pattern := '%' || replace(replace(replace(lower(p_args->>'q'), '\', '\\'), '%', '\%'), '_', '\_') || '%';
    v_where := v_where || ' and m.search_text like $4';
  end if;
  if p_args->>'email' is not null then v_where := v_where || ' and lower(m.email) = lower($5->>''email'')'; end if;
  if p_args->>'tag' is not null then v_where := v_where || ' and m.tags @> array[$5->>''tag'']'; end if;
  if p_args->>'created_after' is not null then
    v_where := v_where || ' and m.created_at >= ($5->>''created_after'')::timestamptz';
  end if;
  if p_args->>'created_before' is not null then
    v_where := v_where || ' and m.created_at < ($5->>''created_before'')::timestamptz';
  end if;
  if coalesce(p_args->>'status', p_args->>'tier_id', p_args->>'plan_id') is not null then
    v_where := v_where || ' and exists (select 1 from billing.subscriptions s'
      || ' where s.community_id = m.community_id and s.member_id = m.id'
      || case when p_args->>'status' is not null then ' and s.status = $5->>''status''' else '' end
      || case when p_args->>'plan_id' is not null then ' and s.plan_id = $5->>''plan_id''' else '' end
      || case when p_args->>'tier_id' is not null then ' and s.plan_id in (select p.id from billing.plans p'
           || ' where p.community_id = s.community_id and p.tier_id = $5->>''tier_id'')' else '' end
      || ')';
  end if;
  -- 1. The newest 2,000 members after the cursor, in id order, until the page is full.
  execute 'select array(select m.id
      from (select * from billing.members m
            where m.community_id = $1 and m.id < $2 and ($3::text is null or m.id = $3)
            order by m.id desc limit 2000) m
      where ' || v_where || ' order by m.id desc limit $6)'
    into v_ids using v_community, v_cursor, v_member, v_pattern, p_args, p_limit;
  if cardinality(v_ids) >= p_limit then
    return v_ids;
  end if;
  select min(w.id), count(*) into v_edge, v_seen
  from (select m.id from billing.members m
        where m.community_id = v_community and m.id < v_cursor and (v_member is null or m.id = v_member)
        order by m.id desc limit 2000) w;
  if v_seen < 2000 then
    return v_ids; -- no older member
  end if;
  -- 2. Every match older than those, by index; the newest of them.
  execute 'with hits as materialized (
      select m.id from billing.members m
      where m.community_id = $1 and m.id < $2 and ($3::text is null or m.id = $3) and ' || v_where || ')
    select coalesce(array_agg(h.id order by h.id desc), ''{}'') from (select id from hits order by id desc limit $6) h'
    into v_more using v_community, v_edge, v_member, v_pattern, p_args, p_limit - cardinality(v_ids);
  return v_ids || v_more;
end
$$;

-- GET /v1/members: newest first. Without a filter one static statement (planned once
-- per session); with one, the page's ids from billing_private.members_search, read
-- again here under the tenant policy.
create or replace function billing_api.members_list(p_args jsonb) returns jsonb
  language plpgsql stable
as $$
declare
  v_limit integer := coalesce((p_args->>'limit')::integer, 25);
  v_community text := billing.current_community_id();
  v_found text[];
  v_ids text[];
  v_items jsonb[];
begin
  if p_args ?| array['q', 'email', 'tag', 'created_after', 'created_before', 'status', 'tier_id', 'plan_id'] then
    v_found := billing_private.members_search(p_args, v_limit + 1);
    select array_agg(m.id order by m.id desc), array_agg(billing.member_api_json(m.community_id, m.id) order by m.id desc)
      into v_ids, v_items
    from billing.members m
    where m.community_id = v_community and m.id = any(v_found);
  else
    select array_agg(m.id order by m.id desc), array_agg(billing.member_api_json(m.community_id, m.id) order by m.id desc)
      into v_ids, v_items
    from (select m.community_id, m.id from billing.members m
          where m.community_id = v_community and m.id < coalesce(p_args->>'cursor', chr(1114111))
          order by m.id desc limit v_limit + 1) m;
  end if;
  return billing.page_json(v_ids, v_items, v_limit);
end
$$;

-- PATCH /v1/members/{id}: an operator sets or clears the member's email and note
-- (null clears), and replaces its tags ([] clears); a field left out is kept. Writes no
-- event: none of these fields is ever in an event. Refusals name the field (422) and
-- never quote the value (personal data stays out of answers kept in logs).
create or replace function billing_api.members_update(p_args jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_community text := billing.current_community_id();
  v_member_id text := p_args->>'id';
  v_email text := nullif(btrim(p_args->>'email'), '');
  v_note text := p_args->>'note';
  v_tags text[];
begin
  if v_email is not null and not billing.email_valid(v_email) then
    perform billing.raise('BL422', 'email is not a valid email address.', 'email');
  end if;
  if v_note is not null and not billing.member_note_valid(v_note) then
    perform billing.raise('BL422', 'note must be 1 to 2000 characters, without control characters (tabs and line breaks excepted).', 'note');
  end if;
  if p_args ? 'tags' then
    v_tags := case when jsonb_typeof(p_args->'tags') = 'array'
      then array(select jsonb_array_elements_text(p_args->'tags')) else '{}' end;
    if not billing.member_tags_valid(v_tags) then
      perform billing.raise('BL422', 'tags must be at most 20 distinct tags of 1 to 40 lowercase characters, '
        || 'without spaces, commas or control characters.', 'tags');
    end if;
  end if;
  if p_args ?| array['email', 'note', 'tags'] then
    update billing.members m set
      email = case when p_args ? 'email' then v_email else m.email end,
      note = case when p_args ? 'note' then v_note else m.note end,
      tags = case when p_args ? 'tags' then v_tags else m.tags end,
      updated_at = now()
    where m.community_id = v_community and m.id = v_member_id
      and ((p_args ? 'email' and m.email is distinct from v_email)
        or (p_args ? 'note' and m.note is distinct from v_note)
        or (p_args ? 'tags' and m.tags is distinct from v_tags));
  end if;
  if not exists (select 1 from billing.members m where m.community_id = v_community and m.id = v_member_id) then
    perform billing.raise('BL404', 'No member ' || v_member_id || '.');
  end if;
  return billing.member_api_json(v_community, v_member_id);
end
$$;

grant execute on function billing.member_api_json(text,text) to billing_api;
grant execute on function billing_private.members_search(jsonb,integer) to billing_api;
grant execute on function billing_api.members_list(jsonb) to billing_api;
grant execute on function billing_api.members_update(jsonb) to billing_api;
grant create on schema billing_api to billing_writer;
alter function billing_api.members_update(jsonb) owner to billing_writer;
revoke create on schema billing_api from billing_writer;

create or replace view billing_graphql.members with (security_invoker = true, security_barrier = false) as
  select m.id, m.created_at, m.updated_at, m.email, m.display_name, m.note, m.tags
  from billing.members m
  where (select billing.has_scope('members:read'));
comment on view billing_graphql.members is E'@primaryKey id\n@scope members:read\n@behavior -insert -update -delete\nMembers. Needs members:read.';
comment on column billing_graphql.members.id is E'@notNull';
comment on column billing_graphql.members.created_at is E'@notNull';
comment on column billing_graphql.members.updated_at is E'@notNull';
comment on column billing_graphql.members.email is E'The member\'s email (personal data), null when unknown.';
comment on column billing_graphql.members.display_name is E'How operators see the member: the Discord username, else the Telegram one, else the email, else an external subject\'s id; null when none (personal data).';
comment on column billing_graphql.members.note is E'The operators\' note about the member (personal data), null when none.';
comment on column billing_graphql.members.tags is E'@notNull\nThe operators\' tags on the member (lowercase, sorted).';
