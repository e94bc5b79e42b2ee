"""How well the answering strategies answer a judged workspace's questions: whether the answer
states the fact a judge wrote down, and whether it cites a source that states it.

A fact is a list of alternative phrasings; an answer holds it when one of them appears in it
(case and spacing aside), and cites it when a bullet holding it cites a ref whose text holds
the same phrasing. Citing matters as much as saying: an answer that states a fact its sources
do not hold asks to be trusted, not checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from subspace.answers.sources import hit_texts
from subspace.answers.strategies import STRATEGIES
from subspace.answers.strategy import Answer, AnswerBullet, Job
from subspace.context import Context
from subspace.db.pool import Conn
from subspace.providers.chat import ChatProvider
from subspace.search.searcher import Searcher

ANSWER_METRICS = ("holds_fact", "cites_fact")
ANSWER_LABELS = {"holds_fact": "holds the fact", "cites_fact": "cites a source holding it"}


def normalised(text: str) -> str:
    """`text` casefolded with its runs of spacing made one space, for substring checks."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def stated(facts: Iterable[str], text: str) -> list[str]:
    """The phrasings of `facts` that `text` holds as words (case and spacing aside: "seeds"
    is not in "linseeds").

    >>> stated(["cargo publish"], "Run  Cargo\\npublish to upload it.")
    ['cargo publish']
    """
    held = normalised(text)
    return [
        fact for fact in facts if re.search(rf"(?<!\w){re.escape(normalised(fact))}(?!\w)", held)
    ]


@dataclass
class Quiet:
    """A run's progress that nobody watches: the evaluation reads the returned Answer."""

    bullets: list[AnswerBullet] = field(default_factory=list)

    def step(self, kind: str, summary: str, data: dict[str, Any]) -> None:
        pass

    def bullet(self, bullet: AnswerBullet) -> None:
        self.bullets.append(bullet)

    def cancelled(self) -> bool:
        return False


@dataclass(frozen=True)
class Graded:
    holds_fact: bool
    cites_fact: bool


def grade(cx: Context, answer: Answer, facts: tuple[str, ...]) -> Graded:
    """Whether `answer` states one of `facts`, and cites a source holding what it states.
    An answer that found nothing holds nothing (its closest hits are not an answer)."""
    if not answer.found:
        return Graded(False, False)
    holding = [(b, stated(facts, b.text)) for b in answer.bullets]
    holding = [(b, said) for b, said in holding if said]
    refs = [ref for b, _ in holding for ref in b.refs]
    with cx.transaction() as conn:
        texts = hit_texts(conn, cx.actor.workspace_id, refs) | _whole_files(conn, cx, refs)
    cites = any(stated(said, texts[ref]) for b, said in holding for ref in b.refs if ref in texts)
    return Graded(bool(holding), cites)


def _whole_files(conn: Conn, cx: Context, refs: list[str]) -> dict[str, str]:
    """The text of each whole file that `refs` cite as file:<id> (hit_texts reads chunks)."""
    ids = [ref.removeprefix("file:") for ref in refs if ref.count(":") == 1 and
           ref.startswith("file:")]  # fmt: skip
    rows = conn.execute(
        "select 'file:' || file_id as ref, text from search.file_text "
        "where workspace_id = %s and file_id::text = any(%s)",
        (cx.actor.workspace_id, ids),
    ).fetchall()
    return {row["ref"]: row["text"] for row in rows}


def answer_all(
    cx: Context,
    searcher: Searcher,
    chat: ChatProvider,
    questions: dict[str, str],
    facts: dict[str, tuple[str, ...]],
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, dict[str, Graded]]:
    """Each strategy's answer to each of `questions` (id -> text), graded against its facts."""
    graded: dict[str, dict[str, Graded]] = {}
    for name, strategy in STRATEGIES.items():
        progress(f"answering with {name}")
        graded[name] = {
            qid: grade(cx, strategy.answer(Job(cx, searcher, chat, text, cx.settings, Quiet())),
                       facts[qid])
            for qid, text in questions.items()
        }  # fmt: skip
    return graded


def shares(graded: dict[str, Graded]) -> dict[str, float]:
    """The share of one strategy's answers that hold their fact, and that cite it."""
    count = len(graded) or 1
    return {
        "holds_fact": sum(g.holds_fact for g in graded.values()) / count,
        "cites_fact": sum(g.cites_fact for g in graded.values()) / count,
    }
