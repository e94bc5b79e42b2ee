"""`subspace serve` as a user runs it: a fresh home, the embedded Postgres, Ctrl-C to stop."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, key_of_home

pytestmark = pytest.mark.slow


def wait_for(url: str, timeout: float) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def home() -> Iterator[Path]:
    # Not under pytest's temporary folder: as root, the embedded Postgres runs as another
    # user, and every pytest session that starts sets that folder back to mode 0700.
    folder = Path(tempfile.mkdtemp(prefix="subspace-serve-"))
    yield folder / "home"
    shutil.rmtree(folder, ignore_errors=True)


def test_serve_from_an_empty_home_then_ctrl_c(home: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SUBSPACE_", "PROVIDERS"))}
    env.update({"SUBSPACE_HOME": str(home), "SUBSPACE_PORT": str(port), "PROVIDERS": "fake"})
    env["SUBSPACE_DB_POOL_SIZE"] = "7"
    proc = subprocess.Popen(
        [sys.executable, "-m", "subspace", "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("Sign in: ") for line in lines):
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "".join(lines)
            lines.append(line)
            assert time.monotonic() < deadline, "".join(lines)
        url = next(line for line in lines if line.startswith("Sign in: ")).split()[-1]
        code = url.split("code=")[1]
        assert url == f"http://127.0.0.1:{port}/signin?code={code}"
        token = key_of_home(env)
        assert wait_for(f"http://127.0.0.1:{port}/healthz", 30).json() == {"status": "ok"}
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        # Each web process's requests share SUBSPACE_DB_POOL_SIZE connections, as /metrics
        # reports (open on loopback).
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        sizes = re.findall(r'^subspace_db_pool_size\{pool="requests",process="\d+"\} (.*)$',
                           metrics, flags=re.M)  # fmt: skip
        assert sizes and set(sizes) == {"7.0"}, metrics
        pages = httpx.get(
            f"http://127.0.0.1:{port}/api/pages", headers={"authorization": f"Bearer {token}"}
        ).json()
        assert "Welcome to Subspace" in {p["title"] for p in pages}
        # The demo's PDF, DOCX and mail attachment are extracted in the background.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            files = httpx.get(
                f"http://127.0.0.1:{port}/api/files", headers={"authorization": f"Bearer {token}"}
            ).json()
            if files and all(f["status"] == "ready" for f in files):
                break
            time.sleep(0.2)
        assert sorted(f["name"] for f in files if f["status"] == "ready") == [
            "invoice-INV-20931.txt",
            "office-field-guide.pdf",
            "onboarding-checklist.docx",
        ]
        # The indexer inside the server embeds the demo; a second process can watch it.
        deadline = time.monotonic() + 30
        while True:
            status = subprocess.run(
                [sys.executable, "-m", "subspace", "indexer", "status", "--json"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            indexed = json.loads(status.stdout)
            if indexed["backlog"] == 0 and indexed["embeddings"] > 0:
                break
            assert time.monotonic() < deadline, indexed
            time.sleep(0.3)
        assert indexed["model"] == "fake-trigram-256"
        assert indexed["dead_letters"] == 0
        browser = httpx.Client(follow_redirects=True)
        assert code in browser.get(url).text  # the form, filled in; its script sends it
        signed_in = browser.post(f"http://127.0.0.1:{port}/signin", data={"code": code})
        assert signed_in.status_code == 200
        assert "/static/js/app.js" in signed_in.text
        assert "code=" not in str(signed_in.url)  # the code leaves the address bar
        assert browser.get(f"http://127.0.0.1:{port}/static/js/app.js").status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert "Subspace stopped." in output
    # The embedded server stopped with it: its pid file is gone.
    assert not (home / "pg" / "postmaster.pid").exists()
