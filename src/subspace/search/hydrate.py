"""Hydration: the text, titles, breadcrumbs and highlights of the rows that survived the limit.

Visibility is checked again here, so an item archived while the search ran is dropped rather
than shown.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from subspace.db.pipeline import Later, all_rows, generic_plans, prepared
from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.analysis import fold, fold_with_offsets
from subspace.search.filters import Scope
from subspace.search.fragments import Fragment, bind
from subspace.search.fusion import Fused, TargetKey
from subspace.search.lexical.terms import TsQueries
from subspace.search.refs import parse_ref

START, STOP = "\ue000", "\ue001"  # private-use characters: never in stored text after cleaning
SHORT_TEXT = 400  # texts up to this long are shown whole, with every match highlighted
BREADCRUMB_CHARS = 80
_WHOLE = f'StartSel="{START}", StopSel="{STOP}", HighlightAll=true'
DELIMITER = " … "  # between the fragments of a long text
_FRAGMENTS = (
    f'StartSel="{START}", StopSel="{STOP}", MaxFragments=2, MaxWords=30, MinWords=12, '
    f'FragmentDelimiter="{DELIMITER}"'
)
# A token with inner separators (PROJ-1234, foo.bar.com, snake_case_name.py), and its parts.
_JOINER = re.compile(r"[-./@:_\\]")  # joins the parts of an identifier: PROJ-1234, a.b@c.org
_SPACE = re.compile(r"\s")
_PART = re.compile(r"[^\W_]+")
_MARKERS = re.compile(f"([{START}{STOP}])")
STEM_SUFFIX = 3  # letters the English stemmer takes off a word at most (examples -> exampl)


@dataclass
class LegScore:
    rank: int
    score: float


@dataclass
class Row:
    """One typed search result."""

    type: str  # page, node, mem, file or mail
    id: UUID  # the node, page, file or mail
    ref: str  # the chunk that matched
    title: str
    passage: str
    highlights: list[tuple[int, int]]  # [start, end) offsets of matched words in `passage`
    kb_id: UUID
    knowledge_base: str
    score: float
    legs: dict[str, LegScore]
    created_at: datetime
    updated_at: datetime
    breadcrumb: list[str] = field(default_factory=list)
    # [start, end) offsets of matched words in `title` (a file's, a mail's subject, a page's)
    title_highlights: list[tuple[int, int]] = field(default_factory=list)
    page_id: UUID | None = None
    file_id: UUID | None = None
    mail_id: UUID | None = None
    sender: str | None = None
    sent_at: datetime | None = None
    more_on_page: int | None = None
    explain: dict[str, Any] | None = None
    answer: bool = False  # a bullet an answer run asked with or wrote: derived, not a source
    source: str | None = None  # the watched folder or mailbox its item came from (sources/)


def split_highlights(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """Remove the highlight markers; return the plain text and the marked spans.

    >>> split_highlights("a \\ue000cat\\ue001 sat")
    ('a cat sat', [(2, 5)])
    """
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    position = 0
    start = -1
    for piece in _MARKERS.split(marked):
        if piece == START:
            start = position
        elif piece == STOP:
            if start >= 0 and position > start:
                spans.append((start, position))
            start = -1
        elif piece:
            out.append(piece)
            position += len(piece)
    return "".join(out), spans


# ts_headline drops what looks like an XML tag ("npm access [<user>|<scope>]" came out as
# "[ | ]"): it reads text whose angle brackets are spaces, and unfold_headline finds its
# fragments in the original, brackets and all.
_BRACKETS = str.maketrans("<>", "  ")


def _unbracketed_fold(expr: str) -> str:
    return f"translate(search.fold({expr}), '<>', '  ')"


def _headline(expr: str, tsquery: str) -> Fragment:
    """`expr` as original and its marked passage for `tsquery`, computed over its folded text
    (what the tsvectors hold, so café is highlighted for cafe); `unfold_headline` maps it back
    onto the original."""
    folded = _unbracketed_fold(expr)
    return Fragment(
        f"{expr} as original, case when length({expr}) <= {SHORT_TEXT} "
        f"then ts_headline('english', {folded}, %(hq)s::tsquery, '{_WHOLE}') "
        f"else ts_headline('english', {folded}, %(hq)s::tsquery, '{_FRAGMENTS}') end",
        {"hq": tsquery},
    )


def unfold_headline(
    original: str, marked: str, lexemes: Collection[str] = ()
) -> tuple[str, list[tuple[int, int]]]:
    """The passage of `original` that `marked` (ts_headline over the folded original) shows,
    and the highlighted spans in it.

    Each fragment is found in the folded original and cut from the original, so accents and
    CJK characters appear as written, and so do angle brackets (ts_headline reads them as
    spaces). A fragment not found there is shown as ts_headline printed it. Parts of
    identifiers that match one of the query's `lexemes` (TsQueries.lexemes) are highlighted
    too: `1234` in `PROJ-1234`.

    >>> unfold_headline("Le café", "Le \\ue000cafe\\ue001")
    ('Le café', [(3, 7)])
    """
    text, marks = split_highlights(marked)
    folded = fold_with_offsets(original)
    haystack = folded.text.translate(_BRACKETS)
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    cursor = 0
    at = 0
    for i, fragment in enumerate(text.split(DELIMITER)):
        if i:
            out.append(DELIMITER)
            length += len(DELIMITER)
            at += len(DELIMITER)
        found = haystack.find(fragment, cursor)
        if found < 0:
            found = haystack.find(fragment)
        inside = [(a - at, b - at) for a, b in marks if at <= a and b <= at + len(fragment)]
        if found < 0 or not fragment:
            out.append(fragment)
            spans.extend((length + a, length + b) for a, b in inside)
            shown = len(fragment)
        else:
            start, end = folded.original_span(found, found + len(fragment))
            for a, b in inside:
                first, last = folded.original_span(found + a, found + b)
                spans.append((length + first - start, length + last - start))
            out.append(original[start:end])
            shown = end - start
            cursor = found + len(fragment)
        length += shown
        at += len(fragment)
    shown_text = "".join(out)
    return shown_text, _merged(spans + _part_spans(shown_text, spans, lexemes))


def _part_spans(
    text: str, highlighted: list[tuple[int, int]], lexemes: Collection[str]
) -> list[tuple[int, int]]:
    """Spans of identifier parts in `text` that match a query lexeme and are not highlighted
    yet: documents are indexed with these parts, ts_headline only knows the whole token."""
    if not lexemes:
        return []
    found = []
    for at, token in _identifiers(text):
        for part in _PART.finditer(token):
            start, end = at + part.start(), at + part.end()
            if any(a < end and start < b for a, b in highlighted):
                continue
            word = part.group()
            word = (word if word.isascii() else fold(word)).lower()  # fold keeps ASCII as is
            if word in lexemes or any(
                word.isalpha() and len(w) >= STEM_SUFFIX and word.startswith(w)
                and len(word) - len(w) <= STEM_SUFFIX for w in lexemes
            ):  # fmt: skip
                found.append((start, end))
    return found


def _identifiers(text: str) -> list[tuple[int, str]]:
    """Each identifier of `text` and where it starts: a run of non-space holding two letters
    or digits joined by one of -./@:_ or a backslash (PROJ-1234, a.b@c.org, 0.05).

    Found from each joiner outwards: a regular expression for the whole run, tried at every
    character, cost most of a search's highlighting (10 rows of 1,400 characters: 1.3 ms,
    against 0.16 ms this way).
    """
    found: list[tuple[int, str]] = []
    end = 0
    backwards = ""
    for joiner in _JOINER.finditer(text, 1):
        at = joiner.start()
        if at < end or at + 1 >= len(text):
            continue
        if not (text[at - 1].isalnum() and text[at + 1].isalnum()):  # isalnum is [^\W_]
            continue
        backwards = backwards or text[::-1]
        behind = len(text) - at
        start = at - (_run_end(backwards, behind) - behind)
        end = _run_end(text, at)
        found.append((start, text[start:end]))
    return found


def _run_end(text: str, at: int) -> int:
    """Where the run of non-space at `at` ends."""
    space = _SPACE.search(text, at)
    return len(text) if space is None else space.start()


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans, overlapping ones joined (the bigrams of a CJK word overlap)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def hydrate(conn: Conn, scope: Scope, fused: list[Fused], tsq: TsQueries) -> list[Row]:
    """Rows for `fused`, in the same order; items no longer visible are left out. Passages
    are marked for `tsq`'s any-words query and its lexemes (no query: nothing is marked)."""
    return queue_hydrate(conn, scope, fused, tsq).result()


