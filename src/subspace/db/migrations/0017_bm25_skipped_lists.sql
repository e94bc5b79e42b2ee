-- One way to the exact BM25 top-k for every query. Migration 0016 scored several words by
-- summing all their postings up to 200,000 and read longer lists with the threshold algorithm
-- of migration 0014, whose bounds stay loose over a dozen words: at a million chunks a long
-- question holding a word in a sixth of the documents ran past the search's time limit. Now
-- every query goes through search.bm25_scan, which for several words no longer reads the
-- lists of the words that weigh least (MaxScore's split): a document holding only those
-- cannot enter a base's top, so their lists are looked up for the documents the others rank
-- instead of read whole. The threshold algorithm and its per-posting type are gone.

drop type search.bm25_met;

-- Scores on a grid: `x` rounded to a multiple of 2^-36 (1.5e-11). Sums of such numbers (below
-- 2^17) are exact, so a document's score is the same whichever order its parts are added in
-- (an aggregate's, a lookup's), documents alike tie exactly (the order between them is their
-- ids'), and scores compare exactly. Rounding keeps order: a bound rounded so still bounds.
create function search.bm25_grid(x float8) returns float8 language sql immutable as $$
    select round(x * 68719476736::float8) / 68719476736::float8
$$;

-- What a lexeme of `weight`, (k1 + 1) * idf * its repeats, adds to the score of a document of
-- length `len` holding it `tf` times, as migration 0016 has it, on the grid.
create or replace function search.bm25_part(weight float8, tf float8, len float8, average float8)
    returns float8 language sql immutable as $$
    select search.bm25_grid(weight * (1::float8 - (0.3::float8 + 0.9::float8 * len / average)
                                      / (tf + (0.3::float8 + 0.9::float8 * len / average))))
$$;

-- Whether a document (every-clause group, score, id) ranks before the cap-th (k_every,
-- k_score, k_id), as search.bm25_ranked orders them: scores on the grid compare exactly.
create or replace function search.bm25_enters(
    every boolean, score float8, id uuid, k_every boolean, k_score float8, k_id uuid
) returns boolean language sql immutable as $$
    select every > k_every or (every = k_every and (score > k_score
        or (score = k_score and id <= k_id)))
$$;

-- search.bm25_tops of migration 0016, the cap-ths tying the weakest now those of its very
-- score: after a round of verification, the weakest of the bases' cap-ths (group, score, and
-- the largest target id among the cap-ths of that group and score: beating it says "can
-- enter" whenever one of those bases would) among the bases that have `cap`, whether every one
-- of the `kbs` bases has, and how many documents the next round verifies.
create or replace function search.bm25_tops(
    hits search.bm25_hit[], cap integer, kbs integer, per_round bigint, verified bigint
) returns table (k_every boolean, k_score float8, k_id uuid, filled boolean, next_round bigint)
    language sql immutable as $$
    with r as materialized (
        select * from search.bm25_ranked(hits)
    ), kth as (  -- each full base's cap-th
        select r.every, r.score, r.target_id from r where r.rank = cap
    ), weakest as (
        select k.every, k.score from kth k order by k.every, k.score limit 1
    )
    select w.every, w.score,
           (select k.target_id from kth k
            where k.every = w.every and k.score = w.score
            order by k.target_id desc limit 1),
           (select count(*) from kth) >= kbs,
           -- numeric until bounded: the product can pass an integer's range
           (select least(4 * per_round, greatest(cap, ceil(1.25 * (cap * kbs - count(*) filter (
               where r.rank <= cap)) * verified / greatest(count(*), 1))))::bigint from r)
    from (select 1) one left join weakest w on true
$$;

-- The lexemes a search of several lists may skip: taken from the one that adds least at most
-- (`most`, each lexeme's best impact times its weight), the longest run whose documents, if
-- they held none of the other lexemes, could not beat the weakest cap-th (k_every, k_score,
-- k_id, search.bm25_enters). The run is a prefix: what it adds at most only grows along it.
create function search.bm25_skippable(
    most float8[], clauses bigint[], k_every boolean, k_score float8, k_id uuid
) returns boolean[] language sql immutable as $$
    with o as (
        select x.g, sum(x.m) over w as upto,
               bit_or(1::bigint << (least(x.g, 64) - 1)::integer) over w as mask
        from unnest(most) with ordinality x(m, g) where x.m > 0
        window w as (order by x.m, x.g)
    )
    select array(
        select coalesce(bool_or(not search.bm25_enters(
                   -- whether such a document may hold a lexeme of every clause
                   clauses is not null
                       and not exists (select 1 from unnest(clauses) c where c & o.mask = 0),
                   o.upto, '00000000-0000-0000-0000-000000000000', k_every, k_score, k_id)), false)
        from generate_series(1, cardinality(most)) x(g) left join o on o.g = x.g
        group by x.g order by x.g)
$$;

-- The exact top-k of search.bm25_top_k (same arguments, with each lexeme's weight, the number
-- of lexemes weighing anything, the average length and the impacts' slack worked out): rank
-- documents from their postings, verify the best in order until no document left can enter a
-- base's top. One list is read best first, as deep as the verification needs: its order is
-- its documents' order up to the impacts' slack, which bounds what a document not read yet
-- can score. Several lists are summed in one aggregate of their postings (reading a posting
-- costs about a microsecond, looking a document up ten), except the lists skipped: their
-- documents are ranked at what the skipped lexemes add at most, and the best of them are
-- scored exactly from all their postings before they are verified.
create or replace function search.bm25_scan(
    ws uuid, src text, kinds text[], lexemes text[], weight float8[], lists integer,
    average float8, slack float8, clauses bigint[], cap integer, kbs integer, verify text
) returns setof search.bm25_hit language plpgsql stable
set plan_cache_mode = auto as $$
declare
    -- Documents ranked per pass: a pass ranks them all again, deeper, when filters turned
    -- so many away that the first were not enough.
    first_depth constant bigint := 4 * greatest(cap * kbs, 1);
    depth bigint := first_depth;
    per_round bigint := greatest(cap * kbs, 1);  -- documents the next round verifies
    ranked search.bm25_scored[];
    found integer;
    -- Where what a document not ranked can score is bounded (one list read to a depth, or
    -- documents ranked on what skipped lexemes add at most), that bound and whether such a
    -- document can match every clause, else null; and how many ranked documents rank above
    -- it: their order is final.
    beyond float8;
    beyond_every boolean;
    settled integer;
    g integer := (select min(w.g) from unnest(weight) with ordinality w(x, g) where w.x > 0);
    -- Several lists: the most each lexeme adds to a score, the lexemes whose lists are
    -- skipped, what those add at most and which they are (a mask).
    most float8[];
    skipped boolean[];
    skipped_most float8 := 0;
    skipped_mask bigint := 0;
    -- Lists skipped before every base has `cap`: the ranked documents' order is not final
    -- (what a document not ranked may score is far above theirs), yet the best of them are
    -- verified, to learn what a cap-th scores before the lists are split for it.
    probing boolean := false;
    budget bigint := 64 * greatest(cap * kbs, 1);  -- postings read first, when lists are split
    postings bigint;  -- in the query's lists
    verified_doc uuid[] := '{}';  -- several lists: not ranked again by the next pass
    verified_part integer[] := '{}';
    next integer := 1;  -- the first ranked document not verified yet
    last integer;
    chosen_doc uuid[];
    chosen_part integer[];
    chosen_score float8[];
    chosen_every boolean[];
    hits search.bm25_hit[] := '{}';
    k_every boolean;  -- the weakest cap-th of the bases that have `cap`
    k_score float8;
    k_id uuid;
    filled boolean := false;
begin
    if lists > 1 then
        -- Lists longer than sixteen budgets between them are split. To begin with only the
        -- shortest are read, as many as a budget of postings holds (the shortest at least):
        -- the rare words' documents tend to make the bases' tops, and the first of them
        -- verified tell what a cap-th scores; the lists are then split for that (below).
        -- Shorter lists are summed whole: a split costs more than it saves there.
        select array_agg(x.skip order by x.g), sum(x.ndoc) into skipped, postings
        from (
            select l.g, coalesce(t.ndoc, 0) as ndoc, weight[l.g] > 0
                       and coalesce(sum(t.ndoc) over w, 0) > budget
                       and coalesce(sum(t.ndoc) over w - t.ndoc, 0) > 0 as skip
            from unnest(lexemes) with ordinality l(lexeme, g)
            left join search.term_stats t
                on t.workspace_id = ws and t.source = src and t.lexeme = l.lexeme
            window w as (order by t.ndoc nulls first, l.g)
        ) x;
        if postings <= 16 * budget then
            skipped := array_fill(false, array[cardinality(lexemes)]);
        else
            most := array(
                select case when weight[l.g] > 0 then search.bm25_grid(weight[l.g] * slack * coalesce((
                           select max(t.impact) from unnest(kinds) k(kind) cross join lateral (
                               select q.impact from search.postings q
                               where q.workspace_id = ws and q.source = src and q.kind = k.kind
                                     and q.lexeme = l.lexeme
                               order by q.impact desc limit 1) t), 0)) else 0 end
                from unnest(lexemes) with ordinality l(lexeme, g) order by l.g);
        end if;
    end if;
    loop
        if lists = 1 then
            -- The kinds' lists merged, each read only as far as the merge can need.
            with p as materialized (
                select q.doc_id, q.part, q.impact,
                       search.bm25_part(weight[g], q.tf, q.len, average) as score
                from unnest(kinds) k(kind) cross join lateral (
                    select q.doc_id, q.part, q.impact, q.tf, q.len from search.postings q
                    where q.workspace_id = ws and q.source = src and q.kind = k.kind
                          and q.lexeme = lexemes[g]
                    order by q.impact desc, q.doc_id, q.part limit depth) q
                order by q.impact desc, q.doc_id, q.part limit depth
            ), d as (  -- one lexeme: whether a document matches every clause is the same for all
                select p.*, clauses is not null and not exists (
                    select 1 from unnest(clauses) c where c & (1::bigint << (least(g, 64) - 1)) = 0)
                    as every
                from p
            )
            select coalesce(array_agg(row(d.doc_id, d.part, d.every, d.score)::search.bm25_scored
                                      order by d.every desc, d.score desc, d.doc_id, d.part), '{}'),
                   case when count(*) = depth
                       then search.bm25_grid(weight[g] * min(d.impact) * slack) end,
                   bool_or(d.every)
            into ranked, beyond, beyond_every
            from d;
        else
            select coalesce(sum(x.m), 0), coalesce(bit_or(1::bigint << (least(x.g, 64) - 1)::integer), 0)
            into skipped_most, skipped_mask
            from unnest(most, skipped) with ordinality x(m, s, g) where x.s and x.m > 0;
            probing := skipped_most > 0 and not filled;
            -- The documents of the lists not skipped, not verified yet and able to enter a
            -- base's top, best first: each scored from its postings, with the skipped lexemes
            -- counted at their most (and as held, for the every-clause group).
            select coalesce(array_agg(row(d.doc_id, d.part, d.every, d.score)::search.bm25_scored
                                      order by d.every desc, d.score desc, d.doc_id, d.part), '{}')
            into ranked
            from (
                with p as not materialized (  -- each posting's share of its document's score
                    select q.doc_id, q.part, search.bm25_part(weight[l.g], q.tf, q.len, average)
                               as score,
                           1::bigint << (least(l.g, 64) - 1)::integer as mask
                    from unnest(lexemes) with ordinality l(lexeme, g)
                    join search.postings q on q.workspace_id = ws and q.source = src
                        and q.kind = any(kinds) and q.lexeme = l.lexeme
                    where weight[l.g] > 0 and not (skipped[l.g] and most[l.g] > 0)
                ), s as (
                    select p.doc_id, p.part, sum(p.score) + skipped_most as score,
                           bit_or(p.mask) as mask
                    from p group by p.doc_id, p.part
                )
                select r.* from (
                    select s.doc_id, s.part, s.score, clauses is not null and not exists (
                               select 1 from unnest(clauses) c where c & (s.mask | skipped_mask) = 0)
                               as every
                    from s
                    where not exists (
                        select 1 from unnest(verified_doc, verified_part) v(doc_id, part)
                        where v.doc_id = s.doc_id and v.part = s.part)
                ) r
                where not filled or search.bm25_enters(r.every, r.score, r.doc_id, k_every, k_score, k_id)
                order by r.every desc, r.score desc, r.doc_id, r.part
                limit depth
            ) d;
            beyond := null;
            if skipped_most > 0 then
                -- The documents not ranked score at most as the last ranked might.
                if cardinality(ranked) = depth then
                    beyond := ranked[depth].score;
                    beyond_every := ranked[depth].every;
                end if;
                -- The ranked scored exactly: all their postings of the query looked up.
                select coalesce(array_agg(row(x.doc_id, x.part, x.every, x.score)::search.bm25_scored
                                          order by x.every desc, x.score desc, x.doc_id, x.part), '{}')
                into ranked
                from (
                    select c.doc_id, c.part, e.score, clauses is not null and not exists (
                               select 1 from unnest(clauses) k where k & e.mask = 0) as every
                    from unnest(ranked) c cross join lateral (
                        select sum(search.bm25_part(weight[l.g], q.tf, q.len, average)) as score,
                               bit_or(1::bigint << (least(l.g, 64) - 1)::integer) as mask
                        from search.postings q
                        cross join lateral (select array_position(lexemes, q.lexeme) as g) l
                        where q.workspace_id = ws and q.source = src and q.doc_id = c.doc_id
                              and q.part = c.part and q.lexeme = any(lexemes)) e
                ) x;
            end if;
            next := 1;
        end if;
        found := cardinality(ranked);
        settled := found;
        if beyond is not null and not probing then
            settled := (select count(*) from unnest(ranked) r
                        where r.every > beyond_every or (r.every = beyond_every and r.score > beyond));
        end if;
        while next <= settled loop
            -- The rest rank lower: none can enter a base's top once this one cannot.
            exit when filled and not search.bm25_enters(
                ranked[next].every, ranked[next].score, ranked[next].doc_id, k_every, k_score, k_id);
            last := least(next + per_round - 1, settled);
            select array_agg(c.doc_id), array_agg(c.part), array_agg(c.score), array_agg(c.every)
            into chosen_doc, chosen_part, chosen_score, chosen_every
            from unnest(ranked[next:last]) c;
            hits := hits || search.bm25_verify(
                verify, chosen_doc, chosen_part, weight, average, chosen_score, chosen_every);
            if lists > 1 then
                verified_doc := verified_doc || chosen_doc;
                verified_part := verified_part || chosen_part;
            end if;
            next := last + 1;
            select * into k_every, k_score, k_id, filled, per_round
            from search.bm25_tops(hits, cap, kbs, per_round,
                                  case when lists > 1 then cardinality(verified_doc) else next - 1 end);
            exit when probing and filled;  -- a cap-th learnt
        end loop;
        if probing then
            if filled then
                -- Skip what adds at most a third of the weakest cap-th known now, and rank
                -- again. The cap-th only rises, so a document holding only skipped lexemes
                -- never can enter. Skipping all the cap-th rules out would save reading more
                -- postings, but leave more documents to look up: those whose other lexemes
                -- bring them within what the skipped add of the cap-th.
                skipped := search.bm25_skippable(most, clauses, k_every, k_score / 3, k_id);
                depth := first_depth;
            elsif found = depth then
                depth := depth * 4;  -- the lists read hold more documents: verify deeper
            else
                -- The lists read cannot fill every base: skip nothing.
                skipped := array_fill(false, array[cardinality(lexemes)]);
            end if;
            continue;
        end if;
        exit when next <= settled;  -- stopped at a document that cannot enter
        -- Every document ranked: done when they were all there were.
        exit when beyond is null and found < depth;
        -- Done when none of the documents not ranked can enter.
        exit when beyond is not null and filled and not search.bm25_enters(
            beyond_every, beyond, '00000000-0000-0000-0000-000000000000', k_every, k_score, k_id);
        depth := depth * 4;
    end loop;

    return query
    select r.kind, r.target_id, r.item_id, r.kb_id, r.ref, r.every, r.score
    from search.bm25_ranked(hits) r where r.rank <= cap;
end $$;

-- ws, src: the workspace and BM25 source; kinds: its kinds in scope, whose postings are read.
-- lexemes, repeats: the query's lexemes and how often
-- each occurs in the query (a repeated word counts as often as it appears). clauses: for a
-- lookup whose documents with every clause rank first, per clause a bit mask of the lexemes
-- (bit i - 1 for lexemes[i]) one of which a document matching the clause contains; null when
-- there is no such group. cap: targets per knowledge base; kbs: the knowledge bases in scope.
-- verify: SQL scoring candidates, with $1 uuid[] and $2 integer[] their (doc_id, part), $3
-- float8[] each lexeme's weight, (k1 + 1) * idf * repeats, $4 float8 the average length, and
-- $5 float8[] and $6 boolean[] each candidate's score and every-clause flag where known (the
-- scan's, from the postings; null otherwise); it yields search.bm25_hit's columns for the
-- candidates that are visible and match.
create or replace function search.bm25_top_k(
    ws uuid, src text, kinds text[], lexemes text[], repeats integer[], clauses bigint[],
    cap integer, kbs integer, verify text
) returns setof search.bm25_hit language plpgsql stable
-- The statements below have one good plan whatever the query: searches force custom plans
-- (search/legs.py), which would plan each of them again.
set plan_cache_mode = auto as $$
declare
    n integer := coalesce(array_length(lexemes, 1), 0);
    ndocs bigint;
    average float8;
    basis float8;
    slack float8;  -- a true impact is at most the stored one times this (migration 0013)
    weight float8[];
    lists integer;  -- lexemes weighing anything: some document holds them
begin
    if n = 0 or coalesce(cardinality(kinds), 0) = 0 or cap <= 0 or kbs <= 0 then
        return;
    end if;
    select s.ndocs, greatest(s.total_len::float8 / nullif(s.ndocs, 0), 1) into ndocs, average
    from search.source_stats s where s.workspace_id = ws and s.source = src;
    select b.avgdl into basis from search.impact_basis b where b.workspace_id = ws and b.source = src;
    if coalesce(ndocs, 0) = 0 or basis is null then
        return;
    end if;
    -- float4 rounding of a stored impact is below 1e-7 relative; 1e-6 covers it.
    slack := greatest(1, average / basis) * (1 + 1e-6);
    -- idf = ln(1 + (N - df + 0.5) / (df + 0.5)), as bm25s and Lucene's BM25, 0 where no
    -- document has the lexeme; 2.2 is k1 + 1.
    select array_agg(coalesce(2.2::float8 * r.m
                              * ln(1 + (ndocs - t.ndoc + 0.5)::float8 / (t.ndoc + 0.5)), 0)
                     order by r.i),
           count(t.ndoc)
    into weight, lists
    from unnest(lexemes, repeats) with ordinality r(lexeme, m, i)
    left join search.term_stats t
        on t.workspace_id = ws and t.source = src and t.lexeme = r.lexeme and t.ndoc > 0;
    if lists > 0 then
        return query select * from search.bm25_scan(
            ws, src, kinds, lexemes, weight, lists, average, slack, clauses, cap, kbs, verify);
    end if;
end $$;
