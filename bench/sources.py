"""Sources kept in sync, timed on a real `subspace serve`: a watched folder and an IMAP
mailbox on a real Dovecot (Debian's dovecot-imapd, as the tests run it).

Folder: FILES Markdown files (SciFact abstracts, a sentence a bullet) are written to a
folder, the folder is added as a source over the API and its first sync is timed. Then, one
change at a time, CHANGES times each: a file edited (a bullet with a word of its own added),
a file created, a file deleted; each is timed from the write until a lexical search finds it
(or no longer does) and, for an edit, until a search by meaning ranks the new bullet first.
What the round after an edit touched is read from the source's counts (files read and
updated) and from the page: the ids of its unchanged bullets before and after. With a real
model (--provider onnx) the edits wait until the folder's first embeddings are in.

Mailbox: MESSAGES messages (abstracts) are appended to INBOX, the mailbox is added, its first
sync timed; then NEW messages are delivered at once and the time until every one is found
by a lexical search is taken. Dovecot's own log then says how many message bodies the sync
fetched in all: MESSAGES + NEW when none was fetched twice.

    python bench/sources.py [--files 10000] [--messages 5000] [--changes 5] [--new 10]
        [--provider fake|onnx] [--only folder mail] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import imap_server

from bench.corpus import DEFAULT_CORPUS, abstracts, sentences
from bench.hostile import Server, free_port
from subspace.sources.secrets import new_key

POLL_S = 0.05


def wait_until(condition: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until `condition` holds (polled every POLL_S); raises after `timeout_s`."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise SystemExit(f"gave up after {timeout_s:.0f} s")
        time.sleep(POLL_S)
    return time.monotonic() - start


def found(client: httpx.Client, query: str, mode: str = "lexical", *, first: bool = False) -> bool:
    """Whether a search for `query` finds a passage holding it (`first`: as its first row)."""
    answer = client.get("/api/search", params={"q": query, "mode": mode, "limit": 5})
    answer.raise_for_status()
    rows = answer.json()["rows"][: 1 if first else None]
    return any(query in row["passage"] for row in rows)


def source_state(client: httpx.Client, source_id: str) -> dict[str, Any]:
    answer = client.get(f"/api/sources/{source_id}")
    answer.raise_for_status()
    state: dict[str, Any] = answer.json()
    return state


def synced_after(client: httpx.Client, source_id: str, since: str | None) -> bool:
    state = source_state(client, source_id)
    return state["status"] == "ok" and (since is None or state["last_sync_at"] > since)


def write_corpus(folder: Path, files: int, corpus: Path) -> list[Path]:
    paths = []
    texts = itertools.cycle(list(abstracts(corpus)))
    for n in range(files):
        title, text = next(texts)
        bullets = "\n".join(f"- {s}" for s in sentences(text)[:8])
        path = folder / f"{n // 1000:02d}" / f"doc-{n:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        # Numbered: past SciFact's 5,183 abstracts the texts repeat, and a copy of a file
        # imported already is not imported again.
        path.write_text(f"# {title} ({n})\n\n{bullets}\n", encoding="utf-8")
        paths.append(path)
    return paths


def page_nodes(client: httpx.Client, title: str) -> dict[str, str]:
    """The bullets of the page titled `title`: text → id."""
    pages = client.get("/api/pages").json()
    page = next(p for p in pages if p["title"] == title)
    tree = client.get(f"/api/pages/{page['id']}").json()
    out: dict[str, str] = {}

    def walk(nodes: list[dict[str, Any]]) -> None:
        for node in nodes:
            out[node["text"]] = node["id"]
            walk(node.get("children", []))

    walk(tree["nodes"])
    return out


def bench_folder(
    server: Server, root: Path, files: int, changes: int, meaning: bool, corpus: Path
) -> dict[str, Any]:
    client = server.client
    folder = root / "notes"
    started = time.monotonic()
    paths = write_corpus(folder, files, corpus)
    print(f"wrote {files:,} files in {time.monotonic() - started:.1f} s", file=sys.stderr)
    added = client.post("/api/sources", json={"kind": "folder", "name": "notes",
                                              "path": str(folder)})  # fmt: skip
    added.raise_for_status()
    source_id = added.json()["id"]
    first_sync_s = wait_until(lambda: synced_after(client, source_id, None), 3600)
    first = source_state(client, source_id)
    print(f"first sync: {first_sync_s:.1f} s, {first['last_counts']}", file=sys.stderr)
    embedded_s = None
    if meaning:  # the edits are timed once the folder's own embeddings are in
        kb = first["kb_id"]
        embedded_s = first_sync_s + wait_until(
            lambda: client.get(f"/api/knowledge-bases/{kb}/overview").json()[
                "pending_embeddings"] == 0, 7200)  # fmt: skip
        print(f"embedded: {embedded_s:.1f} s after the source was added", file=sys.stderr)

    edits, meanings, creates, deletes, touched = [], [], [], [], []
    for n in range(changes):
        path = paths[(n * 7919) % len(paths)]
        title = path.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
        before = page_nodes(client, title)
        since = source_state(client, source_id)["last_sync_at"]
        word = f"zephyrine{n}quux"
        sentence = f"The harbour master logged {word} at the north pier during the storm"
        wrote = time.monotonic()
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"- {sentence}\n")
        wait_until(lambda w=word: found(client, w), 120)
        edits.append(time.monotonic() - wrote)
        if meaning:
            wait_until(lambda s=sentence: found(client, s, "vector", first=True), 300)
            meanings.append(time.monotonic() - wrote)
        wait_until(lambda t=since: synced_after(client, source_id, t), 60)
        after = page_nodes(client, title)
        counts = source_state(client, source_id)["last_counts"]
        kept = sum(1 for text, ident in before.items() if after.get(text) == ident)
        touched.append({"updated": counts.get("updated", 0), "added": counts.get("added", 0),
                        "bullets_before": len(before), "bullets_kept": kept,
                        "bullets_after": len(after)})  # fmt: skip

        created = folder / "new" / f"created-{n}.md"
        created.parent.mkdir(exist_ok=True)
        word = f"quillonwick{n}"
        wrote = time.monotonic()
        created.write_text(f"# Created {n}\n\n- a note about {word}\n", encoding="utf-8")
        wait_until(lambda w=word: found(client, w), 120)
        creates.append(time.monotonic() - wrote)
        wrote = time.monotonic()
        created.unlink()
        wait_until(lambda w=word: not found(client, w), 120)
        deletes.append(time.monotonic() - wrote)
    result = {
        "files": files,
        "first_sync_s": round(first_sync_s, 1),
        "first_counts": first["last_counts"],
        "edit_to_lexical_s": _spread(edits),
        "create_to_lexical_s": _spread(creates),
        "delete_to_gone_s": _spread(deletes),
        "edit_rounds": touched,
    }
    if meaning:
        result["edit_to_meaning_s"] = _spread(meanings)
        result["first_embedded_s"] = round(embedded_s or 0, 1)
    return result


def bench_mail(server: Server, messages: int, new: int, corpus: Path) -> dict[str, Any]:
    client = server.client
    dovecot = imap_server.start_dovecot(free_port())
    try:
        texts = itertools.cycle(list(abstracts(corpus)))
        batch = []
        for n in range(messages):
            title, text = next(texts)
            batch.append(imap_server.message(n, subject=title, body=text))
        started = time.monotonic()
        dovecot.deliver("INBOX", batch)
        print(f"delivered {messages:,} in {time.monotonic() - started:.1f} s", file=sys.stderr)
        added = client.post("/api/sources", json={
            "kind": "imap", "name": "mail", "host": "127.0.0.1", "port": dovecot.port,
            "tls": "none", "user": imap_server.USER, "password": imap_server.PASSWORD})  # fmt: skip
        added.raise_for_status()
        source_id = added.json()["id"]
        first_sync_s = wait_until(lambda: synced_after(client, source_id, None), 3600)
        first = source_state(client, source_id)
        print(f"first sync: {first_sync_s:.1f} s, {first['last_counts']}", file=sys.stderr)
        words = [f"brigantine{n}vex" for n in range(new)]
        fresh = [imap_server.message(messages + n, body=f"The cargo {w} arrived at dawn.")
                 for n, w in enumerate(words)]  # fmt: skip
        since = first["last_sync_at"]
        dovecot.deliver("INBOX", fresh)
        searchable_s = wait_until(lambda: all(found(client, w) for w in words), 120)
        wait_until(lambda: synced_after(client, source_id, since) and
                   source_state(client, source_id)["last_counts"].get("messages") == messages + new,
                   60)  # fmt: skip
        # Removing the source ends its IMAP session; Dovecot then logs how many bodies the
        # session fetched in all: the server's own count of what was fetched.
        client.delete(f"/api/sources/{source_id}").raise_for_status()
        bodies = wait_for_bodies(dovecot)
        return {
            "messages": messages,
            "first_sync_s": round(first_sync_s, 1),
            "first_counts": first["last_counts"],
            "new": new,
            "new_to_lexical_s": round(searchable_s, 2),
            "bodies_fetched": bodies,
            "refetched": bodies - messages - new,
        }
    finally:
        dovecot.stop()


def wait_for_bodies(dovecot: imap_server.Dovecot) -> int:
    """The message bodies Dovecot sent in all its sessions, once every session that logged
    in has ended (each logs its counts as it ends; the deliveries' own sessions, which fetch
    nothing, end first)."""
    log = dovecot.folder / "dovecot.log"

    def ended() -> bool:
        text = log.read_text()
        return text.count("Login: user=") == len(re.findall(r"body_count=\d+", text))

    wait_until(ended, 30)
    return sum(int(m) for m in re.findall(r"body_count=(\d+)", log.read_text()))


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "max": round(max(values), 2),
            "n": len(values)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--new", type=int, default=10)
    parser.add_argument("--provider", default="fake", choices=["fake", "onnx"])
    parser.add_argument("--only", nargs="+", default=["folder", "mail"], choices=["folder", "mail"])
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact's corpus.jsonl"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="subspace-sources-bench-"))
    env = {"PROVIDERS": args.provider, "SUBSPACE_SOURCES_KEY": new_key(),
           "SUBSPACE_FOLDER_ROOTS": str(root)}  # fmt: skip
    (root / "home").mkdir()
    server = Server(root / "home", free_port(), env)
    out: dict[str, Any] = {"provider": args.provider}
    try:
        if "folder" in args.only:
            meaning = args.provider != "fake"
            out["folder"] = bench_folder(
                server, root, args.files, args.changes, meaning=meaning, corpus=args.corpus
            )
        if "mail" in args.only:
            if not imap_server.available():
                raise SystemExit(imap_server.MISSING)
            out["mail"] = bench_mail(server, args.messages, args.new, args.corpus)
    finally:
        server.stop()
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