def queue_hydrate(conn: Conn, scope: Scope, fused: list[Fused], tsq: TsQueries) -> Later[list[Row]]:
    """`hydrate`, its statements queued: one per kind, and the bullets' breadcrumbs."""
    by_kind: dict[str, list[Fused]] = {}
    for item in fused:
        by_kind.setdefault(_shown_kind(item), []).append(item)
    found = []
    node_ids = [ident for kind, ident in (item.target for item in fused) if kind == "node"]
    with generic_plans(conn):  # rows read by their keys: one plan serves every page
        for kind, items in by_kind.items():
            spec = registry.get(kind)
            query = _details_sql(scope, spec, items, tsq)
            found.append((spec.target_kind, prepared(conn, query.sql, query.params, all_rows)))
        # Bullets sit in a tree: their ancestors say where they are.
        crumbs = queue_breadcrumbs(conn, scope.workspace_id, node_ids) if node_ids else None

    def shape() -> list[Row]:
        details: dict[TargetKey, dict[str, Any]] = {}
        for target, each in found:
            for d in each.result():
                details[(target, d["id"])] = d
        for (kind, ident), d in details.items():
            if kind == "node" and crumbs is not None:
                d["breadcrumb"] = [d["title"] or "Untitled", *crumbs.result().get(ident, [])]
            elif d.get("crumbs"):  # a file's chunk: the headings above it in its document
                # A document's first heading is often its title: said once.
                headings = d["crumbs"][1:] if d["crumbs"][0] == d["title"] else d["crumbs"]
                d["breadcrumb"] = [d["title"], *headings]
        return [
            _row(scope, item, details[item.target], tsq.lexemes)
            for item in fused
            if item.target in details
        ]

    return Later(shape)


