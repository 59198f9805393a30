"""The adversarial alphabet: every class of character an engine may escape, pad, fold or normalise.

A store that compares text the way its engine does, rather than code point by
code point, breaks on exactly these characters -- and usually on only a few of
them: MariaDB's ``JSON_CONTAINS`` compares escaped JSON text, and Python writes
``\\u000b`` where ``JSON_QUOTE`` writes ``\\u000B``, so tags with U+000B, U+000E,
U+000F or U+001A..U+001F never match while every other control does. A sample
that holds *some* controls therefore proves nothing about the others: this
module lists them *all*, by class, so the contract's fixed samples
(:mod:`chongming_conformance.checking.contract`) and the strategies
(:mod:`chongming_conformance.strategies`) can use every one in every run.

Two shapes:

* single characters (:data:`ESCAPED_CHARACTERS`), each of which must survive a
  round trip and match itself -- a miss means the store encodes it differently
  on the way in and on the way to the comparison;
* :data:`CONFUSABLE_PAIRS`, two different strings some engine calls equal
  (PAD SPACE, case folding, Unicode normalisation, width folding) -- a store
  that returns one for the other compares text, not code points.

NUL (U+0000) is outside the text domain (PostgreSQL ``text`` cannot hold it);
:data:`NUL` is listed separately for stores that claim it.
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "ASTRAL",
    "C0_CONTROLS",
    "COMBINING_MARKS",
    "CONFUSABLE_PAIRS",
    "DEL",
    "ESCAPED_CHARACTERS",
    "LINE_SEPARATORS",
    "LITERAL_ESCAPES",
    "METACHARACTERS",
    "NUL",
    "QUOTES_AND_ESCAPES",
    "SPACES",
    "describe",
]

#: U+0000: outside the text domain; only for stores that claim to hold it.
NUL = "\x00"
#: Every C0 control but NUL, U+0001..U+001F: JSON escapes all of them, and
#: encoders disagree on how (``\\u000b`` vs ``\\u000B``, ``\\t`` vs ``\\u0009``).
C0_CONTROLS: tuple[str, ...] = tuple(chr(c) for c in range(0x01, 0x20))
#: U+007F, the one control outside C0 that ASCII-minded escapers forget.
DEL = "\x7f"
#: Line and paragraph separators JavaScript-safe JSON encoders escape; NEL (U+0085).
LINE_SEPARATORS: tuple[str, ...] = ("\u2028", "\u2029", "\x85")
#: Lone combining marks (no base character): acute, diaeresis, enclosing circle.
COMBINING_MARKS: tuple[str, ...] = ("\u0301", "\u0308", "\u20dd")
#: Backslash and the quotes: the escape characters of SQL, JSON and shells.
QUOTES_AND_ESCAPES: tuple[str, ...] = ("\\", '"', "'", "`")
#: Spaces a collation or a trim may treat as nothing: space, NBSP, ideographic, BOM.
SPACES: tuple[str, ...] = (" ", "\u00a0", "\u3000", "\ufeff")
#: Four-byte UTF-8 (two UTF-16 units): utf8mb3 columns reject or mangle them.
ASTRAL: tuple[str, ...] = ("\U0001f600", "\U00010348", "\U0010fffd")
#: Escape sequences spelled out literally: an engine comparing *escaped* text may
#: confuse the real control with its spelling.
LITERAL_ESCAPES: tuple[str, ...] = ("\\u000b", "\\u000B", "\\n", "\\x0b", "\\\\")

#: Every single character above (NUL excluded), each a class an engine escapes or drops.
ESCAPED_CHARACTERS: tuple[str, ...] = (
    *C0_CONTROLS,
    DEL,
    *LINE_SEPARATORS,
    *COMBINING_MARKS,
    *QUOTES_AND_ESCAPES,
    *SPACES,
    *ASTRAL,
)

#: Characters with a meaning in a pattern language a store may match text with, by
#: language. A prefix or tag handed to one of them unescaped matches more than itself
#: (``a*`` under GLOB matches ``axb``), or fails to parse (``a[`` under GLOB, ``a(``
#: as a regex). The contract tries every one of them as a literal ``name_prefix`` and
#: inside tags; the strategies draw them often.
METACHARACTERS: dict[str, tuple[str, ...]] = {
    "LIKE": ("%", "_", "\\"),
    "GLOB": ("*", "?", "[", "]"),
    "regex": (".", "^", "$", "*", "+", "?", "(", ")", "[", "]", "{", "}", "|", "\\"),
    "JSON path": ("$", ".", "[", "]", "*", "'", '"', "@", "?", "(", ")"),
}

#: Pairs of different strings that some engine treats as equal; the reason is
#: the third item; the left one is the plain spelling (no left is also a right).
#: A store must keep every pair apart in equality, prefix and membership tests.
CONFUSABLE_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("build", "build ", "PAD SPACE: trailing spaces ignored"),
    ("build", " build", "leading space trimmed"),
    ("build", "build\u00a0", "trailing NBSP trimmed"),
    ("build", "Build", "case-insensitive collation"),
    ("stra\u00dfe", "STRASSE", "full case folding: \u00df -> SS"),
    ("stra\u00dfe", "strasse", "case folding: \u00df -> ss"),
    ("\u0130stanbul", "i\u0307stanbul", "Turkish dotted capital I folds to i + U+0307"),
    ("\u0131", "I", "Turkish dotless i upper-cases to I"),
    ("caf\u00e9", "cafe\u0301", "NFC vs NFD: precomposed vs combining acute"),
    ("\u00c5", "\u212b", "NFC maps ANGSTROM SIGN to A WITH RING"),
    ("build", "\uff42uild", "full-width letter: NFKC / width folding"),
    ("file", "\ufb01le", "ligature: NFKC"),
    ("caf\u00e9", "cafe", "accent-insensitive collation"),
)


_C0_NAMES = (
    "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI "
    "DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US"
)
#: The names of the controls, which ``unicodedata.name`` does not know.
_CONTROL_NAMES: dict[str, str] = {
    **{chr(i): name for i, name in enumerate(_C0_NAMES.split(" "))},
    DEL: "DEL",
    "\x85": "NEL",
}


def _name(ch: str) -> str:
    known = _CONTROL_NAMES.get(ch)
    return known if known is not None else unicodedata.name(ch, "?")


def describe(text: str) -> str:
    """``text`` with every character outside printable ASCII named: for failure messages.

    ``repr`` shows ``'\\x0b'`` but prints U+2028 or a combining mark as itself,
    which a terminal then hides, and a trailing space is easy to miss; this names
    them: ``'build ' (U+0020 SPACE)``.
    """
    odd = [ch for ch in dict.fromkeys(text) if not ("!" <= ch <= "~")]
    if not odd:
        return repr(text)
    names = ", ".join(f"U+{ord(ch):04X} {_name(ch)}" for ch in odd)
    return f"{text!r} ({names})"
