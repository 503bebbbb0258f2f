"""A ``.json`` document over ``jsonread.JSON_STREAM_BYTES`` is read one top-level array element at a
time (``jsonread.streamed_array``). The threshold is forced to 0 here (and the read size to a few
bytes, so elements, numbers, escapes and multi-byte characters straddle reads): the items, counts,
bad rows and detected format are those of the whole-document parse, and a truncated or
malformed document fails naming the file, the element and the position, writing nothing."""

import json
from pathlib import Path

import pytest

from cupel_np.errors import BadTranscriptError
from cupel_np.io.importers import import_to_parquet, import_transcripts, jsonread


@pytest.fixture
def stream(monkeypatch):
    """Switch streaming on for every size, with reads of ``n`` bytes."""

    def on(n=5):
        monkeypatch.setattr(jsonread, "JSON_STREAM_BYTES", 0)
        monkeypatch.setattr(jsonread, "JSON_READ_BYTES", n)

    return on


def _conv(i, **extra):
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": f'question {i}: caf\u00e9 \U0001f600 \\ "quoted" \n next'},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"t{i}", "type": "function", "function": {"name": "look", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": f"t{i}", "content": "x" * (i * 37 % 200 + 1)},
        {"role": "assistant", "content": f"answer {i}", "usage": {"prompt_tokens": 40 + i}},
    ]
    return {"id": f"c{i}", "messages": msgs, "n": 12345.678e-3 * i, **extra}


def _sharegpt(i):
    return {
        "id": f"s{i}",
        "conversations": [
            {"from": "human", "value": f"hi {i}"},
            {"from": "function_call", "value": json.dumps({"name": "f", "arguments": {"a": i}})},
            {"from": "observation", "value": "done"},
            {"from": "gpt", "value": "ok \u00e9"},
        ],
    }


def _v1(i):
    return {
        "messages": [
            {"role": "user", "content": [{"type": "text", "value": f"v1 {i}"}]},
            {"role": "assistant", "content": [{"type": "text", "value": "sure"}]},
        ]
    }


DOCS = {
    "openai-0": ("openai", []),
    "openai-1": ("openai", [_conv(1)]),
    "openai-2": ("openai", [_conv(1), _conv(2)]),
    "openai-9": ("openai", [_conv(i) for i in range(9)]),
    "openai-bad-rows": ("openai", [_conv(0), 7, {"id": "x"}, _conv(3), "s"]),
    "sharegpt": ("sharegpt", [_sharegpt(i) for i in range(6)]),
    "llama-factory": ("llama-factory", [_v1(i) for i in range(4)]),
}


def _write(path, doc, style):
    if style == "compact":
        text = json.dumps(doc)
    elif style == "indent":
        text = json.dumps(doc, indent=2, ensure_ascii=False)
    else:  # a byte-order mark, CRLF line ends, blank space around
        text = "\ufeff \r\n" + json.dumps(doc, indent=1).replace("\n", "\r\n") + "\r\n\r\n"
    path.write_bytes(text.encode("utf-8"))


def _same(a, b):
    assert b.table.equals(a.table)
    assert b.summary() == a.summary()
    assert [str(x) for x in b.bad] == [str(x) for x in a.bad]


@pytest.mark.parametrize("style", ["compact", "indent", "bom-crlf"])
@pytest.mark.parametrize("key", list(DOCS))
def test_streamed_array_imports_what_the_whole_document_does(tmp_path, stream, key, style):
    fmt, doc = DOCS[key]
    p = tmp_path / f"{key}.json"
    _write(p, doc, style)
    whole = import_transcripts(fmt, p, skip_bad=True, allow_empty=True)
    assert jsonread.streamed_array(p) is None  # under the threshold: parsed whole
    stream(3)
    assert jsonread.streamed_array(p) is not None
    _same(whole, import_transcripts(fmt, p, skip_bad=True, allow_empty=True))
    if doc and not key.endswith("bad-rows"):
        assert whole.items > 0
        _same(whole, import_transcripts("auto", p))  # detection reads the first element only
        assert import_transcripts("auto", p).format == fmt


def test_the_data_sample_streams_the_same(tmp_path, stream):
    whole = import_transcripts("sharegpt", "data/transcripts/sharegpt.json")
    stream(11)
    _same(whole, import_transcripts("sharegpt", "data/transcripts/sharegpt.json"))
    streamed = import_to_parquet("auto", "data/transcripts/sharegpt.json", tmp_path / "s.parquet")
    assert streamed.summary() == whole.summary()


