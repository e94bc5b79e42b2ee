"""Subspace: self-hosted hybrid search over pages, files and mail."""

__version__ = "0.1.0"
