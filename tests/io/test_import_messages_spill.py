"""A streamed ``messages`` import over ``messages.SPILL_BYTES`` does not hold its rows: CSV / TSV /
Parquet inputs are first read as contiguous sets, handed on one at a time (restarted if a set
comes back after another began); other inputs, and those restarted, keep their rows in a local
temp file (sorted runs, merged back by set). Either way the file it writes is the whole-table
import's file, row for row and type for type. The thresholds are forced tiny here so every
spilled input is several runs of several pieces."""

import csv
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np.errors import BadTranscriptError
from cupel_np.io.importers import import_to_parquet, import_transcripts, messages


@pytest.fixture
def restarts(monkeypatch):
    seen = []
    real = messages._contiguous

    def counted(*a, **kw):
        convs, columns = real(*a, **kw)

        def watched():
            try:
                yield from convs
            except messages.NotContiguous:
                seen.append(1)
                raise

        return watched(), columns

    monkeypatch.setattr(messages, "_contiguous", counted)
    return seen


@pytest.fixture
def spill(monkeypatch):
    runs = []
    real = messages._Spill._write_run

    def counted(self):
        runs.append(len(self.held))
        real(self)

    monkeypatch.setattr(messages, "SPILL_BYTES", 0)
    monkeypatch.setattr(messages, "SPILL_RUN_CHARS", 700)
    monkeypatch.setattr(messages, "_PIECE_ROWS", 2)
    monkeypatch.setattr(messages._Spill, "_write_run", counted)
    return runs


def _rows(seed, n=60, sets=7, contiguous=False):
    rng = random.Random(seed)
    order = sorted(range(n), key=lambda i: i * sets // n) if contiguous else list(range(n))
    out = []
    for i in order:
        s = i * sets // n if contiguous else rng.randrange(sets)
        out.append(
            {
                "conv": f"set-{s}",
                "role": rng.choice(["user", "assistant", "system", "tool", "Note"]),
                "text": "" if i % 13 == 5 else f"message {i} " + "w " * rng.randrange(1, 40),
                "label": rng.choice(["a", "b", None]),
                "score": rng.random(),
                "count": rng.randrange(-5, 10**6),
                "flag": rng.random() < 0.5,
                "mixed": rng.choice([1, "x", None, 2.5]),
                "nested": rng.choice([{"p": 1}, {"q": "z", "p": 2}, None]),
                "big": rng.choice([2**70, 1, None]),
                "nothing": None,
            }
        )
    return out


def _same(tmp_path, fmt, paths, **kw):
    a, b = tmp_path / "whole.parquet", tmp_path / "spilled.parquet"
    whole = import_transcripts(fmt, paths, **kw)
    whole.write_parquet(a)
    streamed = import_to_parquet(fmt, paths, b, chunk_chars=50, **kw)
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert tb.schema.equals(ta.schema, check_metadata=True)
    assert tb.equals(ta)
    assert streamed.summary() == whole.summary()
    return whole, ta


@pytest.mark.parametrize("contiguous", [False, True])
def test_jsonl_scattered_or_contiguous_sets(tmp_path, spill, contiguous):
    rows = _rows(1, contiguous=contiguous)
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    whole, t = _same(tmp_path, "messages", p, mapping="content=text,set=conv")
    assert len(spill) >= 3  # several runs were written and merged
    keys = t.column("conversation_id").to_pylist()
    first_seen = list(dict.fromkeys(r["conv"] for r in rows if r["text"]))
    assert list(dict.fromkeys(keys)) == first_seen  # sets in the order of their first row
    assert keys == sorted(keys, key=first_seen.index)  # each set's rows together
    types = {f.name: f.type for f in t.schema}
    assert types["score"] == pa.float64() and types["count"] == pa.int64() and types["flag"] == pa.bool_()
    assert types["label"] == pa.string() and types["nothing"] == pa.string() and types["mixed"] == pa.string()
    assert pa.types.is_struct(types["nested"]) and types["big"] == pa.string()


def test_csv_tsv_and_parquet_across_files(tmp_path, spill):
    rows = _rows(2, n=80)
    flat = [{k: v for k, v in r.items() if k in ("conv", "role", "text", "label")} for r in rows]
    with (tmp_path / "a.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, list(flat[0]))
        w.writeheader()
        w.writerows(flat[:30])
    with (tmp_path / "b.tsv").open("w", newline="") as f:
        w = csv.DictWriter(f, list(flat[0]), delimiter="\t")
        w.writeheader()
        w.writerows(flat[30:55])
    pq.write_table(pa.Table.from_pylist(flat[55:]), tmp_path / "c.parquet")
    paths = [tmp_path / "a.csv", tmp_path / "b.tsv", tmp_path / "c.parquet"]
    _same(tmp_path, "messages", paths, mapping="content=text,set=conv,kind=role", set_column="thread")
    assert len(spill) >= 3


def test_bad_rows_are_the_same(tmp_path, spill):
    rows = [json.dumps(r) for r in _rows(3, n=40)]
    rows[7] = "{not json"
    rows[20] = json.dumps({"conv": "set-1", "role": 5, "text": "x"})
    p = tmp_path / "m.jsonl"
    p.write_text("\n".join(rows) + "\n")
    whole, _ = _same(tmp_path, "messages", p, mapping="content=text,set=conv", skip_bad=True)
    assert [b.line for b in whole.bad] == [8, 21]
    with pytest.raises(BadTranscriptError, match=":8: not valid JSON"):
        import_to_parquet("messages", p, tmp_path / "x.parquet", mapping="content=text,set=conv")
    assert not (tmp_path / "x.parquet").exists()


def test_the_sample_file_streams_the_same(tmp_path, spill, restarts):
    _same(
        tmp_path,
        "messages",
        "data/transcripts/messages.csv",
        mapping="content=text,kind=speaker,set=thread,timestamp=sent_at,source=channel",
        set_column="thread_id",
    )
    assert spill == [] and restarts == []  # its threads are contiguous


def _csv(path, rows, delimiter=","):
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]), delimiter=delimiter)
        w.writeheader()
        w.writerows(rows)


