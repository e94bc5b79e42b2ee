"""The embeddings: chunking, the follower that keeps them current from the outbox and its
queue, embedding writes, the sweep, reindex."""
