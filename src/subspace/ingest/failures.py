"""The one way reading a document fails: a reason to show on the file or the import row."""

from __future__ import annotations


class ExtractionFailed(Exception):
    """The document's text cannot be extracted; `reason` is shown on the file."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
