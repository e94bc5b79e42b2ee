"""Regenerate docs/screenshots/: the start view, the palette with typed rows, a page, the explain
view, and a page on a phone-sized screen.

Starts `subspace serve` on a fresh home (the demo is seeded on first start), signs in with the
printed link in headless Chromium (Debian's), and saves PNGs in light and dark.

    python scripts/screenshots.py        (or: make screenshots)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
SIZE = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 844}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_indexed(base: str, token: str) -> None:
    """The demo's files are extracted and embedded in the background: wait for both."""
    headers = {"authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = httpx.get(f"{base}/api/files", headers=headers).json()
        found = httpx.get(f"{base}/api/search", params={"q": "descaling"}, headers=headers)
        if files and all(f["status"] != "processing" for f in files) and found.json()["rows"]:
            return
        time.sleep(0.5)
    raise SystemExit("the demo was not indexed within two minutes")


def palette(page: Page, query: str) -> None:
    page.keyboard.press("Control+k")
    page.fill("#palette-input", query)
    page.wait_for_selector("#palette-list [role=option]")
    page.wait_for_timeout(400)  # let the last keystroke's answer replace the rows


def sign_in(page: Page, base: str, token: str) -> None:
    """Sign in as a person would with a key: pasted into the sign-in page."""
    page.goto(f"{base}/signin")
    page.fill("#signin-code", token)
    page.click("button[type=submit]")


def shoot(page: Page, base: str, token: str, scheme: str) -> None:
    page.emulate_media(color_scheme=scheme)
    sign_in(page, base, token)
    page.wait_for_selector("#page-list a")
    page.wait_for_selector(".cards")
    page.screenshot(path=OUT / f"start-{scheme}.png")
    page.click("#page-list a:has-text('Incident review')")
    page.wait_for_selector(".outline textarea")
    page.screenshot(path=OUT / f"page-{scheme}.png")
    palette(page, "checkout outage")
    page.screenshot(path=OUT / f"palette-{scheme}.png")
    page.keyboard.press("Escape")
    palette(page, "retry jitter")
    page.click(".palette-explain-toggle")
    page.wait_for_selector("#palette-explain:not([hidden])")
    page.wait_for_timeout(300)
    page.screenshot(path=OUT / f"explain-{scheme}.png")


def shoot_narrow(page: Page, base: str, token: str) -> None:
    sign_in(page, base, token)
    page.wait_for_selector("#page-list a", state="attached")
    page.click("#open-drawer")
    page.click("#page-list a:has-text('Incident review')")
    page.wait_for_selector(".outline textarea")
    page.wait_for_timeout(300)  # the drawer's slide
    page.screenshot(path=OUT / "narrow-page-light.png")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="subspace-shots-") as home:
        port = free_port()
        env = {**os.environ, "SUBSPACE_HOME": home, "SUBSPACE_PORT": str(port), "PROVIDERS": "fake"}
        server = subprocess.Popen(
            [sys.executable, "-m", "subspace", "serve"], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            next(line for line in server.stdout if line.startswith("Sign in: "))
            base = f"http://127.0.0.1:{port}"
            made = subprocess.run(
                [sys.executable, "-m", "subspace", "keys", "create", "--name", "screenshots"],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            token = made.stdout.strip().splitlines()[-1]
            wait_until_indexed(base, token)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
                )
                for scheme in ("light", "dark"):
                    context = browser.new_context(viewport=SIZE)
                    shoot(context.new_page(), base, token, scheme)
                    context.close()
                context = browser.new_context(viewport=NARROW, color_scheme="light")
                shoot_narrow(context.new_page(), base, token)
                context.close()
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote {len(list(OUT.glob('*.png')))} screenshots to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
