-- Items queued because their vectors under the active model are missing or stale (a new
-- model, a crash), not because an event changed them: ranked newest and smallest first, and
-- taken after the items someone changed. An event about such an item clears its rank.
alter table search.embedding_queue add column heal_rank integer;
