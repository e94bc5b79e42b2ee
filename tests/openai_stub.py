"""A small OpenAI-compatible embeddings server on 127.0.0.1, scripted per request."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from subspace.providers.fake import trigram_vector


class Stub:
    """Answers POST /v1/embeddings. `script` holds one behaviour per request (then "ok")."""

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        self.requests.append(body)
        step = self.script.pop(0) if self.script else {"kind": "ok"}
        kind = step["kind"]
        if kind == "sleep":
            time.sleep(step["seconds"])
        if kind == "status":
            error = {"error": {"message": step.get("message", "error"), "type": "x"}}
            return step["code"], step.get("headers", {}), error
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        width = step.get("width", 1536)
        data = []
        for index, text in enumerate(inputs):
            vector = [0.0] * width
            live = trigram_vector(text).tolist()
            vector[: min(width, 256)] = live[: min(width, 256)]
            if kind == "nan":
                vector[0] = float("nan")
            data.append({"object": "embedding", "index": index, "embedding": vector})
        data.reverse()  # the API does not promise order; the client must sort by index
        payload = {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
        return 200, {}, payload


@contextmanager
def running_stub() -> Iterator[Stub]:
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["content-length"])
            body = json.loads(self.rfile.read(length))
            code, headers, payload = stub.answer(body)
            raw = json.dumps(payload).encode()
            self.send_response(code)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError):  # the client gave up waiting
                self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
