-- Sources Subspace keeps in sync (sources/): a watched folder or an IMAP mailbox, each feeding
-- one knowledge base and acting as the user who added it. `config` holds what is not secret
-- (the folder and its patterns; the server, port, TLS mode, user name and folders followed);
-- `secret` holds an IMAP password or app token encrypted with SUBSPACE_SOURCES_KEY
-- (sources/secrets.py) and is never returned by any read.
create table kb.sources (
    workspace_id  uuid not null,
    id            uuid not null default gen_random_uuid(),
    kb_id         uuid not null,
    user_id       uuid not null,
    kind          text not null,
    name          text not null,
    config        jsonb not null,
    secret        bytea,
    -- waiting (never synced), ok, failed (retried with a back-off), paused (needs a person)
    status        text not null default 'waiting',
    status_reason text,
    -- an IMAP source's place in each folder: {"INBOX": {"uidvalidity": 7, "last_uid": 120}}
    cursor        jsonb not null default '{}'::jsonb,
    last_sync_at  timestamptz,
    last_counts   jsonb not null default '{}'::jsonb,
    failures      integer not null default 0,
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now(),
    primary key (workspace_id, id),
    unique (workspace_id, name),
    foreign key (workspace_id, kb_id) references kb.knowledge_bases (workspace_id, id),
    check (kind in ('folder', 'imap')),
    check (status in ('waiting', 'ok', 'failed', 'paused')),
    check (jsonb_typeof(config) = 'object'),
    check (jsonb_typeof(cursor) = 'object')
);

-- What a source brought in: one row per file (`key`: its path from the folder's parent, as
-- `subspace import` names it) or per message of a mail folder ("INBOX:<uidvalidity>:<uid>";
-- a message in two followed folders is one mail with two rows). A file's size and mtime let
-- a round skip reading what has not changed; `error` is why the item failed, if it did;
-- `archived` marks an item the sync archived because its file went, restored if it returns.
create table kb.source_items (
    workspace_id uuid not null,
    source_id    uuid not null,
    key          text not null,
    item_kind    text,
    item_id      uuid,
    size         bigint,
    mtime_ns     bigint,
    error        text,
    archived     boolean not null default false,
    synced_at    timestamptz not null default now(),
    primary key (workspace_id, source_id, key),
    foreign key (workspace_id, source_id) references kb.sources (workspace_id, id)
        on delete cascade,
    check (item_kind in ('page', 'file', 'mail'))
);
create index source_items_item on kb.source_items (workspace_id, item_id)
    where item_id is not null;
