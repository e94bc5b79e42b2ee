"""Embedding (and later chat) providers behind one protocol, chosen by PROVIDERS."""
