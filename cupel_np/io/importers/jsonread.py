"""Reading JSON files for the importers: JSON lines, a whole ``.json`` document, and a large
``.json`` document's top-level array one element at a time (:func:`streamed_array`), with the
same values and the same error positions as the whole-document parse."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from cupel_np._fs import RemotePath
from cupel_np.errors import BadTranscriptError


class Bad(Exception):
    """A problem with the current line (caught per line, reported with file and line)."""


_DECODER = json.JSONDecoder()


def json_lines(path: Path, *, offsets: bool = False) -> Iterator[tuple[Any, ...]]:
    """(line number, parsed JSON or a :class:`Bad`) of each non-blank line; with ``offsets``,
    (line number, value, byte offset of the line) for :func:`json_line_at`."""
    decode = _DECODER.decode
    at = 0
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            start, at = at, at + len(raw)
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark
            try:
                value = decode(raw.decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                if not raw.strip():
                    continue
                value = Bad(f"not valid JSON: {e}")
            except RecursionError:
                value = Bad("not readable: JSON nested too deeply")
            yield (n, value, start) if offsets else (n, value)


def json_line_at(f, offset: int) -> Any:
    """The JSON value of the line at byte ``offset`` of the open binary file ``f`` (as
    :func:`json_lines` read it), for a second pass over lines already read once."""
    f.seek(offset)
    raw = f.readline()
    if offset == 0 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return _DECODER.decode(raw.decode("utf-8"))


def json_document(path: Path) -> Iterator[tuple[int, Any]]:
    """A ``.json`` / ``.traj`` file: one JSON document (line 1), or JSON lines when it is not
    one document (a JSONL file named ``.json``). Over ``JSON_STREAM_BYTES``, a file whose first
    line is a whole JSON value with more after it is read line by line without being read whole
    first, however long its first line (:func:`document_bytes`: the same lines the
    whole-document attempt would fall back to)."""
    raw = document_bytes(path)
    if raw is None:
        yield from json_lines(path)
        return
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        first_error = e
    else:
        del raw
        yield 1, doc
        return
    del raw  # the lines are read again from the file
    lines = list(json_lines(path))
    if len(lines) > 1 and not all(isinstance(v, Bad) for _, v in lines):
        yield from lines
    else:
        yield 1, Bad(f"not valid JSON: {first_error}")


def document_bytes(path) -> bytes | bytearray | None:
    """The file's bytes, to parse as one document; None when the file is over
    ``JSON_STREAM_BYTES`` and is JSON lines (its first line a whole JSON value, non-blank text
    after it: the whole parse would fail with "Extra data" and fall back to its lines): read it
    with :func:`json_lines`. A large file is read once, in ``JSON_READ_BYTES`` reads, and
    until its first line ends only that line and one read are held, so a JSON-lines file
    costs its first line's length whatever its size, and a document is not read twice."""
    size = file_size(path)
    if size <= JSON_STREAM_BYTES:
        return path.read_bytes()
    buf = bytearray()
    with path.open("rb") as f:
        nl = -1
        while nl < 0:
            block = f.read(JSON_READ_BYTES)
            if not block:
                return buf  # one line: a document
            nl = block.find(b"\n")
            if nl >= 0:
                nl += len(buf)
            buf += block
        if _is_one_value(buf[: nl + 1]):
            if buf[nl + 1 :].strip():
                return None
            while block := f.read(JSON_READ_BYTES):
                buf += block
                if block.strip():
                    return None
        return _read_rest(f, buf, size)
    return buf


def _read_rest(f, head: bytearray, size: int) -> bytearray:
    """``head`` (what was read of ``f``) and the rest of ``f``, read into one buffer of the
    file's ``size`` (more if the file grew)."""
    out = bytearray(max(size, len(head)))
    n = len(head)
    out[:n] = head
    del head[:]
    view = memoryview(out)
    while n < len(out) and (k := f.readinto(view[n:])):
        n += k
    view.release()
    del out[n:]
    while block := f.read(JSON_READ_BYTES):
        out += block
    return out


