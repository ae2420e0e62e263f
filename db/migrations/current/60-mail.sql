-- Issue 30 items 1, 2: a member's email (30-members, 80-checkout) and mail to members
-- (65-mail): docs/decisions/member-email.md, docs/decisions/mail-outbox.md.

--!include functions/30-members.sql

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

--!include functions/80-checkout.sql
--!include functions/65-mail.sql

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

--!include 98-dispatch.sql
