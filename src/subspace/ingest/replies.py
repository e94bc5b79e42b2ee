"""What a message says itself, apart from what it quotes and its signature: a reply's quoted
lines ("> …") with the line that introduces them ("On Tue, Ana wrote:"), a forwarded-below
original ("-----Original Message-----"), and the signature after "-- ". Pure: no I/O.

Search and answers read what a message says; the rest is kept with the message and shown
folded, so a thread's every reply does not repeat (and outrank) the message it answers.
"""

from __future__ import annotations

import re

# The line that introduces a quote: "On Tue, 3 Mar 2020, Ana <a@x> wrote:", "Am … schrieb …:",
# "Le … a écrit :", "El … escribió:". A mail client may wrap it over two lines.
# Any other line that names an address or a date and ends with a colon ("02.04.2012 14:20
# пользователь "bob@x.org" написал:") introduces a quote too when quoted lines follow it.
_ATTRIBUTION = re.compile(
    r"^\s*(?:on|am|le|el|il|op)\b.{0,300}?\b(?:wrote|schrieb|a écrit|escribió|ha scritto|schreef)"
    r"\s*:\s*$"
    r"|^.{0,300}?(?:@|\b\d{1,4}[./-]\d{1,2}[./-]\d{1,4}\b).{0,300}:\s*$",
    re.IGNORECASE | re.DOTALL,
)
# Where an original message starts below a reply (Outlook and others): all that follows is it.
_ORIGINAL = re.compile(
    r"^\s*(?:-{2,}\s*(?:original message|ursprüngliche nachricht|message d'origine)\s*-{2,}"
    r"|_{20,})\s*$",
    re.IGNORECASE,
)
# RFC 3676's "-- " (often sent without its space), and the lines phones add.
_SIGNATURE = re.compile(
    r"^--\s?$|^\s*(?:sent from my|sent with|sent from (?:yahoo|outlook)|get outlook for)\b.{0,50}$",
    re.IGNORECASE,
)
# Outlook's header block above the original: "From: …" then "Sent: …" (or "Date:").
_FROM = re.compile(r"^\s*\*?(?:from|von|de)\s*:\*?\s", re.IGNORECASE)
_SENT = re.compile(r"^\s*\*?(?:sent|date|gesendet|envoyé)\s*:\*?\s", re.IGNORECASE)
_QUOTED = re.compile(r"^\s*>")
SIGNATURE_MAX_LINES = 15  # a "--" line further than this from the end is a rule, not a signature


def split_reply(text: str) -> tuple[str, str]:
    """The message's own text, and what was folded out of it (quotes, the original below, the
    signature), each with its lines as written. A message that is all quote keeps its text:
    a forward without a word of its own still says something.

    >>> own, folded = split_reply("Yes, Friday works.\\n\\nOn Tue, Ana wrote:\\n> Friday?\\n"
    ...     "-- \\nBo")
    >>> own
    'Yes, Friday works.'
    >>> folded
    'On Tue, Ana wrote:\\n> Friday?\\n-- \\nBo'
    """
    lines = text.splitlines()
    cut = len(lines)
    for index, line in enumerate(lines):
        header = _FROM.match(line) and any(_SENT.match(n) for n in lines[index + 1 : index + 4])
        if _ORIGINAL.match(line) or header:
            cut = index
            break
        if _SIGNATURE.match(line) and len(lines) - index <= SIGNATURE_MAX_LINES:
            cut = index
            break
    attributions = _attributions(lines[:cut])
    own: list[str] = []
    folded: list[str] = []
    for index, line in enumerate(lines[:cut]):
        if _QUOTED.match(line) or index in attributions:
            folded.append(line)
        else:
            own.append(line)
    folded.extend(lines[cut:])
    kept = "\n".join(own).strip()
    if not kept:
        return text.strip(), ""
    return kept, "\n".join(folded).strip()


def _attributions(lines: list[str]) -> set[int]:
    """The lines that introduce a quote: an attribution (on one line, or wrapped over two)
    whose next line with words is quoted."""
    found: set[int] = set()
    for index in range(len(lines)):
        for span in (1, 2):
            after = index + span
            while after < len(lines) and not lines[after].strip():
                after += 1
            quoted = after < len(lines) and _QUOTED.match(lines[after]) is not None
            own = lines[index : index + span]
            if any(_QUOTED.match(line) or not line.strip() for line in own):
                continue  # a quoted line is folded anyway; an attribution has no blank line
            if quoted and _ATTRIBUTION.match(" ".join(own)):
                found.update(range(index, index + span))
                break
    return found
