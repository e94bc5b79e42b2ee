-- Impact-ordered postings: for every searchable text, one row per lexeme with the part of its
-- BM25 score that depends on the document (term frequency against length), kept current by
-- statement-level triggers in the writing transaction, and indexed so a lexeme's postings are
-- read best first. The exact top-k of migration 0014 reads them and stops early.
--
-- Each list holds one kind's postings (search/kinds.py): a search for memories, one bullet in
-- a hundred, reads the short lists of memories instead of every bullet's and discarding 99%.

create table search.postings (
    workspace_id uuid not null,
    source       text not null,     -- the BM25 source: page, node, file or mail
    kind         text not null,     -- the row's kind: memory or node for a bullet, else the source
    lexeme       text not null,
    -- tf / (tf + k1 * (1 - b + b * len / basis)) with k1 = 1.2, b = 0.75 and the basis below
    impact       real not null,
    doc_id       uuid not null,     -- the row's key: pages.id, nodes.id, file_chunks.file_id, mail.id
    part         integer not null,  -- file_chunks.n; 0 where a row is a document of its own
    tf           integer not null,  -- the lexeme's positions in the document, as lexeme_count counts
    len          integer not null,  -- the document's length in lexemes
    -- Also how the triggers find a document's postings, and a document's tf of a lexeme.
    primary key (workspace_id, source, doc_id, part, lexeme)
);
-- Best first, ties by document; the columns scoring needs ride along so reads stay in the index.
create index postings_by_impact on search.postings
    (workspace_id, source, kind, lexeme, impact desc, doc_id, part) include (tf, len);

-- The average length the stored impacts were computed with. Any value keeps the top-k exact:
-- with A the collection's average, a true impact is at most the stored one times max(1, A /
-- basis), and the reader bounds unseen documents by that. A basis far below A only makes the
-- reader read further; refreshing it (search.refresh_impacts) restores the tight bound.
create table search.impact_basis (
    workspace_id uuid not null,
    source       text not null,
    avgdl        float8 not null check (avgdl > 0),
    primary key (workspace_id, source)
);

-- A term's share of a document's BM25 score before idf: k1 = 1.2, b = 0.75 (search/lexical.py).
create function search.bm25_impact(tf integer, len integer, avgdl float8) returns real
    language sql immutable parallel safe
    return (tf / (tf + 1.2::float8 * (0.25::float8 + 0.75::float8 * len / avgdl)))::real;

-- The statements that add the postings of a set of rows (`rows_sql` yields workspace_id,
-- doc_id, part, tsv, len, kind). Returned as text for the caller to run: a trigger's transition
-- tables are visible to its own statements only.
create function search.postings_sql(source text, rows_sql text) returns text[]
    language sql immutable return array[
    -- A new workspace's first basis: its first documents' average length.
    format('insert into search.impact_basis (workspace_id, source, avgdl) '
           'select workspace_id, %L, greatest(avg(len) filter (where len > 0), 1) from (%s) r '
           'group by workspace_id on conflict do nothing', source, rows_sql),
    -- Lock the bases read: a refresh rewriting them waits for this transaction, and this one
    -- reads the refreshed basis if the refresh went first.
    format('select 1 from search.impact_basis b where b.source = %L and b.workspace_id in '
           '(select workspace_id from (%s) r) for share', source, rows_sql),
    format('insert into search.postings (workspace_id, source, kind, lexeme, impact, doc_id, part, tf, len) '
           'select r.workspace_id, %1$L, r.kind, u.lexeme, search.bm25_impact(u.tf, r.len, b.avgdl), '
           '       r.doc_id, r.part, u.tf, r.len '
           'from (%2$s) r '
           'join search.impact_basis b on b.workspace_id = r.workspace_id and b.source = %1$L '
           'cross join lateral (select t.lexeme, coalesce(array_length(t.positions, 1), 1) as tf '
           '                    from unnest(r.tsv) t) u',
           source, rows_sql)];

