"""Whether the files of a lexical index generation are what the engine wrote.

Tantivy ends every segment file with a footer holding a CRC32 of the file's body, but checks
only the footer's magic number when it opens a file: bytes overwritten inside a segment go
unnoticed, and a search then returns wrong results, raises, or panics in the engine's Rust
code. So the follower and every reader check the checksums themselves, each file once for as
long as it stays the same file (segment files are never rewritten: a commit or a merge adds
new ones), and any file they cannot vouch for makes the generation damaged.

Damage the stamps cannot show (bytes that rot on the disk, a file rewritten and its times
set back) is found when a search fails on it: the reader checks every file again and, finding
one damaged, leaves a DAMAGED note in the folder, which the follower reads at its next round
and rebuilds. The note also tells readers why the index is missing while it is rebuilt.

A segment file truncated while a process has it mapped is another matter: the next read of
the lost pages is a SIGBUS, which kills the process before any code of ours runs (the engine
maps its files, as Postgres's own files, which truncating also harms, are for the server
alone). Verified files are made read-only against accidents, and a restart checks every file
before the index serves.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import struct
import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subspace.search.lexical.index.layout import (
    CURRENT,
    META,
    STATE,
    State,
    generation_named,
    read_json,
    write_atomically,
)

FOOTER_MAGIC = 1337  # tantivy's directory/footer.rs: the last 4 bytes of every segment file
FOOTER_TAIL = 8  # the footer's JSON length and the magic, two little-endian u32
FOOTER_MAX = 50_000  # bytes of footer JSON tantivy accepts
MANAGED = ".managed.json"
SEGMENT_PARTS = ("idx", "pos", "term", "fieldnorm", "fast", "store")
READ_CHUNK = 1 << 20  # bytes read at a time while checksumming
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
MISSING = "the index is missing"  # not built yet, or its folder was removed
DAMAGED = "DAMAGED"  # "<generation> <why>": a damaged generation, until it is rebuilt
PASSES = 3  # a check that meets meta.json replaced under it (a merge) starts again


def engine_failed(exc: BaseException) -> bool:
    """Whether `exc` is the engine failing on its files: an error it raised, or a panic of
    its Rust code, which pyo3 raises as a PanicException deriving from BaseException (so
    `except Exception` lets it through)."""
    return isinstance(exc, ValueError | OSError) or type(exc).__name__ == "PanicException"


# inode, size, and the times of the last write and of the last change of the inode (which no
# call can set back, so a file rewritten with its modification time restored still differs)
Stamp = tuple[int, int, int, int]


def file_stamp(path: Path) -> Stamp | None:
    """What changes when a file is written in place or replaced: its inode, size and times;
    None when it cannot be read."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


class Damaged(Exception):
    """A file of the generation is not what was written: says which and how."""


