"""The embeddings indexer: chunking, the outbox consumer, embedding writes, reindex."""
