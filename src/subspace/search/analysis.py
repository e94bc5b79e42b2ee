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

# One-for-one folds keep every offset, so only the others cut the text into pieces.
_SINGLE = str.maketrans(FOLD_FROM, FOLD_TO)
_UNEVEN = re.compile(f"[{re.escape(''.join(FOLD_MULTI))}]|[{COMBINING}]+|[{CJK}]+")
_CJK_RUN = re.compile(f"[{CJK}]+")
_LINEAR, _WHOLE, _BIGRAMS = range(3)  # how a piece maps back (see Folded._original)


@dataclass(frozen=True)
class Folded:
    """A folded text and, for each piece of it, the stretch of the original it came from."""

    text: str
    # Parallel lists, one entry per piece: where it starts in the folded text, the original
    # [start, end) it came from, and how it maps back: character by character (_LINEAR), as a
    # whole (_WHOLE: ß -> ss, a dropped combining mark), or as the bigrams of a CJK run.
    starts: list[int]
    sources: list[tuple[int, int]]
    kinds: list[int]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The original [start, end) that the folded [start, end) came from."""
        if not self.starts or end <= start:
            return start, end
        return self._original(start, first=True), self._original(end - 1, first=False)

    def _original(self, position: int, *, first: bool) -> int:
        """Where the folded character at `position` starts (`first`) or ends in the original."""
        i = max(0, bisect.bisect_right(self.starts, position) - 1)
        (lo, hi), offset = self.sources[i], position - self.starts[i]
        if self.kinds[i] == _LINEAR:
            return lo + offset + (0 if first else 1)
        if self.kinds[i] == _WHOLE:
            return lo if first else hi
        # " c0c1 c1c2 … " from c0c1c2…: a space maps to nothing, each bigram character to the
        # character it repeats.
        if hi - lo == 1:  # " c "
            return lo if first or offset == 0 else hi
        if offset == 0:
            return lo
        step, place = divmod(offset - 1, 3)  # bigram `step`: first, second character, space
        character = lo + step + place
        return character if first or place == 2 else character + 1


def fold(text: str) -> str:
    """The same text as `search.fold(text)` in SQL.

    >>> fold("Résumé des Maßnahmen: 会议记录")
    'Resume des Massnahmen:  会议 议记 记录 '
    """
    return fold_with_offsets(text).text


def _bigrams(run: str) -> str:
    """c0c1 c1c2 … for a run of CJK characters,  c0  for one."""
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


def fold_with_offsets(text: str) -> Folded:
    """`fold(text)`, with where each piece of it came from in `text`."""
    if text.isascii():  # nothing to fold: every fold above starts outside ASCII
        return Folded(text, [0], [(0, len(text))], [_LINEAR]) if text else Folded("", [], [], [])
    out: list[str] = []
    starts: list[int] = []
    sources: list[tuple[int, int]] = []
    kinds: list[int] = []
    length = 0

    def piece(folded: str, source: tuple[int, int], kind: int) -> None:
        nonlocal length
        out.append(folded)
        starts.append(length)
        length += len(folded)
        sources.append(source)
        kinds.append(kind)

    done = 0
    for match in _UNEVEN.finditer(text):
        at, found = match.start(), match.group()
        if at > done:
            piece(text[done:at].translate(_SINGLE), (done, at), _LINEAR)
        if _CJK_RUN.fullmatch(found):
            piece(_bigrams(found), (at, match.end()), _BIGRAMS)
        else:
            piece(FOLD_MULTI.get(found, ""), (at, match.end()), _WHOLE)
        done = match.end()
    if done < len(text):
        piece(text[done:].translate(_SINGLE), (done, len(text)), _LINEAR)
    return Folded("".join(out), starts, sources, kinds)
