"""Claims of docs/first-steps/first-steps-exercises.md: each port computes what the original
computes, and each bug the page names is real."""

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/first_steps/first_steps_exercises.py")

CLAIMS = {
    "same_class": 0.999,  # float32 against float64: the share of rows with the same class
    "standardized": 1e-5,  # the port's standardized features against NumPy's, rtol and atol
}


def test_the_port_predicts_the_numpy_pipelines_classes(snippet):
    ported = snippet.predict_torch(snippet.x, snippet.w1, snippet.w2)
    assert isinstance(ported, np.ndarray), "NumPy back, as the caller wants"
    same = (ported == snippet.predict_numpy(snippet.x, snippet.w1, snippet.w2)).mean()
    assert same >= CLAIMS["same_class"]


def test_standardizing_matches_numpy_only_with_correction_zero(snippet):
    x = torch.as_tensor(snippet.x, dtype=torch.float32, device=snippet.device)
    expected = torch.as_tensor(snippet.standardize_numpy(snippet.x), dtype=torch.float32)
    tolerance = CLAIMS["standardized"]
    torch.testing.assert_close(snippet.standardize_torch(x).cpu(), expected,
                               rtol=tolerance, atol=tolerance)
    naive = ((x - x.mean(dim=0)) / x.std(dim=0)).cpu()  # torch's default: divides by n - 1
    with pytest.raises(AssertionError):
        torch.testing.assert_close(naive, expected, rtol=tolerance, atol=tolerance)


def test_the_default_std_predicts_the_same_classes_so_only_the_features_catch_it(snippet):
    """Why the task asks for the features too: dividing by a slightly larger std scales
    every feature by the same positive factor, which relu and argmax do not see."""
    def predict_default_std(x, w1, w2):
        x, w1, w2 = (torch.as_tensor(a, dtype=torch.float32, device=snippet.device)
                     for a in (x, w1, w2))
        h = torch.relu((x - x.mean(dim=0)) / x.std(dim=0) @ w1)
        return (h @ w2).argmax(dim=1).cpu().numpy()

    wrong = predict_default_std(snippet.x, snippet.w1, snippet.w2)
    same = (wrong == snippet.predict_numpy(snippet.x, snippet.w1, snippet.w2)).mean()
    assert same >= CLAIMS["same_class"]


def test_the_port_computes_in_float32_and_the_original_in_float64(snippet):
    assert snippet.x.dtype == np.float64
    calls = []
    original = snippet.standardize_torch
    try:
        snippet.standardize_torch = lambda t: calls.append(t) or original(t)
        snippet.predict_torch(snippet.x, snippet.w1, snippet.w2)
    finally:
        snippet.standardize_torch = original
    assert calls[0].dtype == torch.float32 and calls[0].device.type == snippet.device.type


def test_a_tensors_to_returns_a_new_tensor_so_the_original_fails(snippet):
    """On the CPU the device cannot differ, so the dtype shows the same mistake."""
    with pytest.raises(RuntimeError, match="dtype"):
        snippet.prepare_and_run(torch.nn.Linear(8, 2), torch.randn(4, 8), "cpu", torch.float64)
    out = snippet.prepare_and_run_fixed(torch.nn.Linear(8, 2), torch.randn(4, 8), "cpu",
                                        torch.float64)
    assert out.dtype == torch.float64


@pytest.mark.gpus(1)
def test_on_a_gpu_the_original_fails_with_two_devices_and_the_fix_runs(snippet):
    with pytest.raises(RuntimeError, match="same device"):
        snippet.prepare_and_run(torch.nn.Linear(8, 2), torch.randn(4, 8), "cuda")
    out = snippet.prepare_and_run_fixed(torch.nn.Linear(8, 2), torch.randn(4, 8), "cuda")
    assert out.device.type == "cuda"


def test_the_function_for_either_gives_the_numpy_result_on_numpy_arrays(snippet):
    result = snippet.one_hot_anywhere(snippet.labels, 10)
    assert isinstance(result, np.ndarray) and result.dtype == np.float32
    np.testing.assert_array_equal(result, snippet.one_hot(snippet.labels, 10))
    np.testing.assert_array_equal(result.argmax(axis=1), snippet.labels)
    assert (result.sum(axis=1) == 1).all()


@pytest.mark.gpus(1)
def test_on_a_cupy_array_it_computes_on_the_gpu(snippet):
    cp = pytest.importorskip("cupy")
    labels = cp.asarray(snippet.labels)
    with pytest.raises(TypeError):  # the original: a host array indexed with GPU labels
        snippet.one_hot(labels, 10)
    on_gpu = snippet.one_hot_anywhere(labels, 10)
    assert isinstance(on_gpu, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(on_gpu), snippet.one_hot(snippet.labels, 10))


def test_without_cupy_the_module_falls_back_to_numpy():
    from tests.helpers import run_python

    code = ("import sys; sys.modules['cupy'] = None\n"
            "import snippets.first_steps.first_steps_exercises as m\n"
            "assert m.cp is None\n")
    result = run_python(["-c", code])
    assert result.returncode == 0, result.stderr
