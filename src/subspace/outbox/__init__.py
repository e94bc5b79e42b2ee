"""The outbox: every write's event, appended in the write's own transaction (append.py),
declared once with the item it changes (events.py), and read by the followers that keep
the indexes current from one statement over "the events after a position" (reading.py)."""
