"""Generate the sample corpus: a deterministic set of coding-agent sessions.

The file ships inside the package (``cupel_np/data/sample_sessions.parquet``, so ``cupel-np demo``
works after any install); ``data/sample_sessions.parquet`` is a symlink to it, one copy only.

Each session (set key ``session_id``) has a pinned system prompt, user/assistant turns with
timestamps, large tool outputs, retrieved documents with relevance hints and ``cupel:trust``
metadata, memories, exact duplicates, and mixed-case kinds and tags.

    python data/make_sample.py            # rewrites cupel_np/data/sample_sessions.parquet
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20261130
N_SESSIONS = 300
OUT = Path(__file__).resolve().parents[1] / "cupel_np" / "data" / "sample_sessions.parquet"

TOPICS = ["auth", "db", "api", "ui", "build", "tests", "perf", "deploy", "cache", "logging"]
TOOLS = ["grep", "pytest", "git diff", "ls", "cat", "curl", "npm test", "cargo build"]
FILES = [
    "src/app.py",
    "src/db/models.py",
    "api/routes.ts",
    "ui/App.tsx",
    "Makefile",
    "tests/test_auth.py",
    "README.md",
    "deploy/k8s.yaml",
    "src/cache.rs",
    "logging.conf",
]


def _tag_case(rng, tag: str) -> str:
    r = rng.random()
    return tag.upper() if r < 0.1 else tag.capitalize() if r < 0.25 else tag


def make_rows(rng: np.random.Generator) -> list[dict]:
    rows: list[dict] = []
    base = datetime(2026, 11, 1, tzinfo=UTC)
    for s in range(N_SESSIONS):
        sid = f"session-{s:04d}"
        start = base + timedelta(minutes=int(rng.integers(0, 60 * 24 * 28)))
        topic = [str(t) for t in rng.choice(TOPICS, size=2, replace=False)]
        rows.append(
            dict(
                session_id=sid,
                content=f"[{sid}] You are a careful coding agent working on {topic[0]} and {topic[1]}.",
                tokens=int(rng.integers(150, 400)),
                kind="SystemPrompt",
                source="Chat",
                pinned=True,
                timestamp=None,
                priority=None,
                tags=["system"],
                metadata={"cupel:source-type": "system"},
                future_relevance_hint=None,
                original_tokens=None,
            )
        )
        t = start
        n_turns = int(rng.integers(6, 30))
        for turn in range(n_turns):
            t += timedelta(seconds=int(rng.integers(20, 600)))
            who = "user" if turn % 2 == 0 else "assistant"
            tg = _tag_case(rng, topic[turn % 2])
            rows.append(
                dict(
                    session_id=sid,
                    content=f"[{sid}] {who} turn {turn}: about {tg} ({int(rng.integers(1e6))})",
                    tokens=int(rng.integers(20, 400)),
                    kind=rng.choice(["Message", "message", "MESSAGE"], p=[0.8, 0.15, 0.05]).item(),
                    source="Chat",
                    pinned=False,
                    timestamp=t,
                    priority=int(rng.integers(0, 5)) if rng.random() < 0.3 else None,
                    tags=[tg, who],
                    metadata={"cupel:source-type": "user" if who == "user" else "system"},
                    future_relevance_hint=None,
                    original_tokens=None,
                )
            )
            if rng.random() < 0.35:
                tool = str(rng.choice(TOOLS))
                full = int(rng.integers(800, 12000))
                tokens = min(full, int(rng.integers(300, 4000)))
                rows.append(
                    dict(
                        session_id=sid,
                        content=f"[{sid}] $ {tool} {rng.choice(FILES)}\n"
                        + "output line\n" * 3
                        + f"#{int(rng.integers(1e6))}",
                        tokens=tokens,
                        kind=rng.choice(["ToolOutput", "tooloutput"], p=[0.85, 0.15]).item(),
                        source="Tool",
                        pinned=False,
                        timestamp=t + timedelta(seconds=5),
                        priority=None,
                        tags=[_tag_case(rng, topic[0]), "tool"],
                        metadata={"cupel:source-type": "tool", "tool": tool},
                        future_relevance_hint=None,
                        original_tokens=full if full > tokens else None,
                    )
                )
        for d in range(int(rng.integers(2, 8))):
            trust = rng.random()
            trust_s = f"{trust:.2f}" if trust < 0.9 else rng.choice(["high", "1.5", " 0.7"]).item()
            rows.append(
                dict(
                    session_id=sid,
                    content=f"[{sid}] doc {d}: {rng.choice(FILES)} section {int(rng.integers(100))}",
                    tokens=int(rng.integers(200, 2500)),
                    kind="Document",
                    source="Rag",
                    pinned=False,
                    timestamp=start - timedelta(days=int(rng.integers(0, 90))),
                    priority=None,
                    tags=[
                        _tag_case(rng, str(x)) for x in rng.choice(TOPICS, size=int(rng.integers(1, 4)), replace=False)
                    ],
                    metadata={"cupel:trust": trust_s, "cupel:source-type": "external"},
                    future_relevance_hint=float(np.round(rng.normal(0.55, 0.3), 3)),
                    original_tokens=None,
                )
            )
        for _ in range(int(rng.integers(0, 4))):
            rows.append(
                dict(
                    session_id=sid,
                    content=f"memory: prefers {rng.choice(['small commits', 'type hints', 'pytest', 'rebase'])}",
                    tokens=int(rng.integers(10, 60)),
                    kind="Memory",
                    source="Chat",
                    pinned=False,
                    timestamp=None,
                    priority=int(rng.integers(1, 10)),
                    tags=["memory"],
                    metadata={"cupel:priority": rng.choice(["high", "normal"]).item()},
                    future_relevance_hint=float(rng.random()),
                    original_tokens=None,
                )
            )
        # exact duplicates: a retrieved doc fetched twice
        docs = [r for r in rows if r["session_id"] == sid and r["kind"] == "Document"]
        if docs and rng.random() < 0.5:
            dup = dict(docs[0])
            dup["future_relevance_hint"] = float(rng.random())
            rows.append(dup)
    return rows


SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("content", pa.string()),
        ("tokens", pa.int64()),
        ("kind", pa.string()),
        ("source", pa.string()),
        ("priority", pa.int64()),
        ("tags", pa.list_(pa.string())),
        ("metadata", pa.map_(pa.string(), pa.string())),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("future_relevance_hint", pa.float64()),
        ("pinned", pa.bool_()),
        ("original_tokens", pa.int64()),
    ]
)


def main() -> None:
    rows = make_rows(np.random.default_rng(SEED))
    cols = {f.name: [r[f.name] if f.name != "metadata" else list(r["metadata"].items()) for r in rows] for f in SCHEMA}
    table = pa.Table.from_pydict(cols, schema=SCHEMA)
    pq.write_table(table, OUT, compression="zstd")
    print(f"wrote {OUT} ({table.num_rows} rows, {N_SESSIONS} sessions, {OUT.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
