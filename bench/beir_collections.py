"""Public test collections in BEIR layout for `subspace eval`: ArguAna and MLQuestions.

Reads each collection's files where they were found, a clone of the repository named below
(a bare git directory too, read at the commit pinned below) or a folder holding the same files
at the same paths, refuses any file whose SHA-256 is not the one pinned below, and writes the
collection to OUT/<name>/ as `subspace eval` reads it: corpus.jsonl (`_id`, `title`, `text`),
queries.jsonl (`_id`, `text`), qrels/test.tsv (`query-id`, `corpus-id`, `score`) and a
README.md saying what it is, how big, where from and under which licence.

- arguana: BEIR's ArguAna (counterargument retrieval, idebate.org), copied byte for byte:
  the three files are BEIR's arguana.zip members, which their SHA-256 prove.
- mlquestions: the MLQuestions test split (machine-learning questions and passages,
  Kulshreshtha et al., EMNLP 2021) converted from its TSV files: the 11,000 passages its own
  evaluation ranks, the 1,500 test questions and each question's passage as its judgement.
  Passages that repeat one another's text are kept once (--keep-duplicates keeps each row).

`check` loads written collections with the reader `subspace eval` uses and prints their
counts, and what in them a reader of the figures should know.

    python bench/beir_collections.py arguana SOURCE [--out DIR]
    python bench/beir_collections.py mlquestions SOURCE [--out DIR] [--keep-duplicates]
    python bench/beir_collections.py check DIR [DIR ...]

SOURCE for arguana: the git directory of github.com/ecazar/ProyectoIB (or a checkout of it);
for mlquestions: that of github.com/McGill-NLP/MLQuestions. OUT defaults to
bench/collections.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace.evaluation.beir import load_collection

DEFAULT_OUT = Path(__file__).resolve().parent / "collections"
QRELS_HEADER = "query-id\tcorpus-id\tscore\n"


@dataclass(frozen=True)
class SourceFile:
    """One file of a source repository: its path, and the SHA-256 its bytes must have."""

    path: str
    sha256: str


@dataclass(frozen=True)
class Source:
    """A public repository at one commit, and the files read from it."""

    repository: str
    commit: str
    files: dict[str, SourceFile]

    def read(self, where: Path, name: str) -> bytes:
        """The file `name` from `where` (a git directory, read at the pinned commit, or a folder
        holding the repository's files), after its SHA-256 is checked."""
        entry = self.files[name]
        if (where / "objects").is_dir() and (where / "HEAD").is_file():
            done = subprocess.run(
                ["git", f"--git-dir={where}", "show", f"{self.commit}:{entry.path}"],
                capture_output=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(
                    f"{where} has no {entry.path} at {self.commit}: "
                    f"{done.stderr.decode(errors='replace').strip()}"
                )
            data = done.stdout
        elif (where / entry.path).is_file():
            data = (where / entry.path).read_bytes()
        else:
            raise SystemExit(f"{where} is neither a git directory nor holds {entry.path}.")
        check_sha256(data, entry.sha256, f"{self.repository} {entry.path}")
        return data


def check_sha256(data: bytes, expected: str, what: str) -> None:
    found = hashlib.sha256(data).hexdigest()
    if found != expected:
        raise SystemExit(f"{what} has SHA-256 {found}, not the pinned {expected}.")


ARGUANA = Source(
    repository="github.com/ecazar/ProyectoIB",
    commit="77758cc865e08f95d66ba67415d74ef6dd6f6bcb",
    files={
        "corpus": SourceFile(
            "data/corpus.jsonl.gz",
            "6572c13e17aa51d42c0498e765c70cfc9f15550a2140213ea267767e3a9f9134",
        ),
        "queries": SourceFile(
            "data/queries.jsonl.gz",
            "faae9bb245700b764c29d98a1972d1b10ebb8dfb4e7bb349741e8d4f20d29b13",
        ),
        "qrels": SourceFile(
            "data/test.tsv", "0c47b481fa8b47fb9ca5e74bc8a017bdea14518c0e4a5d21345291180b3aca76"
        ),
    },
)
# SHA-256 of the members of BEIR's arguana.zip (3,773,617 bytes, MD5
# 8ad3e3c2a5867cdced806d6503f29b99): the files above, decompressed, are these byte for byte.
ARGUANA_BEIR_MEMBERS = {
    "arguana/corpus.jsonl": "0627982cec4ee896df6dc98604ef6b499c83fd87a19eaaeb3f23b88bbef6cbce",
    "arguana/queries.jsonl": "f8b7c903f95d9a2d291de3915a8fac25085e9db679f19f59fea4145bfd1df618",
    "arguana/qrels/test.tsv": "0c47b481fa8b47fb9ca5e74bc8a017bdea14518c0e4a5d21345291180b3aca76",
}

MLQUESTIONS = Source(
    repository="github.com/McGill-NLP/MLQuestions",
    commit="4235e5e60f48a8667d05cf779d066f0dc9a5c46e",
    files={
        "passages": SourceFile(
            "data/test_passages.tsv",
            "81ef98af64ae59146846340d9b7f8fbb26c6f84ea88928b9e5f67e1c4a34d781",
        ),
        "test": SourceFile(
            "data/test.tsv", "27b408dc64bcf8862108438a29a5a3c201d0d2e9f8b77efd751ac2a59f177956"
        ),
    },
)


# -- writing -------------------------------------------------------------------------------------


@dataclass
class Written:
    """A collection as `subspace eval` reads it, for its README and `check`."""

    folder: Path
    documents: int
    titled: int
    queries: int
    judgements: int
    notes: list[str] = field(default_factory=list)

    def size(self, name: str) -> int:
        return (self.folder / name).stat().st_size


def jsonl(records: list[dict[str, str]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def write_files(folder: Path, corpus: bytes, queries: bytes, qrels: bytes) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_bytes(corpus)
    (folder / "queries.jsonl").write_bytes(queries)
    (folder / "qrels" / "test.tsv").write_bytes(qrels)


def describe(folder: Path) -> Written:
    """The collection in `folder` as `subspace eval` reads it (only judged queries), and what
    in it changes how its figures read: judged documents the corpus lacks (no system finds
    them) and queries that are themselves documents, with the same id and text (a search finds
    them first, though they are not judged relevant: BEIR's evaluation, MTEB and Anserini drop a
    hit whose id is the query's, `subspace eval` does not)."""
    collection = load_collection(folder)
    corpus, qrels = collection.corpus, collection.qrels
    written = Written(
        folder,
        documents=len(corpus),
        titled=sum(1 for title, _ in corpus.values() if title.strip()),
        queries=len(collection.queries),
        judgements=sum(len(docs) for docs in qrels.values()),
    )
    missing = {doc for docs in qrels.values() for doc in docs if doc not in corpus}
    if missing:
        lost = sum(all(doc in missing for doc in docs) for docs in qrels.values())
        written.notes.append(
            f"{len(missing):,} judged documents are not in the corpus, "
            f"so {lost:,} queries have no relevant document to find"
        )
    selves = sum(
        1 for q, text in collection.queries.items() if q in corpus and corpus[q][1] == text
    )
    if selves:
        written.notes.append(f"{selves:,} queries are also documents, with the same id and text")
    return written


def convert_arguana(source: Path, out: Path) -> Written:
    """BEIR's ArguAna, its three files as BEIR distributes them."""
    corpus = gzip.decompress(ARGUANA.read(source, "corpus"))
    queries = gzip.decompress(ARGUANA.read(source, "queries"))
    qrels = ARGUANA.read(source, "qrels")
    for data, member in zip((corpus, queries, qrels), ARGUANA_BEIR_MEMBERS, strict=True):
        check_sha256(data, ARGUANA_BEIR_MEMBERS[member], f"decompressed {member}")
    judged = {line.split("\t")[0] for line in qrels.decode().split("\n")[1:] if line}
    asked = {json.loads(line)["_id"] for line in queries.decode().split("\n") if line}
    if asked - judged:  # BEIR keeps only judged queries; ArguAna judges all 1,406
        raise SystemExit(f"{len(asked - judged)} ArguAna queries have no judgement.")
    folder = out / "arguana"
    write_files(folder, corpus, queries, qrels)
    return describe(folder)


def tsv_rows(data: bytes) -> list[list[str]]:
    """The rows after the header, parsed as the upstream evaluation's pandas.read_csv(sep='\\t')
    parses them (double quotes quote a field)."""
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline=""), delimiter="\t"))
    return [row for row in rows[1:] if row]


def convert_mlquestions(source: Path, out: Path, keep_duplicates: bool) -> Written:
    """The MLQuestions test split: its 11,000 passages (the pool its evaluation ranks, in
    test_passages.tsv), its 1,500 questions (test.tsv) and, as the one judgement of each, the
    passage its `indexes` column points at (a row of test_passages.tsv, from 0)."""
    passages = [row[1] for row in tsv_rows(MLQUESTIONS.read(source, "passages"))]
    tests = tsv_rows(MLQUESTIONS.read(source, "test"))
    if len(passages) != 11_000 or len(tests) != 1_500:
        raise SystemExit(f"read {len(passages)} passages and {len(tests)} questions")
    first_row: dict[str, int] = {}
    for row, text in enumerate(passages):
        first_row.setdefault(text, row)
    corpus, queries, qrels = [], [], [QRELS_HEADER]
    for row, text in enumerate(passages):
        if keep_duplicates or first_row[text] == row:
            corpus.append({"_id": f"p{row}", "title": "", "text": text})
    for row, (_, passage, question, index) in enumerate(tests):
        if passages[int(index)] != passage:
            raise SystemExit(f"test.tsv row {row}: its passage is not row {index} of the pool")
        relevant = int(index) if keep_duplicates else first_row[passage]
        queries.append({"_id": f"q{row}", "text": question})
        qrels.append(f"q{row}\tp{relevant}\t1\n")
    folder = out / "mlquestions"
    write_files(folder, jsonl(corpus), jsonl(queries), "".join(qrels).encode())
    written = describe(folder)
    copies: dict[str, int] = {}
    for text in passages:
        copies[text] = copies.get(text, 0) + 1
    repeated = len(passages) - len(first_row)
    on_repeated = sum(copies[passage] > 1 for _, passage, _, _ in tests)
    written.notes.append(
        f"{repeated:,} of the 11,000 passage rows repeat an earlier row's text (one text "
        f"{max(copies.values())} times), and {on_repeated:,} questions are judged on such a "
        + (
            "text: every row is kept, as the upstream evaluation ranks them, so a judged "
            "passage ties with its copies, which count as not relevant"
            if keep_duplicates
            else "text: each text is kept once, and judged by the id of its first row"
        )
    )
    return written


# -- checking ------------------------------------------------------------------------------------


def check(folder: Path) -> str:
    written = describe(folder)
    line = (
        f"{folder.name}: {written.documents:,} documents, {written.queries:,} queries, "
        f"{written.judgements:,} judgements"
    )
    return "; ".join([line, *written.notes])


# -- READMEs -------------------------------------------------------------------------------------


def size_table(written: Written) -> str:
    rows = []
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        size = written.size(name)
        digest = hashlib.sha256((written.folder / name).read_bytes()).hexdigest()
        rows.append(f"| `{name}` | {size:,} bytes ({size / 1_000_000:.2f} MB) | `{digest}` |")
    return "\n".join(["| file | size | SHA-256 |", "|---|---|---|", *rows])


def notes_list(written: Written) -> str:
    return "\n".join(f"- {note}." for note in written.notes)


def arguana_readme(written: Written) -> str:
    files = "\n".join(
        f"| `{f.path}` | `{f.sha256}` | `{member}` | `{ARGUANA_BEIR_MEMBERS[member]}` |"
        for f, member in zip(ARGUANA.files.values(), ARGUANA_BEIR_MEMBERS, strict=True)
    )
    return f"""# ArguAna (BEIR)

Counterargument retrieval: each query is an argument from a debate of idebate.org, and the one
relevant document is the counterargument written to it, among all the arguments and
counterarguments of all the debates. By Wachsmuth, Syed and Stein, "Retrieval of the Best
Counterargument without Prior Topic Knowledge" (ACL 2018), as BEIR distributes it (Thakur et
al., "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information Retrieval
Models", NeurIPS 2021 Datasets and Benchmarks): its one split, test, every query judged.

{written.documents:,} documents ({written.titled:,} with a title: the debate's topic tags),
{written.queries:,} queries, {written.judgements:,} judgements (grade 1, one per query).

{size_table(written)}

## Source

The three files are BEIR's, byte for byte: they have the SHA-256 of the members of BEIR's
`arguana.zip` (3,773,617 bytes; MD5 `8ad3e3c2a5867cdced806d6503f29b99` in BEIR's README).
They were read from a public copy of the Hugging Face datasets `BeIR/arguana`
(`corpus.jsonl.gz`, `queries.jsonl.gz`) and `BeIR/arguana-qrels` (`test.tsv`), committed to
{ARGUANA.repository} under `data/` and read at commit `{ARGUANA.commit}`:

| path there | SHA-256 | BEIR member | its SHA-256 (after gunzip) |
|---|---|---|---|
{files}

## Licence

**CC BY-SA 4.0**, as the dataset cards of `BeIR/arguana` and `BeIR/arguana-qrels` on Hugging
Face declare. The texts are idebate.org's debates; the original ArguAna corpus is deposited
on Zenodo (10.5281/zenodo.3973258), reported as CC BY 4.0 (not read here: Zenodo is out of
reach), which the share-alike terms add to. Cite Wachsmuth et al. (2018) and Thakur et al.
(2021).

## Reading the figures

{notes_list(written)}

BEIR's evaluation (`ignore_identical_ids`), MTEB and Anserini (`-removeQuery`) drop from each
ranking the document whose id is the query's. `subspace eval` keeps it, so here a query's own
argument usually ranks first, unjudged, and nDCG@10 and MRR@10 read lower than published
figures; Recall@100 much less so. Published BM25 (Anserini, title and text as one field,
`-removeQuery`): nDCG@10 0.397, R@100 0.932. A query whose counterargument is missing from the
corpus scores 0 for every system, as in BEIR.

## Conversion

From the repository's root, with SOURCE a clone of github.com/ecazar/ProyectoIB (a bare git
directory will do):

    python bench/beir_collections.py arguana SOURCE
    python bench/beir_collections.py check bench/collections/arguana
"""


def mlquestions_readme(written: Written, keep_duplicates: bool) -> str:
    files = "\n".join(f"| `{f.path}` | `{f.sha256}` |" for f in MLQUESTIONS.files.values())
    documents = (
        "one document `p<row>` per row of `test_passages.tsv` (rows from 0), repeated texts "
        "too, as the upstream evaluation ranks them"
        if keep_duplicates
        else "one document per distinct passage text, `p<row>` after the first row of "
        "`test_passages.tsv` that holds it (rows from 0); a question is judged on that "
        "document. `--keep-duplicates` writes every row instead"
    )
    flag = " --keep-duplicates" if keep_duplicates else ""
    return f"""# MLQuestions (test split)

Passage retrieval for machine-learning and statistics questions. By Kulshreshtha, Belfer,
Serban and Reddy, "Back-Training excels Self-Training at Unsupervised Domain Adaptation of
Question Generation and Passage Retrieval" (EMNLP 2021): the questions were collected from
Google's "People also ask" with machine-learning concepts as seeds, their answer passages
found with Google search (11K passages), and 3K question-passage pairs were kept for
evaluation, half validation, half test. The paper's passage retrieval ranks all 11K passages
(`data/test_passages.tsv`) for each question; for the 1,500 test questions (`data/test.tsv`)
the right passage is the row its `indexes` column names. Not part of BEIR: converted to its
layout here.

{written.documents:,} documents (no titles), {written.queries:,} queries,
{written.judgements:,} judgements (grade 1, one per question). Queries are `q<row>`, the rows
of `test.tsv` from 0. Documents: {documents}.

{size_table(written)}

## Source

{MLQUESTIONS.repository}, the authors' repository, at commit `{MLQUESTIONS.commit}`;
`test.tsv` last changed in `2a2223f7a02158b9514aa5949dd328b1e0e78f76` ("fix bug in DPR model
evaluation"), which added its `indexes` column:

| path there | SHA-256 |
|---|---|
{files}

The conversion checks that each test question's passage (its `input_text`) is the text of the
row its `indexes` names.

## Licence

**CC BY-NC-SA 4.0**: the repository's `LICENSE.md` is the Creative Commons
Attribution-NonCommercial-ShareAlike 4.0 International licence, and its README says the
MLQuestions dataset is in `data/`. Non-commercial, like SciFact (CC BY-NC 2.0). Cite
Kulshreshtha et al. (2021).

## Reading the figures

{notes_list(written)}

The paper reports top-k accuracy (the right passage among the first k); with one judged
passage per question, Recall@100 here is top-100 accuracy.

## Conversion

From the repository's root, with SOURCE a clone of github.com/McGill-NLP/MLQuestions (a bare
git directory will do):

    python bench/beir_collections.py mlquestions SOURCE{flag}
    python bench/beir_collections.py check bench/collections/mlquestions
"""


# -- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, repository in (
        ("arguana", ARGUANA.repository),
        ("mlquestions", MLQUESTIONS.repository),
    ):
        sub = commands.add_parser(name, help=f"write OUT/{name}/ from {repository}")
        sub.add_argument(
            "source", type=Path, help=f"the git directory (or a checkout) of {repository}"
        )
        sub.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: %(default)s")
    sub.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="one document per row of test_passages.tsv, repeated texts too",
    )
    sub = commands.add_parser("check", help="load written collections and print their counts")
    sub.add_argument("folders", type=Path, nargs="+", metavar="DIR")
    args = parser.parse_args()

    if args.command == "check":
        for folder in args.folders:
            print(check(folder))
        return
    if args.command == "arguana":
        written = convert_arguana(args.source, args.out)
        readme = arguana_readme(written)
    else:
        written = convert_mlquestions(args.source, args.out, args.keep_duplicates)
        readme = mlquestions_readme(written, args.keep_duplicates)
    (written.folder / "README.md").write_text(readme)
    print(check(written.folder), f"-> {written.folder}")


if __name__ == "__main__":
    main()
