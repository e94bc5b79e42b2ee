-- What a message quotes (a reply's "> …" lines, the original below it) and its signature are
-- kept apart from what it says (ingest/replies.py): body_text, which search reads, holds the
-- message's own words, and quoted_text the rest, shown folded with the message.
alter table kb.mail add column quoted_text text not null default '';
