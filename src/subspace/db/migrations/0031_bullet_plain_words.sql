-- A bullet keeps its inline Markdown as written ("see [the guide](https://x.org/guide)"), and
-- is searched by the words a reader sees: a link by its text, its URL only when it has no text
-- (ingest/markdown.py's markdown_plain says the same in Python). Emphasis and code marks are
-- punctuation to the parser already. Highlights and grep offsets still refer to the text as
-- stored, so they land on the words the API returns.
create function search.markdown_plain(t text) returns text
    language sql immutable parallel safe
    return regexp_replace(
        regexp_replace(t, '\[\s*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)', '\1', 'g'),
        '!?\[([^\]]*)\]\([^)]*\)', '\1', 'g');

-- A generated column's expression is changed by adding it again (Postgres 15 and 16 have no
-- SET EXPRESSION), which computes it for the stored bullets; the statistics of the bullets are
-- counted again from it, and the lexical engine's FORMAT 5 rebuilds its index.
alter table kb.nodes drop column text_tsv, drop column text_len;
alter table kb.nodes
    add column text_tsv tsvector generated always as
        (search.document_tsvector(search.markdown_plain(left(text, 100000)))) stored,
    add column text_len integer generated always as
        (search.lexeme_count(search.document_tsvector(search.markdown_plain(left(text, 100000)))))
        stored;
create index nodes_text_tsv on kb.nodes using gin (text_tsv);
create index nodes_length on kb.nodes (workspace_id, text_len, id);

delete from search.term_stats where source = 'node';
delete from search.source_stats where source = 'node';
insert into search.source_stats (workspace_id, source, ndocs, total_len)
select workspace_id, 'node', count(*) filter (where text_len > 0), sum(text_len)
from kb.nodes group by workspace_id;
insert into search.term_stats (workspace_id, source, lexeme, ndoc)
select workspace_id, 'node', lexeme, count(*)
from kb.nodes cross join lateral unnest(tsvector_to_array(text_tsv)) l(lexeme)
group by workspace_id, lexeme;
