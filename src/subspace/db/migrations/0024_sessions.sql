-- Signing in to the web app: a one-time code (printed by `subspace serve` and `subspace
-- signin`) or an API key pasted into the sign-in page becomes a session, whose own token is
-- the browser's cookie; the key itself never is. Only hashes are stored. A session ends when
-- its user signs out, when it is ended from the CLI or the API, when it goes unused past its
-- expiry, and when the key it was signed in with is revoked.
create table kb.signin_codes (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    user_id      uuid not null,
    code_hash    text not null,
    created_at   timestamptz not null default now(),
    expires_at   timestamptz not null,
    used_at      timestamptz,
    primary key (workspace_id, id),
    unique (workspace_id, code_hash),
    foreign key (workspace_id, user_id) references kb.users (workspace_id, id) on delete cascade
);

create table kb.sessions (
    workspace_id uuid not null,
    id           uuid not null default gen_random_uuid(),
    user_id      uuid not null,
    key_id       uuid,  -- the API key it was signed in with; null for a sign-in code
    token_hash   text not null,
    user_agent   text not null default '',
    created_at   timestamptz not null default now(),
    last_used_at timestamptz not null default now(),
    expires_at   timestamptz not null,  -- moved on as it is used
    ended_at     timestamptz,
    primary key (workspace_id, id),
    unique (workspace_id, token_hash),
    foreign key (workspace_id, user_id) references kb.users (workspace_id, id) on delete cascade,
    foreign key (workspace_id, key_id) references kb.api_keys (workspace_id, id) on delete cascade
);
