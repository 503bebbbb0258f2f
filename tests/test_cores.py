"""What the CPU is, for the one choice that depends on it: whether big sorts of packed keys go to
the package's radix sort because NumPy's AVX-512 sort is slow there (AMD Zen 4; ``_cores``,
``engine.sortkeys.sort_keys``), and ``CUPEL_NP_SORT``, which overrides it."""

import pytest

from cupel_np import _cores
from cupel_np._cores import cpu_of, simd_sort_is_slow
from cupel_np.errors import InvalidConfigError


@pytest.mark.parametrize(
    "features, vendor, family, slow",
    [
        ({"X86_V4": True}, "AuthenticAMD", 25, True),  # Zen 4, NumPy >= 2.3's name
        ({"AVX512_SKX": True}, "AuthenticAMD", 25, True),  # Zen 4, older NumPy
        ({"X86_V4": False, "AVX512_SKX": False}, "AuthenticAMD", 25, False),  # AVX-512 off
        ({"X86_V4": True}, "AuthenticAMD", 26, False),  # Zen 5
        ({"X86_V4": True}, "GenuineIntel", 6, False),  # Intel's AVX-512: the fast one
        ({"X86_V3": True}, "AuthenticAMD", 23, False),  # Zen 2: no AVX-512
        ({"X86_V4": True}, "", None, False),  # unknown CPU: NumPy
    ],
)
def test_simd_sort_is_slow_on_zen4_only(features, vendor, family, slow):
    assert simd_sort_is_slow(features, vendor, family) is slow


def test_cpu_of_reads_linux_and_windows_descriptions():
    linux = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
    assert cpu_of(linux) == ("AuthenticAMD", 25)
    assert cpu_of("AMD64 Family 25 Model 17 Stepping 1, AuthenticAMD") == ("AuthenticAMD", 25)
    assert cpu_of("Intel64 Family 6 Model 85 Stepping 7, GenuineIntel") == ("GenuineIntel", 6)
    assert cpu_of("arm") == ("", None)


@pytest.fixture
def fresh_choice(monkeypatch):
    monkeypatch.setattr(_cores, "_SORT_CHOICE", [])
    return monkeypatch


def test_environment_chooses(fresh_choice):
    fresh_choice.setenv(_cores.SORT_ENV, "radix")
    assert _cores.radix_sort_chosen() is True
    fresh_choice.setattr(_cores, "_SORT_CHOICE", [])
    fresh_choice.setenv(_cores.SORT_ENV, "numpy")
    assert _cores.radix_sort_chosen() is False
    fresh_choice.setattr(_cores, "_SORT_CHOICE", [])
    fresh_choice.setenv(_cores.SORT_ENV, "auto")
    assert _cores.radix_sort_chosen() is simd_sort_is_slow(_cores.numpy_cpu_features(), *_cores._this_cpu())
    fresh_choice.setattr(_cores, "_SORT_CHOICE", [])
    fresh_choice.setenv(_cores.SORT_ENV, "quick")
    with pytest.raises(InvalidConfigError, match="CUPEL_NP_SORT must be auto, numpy or radix, got 'quick'"):
        _cores.radix_sort_chosen()


def test_a_bad_sort_setting_is_refused_by_any_run(fresh_choice, capsys, tmp_path):
    """``CUPEL_NP_SORT`` is read on every sweep and selection, so a mistyped value is an error
    even for a run too small to sort anything big (the command line: exit 2, the value named)."""
    import cupel_np as c
    from cupel_np.cli.app import main

    fresh_choice.setenv(_cores.SORT_ENV, "fast")
    items = [c.ContextItem(content=f"m{i}", tokens=10) for i in range(5)]
    with pytest.raises(InvalidConfigError, match="CUPEL_NP_SORT must be auto, numpy or radix, got 'fast'"):
        c.Pipeline(c.preset("chat")).run(items, c.ContextBudget(max_tokens=100, target_tokens=30))
    fresh_choice.setattr(_cores, "_SORT_CHOICE", [])
    with pytest.raises(InvalidConfigError, match="CUPEL_NP_SORT"):
        c.sweep(items, c.ContextBudget(max_tokens=100, target_tokens=30), ["chat", "rag"])
    fresh_choice.setattr(_cores, "_SORT_CHOICE", [])
    assert main(["demo", "--quiet", "--out", str(tmp_path / "out")]) == 2
    assert "CUPEL_NP_SORT must be auto, numpy or radix, got 'fast'" in capsys.readouterr().err
