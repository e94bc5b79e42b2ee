-- A page's version counts the writes to the page and its bullets. Every page or node command
-- adds one in its own transaction, so a client that sends the version it last read
-- (`base_version`) learns when another window changed the page in between.
alter table kb.pages add column version bigint not null default 0;
