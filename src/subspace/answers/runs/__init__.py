"""Answer runs, in three rooms: the queue (queue.py: filing a question, reading runs and their
steps), the engine that executes one with a strategy and records every step (engine.py), and
the server's worker and reaper (worker.py).

A run is a row of kb.runs and the bullet that asked it ("/rag <question>"). Whoever executes
it (the server's RunWorker, or `subspace ask` without a server) holds an advisory lock on the
run for as long as it works, writes each step to kb.run_steps and each answer bullet as a child
of the asking bullet through commands.add_node. Streams read the steps, so any process can
stream any run. A 'running' run whose lock is free lost its process: it is marked failed.
"""

from subspace.answers.runs.engine import (
    Claimed,
    Recorder,
    RunEngine,
    Stopping,
    default_strategies,
)
from subspace.answers.runs.queue import (
    CHANNEL,
    FINISHED,
    MAX_QUESTION_CHARS,
    QUESTIONS_PAGE,
    STEPS_CHANNEL,
    STOPPED,
    Run,
    Step,
    answer_of,
    check_question,
    check_strategy,
    command_text,
    enqueue_run,
    get_run,
    is_last,
    list_steps,
    record_step,
    request_cancel,
    server_running,
    tail_steps,
)
from subspace.answers.runs.worker import REAP_EVERY_S, RunWorker, reap_stopped
from subspace.answers.strategy_names import NAMES as STRATEGY_NAMES

__all__ = [
    "CHANNEL", "FINISHED", "MAX_QUESTION_CHARS", "QUESTIONS_PAGE", "REAP_EVERY_S",
    "STEPS_CHANNEL", "STOPPED", "STRATEGY_NAMES", "Claimed", "Recorder", "Run", "RunEngine",
    "RunWorker", "Step", "Stopping", "answer_of", "check_question", "check_strategy",
    "command_text", "default_strategies", "enqueue_run", "get_run", "is_last", "list_steps",
    "reap_stopped", "record_step", "request_cancel", "server_running", "tail_steps",
]  # fmt: skip
