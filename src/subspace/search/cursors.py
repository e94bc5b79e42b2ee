"""Paging cursors: signed with the workspace's key, and bounded before they are inflated.

A cursor is base64url(mac || zlib(json)), the mac a truncated HMAC-SHA256 of the compressed
bytes under the workspace's `cursor_secret`. The key lives in the database, so every server of
one database accepts what any of them issued. The mac is checked before anything is inflated,
and inflating stops at a fixed size, so a forged or oversized cursor costs a hash and no more.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import zlib
from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.errors import InvalidCursor

MAC_BYTES = 16  # 128 bits of HMAC-SHA256: forging one is as hard as guessing the key


def workspace_secret(conn: Conn, workspace_id: UUID) -> bytes:
    """The key that signs the workspace's cursors (made by migration 0008)."""
    row = conn.execute(
        "select cursor_secret from kb.workspaces where workspace_id = %s", (workspace_id,)
    ).fetchone()
    if row is None:
        raise InvalidCursor("The cursor belongs to no workspace. Start again without it.")
    return bytes(row["cursor_secret"])


def seal(secret: bytes, payload: dict[str, Any]) -> str:
    """The cursor for `payload` (JSON-serialisable), signed with `secret`."""
    body = zlib.compress(json.dumps(payload, separators=(",", ":")).encode())
    mac = hmac.new(secret, body, hashlib.sha256).digest()[:MAC_BYTES]
    return base64.urlsafe_b64encode(mac + body).decode().rstrip("=")


def unseal(secret: bytes, cursor: object, *, what: str, max_chars: int, max_inflated: int) -> Any:
    """The payload of a cursor `seal` made with `secret`, or InvalidCursor (a 400).

    `max_chars` bounds the cursor as sent, `max_inflated` the JSON it inflates to; anything
    larger is refused before it is decoded further.
    """
    invalid = f"The {what} is not valid. Start again without it."
    if not isinstance(cursor, str):
        raise InvalidCursor(f"The {what} must be text, as returned by the previous page.")
    if len(cursor) > max_chars:
        raise InvalidCursor(
            f"The {what} is {len(cursor):,} characters; a cursor this server issues is at "
            f"most {max_chars:,}. Start again without it."
        )
    try:
        raw = base64.b64decode(
            (cursor + "=" * (-len(cursor) % 4)).encode("ascii"), altchars=b"-_", validate=True
        )
    except (ValueError, binascii.Error):  # not ASCII (UnicodeEncodeError), or not base64
        raise InvalidCursor(invalid) from None
    mac, body = raw[:MAC_BYTES], raw[MAC_BYTES:]
    expected = hmac.new(secret, body, hashlib.sha256).digest()[:MAC_BYTES]
    if len(mac) != MAC_BYTES or not hmac.compare_digest(mac, expected):
        raise InvalidCursor(
            f"The {what} was not issued for this workspace or was altered. Start again without it."
        )
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(body, max_inflated + 1)
    except zlib.error:
        raise InvalidCursor(invalid) from None
    if len(text) > max_inflated or inflater.unconsumed_tail or not inflater.eof:
        raise InvalidCursor(invalid)
    try:
        # Callers check the shape of what comes back (NaN, 1e400 or NUL where a key belongs
        # fail there); this only has to survive what the parser itself chokes on.
        return json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        raise InvalidCursor(invalid) from None


def is_clean(text: object, max_chars: int) -> bool:
    """Whether `text` is a string the driver can take: short, no NUL, no lone surrogate."""
    return (
        isinstance(text, str)
        and len(text) <= max_chars
        and "\x00" not in text
        and not any("\ud800" <= c <= "\udfff" for c in text)
    )
