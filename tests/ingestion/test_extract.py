"""Text extraction from each supported format, and its limits (pure, in process)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from subspace.ingest.encoding import decode_text
from subspace.ingest.extract import ExtractLimits, clean_pdf_page, detect_kind, extract
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.html import html_text
from tests.samples import (
    make_docx,
    make_encrypted_pdf,
    make_pdf,
    make_pdf_bomb,
    make_zip_bomb,
)

LIMITS = ExtractLimits(
    max_chars=1_000_000,
    max_pdf_pages=50,
    max_archive_inflated_bytes=20 * 1024 * 1024,
    max_archive_entries=500,
    max_html_depth=256,
)


def run(data: bytes, name: str, content_type: str = "", **limits: int) -> str:
    return extract(data, name, content_type, replace(LIMITS, **limits)).text


@pytest.mark.parametrize(
    ("name", "content_type", "head", "kind"),
    [
        ("a.pdf", "", b"%PDF-1.7", "pdf"),
        ("scan", "application/octet-stream", b"junk%PDF-1.4", "pdf"),
        ("a.docx", "", b"PK\x03\x04", "docx"),
        ("page.HTML", "", b"<p>", "html"),
        ("x", "text/html; charset=utf-8", b"<p>", "html"),
        ("notes.md", "", b"# t", "markdown"),
        ("log.txt", "", b"x", "text"),
        ("data", "text/csv", b"a,b", "text"),
        ("photo.jpg", "image/jpeg", b"\xff\xd8", None),
        ("blob", "application/octet-stream", b"\x00\x01", None),
    ],
)
def test_detect_kind(name: str, content_type: str, head: bytes, kind: str | None) -> None:
    assert detect_kind(head, name, content_type) == kind


def test_unknown_types_fail_as_unsupported() -> None:
    with pytest.raises(ExtractionFailed, match=r"^unsupported type image/png: Subspace reads PDF"):
        run(b"\x89PNG\r\n", "image.png", "image/png")


def test_plain_text_in_latin_1_and_utf_8_with_bom() -> None:
    french = "Le café était fermé, déjà à l'heure où les élèves arrivèrent."
    assert run(french.encode("latin-1"), "note.txt") == french
    assert run(b"\xef\xbb\xbf" + "naïve".encode(), "bom.txt") == "naïve"
    assert decode_text("Привет, это обычный русский текст.".encode("cp1251")).startswith("Привет")


def test_nul_bytes_and_invalid_utf8_in_extracted_text_are_cleaned() -> None:
    text = run(b"alpha\x00beta \xff\xfe gamma", "x.txt")
    assert "\x00" not in text
    assert "alpha" in text
    assert "gamma" in text


def test_markdown_is_read_for_its_words_and_titled_by_its_heading() -> None:
    assert run(b"# Title\n\n- item [one](https://x.org)\n", "a.md") == "Title\n\nitem one"
    extracted = extract(b"# Title\n\n## Part\nText.\n", "a.md", "", LIMITS)
    assert extracted.title == "Title"
    assert [(b.text, b.headings) for b in extracted.blocks] == [
        ("Title", ()),
        ("Part", ("Part",)),
        ("Text.", ("Part",)),
    ]


def test_html_drops_script_and_style_and_keeps_structure() -> None:
    markup = (
        "<html><head><title>Runbook</title><style>p{color:red}</style></head><body>"
        "<script>alert('x')</script><h1>Restart</h1><p>Drain the <b>node</b> first.</p>"
        "<ul><li>kubectl cordon</li><li>kubectl drain</li></ul>"
        "<table><tr><th>Host</th><td>db-1</td></tr></table><!-- hidden --></body></html>"
    )
    assert run(markup.encode(), "r.html") == (
        "Restart\n\nDrain the node first.\n\n- kubectl cordon\n\n- kubectl drain\n\n| Host | db-1"
    )


def test_html_keeps_the_pages_words_and_drops_its_furniture() -> None:
    markup = (
        "<html><head><title>Guide</title></head><body>"
        "<header>Site banner</header><nav><a href='/'>Home</a> Auto - Light - Coal</nav>"
        "<div role='navigation'>Previous chapter</div><aside>Related posts</aside>"
        "<main><header><h1>Publishing</h1></header><p>We publish\nwith one\n   command.</p>"
        "<pre>cargo login\ncargo publish</pre>"
        "<div hidden>Press Esc to hide this help</div><button>Copy</button>"
        "<form><input name=q>Search</form></main>"
        "<footer>Copyright the site</footer></body></html>"
    )
    assert run(markup.encode(), "book.html") == (
        "Publishing\n\nWe publish with one command.\n\ncargo login\ncargo publish"
    )
    # Without <main>, the page's own header and footer still go, its body's words stay.
    plain = "<body><header>Banner</header><h2>Notes</h2><p>Kept.</p><footer>Foot</footer></body>"
    assert run(plain.encode(), "notes.html") == "Notes\n\nKept."


REAL_CHAPTER = next(
    Path("/root/.rustup/toolchains").glob("*/share/doc/rust/html/book/ch14-02-*.html"), None
)


@pytest.mark.skipif(REAL_CHAPTER is None, reason="the Rust book is not installed")
def test_a_real_book_chapter_without_its_theme_menu_and_help() -> None:
    assert REAL_CHAPTER is not None
    extracted = extract(REAL_CHAPTER.read_bytes(), REAL_CHAPTER.name, "", LIMITS)
    text = extracted.text
    # Its <title> appends the book's name; its only <h1> is the chapter's own.
    assert extracted.title == "Publishing a Crate to Crates.io"
    assert "Publishing a Crate to Crates.io" in text
    headings = {b.headings for b in extracted.blocks}
    assert ("Publishing a Crate to Crates.io", "Making Useful Documentation Comments") in headings
    assert "cargo publish" in text
    for furniture in ("Coal", "Navy", "Ayu", "hide this help", "Print this book"):
        assert furniture not in text, furniture


def test_a_huge_page_is_read_up_to_the_text_kept_and_says_it_was_cut() -> None:
    """The walk stops at what extraction keeps: a 50 MB page (measured: 2.2 s in process,
    7 s through `subspace import`) costs its parse, not a walk of all of it."""
    paragraph = "<p>" + "word " * 200 + "</p>"
    markup = ("<main>" + paragraph * 20_000 + "</main>").encode()  # 20 MB
    extracted = extract(markup, "big.html", "", replace(LIMITS, max_chars=50_000))
    assert extracted.truncated
    assert len(extracted.text) == 50_000
    assert len(extracted.blocks) < 60


def test_html_nested_too_deep_fails_fast() -> None:
    deep = "<div>" * 100_000 + "x" + "</div>" * 100_000
    with pytest.raises(ExtractionFailed, match="SUBSPACE_MAX_HTML_DEPTH"):
        html_text(deep, 256)
    # Unclosed paragraphs and list items do not count as nesting.
    assert html_text("<p>a" * 1000, 256).count("a") == 1000


def test_pdf_page_by_page() -> None:
    text = run(make_pdf(["Alpha beta\nsecond (line)", "Gamma page"]), "a.pdf")
    assert "Alpha beta" in text
    assert "second (line)" in text
    assert text.index("Alpha") < text.index("Gamma")


def test_pdf_contents_pages_leaders_page_numbers_and_line_end_hyphens_go() -> None:
    text = run(
        make_pdf(
            [
                "ii\nContents\n1 Setup . . . . . . . . 1\n2 Decoding . . . . . . . 4",
                "4\nThe decoder reads a buffer for manip-\nulation.\nSee also . . . . . . 9",
            ]
        ),
        "manual.pdf",
    )
    assert "Contents" not in text and "Setup" not in text
    assert ". . ." not in text
    assert text.strip() == "The decoder reads a buffer for manipulation."


@pytest.mark.parametrize(
    ("page", "read"),
    [
        ("a buffer for manip-\nulation", "a buffer for manipulation"),
        ("How- \never the river", "However the river"),  # a space after the dash
        ("the Rappahan-\n  nock", "the Rappahannock"),
        ("a well-\nKnown name", "a well-\nKnown name"),  # a capital: no word broken here
        ("a speci\ufb01c \ufb02ow of e\ufb00ort", "a specific flow of effort"),
        ("\ufb03 \ufb04 \ufb05 \ufb06", "ffi ffl st st"),
    ],
)
def test_a_pdf_page_joins_broken_words_and_spells_out_ligatures(page: str, read: str) -> None:
    """As LaTeX and scanned pages write them (bench/pdf_extraction.py found 82 ligatures in a
    LaTeX paper, and "How- \never" in a scan's text layer)."""
    assert clean_pdf_page(page) == read


REAL_PAGES = {
    "texinfo": Path("/usr/share/doc/libffi8/html/Closure-Example.html"),
    "npm": Path("/usr/lib/node_modules/npm/docs/output/configuring-npm/npm-shrinkwrap-json.html"),
    "node": Path("/usr/share/doc/nodejs/api/vm.html"),
}


@pytest.mark.parametrize("generator", sorted(REAL_PAGES))
def test_real_documentation_pages_without_their_navigation(generator: str) -> None:
    """Texinfo's Next/Previous/Up panel, npm's banner and contents, Node's "copy" buttons
    and heading marks are navigation (bench/html_extraction.py measures 182 such pages)."""
    path = REAL_PAGES[generator]
    if not path.exists():
        pytest.skip(f"{path} is not installed")
    extracted = extract(path.read_bytes(), path.name, "", LIMITS)
    title, text = extracted.title, extracted.text
    if generator == "texinfo":
        assert title == "2.6 Closure Example"
        assert "Next: " not in text and "Previous: " not in text
        assert "A trivial example that creates a new puts" in text
    elif generator == "npm":
        assert title == "npm-shrinkwrap.json"
        assert "npm-shrinkwrap.json @" in text  # its heading, in a page header, stays
        assert "Table of contents" not in text
    else:
        assert title == "VM (executing JavaScript)"
        assert "copy\n" not in text and not text.endswith("copy")
        assert all(not h.endswith("#") for b in extracted.blocks for h in b.headings)


REAL_PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")


@pytest.mark.skipif(not REAL_PDF.exists(), reason="libtasn1-doc is not installed")
def test_a_real_manual_keeps_its_functions_and_loses_its_contents_and_index() -> None:
    text = run(REAL_PDF.read_bytes(), REAL_PDF.name)
    assert "asn1_der_decoding" in text  # where the manual describes it
    assert ". . . ." not in text  # not the contents' or the index's leader lines
    assert "Table of Contents" not in text
    assert "manipulation" in text  # "manip-" / "ulation" joined


def test_pdf_page_limit_keeps_the_first_pages_and_flags_it() -> None:
    pdf = make_pdf([f"page number {i}" for i in range(5)])
    result = extract(pdf, "a.pdf", "", ExtractLimits(1_000_000, 3, 1 << 20, 10, 10))
    assert result.truncated
    assert "page number 2" in result.text
    assert "page number 3" not in result.text


def test_extracted_text_size_is_truncated_and_flagged() -> None:
    result = extract(b"x" * 5000, "a.txt", "", ExtractLimits(1000, 1, 1, 1, 1))
    assert (len(result.text), result.truncated) == (1000, True)


def test_truncated_pdf_fails_with_a_reason() -> None:
    pdf = make_pdf(["Some text"])
    with pytest.raises(ExtractionFailed, match="could not be read"):
        run(pdf[: len(pdf) // 2], "cut.pdf")


def test_encrypted_pdf_fails_with_a_reason() -> None:
    with pytest.raises(ExtractionFailed, match="encrypted with a password"):
        run(make_encrypted_pdf("classified"), "locked.pdf")


def test_pdf_compression_bomb_fails_fast() -> None:
    with pytest.raises(ExtractionFailed, match="decompression limit"):
        run(make_pdf_bomb(200 * 1024 * 1024), "bomb.pdf")


def test_docx_paragraphs_and_tables_in_document_order() -> None:
    docx = make_docx(["Intro paragraph"], [["Name", "Owner"], ["Billing", "Finance"]], "Closing")
    assert run(docx, "a.docx") == "Intro paragraph\n\nName | Owner\nBilling | Finance\n\nClosing"


def test_docx_keeps_its_title_headings_and_lists() -> None:
    import io

    import docx

    document = docx.Document()
    document.add_paragraph("Ferry handbook", style="Title")
    document.add_heading("Timetable", level=1)
    document.add_paragraph("Boats leave every hour.")
    document.add_heading("Winter", level=2)
    document.add_paragraph("First boat at seven", style="List Bullet")
    document.add_heading("Fares", level=1)
    document.add_paragraph("Cash or card.")
    out = io.BytesIO()
    document.save(out)
    extracted = extract(out.getvalue(), "ferry.docx", "", LIMITS)
    assert extracted.title == "Ferry handbook"
    assert [(b.text, b.headings, b.is_heading) for b in extracted.blocks] == [
        ("Timetable", ("Timetable",), True),
        ("Boats leave every hour.", ("Timetable",), False),
        ("Winter", ("Timetable", "Winter"), True),
        ("- First boat at seven", ("Timetable", "Winter"), False),
        ("Fares", ("Fares",), True),
        ("Cash or card.", ("Fares",), False),
    ]


REAL_PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")


@pytest.mark.skipif(not REAL_PDF.exists(), reason="libtasn1-doc is not installed")
def test_a_real_manual_without_running_headers_each_block_on_its_page_and_chapter() -> None:
    extracted = extract(REAL_PDF.read_bytes(), REAL_PDF.name, "", LIMITS)
    text = extracted.text
    # The running header "Chapter 2: ASN.1 structure handling 4" tops pages 5 and 6.
    assert "Chapter 2: ASN.1 structure handling" not in text
    assert "asn1_der_decoding . ." not in text
    by_page = {b.page: b for b in extracted.blocks}
    assert by_page[7].headings == ("2 ASN.1 structure handling", "Simple parsing")
    assert "Simple parsing" in by_page[7].text
    assert by_page[13].headings[0] == "4 Function reference"


def test_docx_zip_bomb_fails_before_inflating() -> None:
    with pytest.raises(ExtractionFailed, match="SUBSPACE_MAX_ARCHIVE_INFLATED_BYTES"):
        run(make_zip_bomb(64 * 1024 * 1024), "bomb.docx")


def test_docx_with_too_many_entries_fails() -> None:
    with pytest.raises(ExtractionFailed, match="SUBSPACE_MAX_ARCHIVE_ENTRIES"):
        run(make_zip_bomb(1000, entries=600), "many.docx")


def test_docx_that_is_not_a_zip_fails() -> None:
    with pytest.raises(ExtractionFailed, match="not a zip"):
        run(b"this is plain text with a docx name", "fake.docx")