@dataclass
class Checksums:
    """The files found whole so far, by their stamp: a file replaced or written in place has
    a new stamp and is checked again. Thread-safe; one per reader or follower."""

    verified: dict[Path, Stamp] = field(default_factory=dict)
    # meta.json -> the stamps of it and .managed.json when read, and the files it listed
    segments: dict[Path, tuple[tuple[Stamp | None, Stamp | None], list[str]]] = field(
        default_factory=dict
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def damage(self, folders: Iterable[Path], sources: Iterable[str]) -> str | None:
        """None when every file of every source's index in each workspace folder checks out;
        else which file does not and how, named within the index folder (no server path is
        shown to clients)."""
        sources = list(sources)
        for folder in folders:
            try:
                for source in sources:
                    self._check_index(folder / source)
            except Damaged as exc:
                return str(exc).replace(f"{folder.parent.parent}{os.sep}", "")
        return None

    def forget(self, generation: Path) -> None:
        """Check the generation's files again from scratch (a search failed on it)."""
        with self._lock:
            for path in [p for p in self.verified if generation in p.parents]:
                del self.verified[path]
            for path in [p for p in self.segments if generation in p.parents]:
                del self.segments[path]

    def _check_index(self, folder: Path) -> None:
        for _ in range(PASSES):
            meta = folder / META
            before = file_stamp(meta)
            files = self._segments_of(meta, before)
            missing = [name for name in files if self._check_file(folder / name) == "missing"]
            if not missing:
                return
            if file_stamp(meta) == before:  # not a merge that removed them meanwhile
                raise Damaged(f"{folder / missing[0]} is missing")
        raise Damaged(f"{folder} keeps changing under the check")

    def _segments_of(self, meta: Path, stamp: Stamp | None) -> list[str]:
        """The segment files meta.json lists, read once for as long as it and .managed.json
        stay the same files: a round of the follower stats every index, and reads none."""
        managed = meta.with_name(MANAGED)
        stamps = (stamp, file_stamp(managed))
        with self._lock:
            known = self.segments.get(meta)
        if stamp is not None and known is not None and known[0] == stamps:
            return known[1]
        try:
            files = segment_files(read_json(meta))
        except OSError as exc:
            raise Damaged(f"{meta} cannot be read ({exc.strerror})") from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise Damaged(f"{meta} is not tantivy's meta.json") from None
        _check_managed(managed)
        with self._lock:
            self.segments[meta] = (stamps, files)
        return files

    def _check_file(self, path: Path) -> str:
        """ "ok" or "missing"; raises Damaged for a file whose checksum does not hold."""
        stamp = file_stamp(path)
        if stamp is None:
            return "missing"
        with self._lock:
            if self.verified.get(path) == stamp:
                return "ok"
        problem = footer_problem(path)
        if problem:
            raise Damaged(f"{path} {problem}")
        with contextlib.suppress(OSError):
            os.chmod(path, READ_ONLY)  # against accidents: nothing but a rebuild writes it
        with self._lock:
            self.verified[path] = file_stamp(path) or stamp  # the chmod changed its ctime
        return "ok"


def _check_managed(path: Path) -> None:
    """tantivy's list of the files it manages, which it reads to open an index."""
    try:
        listed = read_json(path)
    except FileNotFoundError:
        return  # made at the first commit
    except OSError as exc:
        raise Damaged(f"{path} cannot be read ({exc.strerror})") from None
    except ValueError:
        listed = None
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        raise Damaged(f"{path} is not tantivy's list of files")


def segment_files(meta: dict[str, Any]) -> list[str]:
    """The files the segments of a meta.json consist of: six parts each, and the deletes of
    the last commit that deleted from it."""
    names = []
    for segment in meta["segments"]:
        ident = str(segment["segment_id"]).replace("-", "")
        names += [f"{ident}.{part}" for part in SEGMENT_PARTS]
        deletes = segment.get("deletes")
        if deletes:
            names.append(f"{ident}.{int(deletes['opstamp'])}.del")
    return names


def footer_problem(path: Path) -> str:
    """What is wrong with a segment file's footer or checksum; "" when it holds."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < FOOTER_TAIL:
                return f"is too short ({size} bytes) to be a segment file"
            handle.seek(size - FOOTER_TAIL)
            length, magic = struct.unpack("<II", handle.read(FOOTER_TAIL))
            if magic != FOOTER_MAGIC or length > min(FOOTER_MAX, size - FOOTER_TAIL):
                return "has no segment footer"
            body = size - FOOTER_TAIL - length
            handle.seek(body)
            try:
                expected = int(json.loads(handle.read(length))["crc"])
            except (ValueError, KeyError, TypeError, RecursionError):
                return "has a damaged footer"
            handle.seek(0)
            crc, left = 0, body
            while left:
                block = handle.read(min(READ_CHUNK, left))
                if not block:
                    return "is shorter than its footer says"
                crc, left = zlib.crc32(block, crc), left - len(block)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return "" if crc == expected else "fails its checksum: its bytes were changed"


def check_generation(
    folder: Path,
    checksums: Checksums,
    fits: Callable[[State], bool],
    *,
    files: bool = True,
    choose: Callable[[State], Iterable[str]] | None = None,
) -> tuple[Path | None, str]:
    """The generation CURRENT names in `folder` and "" when it can serve; else None or the
    generation, and why not. With `files`, the files of the workspaces `choose` picks (every
    workspace without it) are checked, and every file of every workspace when a search
    reported the generation damaged; else only its record (CURRENT and state)."""
    name = generation_named(folder)
    reported = reported_damage(folder)
    if name is None or not (folder / name).is_dir():
        if reported is not None:
            return None, f"it is being rebuilt: {reported[1]}"
        if name is not None:
            return None, f"the generation CURRENT names ({name}) is missing"
        return None, "the index's CURRENT file is damaged" if _exists(folder / CURRENT) else MISSING
    generation = folder / name
    state = State.read(generation / STATE)
    if state is None:
        return generation, "the index's state file is damaged"
    if not fits(state):
        return generation, "the index is of another database, format or set of kinds"
    suspect = reported is not None and reported[0] == name
    if suspect:
        checksums.forget(generation)  # a search failed on it: its files are checked afresh
    if files or suspect:
        picked = state.workspaces if suspect or choose is None else choose(state)
        held = [generation / workspace for workspace in picked]
        damage = checksums.damage(held, state.kinds)
        if damage is not None:
            return generation, f"a file of the index is damaged ({damage})"
    if suspect:
        clear_damage(folder)  # the failure was not the files'
    return generation, ""


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def report_damage(folder: Path, generation: Path, why: str) -> None:
    """Note that `generation` is damaged (for the follower, which rebuilds, and for readers,
    which say why meanwhile). Best effort: a full disk may refuse even this."""
    with contextlib.suppress(OSError):
        write_atomically(folder / DAMAGED, f"{generation.name} {why}")


def reported_damage(folder: Path) -> tuple[str, str] | None:
    """The generation a DAMAGED note names and why, if there is one."""
    try:
        name, _, why = (
            (folder / DAMAGED).read_bytes()[:2000].decode(errors="replace").partition(" ")
        )
    except OSError:
        return None
    return name, why or "a file of it was damaged"


def clear_damage(folder: Path) -> None:
    with contextlib.suppress(OSError):
        (folder / DAMAGED).unlink(missing_ok=True)
