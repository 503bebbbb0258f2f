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

#: Unicode whitespace beyond ASCII (what ``str.isspace`` accepts): a line break absorbs it
_UNICODE_SPACES = np.array(
    [0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000], np.int64
)


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
def _space_at(buf, i, end, cls, uspaces):  # pragma: no cover - compiled
    """(is the character at ``i`` whitespace, is it a newline, its byte length)."""
    b = buf[i]
    if b < 128:
        c = cls[b]
        return c == 3 or c == 4 or c == 5, c == 4, 1
    if b >= 0xF0:
        n = 4
        cp = np.int64(b & 0x07)
    elif b >= 0xE0:
        n = 3
        cp = np.int64(b & 0x0F)
    else:
        n = 2
        cp = np.int64(b & 0x1F)
    for k in range(1, n):
        if i + k < end:
            cp = (cp << 6) | (buf[i + k] & 0x3F)
    for u in uspaces:
        if cp == u:
            return True, False, n
    return False, False, n


@jit
def _estimate_kernel(buf, offsets, cls, uspaces, out):  # pragma: no cover - compiled
    """``out[j]``: the estimate of ``buf[offsets[j]:offsets[j + 1]]`` (UTF-8 bytes), in 24ths
    of a token summed exactly, then rounded up."""
    for j in range(out.shape[0]):
        i = offsets[j]
        end = offsets[j + 1]
        n24 = 0
        no_nl_until = i  # inside a whitespace run already known to hold no newline
        while i < end:
            b = buf[i]
            c = cls[b] if b < 128 else 0
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
            sp, nl, w = _space_at(buf, i, end, cls, uspaces)
            if not sp:
                n24 += 24  # a non-ASCII character
                i += w
                continue
            if i >= no_nl_until:  # a whitespace run: one line-break piece if it holds a newline
                k = i
                has_nl = False
                while k < end:
                    sp2, nl2, w2 = _space_at(buf, k, end, cls, uspaces)
                    if not sp2:
                        break
                    has_nl = has_nl or nl2
                    k += w2
                if has_nl:
                    n24 += 24
                    i = k
                    continue
                no_nl_until = k
            if c == 3:
                k = i + 1
                while k < end and buf[k] < 128 and cls[buf[k]] == 3:
                    k += 1
                n24 += 6 * (k - i - 1)
                i = k
                continue
            n24 += 24  # another whitespace character alone: control or non-ASCII
            i += w
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
        buf = np.zeros(1, np.uint8)  # one array type whatever the input
    _estimate_kernel(buf, offsets, _CLASS, _UNICODE_SPACES, out)
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
