-- The extraction worker's queue, read per workspace: the waiting workspaces one after the other
-- and each one's oldest file (ingest/worker.py's claim). Ordered by creation time alone, a
-- claim sorted every waiting file, and a bulk upload's claims took a time that grew with the
-- square of its size.
drop index if exists kb.files_processing;
create index files_processing on kb.files (workspace_id, created_at, id)
    where status = 'processing';
