-- A search row's passage is a bullet's text as a reader sees it: its Markdown's links as their
-- text (search.markdown_plain, migration 0031), without code fences' lines, inline code's
-- backticks or bold's stars. Only hydration reads it; what is searched is unchanged.
create function search.passage_text(t text) returns text
    language sql immutable parallel safe
    return replace(replace(
        regexp_replace(search.markdown_plain(t), '^\s*(`{3,}|~{3,})[^\n]*\n?', '', 'gn'),
        '`', ''), '**', '');
