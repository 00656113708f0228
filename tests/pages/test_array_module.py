"""Claims of docs/first-steps/cupy-and-numpy.md about code that runs on NumPy or CuPy arrays."""

import numpy as np
import pytest

from tests.helpers import run_python

pytestmark = pytest.mark.snippet("snippets/first_steps/array_module.py")


def test_numpy_arrays_get_numpy(snippet):
    x = np.ones((2, 3), dtype=np.float32)
    assert snippet.get_array_module(x) is np


def test_softmax_matches_the_textbook_formula_and_survives_large_inputs(snippet):
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])
    expected = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(snippet.softmax(x), expected, rtol=1e-12)
    # The naive formula overflows to inf/inf = nan here; the shifted one does not.
    big = np.array([1000.0, 1000.0, 1000.0], dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(np.exp(big) / np.exp(big).sum()).all()
    np.testing.assert_allclose(snippet.softmax(big), np.full(3, 1 / 3), rtol=1e-6)


def test_to_numpy_passes_numpy_arrays_through(snippet):
    x = np.arange(5.0)
    assert np.array_equal(snippet.to_numpy(x), x)


def test_without_cupy_everything_falls_back_to_numpy():
    """Make `import cupy` fail in a fresh interpreter, as on a machine without CuPy."""
    code = (
        "import sys; sys.modules['cupy'] = None\n"  # the next `import cupy` raises ImportError
        "import numpy as np\n"
        "from snippets.first_steps import array_module as m\n"
        "x = np.array([0.0, 1.0])\n"
        "assert m.cp is None and m.get_array_module(x) is np and not m.gpu_usable()\n"
        "assert isinstance(m.to_numpy(m.softmax(x)), np.ndarray)\n"
        "print('fell back')\n"
    )
    result = run_python(["-c", code])
    assert result.returncode == 0, result.stderr
    assert "fell back" in result.stdout


@pytest.mark.gpus(1)
def test_cupy_arrays_stay_on_the_gpu(snippet):
    cp = pytest.importorskip("cupy")
    x = np.random.default_rng(0).normal(size=(64, 10)).astype(np.float32)
    on_gpu = snippet.softmax(cp.asarray(x))
    assert snippet.get_array_module(on_gpu) is cp
    assert isinstance(on_gpu, cp.ndarray)  # computed where the data was: nothing went to the host
    np.testing.assert_allclose(snippet.to_numpy(on_gpu), snippet.softmax(x), rtol=1e-5, atol=1e-7)
    assert snippet.gpu_usable()
