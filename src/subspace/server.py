"""Serving the app over HTTP: deadlines for slow clients, a connection cap, clean stops."""

from __future__ import annotations

import errno
import logging
import resource
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, ClassVar
from urllib.parse import urlsplit

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from subspace.config import Settings
from subspace.errors import ConfigError

log = logging.getLogger(__name__)

# File descriptors kept for everything that is not a client connection: the Postgres pools,
# the extraction worker's pipes, log files, the listening socket.
RESERVED_FDS = 256
# Longest wait for requests in flight when the server stops; connections still busy after
# it (a client reading slowly) are closed.
GRACEFUL_STOP_S = 10
# Sent to a connection past the cap: it never reached h11, so the bytes are written by hand.
_BUSY_BODY = b"The server has too many connections open. Retry in a moment.\n"
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: 1\r\nconnection: close\r\n"
    + f"content-length: {len(_BUSY_BODY)}\r\n\r\n".encode()
    + _BUSY_BODY
)
TIMEOUT_RESPONSE = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's line and headers, and a cap
    on open connections.

    uvicorn arms its keep-alive timer only after a response and cancels it on any byte, so
    a client that sends a few bytes and then nothing holds its connection (and a file
    descriptor) for ever. Here each request must arrive whole within `header_timeout_s` of
    the connection opening or of the previous response.

    A request's body must keep coming too: a connection that sends none of it for
    `header_timeout_s` is closed.

    Past `max_connections`, a new connection closes the one that has waited longest for its
    request, so slow clients cannot lock out a health check; when every connection is busy
    with a request, the new one is answered 503.
    """

    header_timeout_s: float = 10.0
    max_connections: int = 1_000
    # Connections waiting for a request, oldest first; one dict per server (see
    # guarded_protocol), shared by its connections.
    waiting: ClassVar[dict[GuardedH11Protocol, None]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: Any = None  # an asyncio.TimerHandle while armed
        self._body_deadline: Any = None  # likewise, while a request's body is arriving

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            oldest = next(iter(self.waiting), None)
            if oldest is None:
                log.warning(
                    "refused a connection: %d are open and busy (SUBSPACE_MAX_CONNECTIONS)",
                    self.max_connections,
                )
                self.transport.write(BUSY_RESPONSE)
                self.transport.close()
                return
            log.warning(
                "closed the connection that waited longest for a request: %d are open "
                "(SUBSPACE_MAX_CONNECTIONS)",
                self.max_connections,
            )
            oldest._close_waiting()
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        self._disarm_body_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self._answering():
            self._disarm_header_deadline()  # a whole request line and headers are in
            assert self.cycle is not None
            if self.cycle.more_body:
                # Each arrival restarts it: a body may come slowly, but not stop coming.
                self._arm_body_deadline()
            else:
                self._disarm_body_deadline()

    def on_response_complete(self) -> None:
        # Armed before the next cycle starts, so a pipelined request already buffered
        # disarms it at once.
        self._arm_header_deadline()
        super().on_response_complete()

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)
        self.waiting[self] = None

    def _disarm_header_deadline(self) -> None:
        self.waiting.pop(self, None)
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        self.waiting.pop(self, None)
        if not self.transport.is_closing() and not self._answering():
            self._close_waiting()

    def _arm_body_deadline(self) -> None:
        self._disarm_body_deadline()
        self._body_deadline = self.loop.call_later(self.header_timeout_s, self._body_late)

    def _disarm_body_deadline(self) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def _body_late(self) -> None:
        """No byte of the body for `header_timeout_s`: the connection, busy for ever, would
        count against the cap and lock out every other client."""
        self._body_deadline = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or not cycle.more_body:
            return
        if self.flow.read_paused:  # the app has not read what came; the wait is ours
            self._arm_body_deadline()
            return
        if not cycle.response_started:
            self.transport.write(TIMEOUT_RESPONSE)
        self.transport.close()

    def _answering(self) -> bool:
        """Whether a request is being answered (its body may still be arriving)."""
        return self.cycle is not None and not self.cycle.response_complete

    def _close_waiting(self) -> None:
        self._disarm_header_deadline()
        if self.conn.trailing_data[0]:  # part of a request arrived: say why it is dropped
            self.transport.write(TIMEOUT_RESPONSE)
        self.transport.close()


def guarded_protocol(settings: Settings) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, with the settings' limits."""
    limit = connection_limit(settings)
    return type(
        "SubspaceH11Protocol",
        (GuardedH11Protocol,),
        {
            "header_timeout_s": float(settings.header_timeout_s),
            "max_connections": limit,
            "waiting": {},
        },
    )


