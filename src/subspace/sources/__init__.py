"""Sources Subspace keeps in sync: watched folders and IMAP mailboxes (model.py: the rows;
folder.py and imap.py: one round of each; runner.py: the loops in the background work)."""
