"""Markdown and plain text read into outlines that follow the document's structure: headings
hold their sections, a paragraph is one bullet, code and tables stay whole, markup that says
nothing (anchors, comments, underlines) vanishes."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from subspace.ingest.markdown import parse_markdown
from subspace.ingest.outline import OutlineItem, parse_plain_text


def texts(items: list[OutlineItem]) -> list[object]:
    return [[i.text, texts(i.children)] if i.children else i.text for i in items]


def every_text(items: list[OutlineItem]) -> list[str]:
    return [t for i in items for t in [i.text, *every_text(i.children)]]


def test_headings_nest_by_level_and_lists_as_written() -> None:
    outline = parse_markdown(
        "# Trip\n\nIntro line one\nline two\n\n## Packing\n- socks\n  - wool\n- hat\n"
        "### Later\n1. buy\n## Route\n* north\n"
    )
    assert outline.title == "Trip"
    assert texts(outline.items) == [
        "Intro line one line two",
        ["Packing", [["socks", ["wool"]], "hat", ["Later", ["buy"]]]],
        ["Route", ["north"]],
    ]


def test_fallback_title_and_continuation_lines() -> None:
    outline = parse_markdown("- first\n  continues here\n- second", fallback_title="notes.md")
    assert outline.title == "notes.md"
    assert texts(outline.items) == ["first continues here", "second"]


def test_front_matter_keeps_its_keys_and_a_heading_still_titles_the_page() -> None:
    outline = parse_markdown("---\ntags: [ops]\ndate: 2026-01-02\n---\n# Runbook\n\nRestart it.")
    assert outline.title == "Runbook"
    assert texts(outline.items) == ["Restart it."]
    assert outline.properties == {"tags": ["ops"], "date": date(2026, 1, 2)}
    # Front matter that is not YAML is kept as written.
    broken = parse_markdown("---\ntitle: Ops\nkey: [unclosed\n---\nText.")
    assert (broken.title, texts(broken.items)) == ("Ops", ["```yaml\nkey: [unclosed\n```", "Text."])


def test_several_level_one_headings_are_sections_under_the_files_name() -> None:
    outline = parse_markdown(
        "1.0.1\n=====\n- fix\n\n1.0.0\n=====\n- first", fallback_title="History"
    )
    assert outline.title == "History"
    assert texts(outline.items) == [["1.0.1", ["fix"]], ["1.0.0", ["first"]]]


def test_markup_that_says_nothing_vanishes_and_angle_bracket_words_stay() -> None:
    outline = parse_markdown(
        "---\ntitle: 'Release notes'\ntags: [a]\n---\n"
        '<a id="top"></a>\n\n<!-- generated -->\n\n'
        'See <a name="x"></a>the *guide* and [docs](https://example.org/docs).\n'
        "Set it to <implementations-keywords>, then run `make`.\n\n"
        '<p align="center"><img src="logo.png"></p>\n\n---\n\nDone.'
    )
    assert outline.title == "Release notes"
    assert texts(outline.items) == [
        "See the *guide* and [docs](https://example.org/docs). "
        "Set it to <implementations-keywords>, then run `make`.",
        "Done.",
    ]


def test_an_html_block_says_its_images_alt_text() -> None:
    """Rust's README opens with a banner image whose alt text is its tagline."""
    outline = parse_markdown(
        '<div align="center">\n  <picture>\n    <img alt="The Rust Programming Language: A '
        'language empowering everyone" src="logo.svg" width="50%">\n  </picture>\n</div>\n'
    )
    assert [i.text for i in outline.items] == [
        "The Rust Programming Language: A language empowering everyone"
    ]


def test_code_and_tables_are_one_bullet_each_kept_verbatim() -> None:
    outline = parse_markdown(
        "## Use\n\n```sh\nmake serve\nmake test\n```\n\n    indented\n    code\n\n"
        "| key | value |\n|---|---|\n| a | 1 |\n\n- item\n\n  ```py\n  x = 1\n  ```\n"
    )
    assert texts(outline.items) == [
        [
            "Use",
            [
                "```sh\nmake serve\nmake test\n```",
                "```\nindented\ncode\n```",
                "| key | value |\n|---|---|\n| a | 1 |",
                ["item", ["```py\nx = 1\n```"]],
            ],
        ]
    ]


def test_deep_nesting_is_read_without_recursing_into_it() -> None:
    deep = "> " * 5_000 + "bottom\n" + "- " * 5_000 + "leaf\n"
    outline = parse_markdown(deep)
    assert any("bottom" in text for text in every_text(outline.items))


def test_plain_text_joins_wrapped_lines_and_reads_underlines_as_headings() -> None:
    outline = parse_plain_text(
        "Overview\n========\n\n"
        "The tool reads wrapped lines of text like these\nas one paragraph.\n\n"
        "Install\n-------\n\n  * first step,\n    wrapped\n  * second\n\n"
        "    make\n    make install\n\n----------\n\nThe end.\n",
        fallback_title="README",
    )
    assert outline.title == "Overview"
    assert texts(outline.items) == [
        "The tool reads wrapped lines of text like these as one paragraph.",
        ["Install", ["first step, wrapped", "second", "```\nmake\nmake install\n```", "The end."]],
    ]


# -- real documents on this machine, written by others ----------------------------------------

REAL_MARKDOWN = sorted(Path("/usr/lib/node_modules/npm").rglob("README.md"))[:40]
REAL_TEXT = sorted(Path("/usr/share/doc").glob("*/README*"))[:40]


@pytest.mark.skipif(not REAL_MARKDOWN, reason="no npm READMEs on this machine")
def test_real_readmes_keep_no_raw_anchors_underlines_or_comments() -> None:
    for path in REAL_MARKDOWN:
        outline = parse_markdown(path.read_text(errors="replace"), fallback_title=path.stem)
        for text in every_text(outline.items):
            assert text.strip(), path
            assert "<a " not in text and "</a>" not in text and "<!--" not in text, (path, text)
            if not text.startswith(("```", "|")):  # code and tables stay as written
                assert "\n" not in text, (path, text)
                assert not set(text.strip()) <= set("=-~*#_ "), (path, text)


@pytest.mark.skipif(not REAL_TEXT, reason="no /usr/share/doc READMEs on this machine")
def test_real_text_documents_become_paragraphs_not_lines() -> None:
    lines = bullets = 0
    for path in REAL_TEXT:
        if path.suffix in (".gz", ".html"):
            continue
        text = path.read_text(errors="replace")
        outline = parse_plain_text(text, fallback_title=path.stem)
        found = every_text(outline.items)
        lines += sum(1 for line in text.splitlines() if line.strip())
        bullets += len(found)
        for item in found:
            assert not set(item.strip()) <= set("=-~^*# "), (path, item)
    assert bullets < lines / 2, (bullets, lines)  # wrapped lines were joined
