-- A file's name and a mail's subject as lexical units of their own (search/kinds.py: kinds
-- file_name and mail_subject), each with its tsvector, its length, and its BM25 statistics
-- and words, kept by the triggers of migrations 0005 and 0019. A file's name
-- was searched nowhere before (its rows were its text's chunks), and a subject counted as any
-- word of its mail's text; as titles they come first among the rows holding every word of a
-- short lookup, as a page's title does.

alter table kb.files
    add column name_tsv tsvector generated always as
        (search.document_tsvector(left(name, 2000))) stored,
    add column name_len integer generated always as
        (search.lexeme_count(search.document_tsvector(left(name, 2000)))) stored;
create index files_name_tsv on kb.files using gin (name_tsv);

alter table kb.mail
    add column subject_tsv tsvector generated always as
        (search.document_tsvector(left(subject, 2000))) stored,
    add column subject_len integer generated always as
        (search.lexeme_count(search.document_tsvector(left(subject, 2000)))) stored;
create index mail_subject_tsv on kb.mail using gin (subject_tsv);

-- Statistics: trigger names sort before text_words_*, which prune words by these counts.
create trigger text_stats_insert after insert on kb.files referencing new table as new_rows
    for each statement execute function search.update_text_stats('file_name', 'name_tsv', 'name_len');
create trigger text_stats_update after update on kb.files
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_text_stats('file_name', 'name_tsv', 'name_len');
create trigger text_stats_delete after delete on kb.files referencing old table as old_rows
    for each statement execute function search.update_text_stats('file_name', 'name_tsv', 'name_len');

create trigger text_stats_subject_insert after insert on kb.mail referencing new table as new_rows
    for each statement execute function search.update_text_stats('mail_subject', 'subject_tsv', 'subject_len');
create trigger text_stats_subject_update after update on kb.mail
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_text_stats('mail_subject', 'subject_tsv', 'subject_len');
create trigger text_stats_subject_delete after delete on kb.mail referencing old table as old_rows
    for each statement execute function search.update_text_stats('mail_subject', 'subject_tsv', 'subject_len');

-- A subject's words are already kept with its mail's (0019); a file name's are new.
create trigger text_words_insert after insert on kb.files referencing new table as new_rows
    for each statement execute function search.update_words('name', 'name_tsv', 'id');
create trigger text_words_update after update on kb.files
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_words('name', 'name_tsv', 'id');
create trigger text_words_delete after delete on kb.files referencing old table as old_rows
    for each statement execute function search.update_words('name', 'name_tsv', 'id');

-- What is already stored: statistics and words.
insert into search.source_stats (workspace_id, source, ndocs, total_len)
select workspace_id, source, count(*) filter (where len > 0), sum(len) from (
    select workspace_id, 'file_name' as source, name_len as len from kb.files
    union all select workspace_id, 'mail_subject', subject_len from kb.mail
) d group by workspace_id, source;

insert into search.term_stats (workspace_id, source, lexeme, ndoc)
select workspace_id, source, lexeme, count(*) from (
    select workspace_id, 'file_name' as source, tsvector_to_array(name_tsv) as lexemes
    from kb.files
    union all select workspace_id, 'mail_subject', tsvector_to_array(subject_tsv) from kb.mail
) d cross join lateral unnest(d.lexemes) l(lexeme)
group by workspace_id, source, lexeme;

insert into search.words (workspace_id, word, lexeme)
select workspace_id, word, (ts_lexize('english_stem', word))[1] from (
    select distinct f.workspace_id, w.word from kb.files f
    cross join lateral search.spelled_words(left(f.name, 2000)) w(word)
    where not exists (select 1 from search.words k
                      where k.workspace_id = f.workspace_id and k.word = w.word collate "C")
) s
where (ts_lexize('english_stem', word))[1] is not null;