def _flat(rows):
    return [{k: v for k, v in r.items() if k in ("conv", "role", "text", "label", "score")} for r in rows]


def test_contiguous_csv_is_handed_on_as_read_without_a_spill(tmp_path, spill, restarts):
    p = tmp_path / "c.csv"
    _csv(p, _flat(_rows(4, n=70, contiguous=True)))
    _same(tmp_path, "messages", p, mapping="content=text,set=conv,kind=role")
    assert spill == [] and restarts == []  # neither a run written nor a restart


def test_scattered_csv_restarts_and_spills(tmp_path, spill, restarts):
    p = tmp_path / "s.tsv"
    _csv(p, _flat(_rows(5, n=70)), delimiter="\t")
    _same(tmp_path, "messages", p, mapping="content=text,set=conv,kind=role")
    assert restarts == [1] and len(spill) >= 3
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.tsv", "spilled.parquet", "whole.parquet"]


def test_a_set_coming_back_in_a_later_file_restarts(tmp_path, spill, restarts):
    rows = [{k: v for k, v in r.items() if k != "score"} for r in _flat(_rows(6, n=40, sets=4, contiguous=True))]
    _csv(tmp_path / "a.csv", rows)
    pq.write_table(pa.Table.from_pylist(rows[:5]), tmp_path / "b.parquet")  # set-0 again
    _same(tmp_path, "messages", [tmp_path / "a.csv", tmp_path / "b.parquet"], mapping="content=text,set=conv")
    assert restarts == [1]


def test_columns_the_rows_never_show_restart(tmp_path, spill, restarts):
    """A header-only file's columns are no extra columns of the held path (it sees rows only)."""
    _csv(tmp_path / "a.csv", _flat(_rows(7, n=20, contiguous=True)))
    (tmp_path / "b.csv").write_text("conv,role,text,only_here\n")
    _same(tmp_path, "messages", [tmp_path / "a.csv", tmp_path / "b.csv"], mapping="content=text,set=conv")
    assert restarts == [1]


def test_a_restart_reads_a_one_shot_iterator_of_paths_again(tmp_path, spill, restarts):
    """The restart of a scattered input reads the inputs a second time: a generator of paths,
    exhausted by the first reading, gives the same file as the list."""
    _csv(tmp_path / "a.csv", _flat(_rows(8, n=30)))
    _csv(tmp_path / "b.csv", _flat(_rows(9, n=30)))
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    import_to_parquet("messages", paths, tmp_path / "list.parquet", mapping="content=text,set=conv,kind=role")
    import_to_parquet(
        "messages", (p for p in paths), tmp_path / "gen.parquet", mapping="content=text,set=conv,kind=role"
    )
    assert restarts == [1, 1]
    assert pq.read_table(tmp_path / "gen.parquet").equals(pq.read_table(tmp_path / "list.parquet"))


def test_the_mixed_columns_types_take_one_pass_over_the_spill(tmp_path, spill, monkeypatch):
    """``mixed``, ``nested`` and ``big`` need their values for a type: one merge of the spilled
    runs collects all three, and one more hands out the conversations."""
    merges = []
    real = messages._Spill._merged

    def counted(self):
        merges.append(1)
        return real(self)

    monkeypatch.setattr(messages._Spill, "_merged", counted)
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in _rows(10)))
    t = import_to_parquet("messages", p, tmp_path / "o.parquet", mapping="content=text,set=conv")
    assert t.items > 0 and len(merges) == 2
