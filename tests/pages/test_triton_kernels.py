"""Claims of docs/compilers/triton-kernels.md."""

import pytest

pytestmark = pytest.mark.snippet("snippets/compilers/triton_kernels.py")


def test_scaled_sum_is_exact_for_small_integers(snippet):
    # float32 holds every integer below 2**24, so this sum has no rounding error
    assert snippet.scaled_sum(1000) == 2 * sum(range(1000))
    assert snippet.scaled_sum(1000, scale=0.5) == sum(range(1000)) / 2
