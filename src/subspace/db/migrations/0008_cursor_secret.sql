-- The key that signs a workspace's search and grep cursors (HMAC-SHA256). It lives with the
-- workspace, so every server of one database accepts the cursors any of them issued. Two
-- random uuids give 244 random bits from the server's strong random source; the default is
-- volatile, so each existing workspace gets its own.
alter table kb.workspaces add column cursor_secret bytea not null
    default decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');
