-- The exact BM25 top-k of migration 0014, faster for one word and for many bases:
-- search.bm25_scan reads a one-word query's list best first, only as deep as the verification
-- needs (the stored impacts order its documents up to the impacts' slack, which bounds every
-- document not read yet), and is the way for every query but several words whose lists are
-- very long, where search.bm25_top_k's threshold algorithm reads them best first. The scan
-- passes the verification the scores it summed from the postings, so the verification only
-- checks what the postings cannot tell (visibility, filters, phrases, exclusions). The bases'
-- cap-ths are kept as the weakest one (search.bm25_tops, search.bm25_enters), and a posting's
-- share of a score and the verification are written once (search.bm25_part, bm25_verify).

drop function search.bm25_top_k(uuid, text, text[], text[], integer[], bigint[], integer, integer, text);
drop function search.bm25_scan(uuid, text, text[], text[], float8[], float8, bigint[], integer, integer, text);
drop function search.bm25_tops(search.bm25_hit[], integer, integer, bigint, bigint);

-- After a round of verification: the weakest of the bases' cap-ths (group, score, target id)
-- among the bases that have `cap`, whether every one of the `kbs` bases has, and how many
-- documents the next round verifies: enough to fill the tops still short at the share of the
-- `verified` documents that became targets so far (at least `cap`, at most four times
-- `per_round`). A document can enter some base's top when it beats the weakest cap-th
-- (search.bm25_enters), the bases' orders being one order. Scores within 1e-12 tie there, so
-- the weakest carries the largest id of the cap-ths whose scores a document tying it can tie
-- too (within 3e-12 above): beating that says "can enter" whenever one of those bases would.
create function search.bm25_tops(
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
            where k.every = w.every and k.score <= w.score * (1 + 3e-12)
            order by k.target_id desc limit 1),
           (select count(*) from kth) >= kbs,
           -- numeric until bounded: the product can pass an integer's range
           (select least(4 * per_round, greatest(cap, ceil(1.25 * (cap * kbs - count(*) filter (
               where r.rank <= cap)) * verified / greatest(count(*), 1))))::bigint from r)
    from (select 1) one left join weakest w on true
$$;

-- Whether a document (every-clause group, score, id) ranks before the cap-th (k_every,
-- k_score, k_id): scores within 1e-12 of each other are a tie, which the smaller id wins as
-- search.bm25_ranked orders (scores summed in another order differ in the last bits).
create function search.bm25_enters(
    every boolean, score float8, id uuid, k_every boolean, k_score float8, k_id uuid
) returns boolean language sql immutable as $$
    select every > k_every or (every = k_every and (score > k_score * (1 + 1e-12)
        or (score >= k_score * (1 - 1e-12) and id <= k_id)))
$$;

-- What a lexeme of `weight`, (k1 + 1) * idf * its repeats, adds to the score of a document of
-- length `len` holding it `tf` times: weight * tf / (tf + K), K = k1 * (1 - b + b * len /
-- average), written as weight * (1 - K / (tf + K)); k1 = 1.2 and b = 0.75 as search/lexical.py.
create function search.bm25_part(weight float8, tf float8, len float8, average float8)
    returns float8 language sql immutable as $$
    select weight * (1::float8 - (0.3::float8 + 0.9::float8 * len / average)
                     / (tf + (0.3::float8 + 0.9::float8 * len / average)))
$$;

-- The caller's `verify` SQL run on the documents (doc_id, part): the hits among them. The
-- scan passes each document's score and every-clause flag as its postings give them, which
-- spares the verification computing them again.
create function search.bm25_verify(
    verify text, doc_ids uuid[], parts integer[], weight float8[], average float8,
    scores float8[] default null, every boolean[] default null
) returns search.bm25_hit[] language plpgsql stable as $$
declare
    hits search.bm25_hit[];
begin
    execute 'select coalesce(array_agg(row(h.*)::search.bm25_hit), ''{}'') from (' || verify || ') h'
        into hits using doc_ids, parts, weight, average, scores, every;
    return hits;
