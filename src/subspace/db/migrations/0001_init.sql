-- The workspace's content (schema kb) and what is derived from it for retrieval (schema search).
-- Every table carries workspace_id and every key includes it, so the schema can be distributed
-- by workspace_id with each search staying on one shard.

create extension if not exists vector;
create schema if not exists kb;
create schema if not exists search;

create table kb.workspaces (
    workspace_id   uuid primary key default gen_random_uuid(),
    name           text not null,
    -- set when `subspace serve` first prepared the workspace (demo pages, sign-in key)
    initialized_at timestamptz,
    created_at     timestamptz not null default now()
);

create table kb.users (
    workspace_id uuid not null references kb.workspaces (workspace_id),
    id           uuid not null default gen_random_uuid(),
    name         text not null,
    created_at   timestamptz not null default now(),
    primary key (workspace_id, id)
);

create table kb.api_keys (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    user_id      uuid not null,
    name         text not null default '',
    key_prefix   text not null,
    key_hash     text not null,
    created_at   timestamptz not null default now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    primary key (workspace_id, id),
    unique (workspace_id, key_hash),
    foreign key (workspace_id, user_id) references kb.users (workspace_id, id)
);

create table kb.knowledge_bases (
    workspace_id uuid not null references kb.workspaces (workspace_id),
    id           uuid not null default gen_random_uuid(),
    name         text not null,
    is_default   boolean not null default false,
    created_at   timestamptz not null default now(),
    primary key (workspace_id, id),
    unique (workspace_id, name)
);
create unique index knowledge_bases_one_default
    on kb.knowledge_bases (workspace_id) where is_default;

-- Text fed to a generated tsvector is capped at 100,000 characters: a tsvector holds at most
-- 1 MB and costs at most ~6 bytes per input character, so no write can fail with
-- "string is too long for tsvector" however long the text is.
create table kb.pages (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    kb_id        uuid not null,
    title        text not null default '',
    title_tsv    tsvector generated always as (to_tsvector('english', left(title, 100000))) stored,
    archived_at  timestamptz,
    deleted_at   timestamptz,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),
    primary key (workspace_id, id),
    foreign key (workspace_id, kb_id) references kb.knowledge_bases (workspace_id, id)
);
create index pages_kb on kb.pages (workspace_id, kb_id);
create index pages_title_tsv on kb.pages using gin (title_tsv);

create table kb.nodes (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    page_id      uuid not null,
    parent_id    uuid,
    position     integer not null,
    text         text not null default '',
    text_tsv     tsvector generated always as (to_tsvector('english', left(text, 100000))) stored,
    props        jsonb not null default '{}'::jsonb,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),
    primary key (workspace_id, id),
    foreign key (workspace_id, page_id) references kb.pages (workspace_id, id) on delete cascade,
    foreign key (workspace_id, parent_id) references kb.nodes (workspace_id, id) on delete cascade,
    check (position >= 0),
    check (jsonb_typeof(props) = 'object')
);
create index nodes_children on kb.nodes (workspace_id, page_id, parent_id, position);
create index nodes_text_tsv on kb.nodes using gin (text_tsv);

-- Content-addressed blobs, stored in Postgres so one backup holds everything.
create table kb.blobs (
    workspace_id uuid not null references kb.workspaces (workspace_id),
    sha256       text not null,
    size         bigint not null,
    data         bytea not null,
    created_at   timestamptz not null default now(),
    primary key (workspace_id, sha256),
    check (octet_length(data) = size)
);

create table kb.mail (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    kb_id        uuid not null,
    message_id   text not null,
    subject      text not null default '',
    sender       text not null default '',
    recipients   text not null default '',
    sent_at      timestamptz,
    snippet      text not null default '',
    body_text    text not null default '',
    raw_sha256   text not null,
    mail_tsv     tsvector generated always as (
        setweight(to_tsvector('english', left(subject, 2000)), 'A')
        || setweight(to_tsvector('english', left(sender, 2000)), 'B')
        || to_tsvector('english', left(body_text, 96000))
    ) stored,
    archived_at  timestamptz,
    deleted_at   timestamptz,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),
    primary key (workspace_id, id),
    unique (workspace_id, message_id),
    foreign key (workspace_id, kb_id) references kb.knowledge_bases (workspace_id, id),
    foreign key (workspace_id, raw_sha256) references kb.blobs (workspace_id, sha256)
);
create index mail_kb on kb.mail (workspace_id, kb_id);
create index mail_tsv on kb.mail using gin (mail_tsv);

