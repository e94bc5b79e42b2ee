"""The search options, declared once: modes, rankers, kinds, tag operators and result limits.

Every surface derives from these: the CLI's choices, the API's request models (the Literal
types below) and the agent tools' JSON schemas. Add a mode or a kind here and nowhere else.
"""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["hybrid", "lexical", "vector"]
MODES: tuple[Mode, ...] = get_args(Mode)

Ranker = Literal["bm25", "ts_rank_cd"]
RANKERS: tuple[Ranker, ...] = get_args(Ranker)

Kind = Literal["page", "node", "memory", "file", "mail"]
KINDS: tuple[Kind, ...] = get_args(Kind)
# Spellings people type for a kind (the palette's kind:pages, the CLI's --kind mem).
KIND_ALIASES: dict[str, Kind] = {"mem": "memory", "memories": "memory", "nodes": "node",
                                 "bullet": "node", "bullets": "node", "pages": "page",
                                 "files": "file", "mails": "mail"}  # fmt: skip
# What the web app's filter chips call each kind.
KIND_LABELS: dict[Kind, str] = {"page": "Pages", "node": "Bullets", "memory": "Memories",
                                "file": "Files", "mail": "Mail"}  # fmt: skip

# Bullets an answer run wrote or asked with (the "/rag …" question and its answers): shown
# below the sources by default (include), left out (exclude), or alone (only).
Answers = Literal["include", "exclude", "only"]
ANSWERS: tuple[Answers, ...] = get_args(Answers)

TextOp = Literal["eq", "neq", "contains", "not_contains", "starts_with", "ends_with"]
OrderedOp = Literal["eq", "neq", "gt", "gte", "lt", "lte", "between"]
TagOp = Literal[TextOp, OrderedOp]
TEXT_OPS: tuple[TextOp, ...] = get_args(TextOp)
ORDERED_OPS: tuple[OrderedOp, ...] = get_args(OrderedOp)
TAG_OPS: tuple[str, ...] = tuple(dict.fromkeys((*TEXT_OPS, *ORDERED_OPS)))
OPS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "text": TEXT_OPS,
    "number": ORDERED_OPS,
    "date": ORDERED_OPS,
    "boolean": ("eq",),
}

DEFAULT_SEARCH_LIMIT = 10  # rows; the most is the setting SUBSPACE_MAX_SEARCH_LIMIT
DEFAULT_GREP_LIMIT = 100  # matches per call; a cursor continues
GREP_MAX_RESULTS = 500  # matches one grep call may return
