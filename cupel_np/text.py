"""String rules the spec states literally: ASCII-only case folding and Rust's f64 grammar."""

from __future__ import annotations

import re

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_fold(s: str) -> str:
    """Fold 'A'-'Z' to 'a'-'z' and nothing else (``str.lower`` folds far more)."""
    return s.translate(_ASCII_LOWER)


# Rust's `str::parse::<f64>()` grammar: optional sign, then inf / infinity / nan (any case), or
# decimal digits with an optional fraction and exponent. No surrounding whitespace, no '_',
# no hex, and at least one digit in the mantissa.
_RUST_F64 = re.compile(
    r"[+-]?(?:(?ai:inf|infinity|nan)|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)


def parse_rust_f64(s: str) -> float | None:
    """Parse ``s`` as Rust's ``str::parse::<f64>`` would; ``None`` when Rust would fail."""
    if not isinstance(s, str) or _RUST_F64.fullmatch(s) is None:
        return None
    return float(s)
