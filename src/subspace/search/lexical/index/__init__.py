"""The lexical index: its layout on disk (layout.py), the documents it holds as Postgres has
them (documents.py), the checks of its files (integrity.py), how a process reads it
(reader.py), writes it (writer.py) and follows the outbox into it (follower.py), and where
it stands (status.py). A search reads it through reader.py alone."""
