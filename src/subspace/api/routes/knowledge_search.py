"""POST /api/v1/knowledge/search: the hybrid search in the shape Sim's knowledge API answers.

Clients written against that API send `knowledgeBaseIds`, `query`, `topK` and `tagFilters`
and read `{"success": true, "data": {"results": [...]}}`. Files are its documents and their
chunks its chunks; pages (by their bullets) and mail appear as documents too. Every error,
including a missing key and a malformed body, answers `{"success": false, "error": "..."}`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Literal
from uuid import UUID

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from starlette.exceptions import HTTPException

from subspace.api.bodies import RequestBody
from subspace.api.errors import BUSY_POOL, body_model, describe_invalid, http_status
from subspace.api.openapi import SimErrorOut, error_responses
from subspace.api.positions import READER
from subspace.api.search_observer import request_searcher
from subspace.errors import BadRequest, Busy, SubspaceError
from subspace.search.filters import TagFilter
from subspace.search.hydrate import Row
from subspace.search.options import OPS_BY_TYPE
from subspace.search.request import SearchRequest
from subspace.search.row_details import RowDetail, row_details
from subspace.search.service import search

MAX_TOP_K = 100  # Sim's own cap on topK
# Sim's operator names -> ours (search/options.py). Most are the same word; Sim's date filters
# also say before/after, and a boolean's neq is our eq with the other value.
OPERATORS = {
    "eq": "eq",
    "neq": "neq",
    "contains": "contains",
    "not_contains": "not_contains",
    "starts_with": "starts_with",
    "ends_with": "ends_with",
    "gt": "gt",
    "gte": "gte",
    "lt": "lt",
    "lte": "lte",
    "between": "between",
    "after": "gt",
    "before": "lt",
}
ROW_KINDS = {"mem": "memory"}  # a row's type -> the kind shown in metadata


class SimTagFilter(RequestBody):
    """One of Sim's tag filters; `tagSlot` (its storage column) means nothing here."""

    tagName: StrictStr
    tagSlot: StrictStr | None = None
    fieldType: Literal["text", "number", "date", "boolean"] = "text"
    operator: StrictStr = "eq"
    value: StrictBool | StrictInt | StrictFloat | StrictStr
    valueTo: StrictBool | StrictInt | StrictFloat | StrictStr | None = None


class SimSearchIn(RequestBody):
    """Sim's knowledge search body. The reranker fields are accepted; enabling it is refused.
    `workflowId` (Sim sends it from a workflow) is accepted and means nothing here; any other
    field is refused by name, as on every route."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "knowledgeBaseIds": ["3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b"],
                    "query": "launch date",
                    "topK": 5,
                    "tagFilters": [
                        {"tagName": "due", "fieldType": "date", "operator": "before",
                         "value": "2026-12-31"}
                    ],
                }
            ]
        },
    )  # fmt: skip

    knowledgeBaseIds: StrictStr | list[StrictStr]
    workflowId: StrictStr | None = None
    query: StrictStr | None = None
    topK: StrictInt = Field(default=10, ge=1, le=MAX_TOP_K)
    tagFilters: list[SimTagFilter] | None = None
    searchMode: Literal["vector", "hybrid"] | None = None
    rerankerEnabled: StrictBool | None = None
    rerankerModel: StrictStr | None = None
    rerankerInputCount: StrictInt | None = None
    rerankerApiKey: StrictStr | None = None


class SimResult(BaseModel):
    documentId: str
    documentName: str
    sourceUrl: str | None
    content: str
    chunkIndex: int = Field(
        description="n of a file chunk file:<id>:<n>; a bullet's place in its page's reading "
        "order (1 for the first bullet); 0 for a page title or a mail."
    )
    metadata: dict[str, Any]
    similarity: float = Field(
        description="1 - cosine distance between the query and the chunk (its stored embedding, "
        "or its text embedded now when it has none yet); 1 for a tag-only match; 0 when no "
        "vector can be had (no embedding provider, or it did not answer)."
    )
    rankScore: float
    rank: int = Field(ge=1)


class SimData(BaseModel):
    results: list[SimResult]
    query: str
    knowledgeBaseIds: list[str]
    knowledgeBaseId: str
    topK: int
    totalResults: int


class SimSearchOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "success": True,
                    "data": {
                        "results": [
                            {
                                "documentId": "0b5c2d71-3e9f-4a8b-b6c4-1d2e3f4a5b6c",
                                "documentName": "Launch plan",
                                "sourceUrl": None,
                                "content": "Ship the beta on Friday",
                                "chunkIndex": 3,
                                "metadata": {
                                    "kind": "node",
                                    "ref": "node:7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60",
                                    "knowledgeBaseId": "3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b",
                                    "knowledgeBase": "Engineering",
                                },
                                "similarity": 0.82,
                                "rankScore": 0.0328,
                                "rank": 1,
                            }
                        ],
                        "query": "launch date",
                        "knowledgeBaseIds": ["3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b"],
                        "knowledgeBaseId": "3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b",
                        "topK": 5,
                        "totalResults": 1,
                    },
                }
            ]
        }
    )

    success: bool = True
    data: SimData


def failure(status: int, message: str) -> JSONResponse:
    """Sim's error shape: {"success": false, "error": "<message>"}."""
    return JSONResponse({"success": False, "error": message}, status_code=status)


