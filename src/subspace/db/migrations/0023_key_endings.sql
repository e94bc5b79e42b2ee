-- The last characters of each key's token: its prefix is the workspace's, the same for every key
-- of a workspace, so `keys list` showed nothing that tells one token from another. Keys made
-- before this have no ending recorded.
alter table kb.api_keys add column key_ending text not null default '';
