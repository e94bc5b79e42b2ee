"""The similarity floor: a row only the vector leg found is shown only when it is similar
enough to the query.

The vector leg always returns the query's nearest neighbours, however far they are, so
without a floor a query of gibberish would list the workspace's least distant bullets. A
row the lexical leg found as well is never dropped: its words match. Pure: no I/O.

Each model gets its own floor, because cosine similarities are not comparable across models
(hashed trigrams put any two English texts near 0.5, MiniLM puts unrelated ones near 0.1).
The floors are measured by bench/similarity_floor.py on SciFact (docs/benchmarks.md, "The
similarity floor"): the similarity that 99 % of gibberish queries' nearest documents stay
under, checked against the share of judged-relevant pairs it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

from subspace.providers.base import EmbeddingProvider
from subspace.search.fusion import Fused

# cosine similarity (1 - cosine distance) a vector-only row must reach, by embedding model.
MODEL_FLOORS: dict[str, float] = {
    # SciFact: keeps 90 % of relevant pairs; gibberish's nearest document passes 0.3 %.
    "fake-trigram-256": 0.45,
    # SciFact: keeps 95 % of relevant pairs, 4.8 % of random pairs; gibberish's nearest
    # document passes in 10 % of queries. At 0.35 (91 %, 2 %) the vector arm lost 0.007
    # nDCG@10, at 0.30 0.001.
    "local:all-MiniLM-L6-v2": 0.30,
    # The same model with int8 weights on onnxruntime: its floor, until
    # bench/similarity_floor.py --provider onnx measures one of its own.
    "onnx:all-MiniLM-L6-v2-int8": 0.30,
    # Not measured on this machine (it reaches no API): the model's unrelated texts sit near
    # 0.1 and related ones from 0.3 up; bench/similarity_floor.py --provider openai measures it.
    "text-embedding-3-small": 0.25,
    "text-embedding-3-large": 0.25,
}


def model_floor(provider: EmbeddingProvider | None) -> float:
    """The measured floor of the provider's model; 0 (no floor) for a model not measured."""
    if provider is None:
        return 0.0
    return MODEL_FLOORS.get(provider.model, 0.0)


# cosine similarity added to the model's floor when no row matches the query's words: the
# vector leg then answers alone, and gibberish or a topic the workspace lacks has nothing
# but vectors to find. Under MiniLM (bench/similarity_floor.py, SciFact, onnx and torch
# alike) gibberish's nearest document reaches 0.35 in 2.0 % of queries, 0.40 in 0.3 %, 0.45
# in 0.3 %; but on the real set "zqxwv flurbo" meets a changelog's "zlib: level can be
# negative" at 0.425 (words sharing rare letters sit near each other), so vectors alone need
# 0.45. Where words match too, the lower floor stands; no judged query of the real, product
# or SciFact sets has its answer found by vectors alone below 0.45. The trigram floor already
# stops 99.7 % of gibberish, and a word typed halfway ("oce" for "ocelot") reaches it only
# by spelling: no margin there.
ALONE_MARGINS: dict[str, float] = {
    "local:all-MiniLM-L6-v2": 0.15,
    "onnx:all-MiniLM-L6-v2-int8": 0.15,
}


@dataclass(frozen=True)
class Floor:
    """The similarity a vector-only row must reach: `value` beside rows that match the
    query's words, `value + alone` when none does."""

    value: float
    alone: float = 0.0


def floor_for(
    provider: EmbeddingProvider | None, setting: float | None, requested: float | None
) -> Floor:
    """The floor a search applies: the request's, else the setting's
    (SUBSPACE_MIN_SIMILARITY), else the model's with its margin for vectors alone. A floor
    someone set is applied as set."""
    if requested is not None:
        return Floor(requested)
    if setting is not None:
        return Floor(setting)
    margin = ALONE_MARGINS.get(provider.model, 0.0) if provider is not None else 0.0
    return Floor(model_floor(provider), margin)


@dataclass(frozen=True)
class Floored:
    """The candidates kept, how many only the vector leg found below the floor, and the
    floor applied."""

    kept: list[Fused]
    below: int
    floor: float


def above_floor(candidates: list[Fused], floor: Floor) -> Floored:
    """The candidates in order, without those only the vector leg found whose similarity is
    under the floor (raised by its margin when no candidate matches the query's words)."""
    alone = all(_vector_only(item) for item in candidates)
    applied = round(floor.value + floor.alone, 6) if alone else floor.value
    kept = [item for item in candidates if passes(item, applied)]
    return Floored(kept, len(candidates) - len(kept), applied)


def _vector_only(item: Fused) -> bool:
    return set(item.hits) == {"vector"}


def passes(item: Fused, floor: float) -> bool:
    """Whether a fused row is shown under `floor`: another leg found it, or its vector
    similarity reaches the floor."""
    if not _vector_only(item):
        return True
    return item.hits["vector"][1].score >= floor
