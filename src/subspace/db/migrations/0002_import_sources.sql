-- Re-importing a folder must change nothing: pages remember the hash of the file they came
-- from, and files are found by their blob.
alter table kb.pages add column source_sha256 text;
create index pages_source on kb.pages (workspace_id, kb_id, source_sha256)
    where source_sha256 is not null;
create index files_blob on kb.files (workspace_id, kb_id, blob_sha256);
create index files_processing on kb.files (created_at) where status = 'processing';