@pytest.mark.parametrize("read", [1, 2, 3, 7, 64, 1 << 20])
def test_elements_are_the_values_json_loads_gives(tmp_path, monkeypatch, read):
    doc = [
        0,
        -1.5e-7,
        12345678901234567890,
        1e400,
        True,
        None,
        "",
        "\\u00e9\ud83d",
        "\U0001f600",
        [],
        {},
        {"a": [1, {"b": "c"}], "a ": 2},
        [[[[]]]],
        3.25,
        -0,
        "x" * 40,
        -12.5e3,
    ]
    items = [json.dumps(x) for x in doc] + ['{"d": 1, "d": 2}', "NaN", "-Infinity", "1E5"]
    text = "[ " + " ,\n".join(items) + "\n]\n"
    p = tmp_path / "v.json"
    p.write_text(text, encoding="utf-8")
    monkeypatch.setattr(jsonread, "JSON_STREAM_BYTES", 0)
    monkeypatch.setattr(jsonread, "JSON_READ_BYTES", read)
    got = list(jsonread.streamed_array(p))
    assert json.dumps(got) == json.dumps(json.loads(text))


def _doc():
    return json.dumps([_conv(i) for i in range(3)], indent=1)


@pytest.mark.parametrize(
    "name,edit,msg",
    [
        ("missing-comma", lambda t: t.replace('"c1"', '"c1" "x"'), "Expecting ',' delimiter"),
        ("between-elements", lambda t: t.replace("},\n {", "} {", 1), "after element 0 of the top-level array"),
        ("truncated", lambda t: t[: t.index('"c2"') + 40], "in element 2 of the top-level array"),
        ("unclosed", lambda t: t.rstrip()[:-1], "after element 2 of the top-level array"),
        ("extra-data", lambda t: t + "\n[]", "Extra data: line"),
        ("control-char", lambda t: t.replace("be brief", "be\tbrief", 1), "Invalid control character"),
    ],
)
def test_a_malformed_document_fails_naming_where_and_writes_nothing(tmp_path, stream, name, edit, msg):
    p = tmp_path / f"{name}.json"
    p.write_text(edit(_doc()), encoding="utf-8")
    with pytest.raises(BadTranscriptError) as whole:  # the whole parse fails too (one bad "line")
        import_transcripts("openai", p, skip_bad=True)
    stream(9)
    out = tmp_path / "out.parquet"
    for skip_bad in (False, True):  # a broken document is the file's problem, whatever --skip-bad says
        with pytest.raises(BadTranscriptError) as e:
            import_to_parquet("openai", p, out, skip_bad=skip_bad)
        assert str(e.value).startswith(f"{p}: not valid JSON: ")
        assert msg in str(e.value) and "nothing was imported" in str(e.value)
        assert not out.exists()
    where = str(whole.value).split("not valid JSON: ")[1].split(")")[0]
    if name != "extra-data":  # the same message and position as json.loads' (extra data: it read lines)
        assert where + ")" in str(e.value)


def test_every_truncation_fails(tmp_path, stream):
    text = json.dumps([_sharegpt(0), _sharegpt(1)])
    stream(4)
    p = tmp_path / "t.json"
    for cut in range(1, len(text)):
        p.write_text(text[:cut])
        with pytest.raises(BadTranscriptError):
            import_transcripts("sharegpt", p)


def test_not_utf8_fails_naming_the_byte(tmp_path, stream):
    raw = json.dumps([_sharegpt(0), _sharegpt(1)]).encode()
    p = tmp_path / "b.json"
    p.write_bytes(raw[:150] + b"\xff" + raw[150:])
    stream(16)
    with pytest.raises(BadTranscriptError, match="not UTF-8: invalid start byte \\(byte 0xff at byte 150 of"):
        import_transcripts("sharegpt", p)


def test_json_lines_named_json_are_read_line_by_line(tmp_path, stream, monkeypatch):
    lines = [json.dumps(_conv(i)) for i in range(4)]
    p = tmp_path / "lines.json"
    p.write_text("\n".join(lines) + "\n")
    whole = import_transcripts("openai", p)
    stream()
    monkeypatch.setattr(p.__class__, "read_bytes", lambda self: pytest.fail("read whole"))
    assert jsonread.streamed_array(p) is None
    _same(whole, import_transcripts("openai", p))
    assert whole.lines == 4


