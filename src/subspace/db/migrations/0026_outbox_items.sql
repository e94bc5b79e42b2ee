-- The outbox names the item each event changes, and which of its rows when it changed only
-- some, as append_event writes them from the event's declaration (subspace/outbox): no
-- follower maps event names to items again. Older events are named here, once, by the
-- prefixes the followers matched before.
alter table kb.outbox
    add column item_kind text,
    add column item_id uuid,
    add column item_rows uuid[];

update kb.outbox set
    item_kind = case
        when event like 'page.%' or event like 'nodes.%' then 'page'
        when event like 'file.%' then 'file'
        when event like 'mail.%' then 'mail'
    end;
update kb.outbox set item_id = (payload->>(item_kind || '_id'))::uuid where item_kind is not null;
update kb.outbox set item_kind = null where item_id is null;
update kb.outbox set item_rows = array(
        select jsonb_array_elements_text(
            coalesce(payload->'node_ids', payload->'deleted_node_ids'))::uuid)
    where event like 'nodes.%'
    and jsonb_typeof(coalesce(payload->'node_ids', payload->'deleted_node_ids')) = 'array';

-- Where each follower that keeps its position in Postgres stands: a snapshot, after which
-- the outbox holds what it has not read (subspace/outbox/reading.py). The lexical index
-- keeps its own in its folder, written with the index it describes. One row per follower
-- for the whole database, so it lives beside the migrations, like database_identity.
create table public.follower_positions (
    follower   text primary key,
    position   pg_snapshot not null,
    moved_at   timestamptz not null default now()
);

-- The items waiting for their embeddings: the embeddings follower moves what the events
-- after its position changed in here, and removes an item once its embeddings commit,
-- unless an event newer than the one it read has come in meanwhile. Debounce, retries and
-- their backoff are kept per item, as the follower works per item.
create table search.embedding_queue (
    workspace_id uuid not null,
    item_kind    text not null,
    item_id      uuid not null,
    events       integer not null,     -- events about it not yet embedded
    last_event   bigint not null,      -- the newest of them
    first_at     timestamptz not null, -- when the oldest was written
    last_at      timestamptz not null, -- when the newest was written
    attempts     integer not null default 0,
    retry_at     timestamptz,
    last_error   text,
    primary key (workspace_id, item_kind, item_id)
);

insert into search.embedding_queue
    (workspace_id, item_kind, item_id, events, last_event, first_at, last_at, attempts,
     retry_at, last_error)
select workspace_id, item_kind, item_id, count(*), max(id), min(created_at), max(created_at),
    max(attempts), max(retry_at), max(last_error)
from kb.outbox where indexed_at is null and item_id is not null
group by workspace_id, item_kind, item_id;
insert into public.follower_positions (follower, position)
values ('embeddings', pg_current_snapshot());

-- Set aside per item, as it failed.
alter table search.dead_letters rename to dead_letters_by_event;
create table search.dead_letters (
    workspace_id uuid not null,
    item_kind    text not null,
    item_id      uuid not null,
    events       integer not null,
    error        text not null,
    attempts     integer not null,
    failed_at    timestamptz not null default now(),
    primary key (workspace_id, item_kind, item_id)
);
insert into search.dead_letters (workspace_id, item_kind, item_id, events, error, attempts,
                                 failed_at)
select d.workspace_id, o.item_kind, o.item_id, count(*), max(d.error), max(d.attempts),
    max(d.failed_at)
from search.dead_letters_by_event d
join kb.outbox o on o.workspace_id = d.workspace_id and o.id = d.event_id
where o.item_id is not null
group by d.workspace_id, o.item_kind, o.item_id;
drop table search.dead_letters_by_event;

drop index kb.outbox_pending;
alter table kb.outbox
    drop column indexed_at,
    drop column attempts,
    drop column retry_at,
    drop column last_error;
