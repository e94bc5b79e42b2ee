"""Every script under bench/ still runs: its --help, and one run at its smallest size.

A bench script is run by hand, now and then, so nothing else notices when a change elsewhere
breaks it; these runs do. Each is a subprocess from the repository's root with the fake
provider, on a tiny synthetic collection in BEIR layout in place of SciFact (which a fresh
clone may not hold), its homes and temporary folders under the test's tmp_path. A run is
checked for having worked and printed its figures, never for what the figures are: benchmarks
are not timed assertions.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
HELP_TIMEOUT_S = 120  # an import of the app on a busy machine takes a few seconds
RUN_TIMEOUT_S = 600  # each run takes seconds; this only stops one that hangs
DOCUMENTS = 60  # in the tiny collection the runs read in place of SciFact
QUERIES = 12

# bench/*.py that are not scripts, and why.
NOT_SCRIPTS = {
    "__init__": "makes bench/ a package, so the scripts import each other as bench.<name>",
    "corpus": "a helper: SciFact's abstracts and their sentences, for the scripts that read them",
    "served": "a helper: the app on a real uvicorn for the browser scripts, and signing in",
}


@dataclass(frozen=True)
class Smoke:
    """A script's smallest run and what its output shows."""

    # The arguments, as typed after the script's name: {corpus} is the tiny corpus.jsonl,
    # {dataset} its BEIR folder and {tmp} a folder of the test's own.
    args: str
    prints: tuple[str, ...] = ()  # regular expressions, each found in stdout
    # What the JSON it prints (all of stdout, or else its last line) must satisfy.
    json: Callable[[Any], bool] | None = None
    chromium: bool = False
    # A module the script measures against, installed only where that is measured.
    needs: str = ""


