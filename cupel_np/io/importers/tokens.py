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


@jit
def _is_space(cp, uspaces):  # pragma: no cover - compiled
    if cp < 128:
        return cp == 32 or (9 <= cp <= 13) or (28 <= cp <= 31)
    for u in uspaces:
        if cp == u:
            return True
    return False


@jit
def _decode(buf, i, end):  # pragma: no cover - compiled
    """(code point, its byte length) of the UTF-8 sequence at ``buf[i]`` (surrogatepass)."""
    b = buf[i]
    if b < 0x80:
        return np.int64(b), 1
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
    return cp, n


@jit
def _estimate_kernel(buf, offsets, uspaces, out):  # pragma: no cover - compiled
    """``out[j]``: the estimate of ``buf[offsets[j]:offsets[j + 1]]`` (UTF-8 bytes)."""
    for j in range(out.shape[0]):
        i = offsets[j]
        end = offsets[j + 1]
        n24 = 0
        no_nl_until = i  # inside a whitespace run already known to hold no newline
        while i < end:
            b = buf[i]
            if (65 <= b <= 90) or (97 <= b <= 122):
                k = i
                while k < end and ((65 <= buf[k] <= 90) or (97 <= buf[k] <= 122)):
                    k += 1
                n24 += 24 + 4 * max(0, k - i - 4)
                i = k
                continue
            if 48 <= b <= 57:
                k = i
                while k < end and k - i < 3 and 48 <= buf[k] <= 57:
                    k += 1
                n24 += 24
                i = k
                continue
            cp, w = _decode(buf, i, end)
            if _is_space(cp, uspaces):
                # a whitespace run: one line-break piece if it holds a newline
                k = i
                has_nl = False
                while k < end and i >= no_nl_until:
                    c2, w2 = _decode(buf, k, end)
                    if not _is_space(c2, uspaces):
                        break
                    if c2 == 10:
                        has_nl = True
                    k += w2
                if has_nl:
                    n24 += 24
                    i = k
                    continue
                no_nl_until = max(no_nl_until, k)
                if b == 32 or b == 9:
                    k = i
                    while k < end and (buf[k] == 32 or buf[k] == 9):
                        k += 1
                    n24 += 6 * (k - i - 1)
                    i = k
                    continue
                n24 += 24  # another whitespace character alone: control or non-ASCII
                i += w
                continue
            if (33 <= b <= 47) or (58 <= b <= 64) or (91 <= b <= 96) or (123 <= b <= 126):
                k = i
                while k < end and (
                    (33 <= buf[k] <= 47) or (58 <= buf[k] <= 64) or (91 <= buf[k] <= 96) or (123 <= buf[k] <= 126)
                ):
                    k += 1
                n24 += 15 * (k - i)
                i = k
                continue
            n24 += 24  # a non-ASCII or control character
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
    _estimate_kernel(buf, offsets, _UNICODE_SPACES, out)
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
