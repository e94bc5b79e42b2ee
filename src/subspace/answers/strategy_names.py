"""The answering strategies' names, declared once: the strategies take theirs from here, and the
API, the command line and the run queue list these. A light module, so the command line can
offer the names without importing the strategies."""

from __future__ import annotations

RAG = "rag"  # an agent loop over the read tools
PAGEINDEX = "rag-pageindex"  # pages chosen from their titles and outlines
DIRECT = "rag-direct"  # one hybrid search, then the answer

NAMES = (RAG, PAGEINDEX, DIRECT)
