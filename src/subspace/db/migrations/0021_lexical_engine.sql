-- The lexical leg ranks on a compiled engine (Tantivy, search/lexical/), an index derived from
-- Postgres as the embeddings are. What the exact top-k inside Postgres needed goes: the
-- impact-ordered postings, their triggers and the functions that read them (migrations
-- 0013-0018, whose files are gone; a database that applied them loses their objects here).
-- The generated tsvectors, their GIN indexes and the statistics of migration 0005 stay: the
-- writes the engine has not applied yet, and the fallback while it is rebuilt, are ranked
-- from them.

do $$
declare
    t text;
begin
    foreach t in array array['kb.pages', 'kb.nodes', 'search.file_chunks', 'kb.mail'] loop
        execute format('drop trigger if exists postings_insert on %s', t);
        execute format('drop trigger if exists postings_update on %s', t);
        execute format('drop trigger if exists postings_delete on %s', t);
    end loop;
end $$;

do $$
declare
    f regprocedure;
begin
    for f in select p.oid::regprocedure from pg_proc p join pg_namespace n on n.oid = p.pronamespace
             where n.nspname = 'search' and (p.proname like 'bm25%' or p.proname in
                   ('update_postings', 'postings_sql', 'refresh_impacts', 'node_kind'))
    loop
        execute format('drop function %s cascade', f);
    end loop;
end $$;

drop type if exists search.bm25_hit, search.bm25_met, search.bm25_scored cascade;
drop table if exists search.postings, search.impact_basis;

-- Which writes the engine holds is told by their transactions: an index records the snapshot
-- it read, and the events whose transaction that snapshot does not see are the delta a
-- search adds from Postgres (search/lexical/delta.py). Events older than this column carry
-- the migration's own transaction, which every index built after it has seen.
alter table kb.outbox add column xid xid8 not null default pg_current_xact_id();
create index outbox_xid on kb.outbox (workspace_id, xid);
create index outbox_xid_all on kb.outbox (xid);

-- The database an index was built from: an index folder copied to another database, or a
-- database restored elsewhere, is rebuilt rather than trusted (search/lexical/index.py).
-- One row for the whole database, so it lives beside the migrations, outside the schemas
-- that are distributed by workspace.
create table public.database_identity (
    id         uuid primary key default gen_random_uuid(),
    created_at timestamptz not null default now()
);
insert into public.database_identity default values;

-- A document's length as the engine stores it: exact up to 40, then rounded down to eight
-- values per power of two, 2^g * (9 + j) + 24 (search/lexical/bm25.py, whose test compares
-- the two for every length that matters).
create function search.stored_length(len integer) returns integer
    language plpgsql immutable parallel safe strict as $$
declare
    y bigint := len - 24;
    g integer := 0;
begin
    if len <= 40 then
        return greatest(len, 0);
    end if;
    while 9::bigint << (g + 1) <= y loop
        g := g + 1;
    end loop;
    return ((1::bigint << g) * least(y >> g, 16) + 24)::integer;
end $$;

-- One term's part of a BM25 score, as the engine computes it: `weight` is idf times the
-- query's repeats of the term; k1 and b are passed in by the caller (search/lexical/bm25.py).
create function search.bm25_term(
    weight float8, tf integer, len integer, average float8, k1 float8, b float8
) returns float8 language sql immutable parallel safe
return case when tf > 0 and weight > 0 then
    weight * (k1 + 1) * tf / (tf + k1 * (1 - b + b * search.stored_length(len) / average))
    else 0 end;

-- What an index records as the database it was built from: the cluster (when this role may
-- read it), the database and its identity row. A copy of the database in the same cluster,
-- or a restore elsewhere, differs in one of them.
create function search.database_identity() returns text language plpgsql stable as $$
declare
    cluster text := '';
begin
    begin
        select system_identifier::text into cluster from pg_control_system();
    exception when insufficient_privilege then
        cluster := '';
    end;
    return concat_ws('/', cluster,
                     (select oid::text from pg_database where datname = current_database()),
                     (select id::text from public.database_identity order by created_at limit 1));
end $$;
