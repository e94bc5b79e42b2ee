-- An imported page or file is known by where it came from, as well as by its bytes: its path
-- relative to the parent of the folder imported (so it starts with that folder's name), within
-- its knowledge base. Importing again finds the item at its path and updates it in place; an
-- API upload's path is its file name. Archived and deleted items keep their path, so importing
-- again never makes a second copy of what someone put away.
alter table kb.pages add column source_path text;
alter table kb.files add column source_path text;
create unique index pages_source_path on kb.pages (workspace_id, kb_id, source_path)
    where source_path is not null;
create unique index files_source_path on kb.files (workspace_id, kb_id, source_path)
    where source_path is not null;

-- A document's own title (HTML <title>, PDF metadata, a first heading), set by extraction;
-- null shows the file's name.
alter table kb.files add column title text;
