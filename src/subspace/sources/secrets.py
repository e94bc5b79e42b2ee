"""Mailbox passwords kept encrypted at rest, with a key only the environment holds.

The key is a Fernet key (AES-128-CBC with an HMAC-SHA256 over it) in SUBSPACE_SOURCES_KEY:
a database backup alone never gives away anyone's mailbox. A missing key, or one other than
the key a password was sealed with, pauses the source with a reason that says which.
"""

from __future__ import annotations

import binascii

from cryptography.fernet import Fernet, InvalidToken

from subspace.config import Settings
from subspace.errors import InvalidInput

MAKE_KEY = "make one with `subspace sources key` and set it in the server's environment"


class KeyProblem(Exception):
    """The password cannot be read: `reason` says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def new_key() -> str:
    """A fresh key for SUBSPACE_SOURCES_KEY."""
    return Fernet.generate_key().decode()


def _fernet(settings: Settings) -> Fernet:
    if not settings.sources_key:
        raise KeyProblem(f"SUBSPACE_SOURCES_KEY is not set: {MAKE_KEY}.")
    try:
        return Fernet(settings.sources_key.encode())
    except (ValueError, binascii.Error):
        raise KeyProblem(
            "SUBSPACE_SOURCES_KEY is not a key `subspace sources key` makes (32 bytes in "
            "URL-safe base64, 44 characters)."
        ) from None


def seal_password(settings: Settings, password: str) -> bytes:
    """`password` encrypted with the environment's key; InvalidInput when there is none."""
    try:
        return _fernet(settings).encrypt(password.encode())
    except KeyProblem as exc:
        raise InvalidInput(f"A mailbox password cannot be kept: {exc.reason}") from None


def unseal_password(settings: Settings, sealed: bytes) -> str:
    """The password `seal_password` encrypted; KeyProblem when the key is missing or another."""
    try:
        return _fernet(settings).decrypt(sealed).decode()
    except InvalidToken:
        raise KeyProblem(
            "the password was kept with another SUBSPACE_SOURCES_KEY: set the key it was kept "
            "with, or give the password again (`subspace sources password NAME`)."
        ) from None
