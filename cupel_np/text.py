"""String rules the spec states literally (ASCII-only case folding, Rust's f64 grammar) and small text helpers."""

from __future__ import annotations

import html
import re

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_fold(s: str) -> str:
    """Fold 'A'-'Z' to 'a'-'z' and nothing else (``str.lower`` folds far more, but on an
    all-ASCII string exactly that, and several times faster than ``str.translate``)."""
    return s.lower() if s.isascii() else s.translate(_ASCII_LOWER)


# Rust's `str::parse::<f64>()` grammar: optional sign, then inf / infinity / nan (any case), or
# decimal digits with an optional fraction and exponent. No surrounding whitespace, no '_',
# no hex, and at least one digit in the mantissa.
_RUST_F64 = re.compile(r"[+-]?(?:(?ai:inf|infinity|nan)|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")


def parse_rust_f64(s: str) -> float | None:
    """Parse ``s`` as Rust's ``str::parse::<f64>`` would; ``None`` when Rust would fail."""
    if not isinstance(s, str) or _RUST_F64.fullmatch(s) is None:
        return None
    return float(s)


# Unicode White_Space (what Rust's str::trim and .NET's char.IsWhiteSpace strip). Python's
# str.isspace/strip also treat U+001C..U+001F as whitespace; the spec's implementations do not.
WHITE_SPACE_CLASS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_BLANK = re.compile(f"[{WHITE_SPACE_CLASS}]*")


def is_blank(s: str) -> bool:
    """True when ``s`` is empty or only Unicode White_Space (ContextKind/Source rule)."""
    return _BLANK.fullmatch(s) is not None


def shorten(s: str, n: int = 60) -> str:
    """``s`` on one line, cut to ``n`` characters with an ellipsis."""
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


#: characters a page never shows raw: the bidi embeddings, overrides and isolates (an
#: unterminated U+202E reverses the rest of a sentence, or shows a label as another word), the
#: C0 controls but tab and newline, DEL and the C1 controls. Each is shown as ``⟨U+XXXX⟩``.
_UNSAFE = {
    cp: f"\u27e8U+{cp:04X}\u27e9"
    for cp in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0))
    + (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
}

#: what terminal output never writes raw: ``_UNSAFE`` (ESC, so no ANSI / OSC escape sequence in
#: a user's string reaches the terminal) and, on stdout, carriage return (which rewrites the line)
TERMINAL_UNSAFE = {**_UNSAFE, 0x0D: "\u27e8U+000D\u27e9"}


class SafeTerminalText:
    """A text stream wrapper writing ``str.translate(table)`` of everything: control and bidi
    characters in user strings (content, labels, set keys) are shown as ``⟨U+XXXX⟩`` instead
    of moving the cursor, recolouring or retitling the terminal, or reordering the line."""

    def __init__(self, stream, *, keep_cr: bool = False):
        self._stream = stream
        self._table = _UNSAFE if keep_cr else TERMINAL_UNSAFE

    def write(self, s: str) -> int:
        self._stream.write(s.translate(self._table))
        return len(s)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


#: how many characters of one user string a page shows at most (the rest is cut with an
#: ellipsis and a count; the written Parquet outputs hold every value whole)
DISPLAY_LIMIT = 2000


def display_text(x, limit: int = DISPLAY_LIMIT) -> str:
    """``str(x)`` as a page or a terminal may show it: unsafe characters made visible
    (``_UNSAFE``) and cut to ``limit`` characters (``… (+N characters)``). Not escaped."""
    s = str(x)
    if len(s) > limit:
        s = s[:limit] + f"… (+{len(s) - limit:,} characters)"
    return s.translate(_UNSAFE)


def escape_html(x, limit: int = DISPLAY_LIMIT) -> str:
    """``str(x)`` escaped for HTML text and attribute values, after ``display_text``: no user
    string can reorder the page's text (bidi controls) or make it unbounded (``limit``)."""
    return html.escape(display_text(x, limit), quote=True)
