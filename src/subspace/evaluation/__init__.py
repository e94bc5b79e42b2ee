"""`subspace eval`: retrieval quality on a BEIR-layout collection, beside reference systems."""
