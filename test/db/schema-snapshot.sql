with s as (select oid, nspname from pg_namespace where nspname in ('billing','billing_private','billing_api','analytics','billing_graphql'))
select 'fn '||s.nspname||'.'||p.proname||'('||pg_get_function_identity_arguments(p.oid)||')' as k, md5(pg_get_functiondef(p.oid))||' acl='||coalesce((select string_agg(x::text, ',' order by x::text) from unnest(p.proacl) x),'') as v
  from pg_proc p join s on s.oid=p.pronamespace where p.prokind in ('f','p')
union all
select 'rel '||s.nspname||'.'||c.relname||' kind='||c.relkind::text, coalesce((select string_agg(x::text, ',' order by x::text) from unnest(c.relacl) x),'')||' rls='||c.relrowsecurity||c.relforcerowsecurity||' opts='||coalesce(c.reloptions::text,'')
  from pg_class c join s on s.oid=c.relnamespace where c.relkind in ('r','v','m','p','S','u') or (c.relkind='r')
union all
select 'view '||s.nspname||'.'||c.relname, md5(pg_get_viewdef(c.oid))
  from pg_class c join s on s.oid=c.relnamespace where c.relkind in ('v','m')
union all
select 'col '||s.nspname||'.'||c.relname||'.'||a.attname, format_type(a.atttypid,a.atttypmod)||' nn='||a.attnotnull||' def='||coalesce(pg_get_expr(d.adbin,d.adrelid),'')||' coll='||coalesce((select collname from pg_collation where oid=a.attcollation),'')||' acl='||coalesce((select string_agg(x::text, ',' order by x::text) from unnest(a.attacl) x),'')
  from pg_attribute a join pg_class c on c.oid=a.attrelid join s on s.oid=c.relnamespace left join pg_attrdef d on d.adrelid=a.attrelid and d.adnum=a.attnum
  where a.attnum>0 and not a.attisdropped and c.relkind in ('r','v','m','p')
union all
select 'idx '||s.nspname||'.'||c.relname, pg_get_indexdef(c.oid) from pg_class c join s on s.oid=c.relnamespace where c.relkind='i'
union all
select 'con '||s.nspname||'.'||r.relname||'.'||co.conname, pg_get_constraintdef(co.oid) from pg_constraint co join pg_class r on r.oid=co.conrelid join s on s.oid=r.relnamespace
union all
select 'trg '||s.nspname||'.'||r.relname||'.'||t.tgname, pg_get_triggerdef(t.oid)||' en='||t.tgenabled::text from pg_trigger t join pg_class r on r.oid=t.tgrelid join s on s.oid=r.relnamespace where not t.tgisinternal
union all
select 'pol '||schemaname||'.'||tablename||'.'||policyname, permissive||' '||roles::text||' '||cmd||' '||coalesce(qual,'')||' / '||coalesce(with_check,'') from pg_policies where schemaname in ('billing','billing_private','billing_api','analytics','billing_graphql')
union all
select 'type '||s.nspname||'.'||t.typname, t.typtype::text from pg_type t join s on s.oid=t.typnamespace where t.typtype in ('e','d','c') and not exists (select 1 from pg_class c where c.reltype=t.oid)
union all
select 'schema '||nspname, coalesce((select string_agg(x::text, ',' order by x::text) from unnest(nspacl) x),'') from pg_namespace where nspname in ('billing','billing_private','billing_api','analytics','billing_graphql')
order by 1;
