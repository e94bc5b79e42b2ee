-- The vector leg counts and scans one knowledge base's embeddings under one model.
create index embeddings_scope on search.embeddings (workspace_id, model, kb_id, kind);
