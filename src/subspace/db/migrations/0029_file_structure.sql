-- A file's chunks know where they sit in their document: the headings above where each starts
-- (shown as the passage's breadcrumb) and, in a PDF, its page. Extraction fills them; chunks
-- stored before have none until their file is extracted again.
alter table search.file_chunks
    add column headings text[] not null default '{}',
    add column page integer;

-- What a file is called wherever it is listed or found: its own title once extraction found
-- one (0028), else its name.
alter table kb.files
    add column label text generated always as (coalesce(nullif(title, ''), name)) stored;
