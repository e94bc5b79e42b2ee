-- For a query of common words BM25 scores only the shortest matching documents; these let
-- Postgres walk a workspace's documents from the shortest up and stop once it has enough,
-- instead of reading every match of a word found in a third of them.
create index nodes_length on kb.nodes (workspace_id, text_len, id);
create index file_chunks_length on search.file_chunks (workspace_id, text_len, file_id);
create index pages_length on kb.pages (workspace_id, title_len, id);
create index mail_length on kb.mail (workspace_id, mail_len, id);
