"""The lexical leg, in layers: the query as terms (terms.py), BM25 (bm25.py), the index and its
documents (index/, whose reader alone a search uses), the engine's query (engine_query.py),
the delta (delta.py), the SQL ranking of what the engine has not got (sql.py), collecting one
order (collector.py) and the leg itself (leg.py)."""
