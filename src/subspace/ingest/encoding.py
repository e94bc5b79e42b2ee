"""Text of unknown encoding decoded: byte-order marks, UTF-8, then a detected encoding."""

from __future__ import annotations

from charset_normalizer import from_bytes

ENCODING_SAMPLE_BYTES = 256 * 1024  # enough for charset detection, bounded in time
_LATIN_CODE_PAGES = {
    "cp1250", "cp1252", "cp1254", "cp1257", "latin_1", "iso8859_2", "iso8859_3", "iso8859_4",
    "iso8859_9", "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16",
    "mac_latin2", "mac_roman", "mac_iceland", "mac_turkish", "cp437", "cp850",
}  # fmt: skip


def decode_text(data: bytes) -> str:
    """Decode text of unknown encoding: BOMs, then UTF-8, then a detected encoding."""
    for bom, encoding in (
        (b"\xef\xbb\xbf", "utf-8-sig"),
        (b"\xff\xfe", "utf-16"),
        (b"\xfe\xff", "utf-16"),
    ):
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    matches = from_bytes(data[:ENCODING_SAMPLE_BYTES])
    best = matches.best()
    encoding = best.encoding if best is not None else "cp1252"
    # The detector cannot tell the Latin code pages apart on short text (it reads French
    # Latin-1 as Baltic cp1257); Windows-1252 is by far the most common of them.
    if encoding in _LATIN_CODE_PAGES and any(m.encoding == "cp1252" for m in matches):
        encoding = "cp1252"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:
        return data.decode("cp1252", errors="replace")
