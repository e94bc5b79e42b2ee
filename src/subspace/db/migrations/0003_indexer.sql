-- The embeddings indexer: file text in chunks with their own tsvector, embeddings tied to the
-- item they came from, and outbox events that are consumed, retried and set aside.

create table search.file_chunks (
    workspace_id uuid not null,
    file_id      uuid not null,
    n            integer not null,
    text         text not null,
    text_tsv     tsvector generated always as (to_tsvector('english', left(text, 100000))) stored,
    -- one chunk can be hidden from search on its own
    enabled      boolean not null default true,
    primary key (workspace_id, file_id, n),
    foreign key (workspace_id, file_id) references kb.files (workspace_id, id) on delete cascade
);
create index file_chunks_text_tsv on search.file_chunks using gin (text_tsv);

-- Nothing wrote embeddings before this migration, so the new columns need no backfill.
alter table search.embeddings
    add column item_id uuid not null,
    add column source_at timestamptz not null;
create index embeddings_item on search.embeddings (workspace_id, model, item_id);
create index embeddings_text_hash on search.embeddings (workspace_id, model, text_hash);

alter table kb.outbox
    add column indexed_at timestamptz,
    add column attempts integer not null default 0,
    add column retry_at timestamptz,
    add column last_error text;
-- Events written before the indexer existed are history: it starts at the head of the
-- outbox, and the sweep (or `subspace reindex`) covers what came before.
update kb.outbox set indexed_at = now();
create index outbox_pending on kb.outbox (id) where indexed_at is null;

create table search.dead_letters (
    workspace_id uuid not null,
    event_id     bigint not null,
    event        text not null,
    payload      jsonb not null,
    error        text not null,
    attempts     integer not null,
    failed_at    timestamptz not null default now(),
    primary key (workspace_id, event_id)
);