@pytest.mark.parametrize("first", ["object", "after-blank"])
def test_json_lines_with_a_first_line_longer_than_looked_at_are_not_held(tmp_path, stream, monkeypatch, first):
    """A JSON-lines file named ``.json`` over the threshold whose first line is longer than
    ``_FIRST_LINE_BYTES`` (1 MiB; 256 bytes here) was taken for one document: read whole
    (then its lines all held) by the reader and by ``auto``. It is read line by line now, one
    read past its first line at a time: the file is never read whole, and the peak memory of
    reading it is a few lines', not the file's."""
    import tracemalloc

    from cupel_np.io.importers import detect

    lines = [json.dumps(_conv(i, pad="p" * 20_000)) for i in range(60)]
    p = tmp_path / "lines.json"
    p.write_text(lines[0] + ("\n \n" if first == "after-blank" else "\n") + "\n".join(lines[1:]) + "\n")
    want = import_transcripts("openai", p)  # under the threshold: the whole parse, falling back to lines
    assert want.lines == 60
    stream(4096)
    monkeypatch.setattr(jsonread, "_FIRST_LINE_BYTES", 256)
    assert len(lines[0]) > 256 and not jsonread.first_line_is_record(p)  # too long to be looked at
    monkeypatch.setattr(p.__class__, "read_bytes", lambda self: pytest.fail("read whole"))
    assert jsonread.document_bytes(p) is None
    size = p.stat().st_size
    for read in (lambda: sum(1 for _ in jsonread.json_document(p)), lambda: detect.detect(p)):
        tracemalloc.start()
        try:
            got = read()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert got in (60, "openai")
        assert peak < size // 4, (peak, size)  # a few lines held (each ~20 KB), not the 1.2 MB file
    assert list(jsonread.json_document(p)) == list(jsonread.json_lines(p))
    _same(want, import_transcripts("openai", p))
    _same(want, import_transcripts("auto", p))


def test_a_large_document_is_read_once_and_parsed_whole(tmp_path, stream, monkeypatch):
    """Over the threshold, a document that is not JSON lines (one long line; a long first line
    whose value goes on; a first line that is a value with only blank text after it) is still
    parsed whole, from one read of the file; the same values and errors as ``json.loads``."""
    doc = [_conv(i) for i in range(30)]
    cases = {
        "one-line": json.dumps(doc),
        "one-line-nl": json.dumps(doc) + "\n\n  \n",
        "indented": json.dumps(doc, indent=2),
        "long-first-line": json.dumps(doc[:20]).rstrip("]") + ",\n" + json.dumps(doc[20:]).lstrip("["),
        "two-documents-on-one-line": json.dumps(doc) + " " + json.dumps(doc) + "\n",
        "object": json.dumps({"a": doc}) + "\n",
    }
    stream(1000)
    opened = []
    real_open = Path.open
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: opened.append(1) or real_open(self, *a, **k))
    for name, text in cases.items():
        p = tmp_path / f"{name}.json"
        p.write_text(text)
        opened.clear()
        raw = jsonread.document_bytes(p)
        assert raw == text.encode() and len(opened) == 1, name
        try:
            want = [(1, json.loads(text))]
        except json.JSONDecodeError:
            want = None
        got = list(jsonread.json_document(p))
        if want is not None:
            assert got == want, name
        else:
            assert len(got) == 1 and isinstance(got[0][1], jsonread.Bad), name
    import io

    for told in (0, 5, 9, 10, 11, 40):  # the size told by a stat before the file shrank or grew
        f = io.BufferedReader(io.BytesIO(b"0123456789"))
        f.read(3)
        assert jsonread._read_rest(f, bytearray(b"012"), told) == b"0123456789", told


def _claude_records(n, pad):
    """One Claude Code session (a summary, then user / assistant turns, one with a tool call
    and its result) with ``pad`` characters of text a record, and one element that is no record."""
    recs: list = [{"type": "summary", "summary": "long", "leafUuid": f"r{n - 1}"}]
    parent = None
    for i in range(n):
        kind = "user" if i % 2 == 0 else "assistant"
        if i == 3:
            content: list | str = [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a"}}]
        elif i == 4:
            content = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "caf\u00e9 " + "r" * pad}]
        else:
            content = f"turn {i} \U0001f600 " + "x" * pad if kind == "user" else [{"type": "text", "text": "y" * pad}]
        r = {
            "type": kind,
            "uuid": f"r{i}",
            "parentUuid": parent,
            "sessionId": "sess-a",
            "isSidechain": False,
            "timestamp": f"2026-11-20T10:{i // 60:02d}:{i % 60:02d}Z",
            "message": {"role": kind, "content": content},
        }
        if kind == "assistant":
            r["message"] |= {"id": f"msg_{i}", "usage": {"input_tokens": 10 * i + 3, "output_tokens": 5}}
        recs.append(r)
        parent = f"r{i}"
    recs.insert(5, 7)  # a bad row
    return recs


