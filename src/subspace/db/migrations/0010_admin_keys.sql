-- An admin key is an operator's: besides acting in its own workspace, it may create
-- workspaces and keys for them over /api/admin. Existing keys stay ordinary.
alter table kb.api_keys add column admin boolean not null default false;
