-- Text analysis for the lexical leg, the same for documents and queries:
--   search.fold(text): Latin letters lose their diacritics (résumé -> resume, ß -> ss, ø -> o)
--     and every run of Chinese, Japanese or Korean characters becomes its overlapping
--     character bigrams (会议记录 -> 会议 议记 记录; one character stays itself), which the
--     default parser would otherwise keep as one unsearchable word.
--   search.identifier_parts(tsvector): the parts of the tokens the parser keeps whole (hosts,
--     e-mail addresses, paths and file names, the -1234 of PROJ-1234), so 1234, foo, user,
--     v1 and 1.2.3 find PROJ-1234, foo.bar.com, user@example.com and v1.2.3.
--   search.document_tsvector(text): the tsvector of a document: folded, then its parts.
-- The pgserver build has neither unaccent nor pg_trgm, and generated columns need immutable
-- expressions, so these are plain SQL over translate() and regular expressions; the Python
-- mirror of fold() (search/analysis.py) maps highlights back to the original text.

-- Latin-1 and Extended-A in one translate(), the rarer Extended-B and Extended Additional in
-- another only when the text has them: translate() compares every character with every
-- character of its list (0.3 s for 100,000 characters over the whole list of 507).
create function search.fold_latin(t text) returns text
    language sql immutable parallel safe
    return case when t !~ '[\u00c0-\u024f\u1e00-\u1eff\u0300-\u036f]' then t else
        regexp_replace(translate(translate(
            case when t !~ '[ÆæŒœßẞÞþĲĳǄ-ǌǱ-ǳ]' then t else
                replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(
                replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(
                replace(replace(t, 'Æ', 'AE'), 'æ', 'ae'), 'Œ', 'OE'), 'œ', 'oe'), 'ß', 'ss'),
                'ẞ', 'SS'), 'Þ', 'TH'), 'þ', 'th'), 'Ĳ', 'IJ'), 'ĳ', 'ij'), 'Ǆ', 'DZ'), 'ǅ', 'Dz'),
                'ǆ', 'dz'), 'Ǉ', 'LJ'), 'ǈ', 'Lj'), 'ǉ', 'lj'), 'Ǌ', 'NJ'), 'ǋ', 'Nj'), 'ǌ', 'nj'),
                'Ǳ', 'DZ'), 'ǲ', 'Dz'), 'ǳ', 'dz')
            end,
            'ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝàáâãäåçèéêëìíîïðñòóôõöøùúûüýÿĀāĂ'
            || 'ăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĦħĨĩĪīĬĭĮįİıĴĵĶķĹĺĻļĽľŁłŃ'
            || 'ńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŦŧŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽžſ',
            'AAAAAACEEEEIIIIDNOOOOOOUUUUYaaaaaaceeeeiiiidnoooooouuuuyyAaA'
            || 'aAaCcCcCcCcDdDdEeEeEeEeEeGgGgGgGgHhHhIiIiIiIiIiJjKkLlLlLlLlN'
            || 'nNnNnOoOoOoRrRrRrSsSsSsSsTtTtTtUuUuUuUuUuUuWwYyYZzZzZzs'),
            case when t !~ '[\u0180-\u024f\u1e00-\u1eff]' then '' else
            'ƀƚƠơƯưǍǎǏǐǑǒǓǔǕǖǗǘǙǚǛǜǞǟǠǡǦǧǨǩǪǫǬǭǰǴǵǸǹǺǻȀȁȂȃȄȅȆȇȈȉȊȋȌȍȎȏȐȑȒ'
            || 'ȓȔȕȖȗȘșȚțȞȟȦȧȨȩȪȫȬȭȮȯȰȱȲȳȻȼḀḁḂḃḄḅḆḇḈḉḊḋḌḍḎḏḐḑḒḓḔḕḖḗḘḙḚḛḜḝḞḟḠ'
            || 'ḡḢḣḤḥḦḧḨḩḪḫḬḭḮḯḰḱḲḳḴḵḶḷḸḹḺḻḼḽḾḿṀṁṂṃṄṅṆṇṈṉṊṋṌṍṎṏṐṑṒṓṔṕṖṗṘṙṚṛṜ'
            || 'ṝṞṟṠṡṢṣṤṥṦṧṨṩṪṫṬṭṮṯṰṱṲṳṴṵṶṷṸṹṺṻṼṽṾṿẀẁẂẃẄẅẆẇẈẉẊẋẌẍẎẏẐẑẒẓẔẕẖẗẘ'
            || 'ẙẛẠạẢảẤấẦầẨẩẪẫẬậẮắẰằẲẳẴẵẶặẸẹẺẻẼẽẾếỀềỂểỄễỆệỈỉỊịỌọỎỏỐốỒồỔổỖỗỘộ'
            || 'ỚớỜờỞởỠỡỢợỤụỦủỨứỪừỬửỮữỰựỲỳỴỵỶỷỸỹ' end,
            case when t !~ '[\u0180-\u024f\u1e00-\u1eff]' then '' else
            'blOoUuAaIiOoUuUuUuUuUuAaAaGgKkOoOojGgNnAaAaAaEeEeIiIiOoOoRrR'
            || 'rUuUuSsTtHhAaEeOoOoOoOoYyCcAaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfG'
            || 'gHhHhHhHhHhIiIiKkKkKkLlLlLlLlMmMmMmNnNnNnNnOoOoOoOoPpPpRrRrR'
            || 'rRrSsSsSsSsSsTtTtTtTtUuUuUuUuUuVvVvWwWwWwWwWwXxXxYyZzZzZzhtw'
            || 'ysAaAaAaAaAaAaAaAaAaAaAaAaEeEeEeEeEeEeEeEeIiIiOoOoOoOoOoOoOo'
            || 'OoOoOoOoOoUuUuUuUuUuUuUuYyYyYyYy' end),
            '[\u0300-\u036f]+', '', 'g')
    end;

