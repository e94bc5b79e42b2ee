"""A running server whose lexical index is damaged again and again: searches must all answer,
and the engine must be back soon after the last damage.

Starts `subspace serve` (fake provider) on a fresh embedded Postgres in a temporary folder,
seeds PAGES pages of BULLETS bullets, waits for the lexical index, then for SECONDS runs
CLIENTS searchers (keyword and hybrid, each checking that the last word written is found), one
writer adding a bullet every WRITE_PAUSE_S, and a damager that every DAMAGE_EVERY_S overwrites
one file of the index: CURRENT, a state file or one of the engine's meta files, with random
bytes, nothing, or bytes that are not text (and, with --segments, bytes inside a segment
file). Then it stops damaging and times how long until searches rank on the engine again (no
`degraded` entry).

Prints the searches' status codes, how many were degraded, the writes a search missed, and the
seconds from the last damage until the engine was back.

    python bench/damaged_index.py [--seconds 60] [--clients 4] [--bullets 100]
        [--damage-every 2] [--segments] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.hostile import Server, free_port

PAGES = 3
BULLETS = 100
CLIENTS = 4
WRITE_PAUSE_S = 0.2
DAMAGE_EVERY_S = 2.0
BACK_WITHIN_S = 180.0  # how long to wait for the engine after the last damage
WORDS = (
    "harbor ferry schedule ticket crew engine pier cargo manifest weather tide captain deck "
    "lantern rope anchor compass chart voyage island lighthouse beacon storm sail mast hull"
).split()
DAMAGES = ("random bytes", "empty", "not text")


def seed(server: Server, bullets: int = BULLETS) -> None:
    chooser = random.Random(1)
    for n in range(PAGES):
        page = server.client.post("/api/pages", json={"title": f"Logbook {n}"}).json()
        for _ in range(bullets):
            text = " ".join(chooser.choice(WORDS) for _ in range(8))
            server.client.post("/api/nodes", json={"page_id": page["id"], "text": text})


def index_files(home: Path, segments: bool) -> list[Path]:
    """The files the damager picks from: CURRENT, each generation's state, the engine's meta
    files (and segment files, with --segments)."""
    found = list(home.glob("lexical/*/CURRENT")) + list(home.glob("lexical/*/g*/state.json"))
    found += list(home.glob("lexical/*/g*/*/meta.json"))
    found += list(home.glob("lexical/*/g*/*/.managed.json"))
    if segments:
        found += [p for p in home.glob("lexical/*/g*/*/*.*") if p.suffix in (".idx", ".term")]
    return found


def damage(path: Path, how: str, chooser: random.Random) -> None:
    try:
        size = path.stat().st_size
        path.chmod(0o644)
        if path.suffix in (".idx", ".term"):  # in place: truncating a mapped file kills
            with path.open("r+b") as handle:
                handle.seek(chooser.randrange(max(size - 100, 1)))
                handle.write(chooser.randbytes(8))
        elif how == "random bytes":
            path.write_bytes(chooser.randbytes(max(size, 2)))
        elif how == "empty":
            path.write_bytes(b"")
        else:
            path.write_bytes(b"\xa9\xff")
    except OSError:
        pass  # replaced or removed by a rebuild meanwhile


def engine_ready(client: httpx.Client) -> bool:
    answer = client.get("/api/search", params={"q": "harbor", "mode": "lexical"})
    return answer.status_code == 200 and not answer.json()["degraded"]


def wait_for_engine(client: httpx.Client, limit_s: float) -> float | None:
    """Seconds until a search ranks on the engine again; None past `limit_s`."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if engine_ready(client):
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def run(
    seconds: float,
    clients: int,
    segments: bool,
    bullets: int = BULLETS,
    damage_every_s: float = DAMAGE_EVERY_S,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="subspace-damage-") as tmp:
        home = Path(tmp)
        server = Server(home, free_port())
        try:
            seed(server, bullets)
            if wait_for_engine(server.client, 120) is None:
                raise SystemExit("the lexical index was not built within 120 s")
            return _attack(server, home, seconds, clients, segments, damage_every_s)
        finally:
            server.stop()


def _attack(
    server: Server, home: Path, seconds: float, clients: int, segments: bool, damage_every_s: float
) -> dict[str, Any]:
    stop = threading.Event()
    codes: Counter[int] = Counter()
    degraded = Counter[str]()
    missed: list[str] = []
    written: list[str] = []
    damages: Counter[str] = Counter()
    lock = threading.Lock()
    page = server.client.post("/api/pages", json={"title": "Probes"}).json()
    last_damage = [time.monotonic()]

    def write() -> None:
        n = 0
        while not stop.is_set():
            word = f"probe{n}x"
            answer = server.client.post("/api/nodes", json={"page_id": page["id"], "text": word})
            with lock:
                codes[answer.status_code] += 1
                if answer.status_code == 201:
                    written.append(word)
            n += 1
            stop.wait(WRITE_PAUSE_S)

    def search(seed_: int) -> None:
        chooser = random.Random(seed_)
        while not stop.is_set():
            with lock:
                word = written[-1] if written else "harbor"
            mode = chooser.choice(("lexical", "hybrid"))
            answer = server.client.get("/api/search", params={"q": word, "mode": mode})
            with lock:
                codes[answer.status_code] += 1
                if answer.status_code != 200:
                    continue
                body = answer.json()
                for note in body["degraded"]:
                    degraded[note.split("(")[0].strip()[:70]] += 1
                if word.startswith("probe") and not body["rows"]:
                    missed.append(word)

    def damager() -> None:
        chooser = random.Random(7)
        while not stop.wait(damage_every_s):
            try:
                candidates = index_files(home, segments)
            except FileNotFoundError:  # a rebuild removed a generation while it was listed
                continue
            if not candidates:
                continue
            target, how = chooser.choice(candidates), chooser.choice(DAMAGES)
            damage(target, how, chooser)
            last_damage[0] = time.monotonic()
            damages[f"{target.name}: {how}" if target.suffix not in (".idx", ".term")
                    else f"segment .{target.suffix[1:]}: in place"] += 1  # fmt: skip

    threads = [threading.Thread(target=write), threading.Thread(target=damager)]
    threads += [threading.Thread(target=search, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    back = wait_for_engine(server.client, BACK_WITHIN_S)
    since_damage = None if back is None else time.monotonic() - last_damage[0]
    searches = sum(codes.values())
    return {
        "seconds": round(time.monotonic() - started, 1),
        "requests": searches,
        "status": dict(sorted(codes.items())),
        "server_errors": sum(v for k, v in codes.items() if k >= 500),
        "degraded": dict(degraded.most_common()),
        "writes": len(written),
        "writes_missed_by_a_search": len(missed),
        "damages": dict(damages.most_common()),
        "engine_back_s_after_last_damage": None if since_damage is None else round(since_damage, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--bullets", type=int, default=BULLETS, help="per seeded page")
    parser.add_argument(
        "--damage-every", type=float, default=DAMAGE_EVERY_S, help="seconds between damages"
    )
    parser.add_argument("--segments", action="store_true",
                        help="Also overwrite bytes inside segment files.")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.seconds, args.clients, args.segments, args.bullets, args.damage_every)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        print(f"{key.replace('_', ' '):34} {json.dumps(value)}")


if __name__ == "__main__":
    main()
