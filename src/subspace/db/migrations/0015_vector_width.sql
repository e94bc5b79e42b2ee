-- Each embedding model's HNSW index at the model's own width. Vectors stay halfvec(1536),
-- zero-padded past the model's width, so the cosine of the first d numbers is the cosine of
-- the whole vector: an index on subvector(vec, 1, d) walks d numbers instead of 1,536 and
-- finds the same neighbours. One partial index per model, since models differ in width.

-- The models whose vectors are indexed, with their width. A row means the model's index is
-- managed: a writer that finds its model here never builds the index itself, so a bulk load
-- (reindex, evaluation) can drop it, write, and build it once at the end. It describes
-- indexes, which every workspace shares, so it sits beside schema_migrations in public
-- rather than among the kb and search tables, which are all keyed by workspace.
create table public.vector_models (
    model      text primary key,
    dimensions integer not null check (dimensions between 1 and 1536)
);

-- A stable identifier for any model name (names hold ':' and '/', and may be long).
create function search.vector_index_name(model text) returns text
language sql immutable strict parallel safe
return 'embeddings_vec_' || left(md5(model), 16);

-- Build a registered model's index when it is missing; true when it was built.
create function search.build_vector_index(p_model text) returns boolean
language plpgsql as $$
declare
    width integer;
    name text := search.vector_index_name(p_model);
begin
    select dimensions into width from public.vector_models where model = p_model;
    if width is null or to_regclass(format('search.%I', name)) is not null then
        return false;
    end if;
    execute format(
        'create index %I on search.embeddings using hnsw '
        '((subvector(vec, 1, %s)::halfvec(%s)) halfvec_cosine_ops) where model = %L',
        name, width, width, p_model);
    return true;
end $$;

-- Build every registered model's missing index; the number built.
create function search.build_vector_indexes() returns integer
language sql as $$
    select count(*)::integer from public.vector_models m where search.build_vector_index(m.model)
$$;

-- Drop a model's index, keeping it registered (so writers leave it to whoever dropped it).
create function search.drop_vector_index(p_model text) returns boolean
language plpgsql as $$
begin
    if to_regclass(format('search.%I', search.vector_index_name(p_model))) is null then
        return false;
    end if;
    execute format('drop index search.%I', search.vector_index_name(p_model));
    return true;
end $$;

-- Register a model at its width; the first registration builds its (still nearly empty)
-- index. Concurrent first writers of one model queue on the primary key, so one builds. A
-- wider width than registered (a width inferred below from vectors whose last numbers
-- happened to be zero) replaces it, rebuilding the index if it existed: zero padding makes
-- the wider prefix's cosine the same. A narrower one is refused: it would not find the index.
create function search.register_vector_model(p_model text, p_dimensions integer)
returns boolean
language plpgsql as $$
declare
    known integer;
begin
    select dimensions into known from public.vector_models where model = p_model;
    if known is null then
        insert into public.vector_models (model, dimensions) values (p_model, p_dimensions)
        on conflict (model) do nothing;
        if found then
            perform search.build_vector_index(p_model);
            return true;
        end if;
        select dimensions into known from public.vector_models where model = p_model;
    end if;
    if known < p_dimensions then
        update public.vector_models set dimensions = p_dimensions
        where model = p_model and dimensions < p_dimensions;
        if found and search.drop_vector_index(p_model) then
            perform search.build_vector_index(p_model);
        end if;
        return found;
    end if;
    if known > p_dimensions then
        raise exception 'model % is registered with % dimensions, got %',
            p_model, known, p_dimensions;
    end if;
    return false;
end $$;

-- The full-width index of migration 0001 gives way to the per-model ones.
drop index if exists search.embeddings_vec;

-- Models already stored: their width is read from their vectors, the last non-zero position
-- among a thousand of them (padding is exact zeros; a dense model fills its last number in
-- every vector, and a sparse one that comes out short is widened by its next write), and
-- their index is built here, once, before anything is served.
insert into public.vector_models (model, dimensions)
select m.model, (
    select max(u.i)
    from (select e.vec from search.embeddings e where e.model = m.model limit 1000) s,
        unnest(s.vec::vector::real[]) with ordinality as u(x, i)
    where u.x <> 0
)
from (select distinct model from search.embeddings) m;

select search.build_vector_indexes();
