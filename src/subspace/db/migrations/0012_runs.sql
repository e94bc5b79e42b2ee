-- Answer runs: a question asked with /rag, /rag-pageindex or /rag-direct, answered as child
-- bullets of the bullet that asked it (node_id), and every step the run took. Steps are the
-- stream: any process executing the run writes them, any server streams them.
create table kb.runs (
    workspace_id     uuid not null,
    id               uuid not null default gen_random_uuid(),
    user_id          uuid not null,
    page_id          uuid not null,
    node_id          uuid not null,
    strategy         text not null,
    question         text not null,
    status           text not null default 'queued'
        check (status in ('queued', 'running', 'done', 'failed', 'cancelled')),
    found            boolean,
    error            text,
    cancel_requested boolean not null default false,
    created_at       timestamptz not null default now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    primary key (workspace_id, id),
    foreign key (workspace_id, user_id) references kb.users (workspace_id, id)
);
-- The workers' queue and the sweep for runs whose process died.
create index runs_open on kb.runs (created_at) where status in ('queued', 'running');
-- The bullets that ask: not sources for an answer (answers/sources.py).
create index runs_node on kb.runs (workspace_id, node_id);

create table kb.run_steps (
    workspace_id uuid not null,
    run_id       uuid not null,
    seq          integer not null,
    kind         text not null check (kind in ('tool', 'bullet', 'status', 'error')),
    summary      text not null default '',
    data         jsonb not null default '{}'::jsonb,
    at           timestamptz not null default now(),
    primary key (workspace_id, run_id, seq),
    foreign key (workspace_id, run_id) references kb.runs (workspace_id, id) on delete cascade
);
