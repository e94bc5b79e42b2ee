"""What a search is asked and what it answers: the one contract behind every surface (the
palette, the API, the Sim endpoint, the tools, MCP, the command line, the answers)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from subspace.errors import InvalidInput, unknown_field_message
from subspace.search.filters import TagFilter
from subspace.search.hydrate import Row
from subspace.search.options import (
    DEFAULT_SEARCH_LIMIT,
    KIND_ALIASES,
    KINDS,
    Answers,
    Mode,
    Ranker,
)

LegName = Literal["lexical", "vector"]
MAX_SHOWN = 60  # characters of a refused value quoted back


@dataclass
class LegReport:
    """How one leg went: whether it ran (and why not), its candidates, time, plan, weight."""

    ran: bool
    error: str | None = None
    candidates: int = 0
    ms: float = 0.0
    plan: str | None = None
    weight: float = 1.0
    ranker: str | None = None


Weight = Annotated[StrictFloat | StrictInt, Field(ge=0, allow_inf_nan=False)]


class SearchRequest(BaseModel):
    """What a search is asked: the one request every surface sends (the API's body, the
    command line, the tools and MCP, the Sim adapter, eval). Its types say which values
    fit; `service.validate` checks what they cannot (the limits of the settings, text that
    cannot be searched, a query that asks for nothing). A value that does not fit is refused
    when the request is made, as InvalidInput naming the field and what fits."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {"query": "launch date", "limit": 10},
                {
                    "query": "beta",
                    "kinds": ["node", "file"],
                    "tags": [{"tag": "due", "op": "lt", "value": "2026-12-31"}],
                    "mode": "hybrid",
                    "explain": True,
                },
            ]
        },
    )

    query: StrictStr = ""
    kb_ids: list[UUID] | None = Field(default=None, alias="knowledge_bases")
    kinds: list[StrictStr] | None = Field(
        default=None,
        description=f"Any of {', '.join(KINDS)} (also {', '.join(KIND_ALIASES)}); all when absent.",
    )
    tags: list[TagFilter] | None = None
    mode: Mode = "hybrid"
    limit: StrictInt = DEFAULT_SEARCH_LIMIT  # at most SUBSPACE_MAX_SEARCH_LIMIT
    weights: dict[LegName, Weight] | None = None
    explain: StrictBool = False
    explain_target: StrictStr | None = Field(
        default=None, description="A ref (node:<id>, file:<id>:2) or an id to explain if absent."
    )
    group_by_page: StrictBool = False
    cursor: StrictStr | None = None
    ranker: Ranker | None = None  # None: SUBSPACE_LEXICAL_RANKER
    typos: StrictBool = True  # match query words absent from the vocabulary to close ones
    answers: Answers = Field(
        default="include",
        description="Bullets an answer run asked with or wrote: include (ranked below the "
        "sources they cite), exclude, or only.",
    )
    min_similarity: StrictFloat | StrictInt | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="Cosine similarity a row only the vector leg found must reach; absent: "
        "SUBSPACE_MIN_SIMILARITY, else the embedding model's measured floor.",
    )

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise InvalidInput(refusal(exc)) from None


def refusal(exc: ValidationError) -> str:
    """What a request that does not fit its types is told: the first field that does not,
    and what would."""
    errors = exc.errors()
    for error in errors:  # an unknown field first: it may be why another is missing
        if error["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            path = [str(part) for part in error["loc"]]
            inner = path[0] == "tags" and len(path) > 1
            known = (
                [f.name for f in dataclasses.fields(TagFilter)]
                if inner
                else [info.alias or name for name, info in SearchRequest.model_fields.items()]
            )
            message = unknown_field_message(path[-1], known)
            return f"In {'.'.join(path[:-1])}: {message}" if inner else message
    error = errors[0]
    where = [str(part) for part in error["loc"]]
    field, value = where[0] if where else "request", error.get("input")
    kind = error["type"]
    if field == "weights" and len(where) > 1:
        if kind == "literal_error":
            return (
                f"Unknown leg {_shown(where[1])} in weights. Use: {', '.join(get_args(LegName))}."
            )
        return f"The weight of the {where[1]} leg must be a number >= 0."
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"Unknown {field} {_shown(value)}. Use one of: {expected.replace(' or ', ', ')}."
    if field == "min_similarity":
        return (
            f"min_similarity must be a number from -1 to 1, got {_shown(value)}. Leave it out for "
            "the embedding model's floor."
        )
    if field == "kinds" and kind == "list_type":
        return 'kinds must be a list of kind names, e.g. ["file"].'
    if field == "limit":
        return f"limit must be a whole number, got {_shown(value)}."
    place = ".".join(where) or "request"
    return f"{place}: {error['msg']} (got {_shown(value)})."


def _shown(value: object) -> str:
    """A value as a message quotes it: cut, since a request may carry megabytes."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"


@dataclass
class SearchResponse:
    query: str
    mode: str
    rows: list[Row]
    legs: dict[str, LegReport]
    # A line per leg that failed ("vector: timeout") or searched without part of the query.
    degraded: list[str]
    pending_embeddings: int
    is_question: bool
    next_cursor: str | None = None
    absent: dict[str, Any] | None = None
    took_ms: float = 0.0
    notes: list[str] = field(default_factory=list)
    # Each corrected word as the user typed it -> the word searched for instead.
    corrections: dict[str, str] = field(default_factory=dict)
    # With explain: each leg's own first `limit` rows, in its order (the fused list's parts).
    leg_rows: dict[str, list[Row]] = field(default_factory=dict)
    # The similarity floor the vector leg's own rows had to reach (None when it did not
    # run), and how many of its candidates stayed under it.
    min_similarity: float | None = None
    below_floor: int = 0
    # Each step's milliseconds, by its SearchStep name, in the order they ran.
    steps: dict[str, float] = field(default_factory=dict)
