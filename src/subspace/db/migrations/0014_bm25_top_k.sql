-- The exact BM25 top-k of one source over the impact-ordered postings of migration 0013, two
-- ways. search.bm25_top_k reads each query lexeme's postings best first, in batches that
-- double; a document met in a batch is scored exactly (visibility, filters and tsqueries
-- applied by the caller's SQL, a batch at a time) only while it can still enter some
-- knowledge base's top `cap`, and reading stops once no document not met yet can (Fagin's
-- threshold algorithm). search.bm25_scan scores every posting of the query's lexemes in one
-- aggregate and verifies the best documents in order. The first wins for one word in one
-- base, where the top of one list is the answer; the second for several words or bases,
-- whose bounds stay loose (docs/benchmarks.md). Both give the brute-force scores: idf from
-- search.term_stats, the average length from search.source_stats.

create type search.bm25_hit as (
    kind      text,
    target_id uuid,
    item_id   uuid,
    kb_id     uuid,
    ref       text,
    every     boolean,  -- the document matches every clause of a short lookup
    score     float8
);

-- A posting read and not decided yet: its document, its lexeme (an index into the query's
-- lexemes) and the exact score the lexeme adds.
create type search.bm25_met as (
    doc_id uuid,
    part   integer,
    lexeme integer,
    score  float8
);

