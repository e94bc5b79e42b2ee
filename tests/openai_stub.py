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


class ChatStub:
    """Answers POST /v1/chat/completions with server-sent chunks, one scripted behaviour per
    request (then the text "ok"). Behaviours:

    {"kind": "text", "pieces": [...], "pause": s}   each piece one chunk, `pause` s apart
    {"kind": "tool_calls", "calls": [{"id", "name", "arguments": str}], "pieces": n}
                                                    each call's arguments split into n chunks
    {"kind": "status", "code": 429, "headers": {...}, "message": "..."}   a JSON error
    {"kind": "sleep", "seconds": s}                 wait before answering (then "ok")
    {"kind": "stall", "pieces": [...], "seconds": s}   send the pieces, then go silent
    {"kind": "cut", "pieces": [...]}                send the pieces, then close without finishing
    """

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.keys: list[str] = []  # the Authorization header of each request
        self.left = 0  # answers the client stopped reading before their end
        self.url = ""

    def chunks(
        self, body: dict[str, Any], step: dict[str, Any]
    ) -> Iterator[dict[str, Any] | float]:
        """The chunks of one streamed answer; a float is a pause in seconds."""

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-stub",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        if step["kind"] == "tool_calls":
            for index, call in enumerate(step["calls"]):
                head = {"index": index, "id": call["id"], "type": "function"}
                yield chunk({"tool_calls": [{**head, "function": {"name": call["name"]}}]})
                raw, parts = call["arguments"], max(1, step.get("pieces", 3))
                size = max(1, -(-len(raw) // parts))
                for start in range(0, len(raw), size):
                    piece = {"arguments": raw[start : start + size]}
                    yield chunk({"tool_calls": [{"index": index, "function": piece}]})
            yield chunk({}, "tool_calls")
            return
        for piece in step.get("pieces", ["ok"]):
            yield chunk({"content": piece})
            if step.get("pause"):
                yield float(step["pause"])
        if step["kind"] == "stall":
            yield float(step["seconds"])
        if step["kind"] != "cut":
            yield chunk({}, "stop")


@contextmanager
def running_chat_stub() -> Iterator[ChatStub]:
    stub = ChatStub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["content-length"])
            body = json.loads(self.rfile.read(length))
            stub.requests.append(body)
            stub.keys.append(self.headers.get("authorization", ""))
            step: dict[str, Any] = stub.script.pop(0) if stub.script else {"kind": "text"}
            if step["kind"] == "sleep":
                time.sleep(step["seconds"])
                step = {"kind": "text"}
            try:
                if step["kind"] == "status":
                    self.send_json(step)
                else:
                    self.send_stream(stub.chunks(body, step), done=step["kind"] != "cut")
            except (BrokenPipeError, ConnectionResetError):
                stub.left += 1

        def send_json(self, step: dict[str, Any]) -> None:
            error = {"error": {"message": step.get("message", "error"), "type": "x"}}
            raw = json.dumps(error).encode()
            self.send_response(step["code"])
            for name, value in step.get("headers", {}).items():
                self.send_header(name, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def send_stream(self, chunks: Iterator[dict[str, Any] | float], *, done: bool) -> None:
            # HTTP/1.0 without a length: the body ends when the connection closes.
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for item in chunks:
                if isinstance(item, float):
                    time.sleep(item)
                    continue
                self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
                self.wfile.flush()
            if done:
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll lets shutdown() return at once rather than after half a second.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
