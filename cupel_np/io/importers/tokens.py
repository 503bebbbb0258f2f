"""Token counters: the default estimate (a Numba kernel over UTF-8 bytes) and named ones.

The estimate cuts text into pieces like a BPE pre-tokenizer would and charges each piece a
fixed share of a token (see :func:`estimate_tokens`). Pieces, tried in this order at each
position, each consuming the longest run it can:

* a word: ASCII letters ``[A-Za-z]+`` — 1 token, plus 1/6 for each letter beyond the 4th;
* a digit group: ``[0-9]{1,3}`` — 1;
* a line break: a run of whitespace (Python's ``str.isspace``) that holds a ``\\n`` — 1;
* spaces: ``[ \\t]+`` — 1/4 for each beyond the first;
* punctuation: a run of ASCII punctuation — 1/1.6 (= 15/24) a character;
* any other character (non-ASCII, control) — 1.

The sum is counted exactly in 24ths of a token and rounded up. One kernel call counts a whole
column (``estimate_tokens_many``), so the import of a large file is not bound by a Python
loop over its pieces.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cupel_np._jit import jit
from cupel_np.errors import InvalidConfigError

#: ASCII byte classes: 1 letter, 2 digit, 3 space or tab, 4 newline, 5 other whitespace
#: (\v \f \r \x1c-\x1f), 6 punctuation, 7 control
_CLASS = np.zeros(128, np.uint8)
for _b in range(128):
    _c = chr(_b)
    if _c.isascii() and _c.isalpha():
        _CLASS[_b] = 1
    elif _c.isdigit():
        _CLASS[_b] = 2
    elif _c in " \t":
        _CLASS[_b] = 3
    elif _c == "\n":
        _CLASS[_b] = 4
    elif _c.isspace():
        _CLASS[_b] = 5
    elif 33 <= _b <= 126:
        _CLASS[_b] = 6
    else:
        _CLASS[_b] = 7
del _b, _c


@jit
def _width(b):  # pragma: no cover - compiled
    """The byte length of the UTF-8 character whose first byte is ``b`` (>= 0x80)."""
    if b >= 0xF0:
        return 4
    if b >= 0xE0:
        return 3
    return 2


@jit
def _unicode_space(b0, b1, b2):  # pragma: no cover - compiled
    """Is the non-ASCII character of UTF-8 bytes ``b0 b1 b2`` whitespace (``str.isspace``:
    U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000)? Bytes
    past the text are passed as 0. Scalars only, so the call costs no reference counting."""
    if b0 == 0xC2:
        return b1 == 0x85 or b1 == 0xA0
    if b0 == 0xE1:
        return b1 == 0x9A and b2 == 0x80
    if b0 == 0xE2:
        if b1 == 0x80:
            return b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF
        return b1 == 0x81 and b2 == 0x9F
    if b0 == 0xE3:
        return b1 == 0x80 and b2 == 0x80
    return False


@jit
def _estimate_kernel(buf, offsets, cls, out):  # pragma: no cover - compiled
    """``out[j]``: the estimate of ``buf[offsets[j]:offsets[j + 1]]`` (UTF-8 bytes), in 24ths
    of a token summed exactly, then rounded up. One pass over the bytes; a whitespace run is
    scanned once, costing 1 token when it holds a newline, else the sum of its space/tab runs
    (6/24 for each beyond the first) and 1 for each other whitespace character."""
    for j in range(out.shape[0]):
        i = offsets[j]
        end = offsets[j + 1]
        n24 = 0
        while i < end:
            b = buf[i]
            if b < 128:
                c = cls[b]
                if c == 1:
                    k = i + 1
                    while k < end and buf[k] < 128 and cls[buf[k]] == 1:
                        k += 1
                    n24 += 24 + 4 * max(0, k - i - 4)
                    i = k
                    continue
                if c == 2:
                    k = i + 1
                    while k < end and k - i < 3 and buf[k] < 128 and cls[buf[k]] == 2:
                        k += 1
                    n24 += 24
                    i = k
                    continue
                if c == 6:
                    k = i + 1
                    while k < end and buf[k] < 128 and cls[buf[k]] == 6:
                        k += 1
                    n24 += 15 * (k - i)
                    i = k
                    continue
                if c == 7:
                    n24 += 24
                    i += 1
                    continue
            else:
                b1 = buf[i + 1] if i + 1 < end else 0
                b2 = buf[i + 2] if i + 2 < end else 0
                if not _unicode_space(b, b1, b2):
                    n24 += 24  # a non-ASCII character
                    i += _width(b)
                    continue
            # a whitespace run starts at i
            has_nl = False
            cost = 0
            prev_blank = False  # the previous character was a space or tab
            k = i
            while k < end:
                b = buf[k]
                if b < 128:
                    c = cls[b]
                    if c == 3:
                        if prev_blank:
                            cost += 6
                        prev_blank = True
                        k += 1
                        continue
                    if c != 4 and c != 5:
                        break
                    has_nl = has_nl or c == 4
                    k += 1
                else:
                    b1 = buf[k + 1] if k + 1 < end else 0
                    b2 = buf[k + 2] if k + 2 < end else 0
                    if not _unicode_space(b, b1, b2):
                        break
                    k += _width(b)
                cost += 24
                prev_blank = False
            n24 += 24 if has_nl else cost
            i = k
        out[j] = (n24 + 23) // 24


def estimate_tokens_many(texts: Sequence[str]) -> np.ndarray:
    """:func:`estimate_tokens` of every text, as an int64 array, in one kernel call."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    if encoded:
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    buf = np.frombuffer(b"".join(encoded), np.uint8) if encoded else np.zeros(0, np.uint8)
    out = np.zeros(len(encoded), np.int64)
    if len(buf) == 0:
        buf = np.frombuffer(b"\x00", np.uint8)  # read-only like the joined text: one kernel type
    _estimate_kernel(buf, offsets, _CLASS, out)
    return out


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate (no download): a word of up to 4 letters is 1 token and
    each further 6 letters add one, a digit group of up to 3 is 1, punctuation costs one per
    1.6 characters, a line break 1, a non-ASCII character 1, runs of spaces one per 4 beyond
    the first; the sum (exact, in 24ths) is rounded up. 0 for empty text."""
    if not text:
        return 0
    return int(estimate_tokens_many([text])[0])


def _chars4(s: str) -> int:
    return (len(s) + 3) // 4


def make_token_counter(spec=None) -> tuple[Callable[[str], int], str]:
    """A ``str -> int`` counter and its name from ``spec``: ``None`` / ``"estimate"`` (the
    default estimate), ``"chars4"`` (ceil(len/4)), a callable, ``"tiktoken:ENCODING"``,
    ``"tokenizers:PATH"`` (a Hugging Face ``tokenizer.json``) or ``"module:function"``."""
    if spec is None or spec == "estimate":
        return estimate_tokens, "estimate"
    if callable(spec):
        return spec, getattr(spec, "__name__", "callable")
    if not isinstance(spec, str):
        raise InvalidConfigError(f"tokenizer must be a name, 'module:function' or a callable, got {spec!r}")
    if spec == "chars4":
        return _chars4, "chars4"
    prefix, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise InvalidConfigError(
            f"tokenizer {spec!r}: expected 'estimate', 'chars4', 'tiktoken:ENCODING', "
            "'tokenizers:PATH' or 'module:function'"
        )
    if prefix == "tiktoken":
        return _tiktoken(spec, rest), spec
    if prefix == "tokenizers":
        return _hf_tokenizer(spec, rest), spec
    try:
        mod = importlib.import_module(prefix)
    except ImportError as e:
        raise InvalidConfigError(f"tokenizer {spec!r}: cannot import module {prefix!r}: {e}") from None
    fn: Any = mod
    for part in rest.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise InvalidConfigError(f"tokenizer {spec!r}: module {prefix!r} has no {rest!r}")
    if not callable(fn):
        raise InvalidConfigError(f"tokenizer {spec!r}: {rest!r} is not callable")
    return fn, spec


def _tiktoken(spec: str, name: str) -> Callable[[str], int]:
    try:
        import tiktoken
    except ImportError:
        raise InvalidConfigError(
            f"tokenizer {spec!r}: tiktoken is not installed (pip install 'cupel-np[tokenizers]')"
        ) from None
    try:
        enc = tiktoken.get_encoding(name)
    except Exception as e:  # unknown name, or its BPE file cannot be fetched
        raise InvalidConfigError(
            f"tokenizer {spec!r}: tiktoken cannot load {name!r}: {type(e).__name__}: {e}"
        ) from None
    return lambda s: len(enc.encode(s, disallowed_special=()))


def _hf_tokenizer(spec: str, path: str) -> Callable[[str], int]:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise InvalidConfigError(
            f"tokenizer {spec!r}: the tokenizers package is not installed (pip install tokenizers)"
        ) from None
    try:
        tok = Tokenizer.from_file(path)
    except Exception as e:
        raise InvalidConfigError(f"tokenizer {spec!r}: cannot load {path!r}: {e}") from None
    return lambda s: len(tok.encode(s, add_special_tokens=False).ids)


def count_all(texts: Sequence[str], count: Callable[[str], int]) -> list[int]:
    """Every text's tokens by ``count`` (the estimate in one kernel call); a counter that
    returns anything but an integer >= 0 is an error."""
    if count is estimate_tokens:
        return estimate_tokens_many(texts).tolist()
    out = []
    for t in texts:
        k = count(t)
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            try:
                k2 = int(k)
            except (TypeError, ValueError):
                k2 = None
            if k2 is None or k2 != k or k2 < 0 or isinstance(k, bool):
                raise InvalidConfigError(f"token counter returned {k!r} (expected an integer >= 0)")
            k = k2
        out.append(k)
    return out