-- Scored hits, one per target (a file's best chunk stands for the file), each with its rank in
-- its knowledge base: every-clause group first, then score, then target id.
create function search.bm25_ranked(hits search.bm25_hit[])
    returns table (kind text, target_id uuid, item_id uuid, kb_id uuid, ref text,
                   every boolean, score float8, rank bigint)
    language sql immutable as $$
    with best as (
        select distinct on (h.target_id) h.* from unnest(hits) h
        order by h.target_id, h.every desc, h.score desc, h.ref
    )
    select b.*, row_number() over (
        partition by b.kb_id order by b.every desc, b.score desc, b.target_id)
    from best b
$$;

-- After a round of verification: each base's cap-th (group, score, target id) where the base
-- has `cap`, whether every one of the `kbs` bases has, and how many documents the next round
-- verifies: enough to fill the tops still short at the share of the `verified` documents that
-- became targets so far (at least `cap`, at most four times `per_round`).
create function search.bm25_tops(
    hits search.bm25_hit[], cap integer, kbs integer, per_round bigint, verified bigint
) returns table (k_every boolean[], k_score float8[], k_id uuid[], filled boolean,
                 next_round bigint)
    language sql immutable as $$
    select coalesce(array_agg(r.every) filter (where r.rank = cap), '{}'),
           coalesce(array_agg(r.score) filter (where r.rank = cap), '{}'),
           coalesce(array_agg(r.target_id) filter (where r.rank = cap), '{}'),
           count(*) filter (where r.rank = cap) >= kbs,
           -- numeric until bounded: the product can pass an integer's range
           least(4 * per_round, greatest(cap, ceil(1.25 * (cap * kbs - count(*) filter (
               where r.rank <= cap)) * verified / greatest(count(*), 1))))::bigint
    from search.bm25_ranked(hits) r
$$;

-- A document of the query's lists scored from its postings, not verified yet. `every`: it
-- holds a lexeme of every clause (a phrase's word order is left to the verification).
create type search.bm25_scored as (
    doc_id uuid,
    part   integer,
    every  boolean,
    score  float8
);

-- The exact top-k of search.bm25_top_k (same arguments, with each lexeme's weight and the
-- average length worked out) by scoring every posting of the query's lexemes in one
-- aggregate, then verifying the best documents in order until no document left can enter a
-- base's top. Reading a posting here costs about a microsecond; verifying a document twenty:
-- for a question whose words fill a few tens of thousands of postings this beats reading the
-- lists best first, whose bounds stay loose over many words and many bases.
create function search.bm25_scan(
    ws uuid, src text, kinds text[], lexemes text[], weight float8[], average float8,
    clauses bigint[], cap integer, kbs integer, verify text
) returns setof search.bm25_hit language plpgsql stable
set plan_cache_mode = auto as $$
declare
    -- Documents ranked per pass: a pass ranks them all again, deeper, when filters turned
    -- so many away that the first were not enough.
    depth integer := 4 * greatest(cap * kbs, 1);
    per_round bigint := greatest(cap * kbs, 1);  -- documents the next round verifies
    ranked search.bm25_scored[];
    found integer;
    next integer := 1;  -- the first ranked document not verified yet
    last integer;
    chosen_doc uuid[];
    chosen_part integer[];
    hits search.bm25_hit[] := '{}';
    scored search.bm25_hit[];
    k_every boolean[] := '{}';  -- the cap-th of each base that has `cap`
    k_score float8[] := '{}';
    k_id uuid[] := '{}';
    filled boolean := false;
    lists integer := (select count(*) from unnest(weight) w where w > 0);
begin
    loop
        select coalesce(array_agg(row(d.doc_id, d.part, d.every, d.score)::search.bm25_scored
                                  order by d.every desc, d.score desc, d.doc_id, d.part), '{}')
        into ranked
        from (
            with p as not materialized (  -- each posting's share of its document's score
                select q.doc_id, q.part,
                       weight[l.g] * (1::float8 - (0.3::float8 + 0.9::float8 * q.len / average)
                           / (q.tf + (0.3::float8 + 0.9::float8 * q.len / average))) as score,
                       1::bigint << (least(l.g, 64) - 1)::integer as mask
                from unnest(lexemes) with ordinality l(lexeme, g)
                join search.postings q on q.workspace_id = ws and q.source = src
                    and q.kind = any(kinds) and q.lexeme = l.lexeme
                where weight[l.g] > 0
            ), s as (
                -- One list needs no grouping: a document has one posting per lexeme (the
                -- grouping was two fifths of the time for a word in 40,000 bullets).
                select p.* from p where lists = 1
                union all
                select p.doc_id, p.part, sum(p.score), bit_or(p.mask) from p where lists > 1
                group by p.doc_id, p.part
            )
            select s.doc_id, s.part, s.score, clauses is not null and not exists (
                       select 1 from unnest(clauses) c where c & s.mask = 0) as every
            from s
            order by every desc, s.score desc, s.doc_id, s.part limit depth
        ) d;
        found := cardinality(ranked);
        while next <= found loop
            -- The rest rank lower: none can enter a base's top once this one cannot (a tie
            -- with a cap-th enters by the smaller id, as search.bm25_ranked orders).
            exit when filled and not exists (
                select 1 from unnest(k_every, k_score, k_id) k(e, s, id)
                where ranked[next].every > k.e or (ranked[next].every = k.e and (
                    ranked[next].score > k.s * (1 + 1e-12)
                    or (ranked[next].score >= k.s * (1 - 1e-12) and ranked[next].doc_id <= k.id))));
            last := least(next + per_round - 1, found);
            select array_agg(c.doc_id), array_agg(c.part) into chosen_doc, chosen_part
            from unnest(ranked[next:last]) c;
            execute 'select coalesce(array_agg(row(h.*)::search.bm25_hit), ''{}'') from (' || verify || ') h'
                into scored using chosen_doc, chosen_part, weight, average;
            hits := hits || scored;
            next := last + 1;
            select * into k_every, k_score, k_id, filled, per_round
            from search.bm25_tops(hits, cap, kbs, per_round, next - 1);
        end loop;
        exit when next <= found or found < depth;
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
-- float8[] each lexeme's weight, (k1 + 1) * idf * repeats, and $4 float8 the average length;
-- it yields search.bm25_hit's columns for the candidates that are visible and match.
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
    scored search.bm25_hit[];
    -- The cap-th target of each knowledge base that has `cap`.
    k_every boolean[] := '{}';
    k_score float8[] := '{}';
    k_id uuid[] := '{}';
    filled boolean := false;
    -- Documents scored per round, at most (search.bm25_tops sizes the next).
    per_round bigint := greatest(cap * kbs, 1);
    j integer;
    postings bigint;  -- the query's lists' lengths summed (over the source's every kind)
    -- 'scan' or 'threshold' pins a path (tests cover both); by default ('auto') one list in
    -- one base is read best first, the rest scanned unless their lists are very long.
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
    -- idf = ln(1 + (N - df + 0.5) / (df + 0.5)) as search/lexical.py's bm25_stats, 0 where no
    -- document has the lexeme; 2.2 is k1 + 1.
    select array_agg(coalesce(2.2::float8 * r.m
                              * ln(1 + (ndocs - t.ndoc + 0.5)::float8 / (t.ndoc + 0.5)), 0)
                     order by r.i),
           coalesce(sum(t.ndoc), 0)
    into weight, postings
    from unnest(lexemes, repeats) with ordinality r(lexeme, m, i)
    left join search.term_stats t
        on t.workspace_id = ws and t.source = src and t.lexeme = r.lexeme and t.ndoc > 0;
    if path = 'scan' or (path = 'auto' and postings <= 200000
                         and (kbs > 1 or (select count(*) from unnest(weight) w where w > 0) > 1))
    then
        return query select * from search.bm25_scan(
            ws, src, kinds, lexemes, weight, average, clauses, cap, kbs, verify);
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
        -- Strictly: a document not met yet that ties a cap-th may have the smaller id.
        advance := (false = any(done)) and (not filled or exists (
            select 1 from unnest(k_every, k_score) k(e, s)
            where every_open > k.e or (every_open = k.e and unseen >= k.s)));
        if advance then
            -- Every list while a base is short of `cap` or the every-clause group is open
            -- above a cap-th; otherwise the lists holding at least an even share of the
            -- bound's excess over the weakest cap-th, so the long list of a common word is
            -- read only when the rare words' lists cannot close the gap (MaxScore's idea).
            gap := null;
            if filled and not exists (select 1 from unnest(k_every) e where every_open > e) then
                gap := unseen - (select min(k.s) from unnest(k_every, k_score) k(e, s)
                                 where k.e = every_open);
            end if;
            active := (select count(*) from unnest(done) d where not d);
            wanted := array(select not done[g] and (gap is null or bound[g] * active >= gap)
                            from generate_series(1, n) g);
            with r as materialized (
                select g, p.doc_id, p.part, p.impact, weight[g] * (1::float8
                       - (0.3::float8 + 0.9::float8 * p.len / average)
                       / (p.tf + (0.3::float8 + 0.9::float8 * p.len / average))) as score
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
            from u where not filled or exists (
                select 1 from unnest(k_every, k_score, k_id) k(e, s, id)
                where u.every > k.e or (u.every = k.e and (u.most > k.s * (1 + 1e-12)
                    or (u.most >= k.s * (1 - 1e-12) and u.doc_id <= k.id))))
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

        execute 'select coalesce(array_agg(row(h.*)::search.bm25_hit), ''{}'') from (' || verify || ') h'
            into scored using chosen_doc, chosen_part, weight, average;
        hits := hits || scored;
        v_doc := v_doc || chosen_doc;
        v_part := v_part || chosen_part;
        select * into k_every, k_score, k_id, filled, per_round
        from search.bm25_tops(hits, cap, kbs, per_round, cardinality(v_doc));
    end loop;

    return query
    select r.kind, r.target_id, r.item_id, r.kb_id, r.ref, r.every, r.score
    from search.bm25_ranked(hits) r where r.rank <= cap;
end $$;

-- Common words no longer score the shortest matching documents: their length indexes
-- (migration 0007) only cost writes and space now.
drop index kb.nodes_length;
drop index search.file_chunks_length;
drop index kb.pages_length;
drop index kb.mail_length;