-- A run abc becomes " a ab bc c " (every character doubled), then the first and the last
-- single characters are dropped: " ab bc ". Lookaround would say it in one expression but
-- costs ten times as much in Postgres's regex engine. The class is Han (with extensions A-F
-- and compatibility ideographs), kana and Hangul: CJK in search/analysis.py.
create function search.cjk_bigrams(t text) returns text
    language sql immutable parallel safe
    return case when t !~ '[\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]' then t else
        regexp_replace(regexp_replace(regexp_replace(regexp_replace(t,
            '([\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+)', ' \1 ', 'g'),
            '([\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f])', '\1 \1', 'g'),
            ' [\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f] ([\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f])', ' \1', 'g'),
            '([\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]) [\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f] ', '\1 ', 'g')
    end;

-- Text of ASCII only (most of it) is left as it is without a regular expression.
create function search.fold(t text) returns text
    language sql immutable parallel safe
    return case when octet_length(t) = length(t) then t
        else search.cjk_bigrams(search.fold_latin(t)) end;

-- The parser keeps some tokens whole: hosts (foo.bar.com), e-mail addresses, paths and file
-- names (v1.2.3, snake_case_name.py), and signed numbers (the -1234 of PROJ-1234). Their
-- lexemes are split at . @ / : _ \ and -, a part that starts with letters then a digit also
-- gives itself without the letters (v1.2.3 -> 1.2.3), an address also gives its domain.
-- Lexemes with no letter (3.14, 1.2.3) and hyphenated words (the parser splits those) are
-- left alone. Reading the lexemes, not the text, costs no second parse.
create function search.identifier_parts(v tsvector) returns text
    language sql immutable parallel safe
    return (
        select coalesce(string_agg(
            regexp_replace(l, '[-./@:_\\]+', ' ', 'g')
            || case when l ~ '^[[:alpha:]]+[0-9]'
                    then ' ' || regexp_replace(l, '^[[:alpha:]]+', '') else '' end
            || case when l like '%@%' then ' ' || split_part(l, '@', 2) else '' end,
            ' '), '')
        from unnest(tsvector_to_array(v)) l
        where (l like '-%' and l ~ '^-[0-9]+$')
            or ((l like '%.%' or l like '%@%' or l like '%/%' or l like '%:%' or l like '%\_%'
                 or l like '%\\%') and l ~ '[[:alpha:]]')
    );

-- The folded text is capped at 150,000 characters: bigrams triple a CJK text, and a tsvector
-- holds at most 1 MB (100,000 random Han characters, the worst case, come to 0.7 MB), so no
-- write can fail however long the text is. The parts come after the text, once per distinct
-- identifier, so a search for the whole identifier still matches it as one phrase and
-- outranks its look-alikes.
create function search.document_tsvector(t text) returns tsvector
    language sql immutable parallel safe
    return (
        select v || to_tsvector('english', search.identifier_parts(v))
        from (select to_tsvector('english', left(search.fold(t), 150000)) as v offset 0) x
    );

-- Every tsvector and every length that BM25 reads now comes from document_tsvector. A
-- generated column's expression cannot be changed in place (before Postgres 17), so each is
-- dropped with its indexes and added again, which computes it for the stored rows.
alter table kb.pages drop column title_tsv, drop column title_len;
alter table kb.pages
    add column title_tsv tsvector generated always as
        (search.document_tsvector(left(title, 100000))) stored,
    add column title_len integer generated always as
        (search.lexeme_count(search.document_tsvector(left(title, 100000)))) stored;
create index pages_title_tsv on kb.pages using gin (title_tsv);
create index pages_length on kb.pages (workspace_id, title_len, id);

alter table kb.nodes drop column text_tsv, drop column text_len;
alter table kb.nodes
    add column text_tsv tsvector generated always as
        (search.document_tsvector(left(text, 100000))) stored,
    add column text_len integer generated always as
        (search.lexeme_count(search.document_tsvector(left(text, 100000)))) stored;
create index nodes_text_tsv on kb.nodes using gin (text_tsv);
create index nodes_length on kb.nodes (workspace_id, text_len, id);

alter table search.file_chunks drop column text_tsv, drop column text_len;
alter table search.file_chunks
    add column text_tsv tsvector generated always as
        (search.document_tsvector(left(text, 100000))) stored,
    add column text_len integer generated always as
        (search.lexeme_count(search.document_tsvector(left(text, 100000)))) stored;
create index file_chunks_text_tsv on search.file_chunks using gin (text_tsv);
create index file_chunks_length on search.file_chunks (workspace_id, text_len, file_id);

alter table kb.mail drop column mail_tsv, drop column mail_len;
alter table kb.mail
    add column mail_tsv tsvector generated always as (
        setweight(search.document_tsvector(left(subject, 2000)), 'A')
        || setweight(search.document_tsvector(left(sender, 2000)), 'B')
        || search.document_tsvector(left(body_text, 96000))
    ) stored,
    add column mail_len integer generated always as (search.lexeme_count(
        setweight(search.document_tsvector(left(subject, 2000)), 'A')
        || setweight(search.document_tsvector(left(sender, 2000)), 'B')
        || search.document_tsvector(left(body_text, 96000)))) stored;
create index mail_tsv on kb.mail using gin (mail_tsv);
create index mail_length on kb.mail (workspace_id, mail_len, id);

-- Adding a column fires no trigger: the BM25 statistics are counted again from the new
-- columns (as migration 0005 first counted them).
delete from search.term_stats;
delete from search.source_stats;

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
