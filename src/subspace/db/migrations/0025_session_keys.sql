-- Revoking a key ends the sessions signed in with it: found by the key, not by a scan.
create index sessions_by_key on kb.sessions (workspace_id, key_id) where key_id is not null;
