"""The answering strategies, one module each: rag (an agent loop over the read tools),
rag-pageindex (pages chosen from their titles and outlines) and rag-direct (one search)."""

from __future__ import annotations

from subspace.answers.strategies.direct import DirectStrategy
from subspace.answers.strategies.pageindex import PageIndexStrategy
from subspace.answers.strategies.rag import RagStrategy
from subspace.answers.strategy import Strategy
from subspace.answers.strategy_names import NAMES

STRATEGIES: dict[str, Strategy] = {
    strategy.name: strategy for strategy in (RagStrategy(), PageIndexStrategy(), DirectStrategy())
}
assert tuple(STRATEGIES) == NAMES, "every declared name has its strategy, in order"
