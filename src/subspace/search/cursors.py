"""Paging cursors: signed with the workspace's key, and bounded before they are inflated; the
search's cursor step (what earlier pages served, and the cursor for the next page).

A cursor is base64url(mac || zlib(json)), the mac a truncated HMAC-SHA256 of the compressed
bytes under the workspace's `cursor_secret`. The key lives in the database, so every server of
one database accepts what any of them issued. The mac is checked before anything is inflated,
and inflating stops at a fixed size, so a forged or oversized cursor costs a hash and no more.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.errors import InvalidCursor
from subspace.search import registry
from subspace.search.fusion import TargetKey

if TYPE_CHECKING:
    from subspace.search.request import SearchRequest

MAC_BYTES = 16  # 128 bits of HMAC-SHA256: forging one is as hard as guessing the key
# A cursor lists every target its pages served, so it grows with the depth paged: ten pages at
# the largest default limit (100), a hundred at the usual 10, and as many as one leg draws
# per knowledge base at MAX_WINDOW. Past that the query wants narrowing, not another page. A target
# is 36 bytes of JSON ('"n<32 hex>",'): 1,000 of them inflate to 36,036 bytes and encode to
# 26,524 characters (measured), so anything beyond the caps below was not issued here.
MAX_CURSOR_TARGETS = 1_000
MAX_CURSOR_INFLATED_BYTES = 40 * 1024
MAX_CURSOR_CHARS = 48 * 1024
_TARGET_KEY = re.compile(r"[a-z][0-9a-f]{32}")


def workspace_secret(conn: Conn, workspace_id: UUID) -> bytes:
    """The key that signs the workspace's cursors (made by migration 0008)."""
    return queue_workspace_secret(conn, workspace_id).result()


def queue_workspace_secret(conn: Conn, workspace_id: UUID) -> Later[bytes]:
    """`workspace_secret`, its statement queued."""
    return prepared(
        conn,
        "select cursor_secret from kb.workspaces where workspace_id = %s",
        (workspace_id,),
        _secret,
    )


def _secret(rows: list[dict[str, Any]]) -> bytes:
    if not rows:
        raise InvalidCursor("The cursor belongs to no workspace. Start again without it.")
    return bytes(rows[0]["cursor_secret"])


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


# -- the search's cursor step ------------------------------------------------------------------


@dataclass(frozen=True)
class Paging:
    """Where a search stands among its pages: the targets earlier pages served (as cursor
    keys), and the workspace's key once it has been read."""

    workspace_id: UUID
    served: frozenset[str]
    secret: bytes | None

    def depth(self, limit: int) -> int:
        """How many rows this page reaches down to."""
        return len(self.served) + limit


@dataclass(frozen=True)
class NextPage:
    """The cursor for the page after this one (None on the last), and why there is none when
    the results go deeper than a cursor may."""

    cursor: str | None
    notes: tuple[str, ...] = ()


def cursor_key(target: TargetKey) -> str:
    """How a cursor lists a target: its kind's declared letter (KindSpec.cursor_key) and its
    id, e.g. "n<32 hex>" for a node."""
    return f"{registry.get(target[0]).cursor_letter}{target[1].hex}"


def fingerprint(request: SearchRequest) -> str:
    """What a cursor is bound to: the query and every option that changes the results (not
    the limit, so pages may differ in size)."""
    shape = json.dumps(
        [
            request.query,
            sorted(map(str, request.kb_ids or [])),
            sorted(request.kinds or []),
            [dataclasses.asdict(t) for t in request.tags or []],
            request.mode,
            request.weights,
            request.ranker,
            request.typos,
            request.group_by_page,
        ],
        default=str,
        sort_keys=True,
    )
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def read_cursor(
    conn: Conn, workspace_id: UUID, request: SearchRequest, *, secret: bytes | None = None
) -> Paging:
    """The targets earlier pages of the same query served; none without a cursor.
    InvalidCursor (400) for a cursor of any other shape, or one this workspace did not sign.

    Without the workspace's `secret`, it is read only when a cursor comes in (here) or a next
    one goes out.
    """
    if not request.cursor:
        return Paging(workspace_id, frozenset(), secret)
    if secret is None:
        secret = workspace_secret(conn, workspace_id)
    payload = unseal(
        secret,
        request.cursor,
        what="cursor",
        max_chars=MAX_CURSOR_CHARS,
        max_inflated=MAX_CURSOR_INFLATED_BYTES,
    )
    served = payload.get("s") if isinstance(payload, dict) else None
    if (
        not isinstance(served, list)
        or len(served) > MAX_CURSOR_TARGETS
        or not all(isinstance(k, str) and _TARGET_KEY.fullmatch(k) for k in served)
        or not isinstance(payload.get("q"), str)
    ):
        raise InvalidCursor("The cursor is not valid. Start again without a cursor.")
    if payload["q"] != fingerprint(request):
        raise InvalidCursor(
            "The cursor belongs to another query or other filters. Start again without it."
        )
    return Paging(workspace_id, frozenset(served), secret)


def next_cursor(
    conn: Conn,
    request: SearchRequest,
    paging: Paging,
    shown: Sequence[TargetKey],
    *,
    more: bool,
) -> NextPage:
    """The cursor past the targets `shown` on this page, when `more` rows remain; none, with a
    note saying why, once the pages served would outgrow MAX_CURSOR_TARGETS."""
    if not more:
        return NextPage(None)
    served = paging.served | {cursor_key(target) for target in shown}
    if len(served) + request.limit > MAX_CURSOR_TARGETS:
        return NextPage(
            None,
            (
                f"Results are paged up to {MAX_CURSOR_TARGETS:,}; narrow the query or "
                "add filters to see what lies deeper.",
            ),
        )
    secret = paging.secret or workspace_secret(conn, paging.workspace_id)
    return NextPage(seal(secret, {"v": 2, "q": fingerprint(request), "s": sorted(served)}))