def _shown_kind(item: Fused) -> str:
    """The kind whose row shows `item`: its target's, unless its best hit was in a field whose
    refs name rows of their own (a file found by its name shows the name, as a page found by
    its title does; a mail found by its subject shows its text, read by the same ref)."""
    hit, target = registry.get(item.best_hit.kind), registry.get(item.target[0])
    return hit.name if hit.part_of and hit.ref_format != target.ref_format else target.name


# The source an item came from: its first by name, when several list it (a mail in two
# mailboxes), through kb.source_items' index on the item.
_SOURCE_OF = (
    "select s.name from kb.source_items si join kb.sources s on s.workspace_id = "
    "si.workspace_id and s.id = si.source_id where si.workspace_id = {i}.workspace_id and "
    "si.item_id = {i}.{key} and not si.archived order by s.name limit 1"
)


def _details_sql(
    scope: Scope, spec: registry.KindSpec, items: list[Fused], tsq: TsQueries
) -> Fragment:
    """The rows of `spec` the hits of `items` name by their refs, with their items' titles and
    knowledge bases, when no reason the registry declares hides them now."""
    a, item = spec.alias, spec.item
    i = a if spec.in_item_table else item.alias
    # The times of what a hit stands for: a bullet's own, a file's rather than its chunk's.
    times = i if spec.key == spec.item_key else a
    sharing = [k for k in registry.registered() if k.target_kind == spec.target_kind]
    text = f"{a}.{spec.text}"
    marked = _headline(f"search.passage_text({text})" if spec.markdown else text, tsq.any_words)
    # A title is short: marked whole, every word that matched (a subject's, "Re:" and all).
    title_marked = (
        f"ts_headline('english', {_unbracketed_fold(f'{i}.{item.title}')}, %(hq)s::tsquery, "
        f"'{_WHOLE}')"
    )
    columns = [
        f"{a}.{spec.key} as id", f"{marked.sql} as marked", f"{i}.{item.title} as title",
        f"{title_marked} as title_marked",
        f"{i}.{item.kb} as kb_id", f"{i}.{item.key} as item_id", f"{times}.created_at",
        f"{times}.updated_at", *(f"{i}.{column}" for column in item.row_columns),
        *(f"coalesce({k.only(a)}, false) as only_{n}" for n, k in enumerate(sharing) if k.only),
        *([f"{a}.{spec.crumbs} as crumbs"] if spec.crumbs else []),
        f"({_SOURCE_OF.format(i=i, key=item.key)}) as source",
    ]  # fmt: skip
    # Each hit names its row by its ref's values (a file's chunk: the file and the number).
    refs = [parse_ref(hit.best_hit.ref) for hit in items]
    wanted = [ref for ref in refs if ref is not None and len(ref.more) == len(spec.ref) - 1]
    values: list[list[Any]] = [[ref.id for ref in wanted]]
    values += [[ref.more[n] for ref in wanted] for n in range(len(spec.ref) - 1)]
    join = "" if spec.in_item_table else f" join {item.table} {i} on {spec.item_link()}"
    if len(spec.ref) == 1:
        where = f"{a}.{spec.ref[0]} = any(%(ref_0)s)"
    else:
        arrays = ", ".join(
            f"%(ref_{n})s::{'uuid' if n == 0 else 'int'}[]" for n in range(len(spec.ref))
        )
        names = ", ".join(f"v{n}" for n in range(len(spec.ref)))
        on = " and ".join(f"want.v{n} = {a}.{column}" for n, column in enumerate(spec.ref))
        join += f" join unnest({arrays}) as want({names}) on {on}"
        where = "true"
    sql = (
        f"select {', '.join(columns)} from {spec.table} {a}{join} where {a}.workspace_id = "
        f"%(ws)s and {where} and {spec.row_visible()} and {item.visible(i)}"
    )
    wanted_values = Fragment("", {f"ref_{n}": column for n, column in enumerate(values)})
    # The visibility conditions name the parameters every scope binds (%(ws)s, %(user)s).
    return Fragment(sql, bind(scope.shared(), marked, wanted_values))


