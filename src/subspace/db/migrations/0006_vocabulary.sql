-- Typo tolerance looks words up by prefix across sources.
create index term_stats_prefix on search.term_stats (workspace_id, lexeme text_pattern_ops);