def _is_one_value(line: bytes | bytearray) -> bool:
    """Whether a line (its ends' whitespace and a UTF-8 byte-order mark aside) is one whole
    JSON value."""
    try:
        text = line.decode("utf-8-sig").strip()
        _, end = _DECODER.raw_decode(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False
    return end == len(text)


#: ``.json`` files larger than this (bytes) are read without holding the document: a top-level
#: array one element at a time (:func:`streamed_array`), JSON lines one line at a time. Smaller
#: files are parsed whole (the same values; docs/importing.md, "Memory")
JSON_STREAM_BYTES = 32 << 20
#: bytes read at a time by :func:`streamed_array` (more while one element is longer)
JSON_READ_BYTES = 1 << 20
#: the first line is looked at (is it a whole value, so the file is JSON lines?) up to this long
_FIRST_LINE_BYTES = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")


def _remote_size(p) -> int | None:
    try:
        return int(p.fs.get_file_info(p.path).size)
    except Exception:  # noqa: BLE001 - unknown: the caller spools to be safe
        return None


def file_size(path) -> int:
    """The file's size in bytes (0 when it cannot be told)."""
    if isinstance(path, RemotePath):
        return _remote_size(path) or 0
    try:
        return int(path.stat().st_size)
    except (OSError, AttributeError):
        return 0


def first_line_is_record(path) -> bool:
    """Whether the file's first line (up to ``_FIRST_LINE_BYTES``) is one whole JSON value and
    non-blank text follows it: then the file is not one document but JSON lines (as the
    whole-document parse would find, failing with "Extra data" and falling back to lines)."""
    with path.open("rb") as f:
        line = f.readline(_FIRST_LINE_BYTES)
        if not line.endswith(b"\n") or not _is_one_value(line):
            return False
        while block := f.read(1 << 16):
            if block.strip():
                return True
    return False


def streamed_array(path, name: str | None = None) -> Iterator[Any] | None:
    """The elements of a ``.json`` file's top-level array, one at a time, when the file is over
    ``JSON_STREAM_BYTES``, is UTF-8 (a byte-order mark allowed) and its first non-blank
    character is ``[`` (and it is not JSON lines: see :func:`json_document`); None otherwise
    (read it with :func:`json_document`). Each element is decoded by the same decoder as the
    whole-document parse, from a buffer holding about one element plus ``JSON_READ_BYTES``,
    so the values are the same. A document that is truncated or malformed anywhere (including
    after the array) raises :class:`BadTranscriptError` naming ``name``, the element and the
    position (line, column and character of the whole document, as ``json.loads`` reports
    them) when the reader reaches it."""
    if file_size(path) <= JSON_STREAM_BYTES:
        return None
    with path.open("rb") as f:
        head = f.read(1 << 12)
    if head[:3] == b"\xef\xbb\xbf":
        head = head[3:]
    elif b"\x00" in head[:4]:
        return None  # UTF-16 / UTF-32 (json.loads reads them): parsed whole
    if head.lstrip()[:1] != b"[" or first_line_is_record(path):
        return None
    return _ArrayReader(path, name or str(path)).elements()


def streamed_object(path, name: str | None, keep: tuple[str, ...]) -> Any:
    """A large ``.json`` / ``.traj`` document read without holding its text: over
    ``JSON_STREAM_BYTES``, UTF-8 and not JSON lines, a top-level object comes back with only
    its members named in ``keep`` (each member decoded as :func:`streamed_array` decodes an
    element, the others dropped as read), a top-level array as the list of its elements; None
    otherwise (read it with :func:`json_document`). Errors as :func:`streamed_array`'s, naming
    the member."""
    if file_size(path) <= JSON_STREAM_BYTES:
        return None
    with path.open("rb") as f:
        head = f.read(1 << 12)
    if head[:3] == b"\xef\xbb\xbf":
        head = head[3:]
    elif b"\x00" in head[:4]:
        return None
    first = head.lstrip()[:1]
    if first not in (b"{", b"[") or first_line_is_record(path):
        return None
    reader = _ArrayReader(path, name or str(path))
    return reader.members(keep) if first == b"{" else list(reader.elements())


class _ArrayReader:
    """The top-level array of a UTF-8 file, element by element (see :func:`streamed_array`)."""

    def __init__(self, path, name: str) -> None:
        self.path, self.name = path, name
        self.buf, self.pos, self.eof = "", 0, False
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.bytes_read = 0
        self.char0 = 0  # where buf[0] is in the whole document (a character offset)
        self.index = 0  # the element being read
        self.member: str | None = None  # the member being read (an object's)

    def elements(self) -> Iterator[Any]:
        with self.path.open("rb") as f:
            self.f = f
            self._skip_ws()
            if self._peek() != "[":  # checked before: only if the file changed meanwhile
                self._fail("Expecting value", self.pos)
            yield from self._items()
            self._skip_ws()
            if self.pos < len(self.buf):
                self._fail("Extra data", self.pos, after=True)

    def _items(self) -> Iterator[Any]:
        """The elements of the array whose ``[`` is at ``pos``, one at a time."""
        self.pos += 1
        self._skip_ws()
        if self._peek() == "]":
            self.pos += 1
            return
        while True:
            yield self._value()
            self.index += 1
            self._skip_ws()
            c = self._peek()
            if c == ",":
                self.pos += 1
                self._skip_ws()
                continue
            if c == "]":
                self.pos += 1
                return
            self._fail("Expecting ',' delimiter", self.pos, between=True)

    def members(self, keep: tuple[str, ...]) -> dict:
        """The top-level object's members named in ``keep`` (each other member is decoded and
        dropped as soon as read; the last of a repeated name wins, as in ``json.loads``)."""
        out: dict = {}
        self.member = ""
        with self.path.open("rb") as f:
            self.f = f
            self._skip_ws()
            if self._peek() != "{":
                self._fail("Expecting value", self.pos)
            self.pos += 1
            self._skip_ws()
            if self._peek() == "}":
                self.pos += 1
            else:
                while True:
                    if self._peek() != '"':
                        self._fail("Expecting property name enclosed in double quotes", self.pos)
                    key = self._value()
                    self._skip_ws()
                    if self._peek() != ":":
                        self._fail("Expecting ':' delimiter", self.pos)
                    self.pos += 1
                    self._skip_ws()
                    self.member = key
                    if self._peek() == "[":  # an array (a message list): element by element
                        items = self._items()
                        if key in keep:
                            out[key] = list(items)
                        else:
                            for _ in items:
                                pass
                    elif key in keep:
                        out[key] = self._value()
                    else:
                        self._value()
                    self._skip_ws()
                    c = self._peek()
                    if c == ",":
                        self.pos += 1
                        self._skip_ws()
                        continue
                    if c == "}":
                        self.pos += 1
                        break
                    self._fail("Expecting ',' delimiter", self.pos)
            self._skip_ws()
            if self.pos < len(self.buf):
                self._fail("Extra data", self.pos, after=True)
        return out

    def _fill(self, want: int = 0) -> bool:
        """Read at least ``want`` (or ``JSON_READ_BYTES``) more bytes, dropping what was read;
        False at the end of the file."""
        if self.eof:
            return False
        data = self.f.read(max(want, JSON_READ_BYTES))
        at = self.bytes_read
        self.bytes_read += len(data)
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            raise BadTranscriptError(
                f"{self.name}: not valid JSON: not UTF-8: {e.reason} (byte 0x{e.object[e.start]:02x} at byte "
                f"{at + e.start} of the file); nothing was imported"
            ) from None
        if not data:
            self.eof = True
        cut = self.pos
        if cut:
            self.char0 += cut
            self.buf = self.buf[cut:] + text
            self.pos = 0
        else:
            self.buf += text
        return True

    def _line_col(self, char: int) -> tuple[int, int]:
        """The line and column (1-based, as ``json.loads`` counts them) of character ``char``
        of the document: the text before it is read again (only for an error message)."""
        decoder = codecs.getincrementaldecoder("utf-8-sig")("replace")
        line, seen, last_nl = 1, 0, -1
        with self.path.open("rb") as f:
            while seen < char and (data := f.read(JSON_READ_BYTES)):
                text = decoder.decode(data)[: char - seen]
                line += text.count("\n")
                nl = text.rfind("\n")
                if nl >= 0:
                    last_nl = seen + nl
                seen += len(text)
        return line, char - last_nl

    def _peek(self) -> str:
        while self.pos >= len(self.buf):
            if not self._fill():
                return ""
        return self.buf[self.pos]

    def _skip_ws(self) -> None:
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or not self._fill():
                return

    def _value(self) -> Any:
        decode = _DECODER.raw_decode
        while True:
            try:
                value, end = decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                # at the end of what was read, or an open string: more text may complete it
                more = e.msg.startswith("Unterminated string") or e.pos >= len(self.buf) - 16
                if not (more and self._fill(len(self.buf) - self.pos)):
                    self._fail(e.msg, e.pos)
                continue
            except RecursionError:
                self._fail("not readable: JSON nested too deeply", self.pos)
            # a number whose digits reach the end of the text read so far may go on: read on first
            if self.buf[end - 1] in '}]"' or _NUMBER_TAIL.match(self.buf, end).end() < len(self.buf):  # type: ignore[union-attr]
                self.pos = end
                return value
            if not self._fill():
                self.pos = end
                return value

    def _fail(self, msg: str, pos: int, *, after: bool = False, between: bool = False) -> NoReturn:
        line, col = self._line_col(self.char0 + pos)
        if self.member is not None:  # reading an object's members
            where = (
                "after the top-level object"
                if after
                else f"at or after member {self.member!r} of the top-level object"
                if self.member
                else "at the start of the top-level object"
            )
        elif after:
            where = f"after the top-level array (of {self.index} element(s))"
        elif between:
            where = f"after element {self.index - 1} of the top-level array"
        else:
            where = f"in element {self.index} of the top-level array"
        raise BadTranscriptError(
            f"{self.name}: not valid JSON: {msg}: line {line} column {col} (char {self.char0 + pos}), {where}; "
            "the document is truncated or malformed, nothing was imported"
        )