def _row(scope: Scope, item: Fused, d: dict[str, Any], lexemes: Collection[str]) -> Row:
    kind, ident = item.target
    spec = registry.get(kind)
    sharing = [k for k in registry.registered() if k.target_kind == kind]
    shown = next((k for n, k in enumerate(sharing) if k.only is None or d.get(f"only_{n}")), spec)
    passage, spans = unfold_headline(d.get("original") or "", d.get("marked") or "", lexemes)
    title = d.get("title") or ""
    shown_title, title_spans = unfold_headline(title, d.get("title_marked") or "", lexemes)
    if not passage.strip():  # a mail of attachments only, say: its subject says what it is
        passage, spans = shown_title, title_spans
    row = Row(
        type=shown.row_type,
        id=ident,
        ref=item.best_hit.ref,
        title=title,
        passage=passage,
        highlights=spans,
        title_highlights=title_spans if shown_title == title else [],
        kb_id=d["kb_id"],
        knowledge_base=scope.kb_names.get(d["kb_id"], ""),
        score=item.score,
        legs={leg: LegScore(rank, hit.score) for leg, (rank, hit) in item.hits.items()},
        created_at=d["created_at"],
        updated_at=d["updated_at"],
        breadcrumb=d.get("breadcrumb", []),
        answer=item.answer,
        source=d.get("source"),
    )
    # The fields the item declares it fills: its id (page_id...) and its own columns (sender).
    if spec.item.row_id:
        setattr(row, spec.item.row_id, d["item_id"])
    for column in spec.item.row_columns:
        setattr(row, column, d[column])
    return row


def queue_breadcrumbs(
    conn: Conn, workspace_id: UUID, node_ids: list[UUID]
) -> Later[dict[UUID, list[str]]]:
    """The ancestor bullets of each node, outermost first, each cut to a short label; the
    statement is queued and read at `.result()`."""
    nodes = registry.get("node").table
    return prepared(
        conn,
        "with recursive up(node_id, ancestor_id, depth) as ("
        f" select id, parent_id, 1 from {nodes}"
        " where workspace_id = %(ws)s and id = any(%(ids)s) and parent_id is not null"
        " union all"
        f" select up.node_id, n.parent_id, up.depth + 1 from up join {nodes} n"
        " on n.workspace_id = %(ws)s and n.id = up.ancestor_id"
        " where n.parent_id is not null and up.depth < 64"
        f") select up.node_id, up.depth, a.text from up join {nodes} a"
        " on a.workspace_id = %(ws)s and a.id = up.ancestor_id order by up.node_id, up.depth desc",
        {"ws": workspace_id, "ids": node_ids},
        _labels,
    )


def _labels(rows: list[dict[str, Any]]) -> dict[UUID, list[str]]:
    found: dict[UUID, list[str]] = {}
    for r in rows:
        text = " ".join(r["text"].split())
        label = text if len(text) <= BREADCRUMB_CHARS else text[: BREADCRUMB_CHARS - 1] + "…"
        found.setdefault(r["node_id"], []).append(label)
    return found
