"""The estimate kernel compiles once: an input of only empty texts used to hand it a writable
buffer (the joined text is read-only), a second specialization and a second compile."""

import pytest

from cupel_np.io.importers import estimate_tokens_many
from cupel_np.io.importers.tokens import _estimate_kernel


def test_one_specialization_for_empty_and_non_empty_inputs():
    if not hasattr(_estimate_kernel, "signatures"):
        pytest.skip("the JIT is off")
    assert estimate_tokens_many(["", ""]).tolist() == [0, 0]
    assert estimate_tokens_many([]).tolist() == []
    assert estimate_tokens_many(["hello world"]).tolist() == [3]
    assert len(_estimate_kernel.signatures) == 1
