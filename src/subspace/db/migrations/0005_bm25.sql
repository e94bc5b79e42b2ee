-- BM25 inside Postgres: every searchable text knows its length in lexemes, and per workspace
-- and source the number of documents, their total length and each lexeme's document
-- frequency are kept current by statement-level triggers, in the writing transaction.

create function search.lexeme_count(t tsvector) returns integer
    language sql immutable parallel safe
    return (select coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer
            from unnest(t) u);

alter table kb.pages add column title_len integer generated always as
    (search.lexeme_count(to_tsvector('english', left(title, 100000)))) stored;
alter table kb.nodes add column text_len integer generated always as
    (search.lexeme_count(to_tsvector('english', left(text, 100000)))) stored;
alter table search.file_chunks add column text_len integer generated always as
    (search.lexeme_count(to_tsvector('english', left(text, 100000)))) stored;
alter table kb.mail add column mail_len integer generated always as (search.lexeme_count(
    setweight(to_tsvector('english', left(subject, 2000)), 'A')
    || setweight(to_tsvector('english', left(sender, 2000)), 'B')
    || to_tsvector('english', left(body_text, 96000)))) stored;

create table search.source_stats (
    workspace_id uuid not null,
    source       text not null,  -- page, node, file or mail
    ndocs        bigint not null default 0,
    total_len    bigint not null default 0,
    primary key (workspace_id, source)
);

create table search.term_stats (
    workspace_id uuid not null,
    source       text not null,
    lexeme       text not null,
    ndoc         bigint not null,
    primary key (workspace_id, source, lexeme)
);

-- One function serves every table: TG_ARGV = (source, tsvector column, length column).
-- Rows whose text did not change appear in both transition tables and cancel out.
create function search.update_text_stats() returns trigger language plpgsql as $$
declare
    source text := TG_ARGV[0];
    tsv text := quote_ident(TG_ARGV[1]);
    len text := quote_ident(TG_ARGV[2]);
    rows_in text;
begin
    if TG_OP = 'INSERT' then
        rows_in := format('select workspace_id, %s as tsv, %s as len, 1 as sign from new_rows',
                          tsv, len);
    elsif TG_OP = 'DELETE' then
        rows_in := format('select workspace_id, %s as tsv, %s as len, -1 as sign from old_rows',
                          tsv, len);
    else
        rows_in := format('select workspace_id, %1$s as tsv, %2$s as len, 1 as sign from new_rows '
                          'union all select workspace_id, %1$s, %2$s, -1 from old_rows', tsv, len);
    end if;
    execute format(
        'insert into search.source_stats as s (workspace_id, source, ndocs, total_len) '
        'select workspace_id, %L, coalesce(sum(sign) filter (where len > 0), 0), coalesce(sum(sign * len), 0) '
        'from (%s) r group by workspace_id '
        'on conflict (workspace_id, source) do update '
        'set ndocs = s.ndocs + coalesce(excluded.ndocs, 0), '
        'total_len = s.total_len + coalesce(excluded.total_len, 0)',
        source, rows_in);
    execute format(
        'insert into search.term_stats as t (workspace_id, source, lexeme, ndoc) '
        'select workspace_id, %L, lexeme, sum(sign) from ('
        '  select r.workspace_id, l.lexeme, r.sign from (%s) r '
        '  cross join lateral unnest(tsvector_to_array(r.tsv)) l(lexeme)) d '
        'group by workspace_id, lexeme having sum(sign) <> 0 '
        'on conflict (workspace_id, source, lexeme) do update set ndoc = t.ndoc + excluded.ndoc',
        source, rows_in);
    return null;
end $$;

create trigger text_stats_insert after insert on kb.pages referencing new table as new_rows
    for each statement execute function search.update_text_stats('page', 'title_tsv', 'title_len');
create trigger text_stats_update after update on kb.pages
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_text_stats('page', 'title_tsv', 'title_len');
create trigger text_stats_delete after delete on kb.pages referencing old table as old_rows
    for each statement execute function search.update_text_stats('page', 'title_tsv', 'title_len');

create trigger text_stats_insert after insert on kb.nodes referencing new table as new_rows
    for each statement execute function search.update_text_stats('node', 'text_tsv', 'text_len');
create trigger text_stats_update after update on kb.nodes
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_text_stats('node', 'text_tsv', 'text_len');
create trigger text_stats_delete after delete on kb.nodes referencing old table as old_rows
    for each statement execute function search.update_text_stats('node', 'text_tsv', 'text_len');

create trigger text_stats_insert after insert on search.file_chunks
    referencing new table as new_rows
    for each statement execute function search.update_text_stats('file', 'text_tsv', 'text_len');
create trigger text_stats_update after update on search.file_chunks
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_text_stats('file', 'text_tsv', 'text_len');
create trigger text_stats_delete after delete on search.file_chunks
    referencing old table as old_rows
    for each statement execute function search.update_text_stats('file', 'text_tsv', 'text_len');

create trigger text_stats_insert after insert on kb.mail referencing new table as new_rows
    for each statement execute function search.update_text_stats('mail', 'mail_tsv', 'mail_len');
create trigger text_stats_update after update on kb.mail
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_text_stats('mail', 'mail_tsv', 'mail_len');
create trigger text_stats_delete after delete on kb.mail referencing old table as old_rows
    for each statement execute function search.update_text_stats('mail', 'mail_tsv', 'mail_len');

-- Statistics for what is already stored.
insert into search.source_stats (workspace_id, source, ndocs, total_len)
select workspace_id, source, count(*) filter (where len > 0), sum(len) from (
    select workspace_id, 'page' as source, title_len as len from kb.pages
    union all select workspace_id, 'node', text_len from kb.nodes
    union all select workspace_id, 'file', text_len from search.file_chunks
    union all select workspace_id, 'mail', mail_len from kb.mail
) d group by workspace_id, source;

insert into search.term_stats (workspace_id, source, lexeme, ndoc)
select workspace_id, source, lexeme, count(*) from (
    select workspace_id, 'page' as source, tsvector_to_array(title_tsv) as lexemes from kb.pages
    union all select workspace_id, 'node', tsvector_to_array(text_tsv) from kb.nodes
    union all select workspace_id, 'file', tsvector_to_array(text_tsv) from search.file_chunks
    union all select workspace_id, 'mail', tsvector_to_array(mail_tsv) from kb.mail
) d cross join lateral unnest(d.lexemes) l(lexeme)
group by workspace_id, source, lexeme;