RUNS: dict[str, Smoke] = {
    "ask_latency": Smoke(
        "--home {tmp}/home --size 200 --queries 2 --corpus {corpus} --json",
        json=lambda r: r["questions"] == 2 and r["done"]["p50_ms"] > 0,
    ),
    # Converting needs the collections' repositories; checking reads any BEIR folder.
    "beir_collections": Smoke(
        "check {dataset}", prints=(rf"^\w+: 60 documents, {QUERIES} queries, \d+ judgements",)
    ),
    "big_pages": Smoke(
        "--bullets 100 --keys 2 --pages 30 --json",
        json=lambda r: (
            [p["bullets"] for p in r["big_pages"]] == [84]
            and r["big_pages"][0]["interactive_ms"] > 0
            and r["sidebar"]["pages"] == 31
            and r["sidebar"]["list_shown_ms"] > 0
        ),
        chromium=True,
    ),
    "bm25s_arms": Smoke(
        "{dataset} --json",
        json=lambda r: (
            r["queries"] == QUERIES
            and set(r["arms"]) == {"bm25s", "bm25s_unique", "our_tokens", "our_tokens_unique"}
        ),
    ),
    "damaged_index": Smoke(
        "--seconds 1 --clients 1 --bullets 5 --damage-every 0.2 --segments --json",
        # The damager ran (every 0.2 s) beside the searchers and the writer.
        json=lambda r: r["requests"] > 0 and r["writes"] > 0 and sum(r["damages"].values()) > 0,
    ),
    "gibberish": Smoke(
        "{dataset} --queries 6 --json",
        json=lambda r: sum(t["queries"] for t in r["by_words"].values()) == 6,
    ),
    "embedding": Smoke(
        "fairness --bulk-pages 4 --own-pages 4 --seconds 1 --corpus {corpus}",
        prints=(r"^search alone: \d+ searches", r"^p95 ratio: ", r"texts embedded meanwhile"),
    ),
    "exact_tokens": Smoke(
        "--per-kind 1 --total 200 --corpus {corpus}",
        prints=(r"^200 chunks, 6 identifier queries", r"^e-mail +\d/1 +\d/1 +\d/1", r"^all +\d+%"),
    ),
    "hostile": Smoke(
        "--slow-clients 2 --slow-hold 1 --json",
        json=lambda r: (
            len(r) == 7  # idle, then each of the six attacks
            and r[-1]["attack"] == "2 slow clients"
            and all(set(row) == {"attack", "seconds", "status", "healthz"} for row in r)
        ),
    ),
    "http_latency": Smoke(
        # Its table rather than --json: the table is printed by code of its own.
        "--home {tmp}/home --size 200 --clients 1 --requests 3 --warmup 1 --queries 2 "
        "--corpus {corpus}",
        prints=(
            r"^POST /api/search +HTTP, 1 client\(s\) +\d+\.\d",
            r"^POST /api/v1/knowledge/search +overhead of HTTP, 1 client, over search\(\)",
        ),
    ),
    "many_clients": Smoke(
        "--home {tmp}/home --size 200 --workers 2 --clients 2 --paced 2 --seconds 2 "
        "--queries 2 --replica --corpus {corpus} --json",
        json=lambda found: (
            [run["replica"] for run in found["runs"]] == [False, False, True, True]
            and all(run["answered"] > 0 and run["5xx"] == 0 for run in found["runs"])
        ),
    ),
    "sources": Smoke(
        "--files 20 --messages 10 --changes 1 --new 2 --corpus {corpus} --json",
        json=lambda r: (
            r["folder"]["first_counts"]["added"] == 20
            and r["folder"]["edit_rounds"][0]["updated"] == 1
            and r["mail"]["first_counts"]["added"] == 10
            and r["mail"]["refetched"] == 0
        ),
    ),
    "indexer": Smoke(
        # --local-chunks 0: no local model is loaded, even where the [local] extra is installed.
        "--bullets 200 --edits 1 --local-chunks 0 --corpus {corpus}",
        prints=(
            r"^import of 200 bullets",
            r"^edit to stored vector, debounce 1500 ms: p50 \d+",
            r"^reindex 2: .* reused by hash \d+",
            r"^local model: .*skipped",
        ),
    ),
    "html_extraction": Smoke(
        "--per-generator 1 --json",
        json=lambda r: r["rows"][-1]["generator"] == "all" and r["rows"][-1]["pages"] > 0,
        needs="trafilatura",
    ),
    "pdf_extraction": Smoke(
        "src/subspace/demo/files/office-field-guide.pdf --passes 1 --examples 1",
        prints=(
            r"^\| office-field-guide\.pdf \| 2 / 2 \| 0 / 0 \|",
            r"^  pypdf : raises .*\(caught; \d+ ms\)",
        ),
        needs="pypdfium2",
    ),
    "ingest": Smoke(
        "--files 3 --markdown 3 --corpus {corpus}",
        prints=(r"^mixed folder: 3 files .* failed 0", r"^subspace import of 3 Markdown files"),
    ),
    "lexical_lag": Smoke(
        "--writers 2 --seconds 1 --json",
        json=lambda r: r["writes"] > 0 and r["events"] > 0 and r["lag_p50_ms"] >= 0,
    ),
    "lexical_tenants": Smoke(
        "--workspaces 3 --bullets 2 --json",
        json=lambda r: r["workspaces"] == 3 and r["index_files"] > 0 and r["rebuild_s"] > 0,
    ),
    "load_rate": Smoke(
        "--bullets 100 --file-chunks 10 --runs 2 --corpus {corpus}",
        prints=(r"^run 1: \d+ files .* 100 bullets .* took in \d+ documents",),
    ),
    "long_queries": Smoke(
        "--out {tmp}/long --queries 2 --corpus {corpus}",
        prints=(r"^2 queries over .* written to",),
    ),
    "palette": Smoke(
        "--bullets 100 --queries 2 --delay 5 --corpus {corpus}",
        # The first query warms the page and the server, and is not timed.
        prints=(
            r"^last keystroke -> rows drawn, 1 queries .*: p50 \d+ ms",
            r"^static assets: [\d,]+ bytes of JavaScript",
        ),
        chromium=True,
    ),
    "rag_scifact": Smoke(
        "--collection {dataset} --limit 2 --home {tmp}/home",
        json=lambda r: r["queries"] == 2 and r["documents"] == DOCUMENTS and 0 <= r["found"] <= 1,
    ),
    "random_file": Smoke(
        "--mb 0.05",
        prints=(r"^0\.05 MB of random bytes: [\d.]+ s in all, [\d.]+ s storing [1-9]\d* chunks",),
    ),
    "search_latency": Smoke(
        "--size 200 --queries 2 --clients 1 --bases 1 2 --references --stages "
        "--beside-writes 1 --corpus {corpus} --json",
        json=lambda r: (
            {row["system"] for row in r["rows"]} == {"subspace", "seed_sql", "bm25s", "lancedb"}
            and {row["bases"] for row in r["rows"]} == {1, 2}
            and set(r["stages"]) == {"rare", "common", "question", "kind_filter"}
            and r["beside_writes"]["searches"] > 0
            and r["beside_writes"]["commits"] > 0
        ),
    ),
    "similarity_floor": Smoke(
        "{dataset} --json",
        json=lambda r: r["pairs"]["relevant"] == QUERIES and len(r["kept_at_floor"]) == 18,
    ),
    "static_model": Smoke(
        "{dataset} --home {tmp}/home",
        prints=(r"wordllama:l2_supercat-256: [\d,]+ ~1,000-character chunks", r"^hybrid: "),
    ),
    "tenants": Smoke(
        "--seconds 1 --bullets 5 --only baseline lock --json",
        json=lambda r: (
            set(r) == {"baseline", "lock writers"}
            and r["baseline"]["normal"]["requests"] > 0
            and r["baseline"]["flooded"] == r["baseline"]["stepped_aside"] == 0
            # the attack ran in its own process and brought its statuses back
            and any(code.startswith("2") for code in r["lock writers"]["attacker"])
        ),
    ),
    "typos": Smoke(
        "--repeat 1 --rounds 1 --corpus {corpus} --json",
        json=lambda r: len(r["loads"]) == 2 and r["words"] > 0 and len(r["on_ms"]) == r["words"],
    ),
}

