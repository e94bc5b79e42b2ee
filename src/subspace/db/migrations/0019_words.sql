-- The words documents hold, as they are spelled, with their lexemes: typo tolerance compares
-- what a person types with these (search/typos.py). The vocabulary of search.term_stats holds
-- stems, three edits from "hydratoin" where "hydration" is one.
--
-- A word is a run of letters (accents folded, lower case) of 3 to 64 letters: typo tolerance
-- corrects words of four letters or more, one edit away at most when short, and a longer run
-- is not a word anyone types. Stopwords (no lexeme) are left out.
--
-- Writes add the words of the texts they bring; removing a document keeps its words while
-- their lexeme is in some document of the workspace, and removes them with the lexeme's last
-- document. So every word kept was written in the workspace and stems to a lexeme it holds;
-- search.term_stats, whose ndoc the lookup reads, says how many documents hold that lexeme.
-- Counting each spelling exactly would mean parsing every removed text again; a text is
-- parsed once, when it is written (measured in docs/benchmarks.md, "Typo tolerance").
-- The column is collated "C" so that its index also serves the lookup's prefix ranges. The
-- index is not unique: a unique one would make a writer adding a new word wait until every
-- other transaction adding it commits, so writers of different sources, which share no
-- statistics row, would wait on each other (and a long import would hold every writer of its
-- new words). Two writers adding one word at once may both keep it; the lookup reads
-- distinct words, and removing a lexeme removes all its rows.
create table search.words (
    workspace_id uuid not null,
    id           bigint generated always as identity,
    word         text collate "C" not null,
    lexeme       text not null,
    primary key (workspace_id, id)
);
create index words_word on search.words (workspace_id, word);
create index words_lexeme on search.words (workspace_id, lexeme);

-- The words of `t`, as the default parser splits it for documents (search.document_tsvector)
-- and queries (search/lexical.py reads a typed word so). The test for letters only is a
-- negated class: '^[[:alpha:]]{3,64}$' costs three times the parse itself.
create function search.spelled_words(t text) returns setof text
    language sql immutable parallel safe as $$
        select w from unnest(tsvector_to_array(to_tsvector('simple', search.fold(t)))) w
        where char_length(w) between 3 and 64 and w !~ '[^[:alpha:]]'
    $$;

-- One function serves every table: TG_ARGV = (text columns, tsvector column, key columns).
-- An update reads only the rows whose text changed (moving a bullet rewrites its row, not
-- its words): the new texts' words are added, the old texts' lexemes checked. Triggers fire
-- in the order of their names, so text_words_* run after text_stats_*: a lexeme's count is
-- current when its words are pruned. A word already kept is not added again.
create function search.update_words() returns trigger language plpgsql as $$
declare
    texts text := TG_ARGV[0];
    tsv text := quote_ident(TG_ARGV[1]);
    keys text := TG_ARGV[2];
    written text;
    removed text;
begin
    if TG_OP = 'INSERT' then
        written := 'select * from new_rows';
    elsif TG_OP = 'UPDATE' then
        written := format('select n.* from new_rows n left join old_rows o '
                          'using (workspace_id, %1$s) where o.%2$s is distinct from n.%2$s',
                          keys, tsv);
        removed := format('select o.* from old_rows o left join new_rows n '
                          'using (workspace_id, %1$s) where n.%2$s is distinct from o.%2$s',
                          keys, tsv);
    else
        removed := 'select * from old_rows';
    end if;
    if written is not null then
        execute format(
            'insert into search.words (workspace_id, word, lexeme) '
            'select workspace_id, word, lexeme from ('
            '  select distinct r.workspace_id, w.word from (%s) r cross join lateral '
            '  search.spelled_words(left(concat_ws('' '', %s), 100000)) w(word)) d '
            'cross join lateral (select (ts_lexize(''english_stem'', d.word))[1] as lexeme) l '
            'where l.lexeme is not null and not exists (select 1 from search.words k '
            '  where k.workspace_id = d.workspace_id and k.word = d.word collate "C") '
            'order by workspace_id, word', written, texts);
    end if;
    if removed is not null then
        execute format(
            'delete from search.words k using ('
            '  select distinct r.workspace_id, l.lexeme from (%s) r '
            '  cross join lateral unnest(tsvector_to_array(r.%s)) l(lexeme)) gone '
            'where k.workspace_id = gone.workspace_id and k.lexeme = gone.lexeme '
            'and not exists (select 1 from search.term_stats t where t.workspace_id = '
            '  gone.workspace_id and t.lexeme = gone.lexeme and t.ndoc > 0)', removed, tsv);
    end if;
    return null;
end $$;

create trigger text_words_insert after insert on kb.pages referencing new table as new_rows
    for each statement execute function search.update_words('title', 'title_tsv', 'id');
create trigger text_words_update after update on kb.pages
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_words('title', 'title_tsv', 'id');
create trigger text_words_delete after delete on kb.pages referencing old table as old_rows
    for each statement execute function search.update_words('title', 'title_tsv', 'id');

create trigger text_words_insert after insert on kb.nodes referencing new table as new_rows
    for each statement execute function search.update_words('text', 'text_tsv', 'id');
create trigger text_words_update after update on kb.nodes
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_words('text', 'text_tsv', 'id');
create trigger text_words_delete after delete on kb.nodes referencing old table as old_rows
    for each statement execute function search.update_words('text', 'text_tsv', 'id');

create trigger text_words_insert after insert on search.file_chunks
    referencing new table as new_rows
    for each statement execute function search.update_words('text', 'text_tsv', 'file_id, n');
create trigger text_words_update after update on search.file_chunks
    referencing old table as old_rows new table as new_rows
    for each statement execute function search.update_words('text', 'text_tsv', 'file_id, n');
create trigger text_words_delete after delete on search.file_chunks
    referencing old table as old_rows
    for each statement execute function search.update_words('text', 'text_tsv', 'file_id, n');

create trigger text_words_insert after insert on kb.mail referencing new table as new_rows
    for each statement execute function
    search.update_words('subject, sender, body_text', 'mail_tsv', 'id');
create trigger text_words_update after update on kb.mail
    referencing old table as old_rows new table as new_rows
    for each statement execute function
    search.update_words('subject, sender, body_text', 'mail_tsv', 'id');
create trigger text_words_delete after delete on kb.mail referencing old table as old_rows
    for each statement execute function
    search.update_words('subject, sender, body_text', 'mail_tsv', 'id');

-- The words of what is already stored.
insert into search.words (workspace_id, word, lexeme)
select workspace_id, word, (ts_lexize('english_stem', word))[1] from (
    select distinct d.workspace_id, w.word from (
        select workspace_id, left(title, 100000) as t from kb.pages
        union all select workspace_id, left(text, 100000) from kb.nodes
        union all select workspace_id, left(text, 100000) from search.file_chunks
        union all select workspace_id, left(concat_ws(' ', subject, sender, body_text), 100000)
        from kb.mail
    ) d cross join lateral search.spelled_words(d.t) w(word)
) s
where (ts_lexize('english_stem', word))[1] is not null;
