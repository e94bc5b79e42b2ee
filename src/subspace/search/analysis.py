"""Text analysis of the lexical leg, as Python mirrors of the SQL in migration 0009.

Documents and queries both pass through `search.fold(text)` before `to_tsvector('english')`:
Latin letters lose their diacritics (`résumé` -> `resume`, `ß` -> `ss`) and every run of
Chinese, Japanese or Korean characters becomes its overlapping character bigrams (`会议记录` ->
` 会议 议记 记录 `). Documents also get the parts of their identifiers (see the migration).

Highlighting runs `ts_headline` over the folded text; `fold_with_offsets` repeats the fold
here, keeping for each folded character the original characters it came from, so highlight
offsets point into the text the user sees. A test checks that both folds agree.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# Latin letters with diacritics (Latin-1, Extended-A and -B, Extended Additional), each folded
# to one ASCII letter: the NFKD decomposition without its combining marks, plus the letters
# that do not decompose (ø, ł, đ, ð, ħ, ı, ŧ, ƀ, ƚ, ȼ). The migration's translate() uses the
# same two strings.
FOLD_FROM = (
    "ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝàáâãäåçèéêëìíîïðñòóôõöøùúûüýÿĀāĂăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚ"
    "ěĜĝĞğĠġĢģĤĥĦħĨĩĪīĬĭĮįİıĴĵĶķĹĺĻļĽľŁłŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŦŧŨũŪūŬŭŮůŰűŲųŴŵŶŷŸ"
    "ŹźŻżŽžſƀƚƠơƯưǍǎǏǐǑǒǓǔǕǖǗǘǙǚǛǜǞǟǠǡǦǧǨǩǪǫǬǭǰǴǵǸǹǺǻȀȁȂȃȄȅȆȇȈȉȊȋȌȍȎȏȐȑȒȓȔȕȖȗȘșȚțȞȟȦȧȨȩȪȫ"
    "ȬȭȮȯȰȱȲȳȻȼḀḁḂḃḄḅḆḇḈḉḊḋḌḍḎḏḐḑḒḓḔḕḖḗḘḙḚḛḜḝḞḟḠḡḢḣḤḥḦḧḨḩḪḫḬḭḮḯḰḱḲḳḴḵḶḷḸḹḺḻḼḽḾḿṀṁṂṃṄṅṆṇṈṉ"
    "ṊṋṌṍṎṏṐṑṒṓṔṕṖṗṘṙṚṛṜṝṞṟṠṡṢṣṤṥṦṧṨṩṪṫṬṭṮṯṰṱṲṳṴṵṶṷṸṹṺṻṼṽṾṿẀẁẂẃẄẅẆẇẈẉẊẋẌẍẎẏẐẑẒẓẔẕẖẗẘẙẛẠạẢ"
    "ảẤấẦầẨẩẪẫẬậẮắẰằẲẳẴẵẶặẸẹẺẻẼẽẾếỀềỂểỄễỆệỈỉỊịỌọỎỏỐốỒồỔổỖỗỘộỚớỜờỞởỠỡỢợỤụỦủỨứỪừỬửỮữỰựỲỳỴỵỶ"
    "ỷỸỹ"
)
FOLD_TO = (
    "AAAAAACEEEEIIIIDNOOOOOOUUUUYaaaaaaceeeeiiiidnoooooouuuuyyAaAaAaCcCcCcCcDdDdEeEeEeEeE"
    "eGgGgGgGgHhHhIiIiIiIiIiJjKkLlLlLlLlNnNnNnOoOoOoRrRrRrSsSsSsSsTtTtTtUuUuUuUuUuUuWwYyY"
    "ZzZzZzsblOoUuAaIiOoUuUuUuUuUuAaAaGgKkOoOojGgNnAaAaAaEeEeIiIiOoOoRrRrUuUuSsTtHhAaEeOo"
    "OoOoOoYyCcAaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfGgHhHhHhHhHhIiIiKkKkKkLlLlLlLlMmMmMmNnNnNn"
    "NnOoOoOoOoPpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUuUuUuUuUuVvVvWwWwWwWwWwXxXxYyZzZzZzhtwysAaA"
    "aAaAaAaAaAaAaAaAaAaAaEeEeEeEeEeEeEeEeIiIiOoOoOoOoOoOoOoOoOoOoOoOoUuUuUuUuUuUuUuYyYyY"
    "yYy"
)
# Letters that fold to two (the migration replaces them before the translate).
FOLD_MULTI = {
    "Æ": "AE", "æ": "ae", "Œ": "OE", "œ": "oe", "ß": "ss", "ẞ": "SS", "Þ": "TH", "þ": "th",
    "Ĳ": "IJ", "ĳ": "ij", "Ǆ": "DZ", "ǅ": "Dz", "ǆ": "dz", "Ǉ": "LJ", "ǈ": "Lj", "ǉ": "lj",
    "Ǌ": "NJ", "ǋ": "Nj", "ǌ": "nj", "Ǳ": "DZ", "ǲ": "Dz", "ǳ": "dz",
}  # fmt: skip
COMBINING = "\u0300-\u036f"  # combining diacritical marks (decomposed text), dropped
# Han (with extension A, B-F and compatibility ideographs), kana and Hangul; the migration's
# regular expressions use the same ranges.
CJK = (
    "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)

_SINGLE = dict(zip(FOLD_FROM, FOLD_TO, strict=True))
_SPECIAL = re.compile(f"[{re.escape(''.join(FOLD_MULTI))}{FOLD_FROM}{COMBINING}]|[{CJK}]+")
_CJK_RUN = re.compile(f"[{CJK}]+")


@dataclass(frozen=True)
class Folded:
    """A folded text and, for each stretch of it, the stretch of the original it came from."""

    text: str
    # Parallel lists: folded[starts[i]:] began with original[sources[i]:]; a piece where both
    # sides have the same length maps character by character, others map as a whole.
    starts: list[int]
    ends: list[int]
    sources: list[tuple[int, int]]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The original [start, end) that the folded [start, end) came from."""
        if not self.starts or end <= start:
            return start, end
        return self._original(start, first=True), self._original(end - 1, first=False)

    def _original(self, position: int, *, first: bool) -> int:
        i = max(0, bisect.bisect_right(self.starts, position) - 1)
        lo, hi = self.sources[i]
        if self.ends[i] - self.starts[i] == hi - lo:
            return lo + position - self.starts[i] + (0 if first else 1)
        return lo if first else hi