CHROMIUM_MISSING = shutil.which("chromium") is None  # as bench/palette.py looks for it

# -- a tiny collection in BEIR layout, in place of SciFact -------------------------------------

WORDS = (
    "harbour ferry lantern compass voyage island beacon anchor captain cargo manifest weather "
    "kestrel grassland meadow orchard blossom harvest granary millstone shepherd pasture "
    "protein receptor membrane enzyme hormone insulin glucose neuron synapse cortex "
    "vitamin calcium mineral density marrow skeleton cartilage tendon ligament muscle "
    "sourdough starter leaven oven crust flour yeast dough rye barley "
    "telescope nebula comet asteroid orbit gravity quasar pulsar galaxy eclipse "
    "glacier moraine fjord tundra permafrost avalanche crevasse summit ridge valley"
).split()


def write_collection(root: Path) -> Path:
    """DOCUMENTS abstracts of 3 to 9 sentences (bench/long_queries.py wants 7 or more) and
    QUERIES queries of five words of one abstract each, judged relevant to it; the same on
    every run. Returns the corpus.jsonl."""
    rng = random.Random(60)
    docs = []
    for n in range(DOCUMENTS):
        sentences = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))).capitalize() + "."
            for _ in range(rng.randint(3, 9))
        ]
        title = " ".join(rng.choice(WORDS) for _ in range(3)).title()
        docs.append({"_id": f"doc{n}", "title": title, "text": " ".join(sentences)})
    judged = rng.sample(docs, QUERIES)
    queries = [
        {
            "_id": f"q{n}",
            "text": " ".join(rng.sample(doc["text"].replace(".", "").lower().split(), 5)),
        }
        for n, doc in enumerate(judged)
    ]
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(doc) + "\n" for doc in docs)
    with (root / "queries.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(query) + "\n" for query in queries)
    qrels = "".join(f"{q['_id']}\t{d['_id']}\t1\n" for q, d in zip(queries, judged, strict=True))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return root / "corpus.jsonl"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_collection(tmp_path_factory.mktemp("beir") / "tiny")


# -- running a script ----------------------------------------------------------------------------


def run_script(
    name: str, args: list[str], tmp_path: Path, timeout_s: float, *, own_tmpdir: bool = True
) -> subprocess.CompletedProcess[str]:
    """bench/<name>.py with `args`, as someone would run it from the repository's root, but with
    the fake provider and nothing of the caller's Subspace settings: the home (which
    bench/similarity_floor.py keeps its vectors in) under `tmp_path` and, with `own_tmpdir`, the
    temporary folders (where most scripts start their embedded server, and some leave it) in
    a folder of the run's own, removed after it."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("SUBSPACE_") and k != "PROVIDERS"
    }
    env.update(PROVIDERS="fake", SUBSPACE_HOME=str(tmp_path / "subspace-home"))
    # A folder of its own, short: multiprocessing's forkserver puts its socket in TMPDIR, and a
    # socket's path must fit in 107 bytes, which one under a deep tmp_path may not.
    tmpdir = Path(tempfile.mkdtemp(prefix="bench-")) if own_tmpdir else None
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    try:
        return subprocess.run(
            [sys.executable, str(BENCH / f"{name}.py"), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


def printed_json(stdout: str) -> Any:
    """The JSON a script printed: all of stdout, or its last line after lines of text."""
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        return json.loads(stdout.strip().splitlines()[-1])


# -- the tests -------------------------------------------------------------------------------


def test_every_bench_script_has_a_smoke_run() -> None:
    """A script added to bench/ fails here until it has an entry in RUNS (or NOT_SCRIPTS)."""
    on_disk = {path.stem for path in BENCH.glob("*.py")}
    assert on_disk == set(RUNS) | set(NOT_SCRIPTS)
    assert not set(RUNS) & set(NOT_SCRIPTS)
    for name in RUNS:
        assert re.search(r"^def main\(", (BENCH / f"{name}.py").read_text(), re.M), name
    for name in NOT_SCRIPTS:
        assert not re.search(r"^def main\(", (BENCH / f"{name}.py").read_text(), re.M), name


@pytest.mark.parametrize("name", sorted(RUNS))
def test_help(name: str, tmp_path: Path) -> None:
    done = run_script(name, ["--help"], tmp_path, HELP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout
    # Every option of the smoke run is one the script declares.
    for option in (arg for arg in RUNS[name].args.split() if arg.startswith("--")):
        assert option in done.stdout, f"{name} --help does not mention {option}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=[
                pytest.mark.skipif(
                    RUNS[name].chromium and CHROMIUM_MISSING,
                    reason="Chromium is missing: run `apt-get install -y chromium`.",
                ),
                pytest.mark.skipif(
                    bool(RUNS[name].needs) and importlib.util.find_spec(RUNS[name].needs) is None,
                    reason=f"{RUNS[name].needs} is not installed: pip install it to run this.",
                ),
            ],
        )
        for name in sorted(RUNS)
    ],
)
def test_smallest_run(name: str, corpus: Path, tmp_path: Path) -> None:
    smoke = RUNS[name]
    fill = {"corpus": str(corpus), "dataset": str(corpus.parent), "tmp": str(tmp_path)}
    args = [arg.format(**fill) for arg in smoke.args.split()]
    # Chromium puts a socket in TMPDIR, and a socket's path must fit in 107 bytes, which one
    # under tmp_path does not; bench/palette.py leaves nothing there (its home is a
    # TemporaryDirectory, and Playwright removes the browser's profile).
    done = run_script(name, args, tmp_path, RUN_TIMEOUT_S, own_tmpdir=not smoke.chromium)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stderr[-4000:]}"
    # A thread that died prints its traceback and the script still exits 0.
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    for pattern in smoke.prints:
        assert re.search(pattern, done.stdout, re.M), f"{pattern!r} not in:\n{done.stdout}"
    if smoke.json is not None:
        assert smoke.json(printed_json(done.stdout)), done.stdout