end $$;

-- The exact top-k of search.bm25_top_k (same arguments, with each lexeme's weight, the number
-- of lexemes weighing anything, the average length and the impacts' slack worked out) by
-- ranking documents from their postings and verifying the best in order until no document
-- left can enter a base's top. Several lists are scored in one aggregate of all their
-- postings: reading a posting costs about a microsecond, verifying a document several, and
-- for a question whose words fill a few tens of thousands of postings this beats reading the
-- lists best first, whose bounds stay loose over many words and many bases. One list is read
-- best first, as deep as the verification needs: its order is its documents' order up to the
-- impacts' slack, which bounds what a document not read yet can score.
create function search.bm25_scan(
    ws uuid, src text, kinds text[], lexemes text[], weight float8[], lists integer,
    average float8, slack float8, clauses bigint[], cap integer, kbs integer, verify text
) returns setof search.bm25_hit language plpgsql stable
set plan_cache_mode = auto as $$
declare
    -- Documents ranked per pass: a pass ranks them all again, deeper, when filters turned
    -- so many away that the first were not enough.
    depth bigint := 4 * greatest(cap * kbs, 1);
    per_round bigint := greatest(cap * kbs, 1);  -- documents the next round verifies
    ranked search.bm25_scored[];
    found integer;
    -- One list: the most a document not ranked can score (null once the list is read to its
    -- end), and how many ranked documents score more: their order is final.
    beyond float8;
    settled integer;
    g integer := (select min(w.g) from unnest(weight) with ordinality w(x, g) where w.x > 0);
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
                   case when count(*) = depth then weight[g] * min(d.impact) * slack end
            into ranked, beyond
            from d;
        else
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
                    where weight[l.g] > 0
                ), s as (
                    select p.doc_id, p.part, sum(p.score) as score, bit_or(p.mask) as mask from p
                    group by p.doc_id, p.part
                )
                select s.doc_id, s.part, s.score, clauses is not null and not exists (
                           select 1 from unnest(clauses) c where c & s.mask = 0) as every
                from s
                order by every desc, s.score desc, s.doc_id, s.part limit depth
            ) d;
        end if;
        found := cardinality(ranked);
        settled := found;
        if beyond is not null then
            settled := (select count(*) from unnest(ranked) r where r.score > beyond);
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
            next := last + 1;
            select * into k_every, k_score, k_id, filled, per_round
            from search.bm25_tops(hits, cap, kbs, per_round, next - 1);
        end loop;
        exit when next <= settled;  -- stopped at a document that cannot enter
        -- Every document ranked: done when they were all there were (an aggregate ranks
        -- every document once the depth holds them; a list read to its end leaves none).
        exit when beyond is null and found < depth;
        -- One list: done when none of the documents left (ranked or not) can enter.
        exit when beyond is not null and filled and not search.bm25_enters(
            ranked[1].every, beyond, '00000000-0000-0000-0000-000000000000', k_every, k_score, k_id);
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
create function search.bm25_top_k(
    ws uuid, src text, kinds text[], lexemes text[], repeats integer[], clauses bigint[],
    cap integer, kbs integer, verify text
) returns setof search.bm25_hit language plpgsql stable
-- The statements below have one good plan whatever the query: searches force custom plans
-- (search/legs.py), which would plan each of them again on every round.
set plan_cache_mode = auto as $$
declare
    n integer := coalesce(array_length(lexemes, 1), 0);
    ndocs bigint;
    average float8;
    basis float8;
    slack float8;  -- a true impact is at most the stored one times this (migration 0013)
    weight float8[];
    frontier float8[];  -- per lexeme: the stored impact read last (1, an impact's maximum, before)
    bound float8[];  -- per lexeme: the most it adds to a document not met in its list
    done boolean[];  -- per lexeme: its list is read to the end (or no document has it)
    wanted boolean[];
    taken integer[];  -- per lexeme: postings read so far
    batch integer[];  -- per lexeme: postings its next read asks for
    exhausted bigint;  -- `done` as a bit mask, for the every-clause group
    unseen float8;  -- the most a document not met yet can score
    every_open boolean;  -- whether such a document can still match every clause
    advance boolean;
    gap float8;
    active integer;
    met search.bm25_met[] := '{}';  -- documents met, neither scored nor ruled out yet
    read search.bm25_met[];
    read_n integer[];
    read_min float8[];
    v_doc uuid[] := '{}';  -- documents scored (found or not): never scored twice
    v_part integer[] := '{}';
    chosen_doc uuid[];
    chosen_part integer[];
    hits search.bm25_hit[] := '{}';
    -- The weakest cap-th target of the knowledge bases that have `cap`.
    k_every boolean;
    k_score float8;
    k_id uuid;
    filled boolean := false;
    -- Documents scored per round, at most (search.bm25_tops sizes the next).
    per_round bigint := greatest(cap * kbs, 1);
    j integer;
    lists integer;  -- lexemes weighing anything: some document holds them
    postings bigint;  -- the query's lists' lengths summed (over the source's every kind)
    -- 'scan' or 'threshold' pins a path (tests cover both); by default ('auto') the scan,
    -- unless several lists hold more than 200,000 postings between them.
    path text := coalesce(nullif(current_setting('subspace.bm25_path', true), ''), 'auto');
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
           count(t.ndoc), coalesce(sum(t.ndoc), 0)
    into weight, lists, postings
    from unnest(lexemes, repeats) with ordinality r(lexeme, m, i)
    left join search.term_stats t
        on t.workspace_id = ws and t.source = src and t.lexeme = r.lexeme and t.ndoc > 0;
    if path = 'scan' or (path = 'auto' and (lists = 1 or postings <= 200000)) then
        return query select * from search.bm25_scan(
            ws, src, kinds, lexemes, weight, lists, average, slack, clauses, cap, kbs, verify);
        return;
    end if;
    frontier := array_fill(1::float8, array[n]);
    taken := array_fill(0, array[n]);
    -- A first read of four rounds' worth: reading postings costs little next to scoring
    -- documents, and a rare word's list is then read to its end at once.
    batch := array_fill(4 * per_round, array[n]);
    done := array(select weight[g] = 0 from generate_series(1, n) g);
    if not (false = any(done)) then
        return;
    end if;

    loop
        bound := array(select case when done[g] then 0 else weight[g] * frontier[g] * slack end
                       from generate_series(1, n) g);
        unseen := (select sum(x) from unnest(bound) x);
        exhausted := (select coalesce(bit_or(1::bigint << (g - 1)), 0)
                      from generate_series(1, least(n, 63)) g where done[g]);
        every_open := clauses is not null
            and not exists (select 1 from unnest(clauses) c where c & ~exhausted = 0);
        -- A document not met yet that ties the cap-th may have the smaller id: the nil uuid.
        advance := (false = any(done)) and (not filled or search.bm25_enters(
            every_open, unseen, '00000000-0000-0000-0000-000000000000', k_every, k_score, k_id));
        if advance then
            -- Every list while a base is short of `cap` or the every-clause group is open
            -- above a cap-th; otherwise the lists holding at least an even share of the
            -- bound's excess over the weakest cap-th, so the long list of a common word is
            -- read only when the rare words' lists cannot close the gap (MaxScore's idea).
            gap := case when filled and every_open = k_every then unseen - k_score end;
            active := (select count(*) from unnest(done) d where not d);
            wanted := array(select not done[g] and (gap is null or bound[g] * active >= gap)
                            from generate_series(1, n) g);
            with r as materialized (
                select g, p.doc_id, p.part, p.impact,
                       search.bm25_part(weight[g], p.tf, p.len, average) as score
                from generate_series(1, n) g
                cross join lateral (
                    -- The kinds' lists merged, each read only as far as the merge can need.
                    select q.* from unnest(kinds) k(kind) cross join lateral (
                        select q.doc_id, q.part, q.impact, q.tf, q.len from search.postings q
                        where q.workspace_id = ws and q.source = src and q.kind = k.kind
                              and q.lexeme = lexemes[g]
                        order by q.impact desc, q.doc_id, q.part limit taken[g] + batch[g]) q
                    order by q.impact desc, q.doc_id, q.part offset taken[g] limit batch[g]) p
                where wanted[g]
            ), per_list as (
                select x.g, count(r.g)::integer as n, min(r.impact)::float8 as last
                from generate_series(1, n) x(g) left join r on r.g = x.g group by x.g
            )
            select coalesce((select array_agg(row(r.doc_id, r.part, r.g, r.score)::search.bm25_met)
                             from r), '{}'),
                   array(select l.n from per_list l order by l.g),
                   array(select l.last from per_list l order by l.g)
            into read, read_n, read_min;
            for j in 1..n loop
                if wanted[j] then
                    taken[j] := taken[j] + read_n[j];
                    if read_n[j] < batch[j] then
                        done[j] := true;
                    else
                        frontier[j] := read_min[j];
                        batch[j] := batch[j] * 2;
                    end if;
                end if;
            end loop;
            met := met || coalesce(array(
                select r from unnest(read) r
                left join unnest(v_doc, v_part) v(d, p) on v.d = r.doc_id and v.p = r.part
                where v.d is null), '{}');
            bound := array(select case when done[g] then 0 else weight[g] * frontier[g] * slack end
                           from generate_series(1, n) g);
            unseen := (select sum(x) from unnest(bound) x);
            exhausted := (select coalesce(bit_or(1::bigint << (g - 1)), 0)
                          from generate_series(1, least(n, 63)) g where done[g]);
        end if;

        -- Each document met: what it scores at most (exact for the lists it was met in, the
        -- frontier for the others) and whether it can still match every clause. Those that
        -- cannot enter any base's top `cap` are ruled out for good (the bound only falls and
        -- the cap-th only rises); the best of the rest are scored.
        with d as (
            select m.doc_id, m.part, sum(m.score) as partial, sum(bound[m.lexeme]) as met_bound,
                   bit_or(case when m.lexeme <= 63 then 1::bigint << (m.lexeme - 1) else 0 end)
                       as mask
            from unnest(met) m group by m.doc_id, m.part
        ), u as (
            select d.doc_id, d.part, d.partial + greatest(0, unseen - d.met_bound) as most,
                   clauses is not null and not exists (
                       select 1 from unnest(clauses) c where c & (d.mask | ~exhausted) = 0)
                       as every
            from d
        ), live as materialized (
            select u.doc_id, u.part, row_number() over (
                order by u.every desc, u.most desc, u.doc_id, u.part) as rank
            from u where not filled
                or search.bm25_enters(u.every, u.most, u.doc_id, k_every, k_score, k_id)
        )
        select coalesce((select array_agg(l.doc_id) from live l where l.rank <= per_round), '{}'),
               coalesce((select array_agg(l.part) from live l where l.rank <= per_round), '{}'),
               coalesce((select array_agg(m) from unnest(met) m
                         join live l on l.doc_id = m.doc_id and l.part = m.part
                         where l.rank > per_round), '{}')
        into chosen_doc, chosen_part, met;
        if cardinality(chosen_doc) = 0 then
            exit when not advance;
            continue;
        end if;

        hits := hits || search.bm25_verify(verify, chosen_doc, chosen_part, weight, average);
        v_doc := v_doc || chosen_doc;
        v_part := v_part || chosen_part;
        select * into k_every, k_score, k_id, filled, per_round
        from search.bm25_tops(hits, cap, kbs, per_round, cardinality(v_doc));
    end loop;

    return query
    select r.kind, r.target_id, r.item_id, r.kb_id, r.ref, r.every, r.score
    from search.bm25_ranked(hits) r where r.rank <= cap;
end $$;