def check_server_settings(settings: Settings) -> None:
    """Raise ConfigError for limits that would close every connection."""
    for env, value in (
        ("SUBSPACE_HEADER_TIMEOUT_S", settings.header_timeout_s),
        ("SUBSPACE_KEEP_ALIVE_S", settings.keep_alive_s),
        ("SUBSPACE_MAX_CONNECTIONS", settings.max_connections),
        ("SUBSPACE_DB_POOL_SIZE", settings.db_pool_size),
    ):
        if value < 1:
            raise ConfigError(f"{env} must be at least 1, got {value}. Fix or unset it.")
    public = urlsplit(settings.public_url)
    if settings.public_url and (public.scheme not in ("http", "https") or not public.netloc):
        raise ConfigError(
            f"SUBSPACE_PUBLIC_URL must be an http:// or https:// address such as "
            f"https://subspace.example.org, got {settings.public_url!r}. Fix or unset it."
        )


def check_address_free(settings: Settings) -> None:
    """Raise ConfigError when nothing could listen on SUBSPACE_HOST:SUBSPACE_PORT.

    Checked before Postgres starts and the sign-in link is printed: otherwise uvicorn finds
    out last and exits with its own message. A server taking the port in between still fails
    in uvicorn, as before.
    """
    address = f"{settings.host}:{settings.port}"
    try:
        # The host's own family, so an IPv6 address such as ::1 is checked as uvicorn binds it.
        family = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)[0][0]
        socket.create_server((settings.host, settings.port), family=family).close()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"{address} is already in use, perhaps by another `subspace serve`. Stop that "
                "server, or set SUBSPACE_PORT to a free port."
            ) from None
        raise ConfigError(
            f"Cannot listen on {address}: {exc.strerror or exc}. Fix SUBSPACE_HOST or "
            "SUBSPACE_PORT."
        ) from None


def raise_open_file_limit() -> int:
    """Raise the soft limit on open files to the hard limit; return the soft limit now set.

    Each connection is a file descriptor, and the usual soft limit (1,024) is reached long
    before the machine is busy.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65_536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open file limit from %d to %d: %s", soft, wanted, exc)
    return soft


def connection_limit(settings: Settings) -> int:
    """SUBSPACE_MAX_CONNECTIONS, lowered to what the open file limit leaves room for."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return settings.max_connections
    room = max(1, soft - RESERVED_FDS)
    if settings.max_connections > room:
        log.warning(
            "SUBSPACE_MAX_CONNECTIONS is %d but the open file limit (%d) leaves room for %d",
            settings.max_connections,
            soft,
            room,
        )
        return room
    return settings.max_connections


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT (Ctrl-C) stop the process alike: KeyboardInterrupt,
    so every `finally` runs and the embedded Postgres is stopped.

    uvicorn handles SIGTERM while it serves, then raises it again once it has stopped; with
    the default handler that kills the process before anything is cleaned up. SIGINT is set
    too: a process started with SIGINT ignored (by a shell's `&`, or a test runner's worker)
    keeps ignoring it, as Python installs its own handler only over the default one.
    """
    previous = {
        signum: signal.signal(signum, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def serve_app(app: Any, settings: Settings, sockets: list[socket.socket] | None = None) -> None:
    """Serve `app` until SIGINT or SIGTERM, on SUBSPACE_HOST:SUBSPACE_PORT or on `sockets`
    already listening (a web process of processes.py). Returns after the server has
    stopped."""
    check_server_settings(settings)
    raise_open_file_limit()
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,  # records go to our handler, which redacts and rate-limits them
        # JSON logs carry each request's own line (api/observe.py), with its id.
        access_log=settings.log_format != "json",
        http=guarded_protocol(settings),
        proxy_headers=False,  # the app applies them, with SUBSPACE_TRUSTED_PROXIES (api/app.py)
        timeout_keep_alive=settings.keep_alive_s,
        timeout_graceful_shutdown=GRACEFUL_STOP_S,
    )
    server = uvicorn.Server(config)
    with suppress(KeyboardInterrupt):  # the signal uvicorn raises again once it has stopped
        server.run(sockets=sockets)