class SimRoute(APIRoute):
    """A route whose every error, raised anywhere (the key, the body, the search), answers in
    Sim's shape instead of the app's {"error": {...}}."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def sim_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except SubspaceError as exc:
                return failure(http_status(exc), exc.message)
            except RequestValidationError as exc:
                # Sim answers 400 to a body that does not fit its schema.
                message = describe_invalid(
                    list(exc.errors()), body_model(self), request.headers.get("content-type", "")
                )
                return failure(400, message)
            except HTTPException as exc:
                if exc.status_code == 400:
                    return failure(400, "The request body could not be parsed. Send UTF-8 JSON.")
                return failure(exc.status_code, str(exc.detail))
            except PoolTimeout:
                response = failure(http_status(BUSY_POOL), BUSY_POOL.message)
                response.headers["Retry-After"] = str(Busy.retry_after_s)
                return response

        return sim_handler


router = APIRouter(
    tags=["sim"],
    route_class=SimRoute,
    responses=error_responses(400, 401, 404, 413, 422, 503, model=SimErrorOut),
)


@router.post("/api/v1/knowledge/search")
def knowledge_search(request: Request, body: SimSearchIn, cx: READER) -> SimSearchOut:
    """Search knowledge bases as Sim's `POST /api/v1/knowledge/search` does."""
    kb_ids = _knowledge_base_ids(body.knowledgeBaseIds)
    if body.rerankerEnabled:
        raise BadRequest(
            "rerankerEnabled is not supported: this server has no reranker. Send "
            "rerankerEnabled false, or leave it out."
        )
    query = body.query or ""
    tags = [_tag_filter(f) for f in body.tagFilters or []]
    if not query.strip() and not tags:
        raise BadRequest("query is required unless tagFilters are given. Send a query.")
    mode = body.searchMode or "hybrid"
    searcher = request_searcher(request)
    found = search(
        cx,
        searcher,
        SearchRequest(query=query, kb_ids=kb_ids, tags=tags, mode=mode, limit=body.topK),
    )
    details = row_details(cx, searcher, found)
    results = [
        _result(row, rank, details[row.ref], mode) for rank, row in enumerate(found.rows, start=1)
    ]
    ids = [str(k) for k in kb_ids]
    data = SimData(
        results=results,
        query=query,
        knowledgeBaseIds=ids,
        knowledgeBaseId=ids[0],
        topK=body.topK,
        totalResults=len(results),
    )
    return SimSearchOut(data=data)


def _knowledge_base_ids(raw: str | list[str]) -> list[UUID]:
    listed = [raw] if isinstance(raw, str) else raw
    if not listed:
        raise BadRequest("knowledgeBaseIds is empty. Send at least one knowledge base id.")
    ids = []
    for value in listed:
        try:
            ids.append(UUID(value))
        except ValueError:
            shown = value if len(value) <= 60 else value[:60] + "…"
            raise BadRequest(
                f"knowledgeBaseIds holds {shown!r}, which is not a knowledge base id. "
                "Send the ids GET /api/knowledge-bases lists."
            ) from None
    return list(dict.fromkeys(ids))


def _tag_filter(wanted: SimTagFilter) -> TagFilter:
    allowed = [op for op, ours in OPERATORS.items() if ours in OPS_BY_TYPE[wanted.fieldType]]
    if wanted.fieldType == "boolean":
        allowed.append("neq")
    if wanted.operator not in allowed:
        raise BadRequest(
            f"Operator {wanted.operator!r} does not fit tag {wanted.tagName!r} of fieldType "
            f"{wanted.fieldType}. Use one of: {', '.join(allowed)}."
        )
    op, value = OPERATORS[wanted.operator], wanted.value
    if wanted.fieldType == "boolean" and op == "neq":
        if not isinstance(value, bool):
            raise BadRequest(f"The value of boolean tag {wanted.tagName!r} must be true or false.")
        op, value = "eq", not value
    if op == "between" and wanted.valueTo is None:
        raise BadRequest(
            f"Operator 'between' on tag {wanted.tagName!r} needs valueTo. Send both bounds."
        )
    return TagFilter(wanted.tagName, op, value, wanted.valueTo if op == "between" else None)


def _result(row: Row, rank: int, detail: RowDetail, mode: str) -> SimResult:
    kind = ROW_KINDS.get(row.type, row.type)
    document = row.page_id or row.id  # a bullet's or a title's page; a file, a mail
    return SimResult(
        documentId=str(document),
        documentName=row.title,
        sourceUrl=None,
        content=detail.content,
        chunkIndex=detail.place,
        metadata={
            "kind": kind,
            "ref": row.ref,
            "knowledgeBaseId": str(row.kb_id),
            "knowledgeBase": row.knowledge_base,
        },
        similarity=detail.similarity,
        rankScore=detail.similarity if mode == "vector" else row.score,
        rank=rank,
    )