def fold(text: str) -> str:
    """The same text as `search.fold(text)` in SQL.

    >>> fold("Résumé des Maßnahmen: 会议记录")
    'Resume des Massnahmen:  会议 议记 记录 '
    """
    return fold_with_offsets(text).text


def fold_with_offsets(text: str) -> Folded:
    """`fold(text)`, with where each part of it came from in `text`."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    sources: list[tuple[int, int]] = []
    length = 0

    def piece(folded: str, source: tuple[int, int]) -> None:
        nonlocal length
        out.append(folded)
        starts.append(length)
        length += len(folded)
        ends.append(length)
        sources.append(source)

    done = 0
    for match in _SPECIAL.finditer(text):
        if match.start() > done:
            piece(text[done : match.start()], (done, match.start()))
        found = match.group()
        at = match.start()
        if _CJK_RUN.fullmatch(found):
            # ` c0c1 c1c2 … ` for a run, ` c0 ` for one character; every bigram's character
            # maps to the character it repeats, the spaces to nothing.
            piece(" ", (at, at))
            for i, char in enumerate(found):
                if 0 < i < len(found) - 1:
                    piece(char, (at + i, at + i + 1))
                    piece(" ", (at + i + 1, at + i + 1))
                piece(char, (at + i, at + i + 1))
            piece(" ", (match.end(), match.end()))
        else:
            piece(FOLD_MULTI.get(found) or _SINGLE.get(found, ""), (at, at + 1))
        done = match.end()
    if done < len(text):
        piece(text[done:], (done, len(text)))
    return Folded("".join(out), starts, ends, sources)
