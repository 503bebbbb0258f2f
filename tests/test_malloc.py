"""glibc's malloc thresholds (``cupel_np._malloc``): set once by the first sweep over a big
set, left alone where the user chose their own or opted out, nothing off glibc."""

import platform

import cupel_np as c
from cupel_np import _malloc


def test_the_users_choice_is_left_alone():
    assert _malloc._tune({"CUPEL_NP_MALLOC_TUNE": "0"}) is False
    assert _malloc._tune({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1048576"}) is False
    assert _malloc._tune({"MALLOC_MMAP_THRESHOLD_": "1048576"}) is False
    assert _malloc._tune({"MALLOC_TRIM_THRESHOLD_": "1048576"}) is False


def test_set_on_glibc_only():
    # (CI and this machine run glibc: there the thresholds are set; elsewhere nothing is)
    assert _malloc._tune({}) is (platform.libc_ver()[0] == "glibc")


def test_a_big_sweep_sets_them_once_and_a_small_one_never(monkeypatch):
    calls = []
    monkeypatch.setattr(_malloc, "_state", [])
    monkeypatch.setattr(_malloc, "_tune", lambda env: calls.append(env) or True)
    items = [c.ContextItem(content=f"item {i}", tokens=5 + i % 7) for i in range(40)]
    table = c.ItemTable.from_items(items)
    budget = c.ContextBudget(max_tokens=200, target_tokens=100)
    variants = [("a", c.Policy(c.PriorityScorer())), ("b", c.Policy(c.PriorityScorer(), placer="u_shaped"))]
    monkeypatch.setattr(_malloc, "BIG_ROWS", 41)
    c.sweep(table, budget, variants, threads=1)
    assert calls == []  # 40 rows: below the big sets
    monkeypatch.setattr(_malloc, "BIG_ROWS", 40)
    c.sweep(table, budget, variants, threads=1)
    c.sweep(table, budget, variants, threads=1)
    assert len(calls) == 1  # decided once per process
    assert _malloc.tune_once() is True
