"""Agents: the tools they use to search and read, and (later) the /rag strategies."""
