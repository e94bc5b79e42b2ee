"""Answering questions from the workspace: chat providers, strategies and runs."""
