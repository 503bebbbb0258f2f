"""String rules the spec states literally (ASCII-only case folding, Rust's f64 grammar) and small text helpers."""

from __future__ import annotations

import html
import re

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_fold(s: str) -> str:
    """Fold 'A'-'Z' to 'a'-'z' and nothing else (``str.lower`` folds far more)."""
    return s.translate(_ASCII_LOWER)


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


def escape_html(x) -> str:
    """``str(x)`` escaped for HTML text and attribute values."""
    return html.escape(str(x), quote=True)
