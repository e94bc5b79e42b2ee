"""The last part every strategy shares: stream the model's answer as checked bullets, or say
that nothing was found and name the closest hits."""

from __future__ import annotations

from collections.abc import Sequence

from subspace.answers.evidence import Evidence, LineReader
from subspace.answers.strategy import Answer, AnswerBullet, Job
from subspace.providers.chat import Cancelled, Message, ToolDef

CLOSEST_COUNT = 3  # "Closest: …" bullets under a question nothing answers


def raise_if_cancelled(job: Job) -> None:
    """Cancelled when the run was cancelled; strategies call it between steps and bullets."""
    if job.progress.cancelled():
        raise Cancelled()


def ask_model(
    job: Job, messages: Sequence[Message], evidence: Evidence, *, tools: Sequence[ToolDef] = ()
) -> tuple[Message, LineReader]:
    """One model turn, its text streamed: each complete line that is a cited claim reaches
    progress.bullet() at once. Cancelled as soon as the run is cancelled."""

    def emit(bullet: AnswerBullet) -> None:
        raise_if_cancelled(job)
        job.progress.bullet(bullet)

    def on_text(delta: str) -> None:
        raise_if_cancelled(job)
        reader.feed(delta)

    reader = LineReader(evidence, emit)
    reply = job.chat.complete(messages, tools=tools, on_text=on_text)
    reader.finish()
    return reply, reader


def answer_from(job: Job, messages: Sequence[Message], evidence: Evidence) -> Answer:
    """The model's answer to `messages` (no tools), or not_found() when no cited claim is left."""
    _, reader = ask_model(job, messages, evidence)
    if reader.bullets:
        return Answer(found=True, bullets=reader.bullets)
    return not_found(job, evidence.closest(CLOSEST_COUNT))


def not_found(job: Job, closest: list[tuple[str, str]]) -> Answer:
    """ "I found nothing about <question>." and a "Closest: …" bullet for each closest hit
    (ref, title), each handed to progress.bullet()."""
    question = _as_object(" ".join(job.question.split()).rstrip("?.!"))
    bullets = [AnswerBullet(f"I found nothing about {question}.", [])]
    for ref, title in closest[:CLOSEST_COUNT]:
        bullets.append(AnswerBullet(f"Closest: {title or ref}", [ref]))
    for bullet in bullets:
        raise_if_cancelled(job)
        job.progress.bullet(bullet)
    return Answer(found=False, bullets=bullets, closest=[ref for ref, _ in closest])


_QUESTION_WORDS = frozenset(
    "what which when where who whom whose why how is are was were do does did can could "
    "should would will has have had".split()
)


def _as_object(question: str) -> str:
    """The question as it reads after "about": its first word lower-cased when it is a
    question word ("about which tram…"), as typed otherwise (names keep their capital)."""
    first, _, rest = question.partition(" ")
    if first.lower() in _QUESTION_WORDS:
        return " ".join(filter(None, [first.lower(), rest]))
    return question