create table kb.files (
    workspace_id  uuid not null,
    id            uuid not null default gen_random_uuid(),
    kb_id         uuid not null,
    name          text not null,
    content_type  text not null default 'application/octet-stream',
    blob_sha256   text not null,
    size          bigint not null,
    status        text not null default 'processing',
    status_reason text,
    enabled       boolean not null default true,
    -- set when the file arrived as an attachment of a mail
    mail_id       uuid,
    archived_at   timestamptz,
    deleted_at    timestamptz,
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now(),
    primary key (workspace_id, id),
    foreign key (workspace_id, kb_id) references kb.knowledge_bases (workspace_id, id),
    foreign key (workspace_id, blob_sha256) references kb.blobs (workspace_id, sha256),
    foreign key (workspace_id, mail_id) references kb.mail (workspace_id, id),
    check (status in ('processing', 'ready', 'failed')),
    check ((status = 'failed') = (status_reason is not null))
);
create index files_kb on kb.files (workspace_id, kb_id);

create table search.file_text (
    workspace_id uuid not null,
    file_id      uuid not null,
    text         text not null,
    truncated    boolean not null default false,
    extracted_at timestamptz not null default now(),
    primary key (workspace_id, file_id),
    foreign key (workspace_id, file_id) references kb.files (workspace_id, id) on delete cascade
);

create table kb.tag_definitions (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    kb_id        uuid not null,
    name         text not null,
    type         text not null,
    created_at   timestamptz not null default now(),
    primary key (workspace_id, id),
    unique (workspace_id, kb_id, name),
    foreign key (workspace_id, kb_id) references kb.knowledge_bases (workspace_id, id),
    check (type in ('text', 'number', 'date', 'boolean'))
);

-- One typed value per (tag, target); exactly the column of the tag's type is set.
create table kb.tag_values (
    workspace_id uuid not null,
    tag_id       uuid not null,
    target_kind  text not null,
    target_id    uuid not null,
    value_text   text,
    value_number double precision,
    value_date   date,
    value_bool   boolean,
    primary key (workspace_id, tag_id, target_kind, target_id),
    foreign key (workspace_id, tag_id) references kb.tag_definitions (workspace_id, id)
        on delete cascade,
    check (target_kind in ('page', 'file', 'mail')),
    check (num_nonnulls(value_text, value_number, value_date, value_bool) = 1)
);
create index tag_values_target on kb.tag_values (workspace_id, target_kind, target_id);

-- Items a user chose to hide from their own searches.
create table kb.exclusions (
    workspace_id uuid not null,
    user_id      uuid not null,
    target_kind  text not null,
    target_id    uuid not null,
    created_at   timestamptz not null default now(),
    primary key (workspace_id, user_id, target_kind, target_id),
    foreign key (workspace_id, user_id) references kb.users (workspace_id, id),
    check (target_kind in ('page', 'file', 'mail'))
);

create table search.embeddings (
    workspace_id uuid not null,
    model        text not null,
    ref          text not null,
    kind         text not null,
    kb_id        uuid not null,
    target_id    uuid not null,
    text_hash    text not null,
    vec          halfvec(1536) not null,
    updated_at   timestamptz not null default now(),
    primary key (workspace_id, model, ref),
    check (kind in ('page', 'node', 'memory', 'file', 'mail'))
);
create index embeddings_vec on search.embeddings using hnsw (vec halfvec_cosine_ops);
create index embeddings_target on search.embeddings (workspace_id, target_id);

-- Every kb-command appends one event here in the same transaction as its rows.
create table kb.outbox (
    workspace_id uuid not null,
    id           bigint generated always as identity,
    event        text not null,
    payload      jsonb not null,
    created_at   timestamptz not null default now(),
    primary key (workspace_id, id)
);
create index outbox_id on kb.outbox (id);

-- The first migration of an empty database creates the default workspace, its owner and
-- its default knowledge base.
with ws as (
    insert into kb.workspaces (name) values ('Default') returning workspace_id
), owner as (
    insert into kb.users (workspace_id, name) select workspace_id, 'owner' from ws
)
insert into kb.knowledge_bases (workspace_id, name, is_default)
select workspace_id, 'Default', true from ws;
