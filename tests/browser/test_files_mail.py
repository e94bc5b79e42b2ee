"""Files, mail and tags in the browser: drop and button uploads, live status, a file's
chunks and actions, mail import and messages, the tags panel, and names shown as text."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import APIResponse, Page, Route, expect

from subspace import commands
from subspace.demo import __file__ as demo_init
from tests.browser.conftest import LiveServer
from tests.samples import make_email

DEMO = Path(demo_init).parent / "files"
PDF = DEMO / "office-field-guide.pdf"
# Extraction runs niced, behind people's requests: while the whole suite fills the cores it
# has taken longer than the pages' usual 15 s wait.
EXTRACTION_WAIT_MS = 60_000
MBOX = DEMO / "demo-inbox.mbox"
PHRASE = "espresso machine needs descaling"

DROP = """([selector, files]) => {
  const transfer = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.data), (c) => c.charCodeAt(0));
    transfer.items.add(new File([bytes], f.name, { type: f.type }));
  }
  const target = document.querySelector(selector);
  for (const type of ["dragenter", "dragover", "drop"]) {
    const init = { bubbles: true, cancelable: true, dataTransfer: transfer };
    target.dispatchEvent(new DragEvent(type, init));
  }
}"""


def drop_files(page: Page, selector: str, files: list[tuple[str, str, bytes]]) -> None:
    """Drop files on an element as a desktop drag would: a DataTransfer carrying File objects."""
    payload = [
        {"name": name, "type": kind, "data": base64.b64encode(data).decode()}
        for name, kind, data in files
    ]
    page.evaluate(DROP, [selector, payload])


def found(live: LiveServer, phrase: str, file_id: str) -> bool:
    with live.api() as client:
        rows = client.get("/api/search", params={"q": phrase, "mode": "lexical"}).json()["rows"]
    return any(file_id in row["ref"] for row in rows)


def eventually(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.1)


def test_a_dropped_pdf_turns_ready_is_found_and_shown_by_its_chunks(
    page: Page, live: LiveServer
) -> None:
    page.goto("/files")
    expect(page.locator("#view h1")).to_have_text("Files")
    drop_files(page, "#view", [("office-field-guide.pdf", "application/pdf", PDF.read_bytes())])
    # the row follows the file until its text is extracted
    expect(page.locator(".upload-row .upload-status")).to_have_text("Ready: searchable.")
    row = page.locator(".file-table tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator(".file-name")).to_have_text("office-field-guide.pdf")
    expect(row.locator(".file-status")).to_have_text("ready")  # the list polls while processing
    file_id = row.get_attribute("data-file-id")
    assert file_id
    eventually(lambda: found(live, PHRASE, file_id))

    drop_files(page, "#view", [("again.pdf", "application/pdf", PDF.read_bytes())])
    expect(page.locator(".upload-row .upload-status").nth(1)).to_have_text(
        "Already stored: this knowledge base holds the same file."
    )
    expect(row).to_have_count(1)

    page.goto(f"/files/{file_id}#c0")
    chunk = page.locator("#c0")
    expect(chunk).to_contain_text("The espresso machine needs descaling every second Friday.")
    expect(chunk).to_have_class("chunk chunk-target")
    expect(chunk).to_be_in_viewport()

    with page.expect_download() as download:
        page.click("text=Download")
    assert Path(download.value.path()).read_bytes() == PDF.read_bytes()
    assert download.value.suggested_filename == "office-field-guide.pdf"


def test_disable_archive_and_delete_hide_a_file_from_search_and_restore_brings_it_back(
    page: Page, live: LiveServer
) -> None:
    cx = live.database.default_context(live.settings)
    file = commands.upload_file(cx, "guide.pdf", PDF.read_bytes(), content_type="application/pdf")
    file_id = str(file.id)
    page.goto(f"/files/{file_id}")
    # The view polls until extracted.
    expect(page.locator("#c0")).to_contain_text("espresso", timeout=EXTRACTION_WAIT_MS)
    expect(page.locator("#view")).not_to_contain_text("null")
    eventually(lambda: found(live, PHRASE, file_id))

    page.click(".file-actions >> text=Disable")
    expect(page.locator(".file-state")).to_contain_text("disabled: hidden from search")
    expect(page.locator(".file-actions [data-action=Enable]")).to_be_focused()
    eventually(lambda: not found(live, PHRASE, file_id))
    page.click(".file-actions >> text=Enable")
    expect(page.locator(".file-state")).to_have_count(0)
    eventually(lambda: found(live, PHRASE, file_id))

    for action in ("Archive", "Delete"):
        page.click(f".file-actions >> text={action}")
        expect(page.locator(".file-state")).to_contain_text(
            "archived" if action == "Archive" else "deleted"
        )
        eventually(lambda: not found(live, PHRASE, file_id))
        page.click(".file-actions >> text=Restore")
        expect(page.locator(".file-state")).to_have_count(0)
        eventually(lambda: found(live, PHRASE, file_id))


def test_a_failed_extraction_shows_its_reason(page: Page, live: LiveServer) -> None:
    page.goto("/files")
    page.set_input_files(
        ".upload-button input[type=file]",
        files=[{"name": "broken.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4 junk"}],
    )
    status = page.locator(".file-table .file-status")
    expect(status).to_contain_text("failed: ", timeout=EXTRACTION_WAIT_MS)
    expect(status.locator(".status-reason")).not_to_be_empty()


class HeldList:
    """The view's first GET of `path`, answered with what the server held when it was asked,
    but only on `release()`: a list read before an upload that arrives after it."""

    def __init__(self, page: Page, path: str) -> None:
        self.route: Route | None = None
        self.response: APIResponse | None = None
        # With its query or without (before the view knows its base): the list, not an item.
        page.route(lambda url: urlsplit(url).path == path, self._hold)

    def _hold(self, route: Route) -> None:
        if route.request.method == "GET" and self.route is None:
            self.route, self.response = route, route.fetch()
        else:
            route.continue_()

    def release(self) -> None:
        assert self.route is not None, "the view never asked for its list"
        self.route.fulfill(response=self.response)


def test_a_file_uploaded_while_the_list_loads_is_listed(page: Page, live: LiveServer) -> None:
    held = HeldList(page, "/api/files")
    page.goto("/files")
    page.set_input_files(
        ".upload-button input[type=file]",
        files=[{"name": "early.txt", "mimeType": "text/plain", "buffer": b"early notes"}],
    )
    expect(page.locator(".upload-row .upload-status")).to_contain_text("Uploaded")
    held.release()
    expect(page.locator(".file-table .file-name")).to_have_text(["early.txt"])


def test_mail_imported_while_the_list_loads_is_listed(page: Page, live: LiveServer) -> None:
    held = HeldList(page, "/api/mail")
    page.goto("/mail")
    page.set_input_files(".upload-button input[type=file]", str(MBOX))
    expect(page.locator(".upload-row .upload-status")).to_have_text(
        "3 messages imported, 1 attachment imported"
    )
    held.release()
    expect(page.locator(".mail-table .mail-subject")).to_have_count(3)


def test_imported_mail_is_listed_newest_first_and_links_its_attachment(
    page: Page, live: LiveServer
) -> None:
    page.goto("/mail")
    expect(page.locator("#view h1")).to_have_text("Mail")
    page.set_input_files(".upload-button input[type=file]", str(MBOX))
    expect(page.locator(".upload-row .upload-status")).to_have_text(
        "3 messages imported, 1 attachment imported"
    )
    subjects = page.locator(".mail-table .mail-subject")
    expect(subjects).to_have_text(
        ["Vendor invoice INV-20931", "Re: flaky integration tests", "Quarterly planning: dates"]
    )
    page.set_input_files(".upload-button input[type=file]", str(MBOX))
    expect(page.locator(".upload-row .upload-status").nth(1)).to_have_text(
        "3 messages already stored"
    )
    expect(page.locator(".import-report li")).to_have_count(3)
    expect(page.locator(".import-report li").first).to_contain_text("already stored")
    expect(subjects).to_have_count(3)

    # A dropped message joins the list in date order; a file that is no mail is refused.
    newer = make_email(
        "<b>Markup</b> in the subject",
        "<script>window.__pwned = 1</script> stays text.",
        message_id="<newer@x>",
        date=datetime(2026, 11, 30, 8, 0, tzinfo=UTC),
    )
    drop_files(page, "#view", [("newer.eml", "message/rfc822", newer)])
    expect(subjects).to_have_count(4)
    expect(subjects.first).to_have_text("<b>Markup</b> in the subject")
    drop_files(page, "#view", [("notes.txt", "text/plain", b"just some notes")])
    refused = page.locator(".upload-failed .upload-status")
    expect(refused).to_contain_text("Nothing was imported from notes.txt")
    expect(subjects).to_have_count(4)
    subjects.first.click()
    expect(page.locator(".mail-body")).to_have_text(
        "<script>window.__pwned = 1</script> stays text."
    )
    assert page.evaluate("window.__pwned") is None
    expect(page.locator(".attachments")).to_have_count(0)
    expect(page.locator("#view")).not_to_contain_text("null")
    page.go_back()

    subjects.nth(1).click()
    expect(page.locator("h1.mail-title")).to_have_text("Vendor invoice INV-20931")
    expect(page.locator(".mail-headers")).to_contain_text("To")
    attachment = page.locator(".attachments a")
    expect(attachment).to_have_text("invoice-INV-20931.txt")
    with live.api() as client:
        files = client.get("/api/files").json()
    assert [f["name"] for f in files] == ["invoice-INV-20931.txt"]
    expect(attachment).to_have_attribute("href", f"/files/{files[0]['id']}")
    attachment.click()
    expect(page.locator("h1.file-title")).to_have_text("invoice-INV-20931.txt")
    assert page.url.endswith(f"/files/{files[0]['id']}")


def test_a_tag_is_defined_set_on_a_file_and_cleared(page: Page, live: LiveServer) -> None:
    cx = live.database.default_context(live.settings)
    file = commands.upload_file(cx, "notes.txt", b"Plain notes.", content_type="text/plain")
    page.goto(f"/files/{file.id}")
    panel = page.locator(".tags-panel")
    expect(panel.locator(".tag-chip")).to_have_count(0)
    panel.locator(".tag-add").click()
    panel.locator(".tag-define input").fill("priority")
    panel.locator(".tag-define select").select_option("number")
    panel.locator(".tag-define button").click()
    expect(panel.locator(".tag-set select")).to_have_value(
        panel.locator(".tag-set option", has_text="priority (number)").get_attribute("value") or ""
    )
    panel.locator(".tag-set input").fill("3")
    panel.locator(".tag-set button").click()
    chip = panel.locator(".tag-chip")
    expect(chip).to_have_text("priority 3 ×")
    with live.api() as client:
        values = client.get(f"/api/tags/values/file/{file.id}").json()
    assert [(v["name"], v["value"]) for v in values] == [("priority", 3.0)]
    page.click("[aria-label='Clear tag priority']")
    expect(chip).to_have_count(0)
    expect(panel.locator(".tag-chip")).to_have_count(0)
    expect(panel.locator(".tag-set select")).to_be_focused()
    with live.api() as client:
        assert client.get(f"/api/tags/values/file/{file.id}").json() == []


def test_the_views_follow_the_selected_knowledge_base(page: Page, live: LiveServer) -> None:
    cx = live.database.default_context(live.settings)
    commands.upload_file(cx, "default.txt", b"in the default base", content_type="text/plain")
    other = commands.create_knowledge_base(cx, "Research")
    commands.upload_file(
        cx, "research.txt", b"in research", content_type="text/plain", kb_id=other.id
    )

    def all_ready() -> bool:
        with live.api() as client:
            return {f["status"] for f in client.get("/api/files").json()} == {"ready"}

    eventually(all_ready)  # so the list is not polling, and only the switch can redraw it
    page.reload()
    page.goto("/files")
    names = page.locator(".file-table .file-name")
    expect(names).to_have_text(["default.txt"])
    page.select_option("#kb-select", label="Research")
    expect(names).to_have_text(["research.txt"])
    page.click(".sections >> text=Mail")
    expect(page.locator("#view .empty-state")).to_contain_text("No mail yet")


def test_a_file_name_with_markup_renders_as_text(page: Page, live: LiveServer) -> None:
    name = "<img src=x onerror=window.__pwned=1>.txt"
    page.goto("/files")
    page.set_input_files(
        ".upload-button input[type=file]",
        files=[{"name": name, "mimeType": "text/plain", "buffer": b"harmless"}],
    )
    link = page.locator(".file-table .file-name")
    expect(link).to_have_text(name)
    expect(page.locator(".upload-row .upload-name")).to_have_text(name)
    link.click()
    expect(page.locator("h1.file-title")).to_have_text(name)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#view img, #upload-tray img").count() == 0


def test_install_drop_upload_lets_another_view_take_dropped_files(
    page: Page, live: LiveServer
) -> None:
    page.goto("/")
    page.evaluate(
        """async () => {
          const { installDropUpload } = await import("/static/js/upload.js");
          installDropUpload(document.getElementById("view"), {});
        }"""
    )
    drop_files(page, "#view", [("dropped.txt", "text/plain", b"dropped on the start page")])
    tray = page.locator("#upload-tray")
    expect(tray.locator(".upload-status")).to_have_text("Ready: searchable.")
    with live.api() as client:
        files = client.get("/api/files").json()
    assert [f["name"] for f in files] == ["dropped.txt"]
    expect(tray.locator(".upload-name a")).to_have_attribute("href", f"/files/{files[0]['id']}")
    tray.locator("text=Close").click()
    expect(tray).to_have_count(0)