-- One function serves every table: TG_ARGV = (source, tsvector column, length column, key
-- column, part column or '0'[, the SQL of a row's kind where the table holds more than one]).
-- An update rewrites the postings of rows whose text or kind changed only.
create function search.update_postings() returns trigger language plpgsql as $$
declare
    source text := TG_ARGV[0];
    tsv text := quote_ident(TG_ARGV[1]);
    len text := quote_ident(TG_ARGV[2]);
    key text := quote_ident(TG_ARGV[3]);
    part text := case when TG_ARGV[4] = '0' then '0' else quote_ident(TG_ARGV[4]) end;
    kind text := coalesce(TG_ARGV[5], quote_literal(source));
    columns text;
    same text;
    statement text;
begin
    columns := format('workspace_id, %s as doc_id, %s as part, %s as tsv, %s as len, %s as kind',
                      key, part, tsv, len, kind);
    if TG_OP = 'INSERT' then
        foreach statement in array search.postings_sql(source, format('select %s from new_rows', columns)) loop
            execute statement;
        end loop;
        return null;
    end if;
    if TG_OP = 'DELETE' then
        execute format(
            'delete from search.postings p using (select %s from old_rows) r '
            'where p.workspace_id = r.workspace_id and p.source = %L '
            'and p.doc_id = r.doc_id and p.part = r.part', columns, source);
        return null;
    end if;
    -- The same document with the same text and kind in the other transition table.
    same := 'select 1 from (select %1$s from %2$s) s where s.workspace_id = r.workspace_id '
            'and s.doc_id = r.doc_id and s.part = r.part and s.tsv = r.tsv and s.len = r.len '
            'and s.kind = r.kind';
    execute format(
        'delete from search.postings p using (select %1$s from old_rows) r '
        'where p.workspace_id = r.workspace_id and p.source = %2$L '
        'and p.doc_id = r.doc_id and p.part = r.part and not exists (%3$s)',
        columns, source, format(same, columns, 'new_rows'));
    foreach statement in array search.postings_sql(source, format(
            'select * from (select %1$s from new_rows) r where not exists (%2$s)',
            columns, format(same, columns, 'old_rows'))) loop
        execute statement;
    end loop;
    return null;
end $$;

create trigger postings_insert after insert on kb.pages referencing new table as new_rows
    for each statement execute function search.update_postings('page', 'title_tsv', 'title_len', 'id', '0');
create trigger postings_update after update on kb.pages
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_postings('page', 'title_tsv', 'title_len', 'id', '0');
create trigger postings_delete after delete on kb.pages referencing old table as old_rows
    for each statement execute function search.update_postings('page', 'title_tsv', 'title_len', 'id', '0');

-- A bullet's kind: a memory when its props say so (search/kinds.py's is_memory), else a node.
create function search.node_kind(props jsonb) returns text language sql immutable
    return case when props->'memory' = 'true'::jsonb then 'memory' else 'node' end;

create trigger postings_insert after insert on kb.nodes referencing new table as new_rows
    for each statement
    execute function search.update_postings('node', 'text_tsv', 'text_len', 'id', '0', 'search.node_kind(props)');
create trigger postings_update after update on kb.nodes
    referencing old table as old_rows new table as new_rows
    for each statement
    execute function search.update_postings('node', 'text_tsv', 'text_len', 'id', '0', 'search.node_kind(props)');
create trigger postings_delete after delete on kb.nodes referencing old table as old_rows
    for each statement
    execute function search.update_postings('node', 'text_tsv', 'text_len', 'id', '0', 'search.node_kind(props)');

create trigger postings_insert after insert on search.file_chunks referencing new table as new_rows
    for each statement execute function search.update_postings('file', 'text_tsv', 'text_len', 'file_id', 'n');
create trigger postings_update after update on search.file_chunks
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_postings('file', 'text_tsv', 'text_len', 'file_id', 'n');
create trigger postings_delete after delete on search.file_chunks referencing old table as old_rows
    for each statement execute function search.update_postings('file', 'text_tsv', 'text_len', 'file_id', 'n');

create trigger postings_insert after insert on kb.mail referencing new table as new_rows
    for each statement execute function search.update_postings('mail', 'mail_tsv', 'mail_len', 'id', '0');
create trigger postings_update after update on kb.mail
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_postings('mail', 'mail_tsv', 'mail_len', 'id', '0');
create trigger postings_delete after delete on kb.mail referencing old table as old_rows
    for each statement execute function search.update_postings('mail', 'mail_tsv', 'mail_len', 'id', '0');

-- Recompute a source's impacts with its current average length, and make that the basis.
-- Safe to call at any time: the top-k is exact before, during and after.
create function search.refresh_impacts(ws uuid, src text) returns void language plpgsql as $$
declare
    average float8;
begin
    select greatest(total_len::float8 / nullif(ndocs, 0), 1) into average
    from search.source_stats where workspace_id = ws and source = src;
    if average is null then
        return;
    end if;
    insert into search.impact_basis (workspace_id, source, avgdl) values (ws, src, average)
    on conflict (workspace_id, source) do nothing;
    perform 1 from search.impact_basis where workspace_id = ws and source = src for update;
    update search.impact_basis set avgdl = average where workspace_id = ws and source = src;
    update search.postings
    set impact = search.bm25_impact(tf, len, average)
    where workspace_id = ws and source = src;
end $$;

-- Postings for what is already stored, each source's basis its current average length.
insert into search.impact_basis (workspace_id, source, avgdl)
select workspace_id, source, greatest(total_len::float8 / ndocs, 1)
from search.source_stats where ndocs > 0;

do $$
declare
    statement text;
begin
    foreach statement in array
        search.postings_sql('page', 'select workspace_id, id as doc_id, 0 as part, '
                                    'title_tsv as tsv, title_len as len, ''page'' as kind from kb.pages')
        || search.postings_sql('node', 'select workspace_id, id as doc_id, 0 as part, '
                                       'text_tsv as tsv, text_len as len, '
                                       'search.node_kind(props) as kind from kb.nodes')
        || search.postings_sql('file', 'select workspace_id, file_id as doc_id, n as part, '
                                       'text_tsv as tsv, text_len as len, ''file'' as kind '
                                       'from search.file_chunks')
        || search.postings_sql('mail', 'select workspace_id, id as doc_id, 0 as part, '
                                       'mail_tsv as tsv, mail_len as len, ''mail'' as kind from kb.mail')
    loop
        execute statement;
    end loop;
end $$;
