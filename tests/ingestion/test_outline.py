from __future__ import annotations

from subspace.ingest.outline import OutlineItem, parse_outline


def texts(items: list[OutlineItem]) -> list[object]:
    return [[i.text, texts(i.children)] if i.children else i.text for i in items]


def test_headings_nest_by_level_and_lists_by_indent() -> None:
    outline = parse_outline(
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
    outline = parse_outline("- first\n  continues here\n- second", fallback_title="notes.md")
    assert outline.title == "notes.md"
    assert texts(outline.items) == ["first continues here", "second"]


def test_a_second_level_one_heading_is_a_bullet() -> None:
    outline = parse_outline("# A\n# B\n- x")
    assert outline.title == "A"
    assert texts(outline.items) == [["B", ["x"]]]