@pytest.mark.parametrize("style", ["compact", "indent", "bom-crlf"])
def test_a_claude_code_array_is_streamed_with_the_same_items(tmp_path, stream, monkeypatch, style):
    """A Claude Code JSON array (``claude -p --output-format json --verbose``, or records saved
    as one array) was read whole (``path.read_bytes`` then ``json.loads``) whatever its size.
    Over the threshold it is read one element at a time (``jsonread.streamed_array``): the same
    items as the whole parse and as the line-delimited file of the same records (rows for lines),
    the file never read whole, and the peak memory of reading it a few records', not the file's."""
    import tracemalloc

    from cupel_np.io.importers import claude_code

    recs = _claude_records(200, 6000)
    p = tmp_path / "session.json"
    _write(p, recs, style)
    lines = tmp_path / "session.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in recs))
    whole = import_transcripts("claude-code", p, skip_bad=True)
    by_line = import_transcripts("claude-code", lines, skip_bad=True)
    assert jsonread.streamed_array(p) is None  # under the threshold: parsed whole
    stream(4096)
    monkeypatch.setattr(jsonread, "_FIRST_LINE_BYTES", 1024)  # the JSON-lines sniff's look (1 MiB) kept small too
    monkeypatch.setattr(p.__class__, "read_bytes", lambda self: pytest.fail("read whole"))
    tracemalloc.start()
    try:
        n = sum(1 for _ in claude_code._array_records(p, "session.json"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = p.stat().st_size
    assert n == len(recs) and peak < size // 4, (peak, size)  # a few records (~6 KB each), not the ~1.3 MB file
    streamed = import_transcripts("claude-code", p, skip_bad=True)
    _same(whole, streamed)
    assert [(b.line, b.unit) for b in streamed.bad] == [(5, "row")]
    rows = by_line.table.num_rows
    assert rows == 200 and streamed.skipped == by_line.skipped
    assert streamed.table.drop(["metadata"]).equals(by_line.table.drop(["metadata"]))
    meta = [dict(m) for m in streamed.table.column("metadata").to_pylist()]
    line_meta = [dict(m) for m in by_line.table.column("metadata").to_pylist()]
    assert [m.pop("row") for m in meta] == [str(int(m.pop("line")) - 1) for m in line_meta]  # row k is line k + 1
    assert [m.pop("file") for m in meta] == [str(p)] * rows and [m.pop("file") for m in line_meta] == [
        str(lines)
    ] * rows
    assert meta == line_meta
    p.write_text(json.dumps(recs)[:-1])  # truncated: stops the import naming where, nothing imported
    with pytest.raises(BadTranscriptError, match="session.json: not valid JSON: .*top-level array"):
        import_transcripts("claude-code", p, skip_bad=True)


TRAJ = [
    ("swe-agent", "data/transcripts/trajectories/demo__dates-7.traj"),
    ("mini-swe-agent", "data/transcripts/trajectories/demo-math.traj.json"),
    ("auto", "data/transcripts/trajectories"),
]


@pytest.mark.parametrize("fmt,path", TRAJ)
def test_trajectories_read_member_by_member_import_the_same(stream, fmt, path):
    whole = import_transcripts(fmt, path)
    stream(6)
    _same(whole, import_transcripts(fmt, path))


def test_trajectory_objects_keep_only_the_members_read(tmp_path, stream):
    doc = json.loads(Path("data/transcripts/trajectories/demo__dates-7.traj").read_text())
    text = json.dumps(doc, indent=1)
    # a repeated member: the last wins, as in json.loads; an escaped key; members never read
    text = text.replace('{\n "', '{\n "hist\\u006fry": [], "environment": {"x": [1, 2, {"y": "}"}]},\n "', 1)
    p = tmp_path / "t.traj"
    p.write_text(text)
    whole = import_transcripts("swe-agent", p)
    stream(5)
    got = jsonread.streamed_object(p, "t", ("history", "info"))
    assert got == {k: v for k, v in json.loads(text).items() if k in ("history", "info")}
    _same(whole, import_transcripts("swe-agent", p))
    bare = tmp_path / "b.traj.json"  # mini-swe-agent's bare message list
    bare.write_text(json.dumps(doc["history"]))
    stream(1 << 20)
    assert jsonread.streamed_object(bare, "b", ()) == doc["history"]


@pytest.mark.parametrize(
    "edit,msg",
    [
        (lambda t: t[: len(t) // 2], "not valid JSON: "),
        (lambda t: t.replace('"history":', '"history"', 1), "Expecting ':' delimiter"),
        (lambda t: t.replace("{", "{,", 1), "at the start of the top-level object"),
        (lambda t: t.rstrip() + " {}", "after the top-level object"),
    ],
)
def test_a_broken_trajectory_fails_naming_where(tmp_path, stream, edit, msg):
    p = tmp_path / "t.traj"
    p.write_text(edit(Path("data/transcripts/trajectories/demo__dates-7.traj").read_text()))
    stream(8)
    with pytest.raises(BadTranscriptError, match=msg):
        import_to_parquet("swe-agent", p, tmp_path / "o.parquet", skip_bad=True)
    assert not (tmp_path / "o.parquet").exists()
