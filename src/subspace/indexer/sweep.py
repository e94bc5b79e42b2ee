"""The sweep: find every item whose embeddings differ from what its text says they should be,
and queue it for the embeddings follower.

Heals whatever a crash, a lost event or a debounce cut short left behind, and a change of
model: under a new model every item lacks its vectors. Each query compares text hashes (or
timestamps, for mail) with search.embeddings under the active model.
"""

from __future__ import annotations

from subspace.db.pool import Conn

# Non-blank text, as chunking sees it (a blank node or title is not embedded).
_HAS_TEXT = r"~ '\S'"

_STALE = f"""
select p.workspace_id, 'page' as kind, p.id from kb.pages p
where p.deleted_at is null and (
    (p.title {_HAS_TEXT} and not exists (
        select 1 from search.embeddings e where e.workspace_id = p.workspace_id
        and e.model = %(model)s and e.ref = 'page:' || p.id and e.text_hash = md5(p.title)))
    or exists (
        select 1 from kb.nodes n where n.workspace_id = p.workspace_id and n.page_id = p.id
        and n.text {_HAS_TEXT} and not exists (
            select 1 from search.embeddings e where e.workspace_id = n.workspace_id
            and e.model = %(model)s and e.ref = 'node:' || n.id and e.text_hash = md5(n.text))))
union
select f.workspace_id, 'file', f.id from kb.files f
join search.file_chunks c on c.workspace_id = f.workspace_id and c.file_id = f.id
where f.deleted_at is null and f.status = 'ready' and c.text {_HAS_TEXT} and not exists (
    select 1 from search.embeddings e where e.workspace_id = c.workspace_id
    and e.model = %(model)s and e.ref = 'file:' || c.file_id || ':' || c.n
    and e.text_hash = md5(c.text))
union
select m.workspace_id, 'mail', m.id from kb.mail m
where m.deleted_at is null and (m.subject {_HAS_TEXT} or m.body_text {_HAS_TEXT}) and not exists (
    select 1 from search.embeddings e where e.workspace_id = m.workspace_id
    and e.model = %(model)s and e.ref = 'mail:' || m.id and e.source_at >= m.updated_at)
union
select e.workspace_id, case when e.kind in ('node', 'memory', 'page') then 'page' else e.kind end,
    e.item_id
from search.embeddings e
where e.model = %(model)s and (
    (e.kind in ('node', 'memory') and not exists (
        select 1 from kb.nodes n where n.workspace_id = e.workspace_id and n.id = e.target_id
        and n.text {_HAS_TEXT}))
    or (e.kind = 'page' and not exists (
        select 1 from kb.pages p where p.workspace_id = e.workspace_id and p.id = e.item_id
        and p.deleted_at is null and p.title {_HAS_TEXT}))
    or (e.kind = 'file' and not exists (
        select 1 from kb.files f join search.file_chunks c
        on c.workspace_id = f.workspace_id and c.file_id = f.id
        where f.workspace_id = e.workspace_id and f.id = e.item_id and f.deleted_at is null
        and e.ref = 'file:' || c.file_id || ':' || c.n))
    or (e.kind = 'mail' and not exists (
        select 1 from kb.mail m where m.workspace_id = e.workspace_id and m.id = e.item_id
        and m.deleted_at is null)))
order by 1, 2, 3
"""


SMALL_ITEM_TEXTS = 64  # an item of up to this many texts is healed before bigger ones

# The stale items join the queue ranked: small ones (a note, a mail) before big ones (a long
# page, a manual), the newest first within each, so what a user touched last searches by
# meaning soonest. An item already queued keeps its place.
_HEAL = f"""
with stale as ({_STALE}),
ranked as (
    select s.workspace_id, s.kind, s.id, case s.kind
        when 'page' then (select count(*) from kb.nodes n
            where n.workspace_id = s.workspace_id and n.page_id = s.id)
        when 'file' then (select count(*) from search.file_chunks c
            where c.workspace_id = s.workspace_id and c.file_id = s.id)
        else 1 end as texts,
    case s.kind
        when 'page' then (select updated_at from kb.pages p
            where p.workspace_id = s.workspace_id and p.id = s.id)
        when 'file' then (select updated_at from kb.files f
            where f.workspace_id = s.workspace_id and f.id = s.id)
        else (select updated_at from kb.mail m
            where m.workspace_id = s.workspace_id and m.id = s.id) end as changed_at
    from stale s)
insert into search.embedding_queue
    (workspace_id, item_kind, item_id, events, last_event, first_at, last_at, heal_rank)
select workspace_id, kind, id, 0, 0, now(), now(), row_number() over (
    order by texts > {SMALL_ITEM_TEXTS}, changed_at desc nulls last, id)
from ranked
on conflict (workspace_id, item_kind, item_id) do nothing
"""


def queue_stale(conn: Conn, model: str) -> int:
    """Queue every item with a missing, outdated or orphaned embedding under `model` that is
    not queued yet; return how many joined the queue."""
    return conn.execute(_HEAL, {"model": model}).rowcount


def drop_other_models(conn: Conn, model: str) -> int:
    """Delete the vectors of every model but `model`; return how many rows went. For when
    `model`'s vectors are complete: the old ones only cost space and writes then."""
    return conn.execute("delete from search.embeddings where model <> %s", (model,)).rowcount
