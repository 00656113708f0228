"""The seeds' outdated advice the pages correct, checked against the current language and API."""

import pytest


def test_cuda_async_keyword_is_a_syntax_error():
    # `async` became a reserved keyword in Python 3.7, so the seeds' `.cuda(async=True)` can't parse.
    with pytest.raises(SyntaxError):
        compile("x = t.cuda(async=True)", "<seed>", "exec")
    compile("x = t.to('cuda', non_blocking=True)", "<current>", "exec")


def test_gpu_is_not_a_device_type():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="gpu"):
        torch.device("gpu")
