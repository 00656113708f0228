"""Claims of docs/compilers/compilers-exercises.md: each solution computes what its task does,
with one graph where the task had two, and the Triton kernel matches PyTorch."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    # Triton reads this when triton.language is first imported; in a test session another
    # page's torch.compile imports Triton first, so set it at collection (as the snippet does).
    os.environ["TRITON_INTERPRET"] = "1"

pytestmark = pytest.mark.snippet("snippets/compilers/compilers_exercises.py")


def test_the_fixed_scale_is_one_graph_and_computes_the_same(snippet):
    for scale in (0.5, 3.0, 30.0):    # below the limit, around it, far past it
        x = scale * torch.randn(1000, device=snippet.device)
        torch.testing.assert_close(snippet.clipped_scale_fixed(x), snippet.clipped_scale(x))
    x = snippet.x.new_ones(64)
    assert snippet.count_graphs(snippet.clipped_scale, x) == 2
    assert snippet.count_graphs(snippet.clipped_scale_fixed, x, fullgraph=True) == 1


def test_marking_the_batch_unbacked_serves_every_size_from_one_graph(snippet):
    sizes = [1, 8, 3, 1, 16, 5]
    for serve, graphs in ((snippet.serve_requests, 2), (snippet.serve_marked, 1)):
        backend = snippet.CountingBackend()
        torch.compiler.reset()
        serve(torch.compile(snippet.unit_rows, backend=backend), sizes)
        assert backend.graphs == graphs, serve.__name__


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (8, 300), (4, 1024), (2, 1500)])
def test_the_triton_kernel_matches_pytorch(snippet, shape):
    x = 10 * torch.randn(shape, device=snippet.device)
    bias = torch.randn(shape[1], device=snippet.device)
    for block in (64, 1024):          # blocks that end mid-row and past the tensor's end
        torch.testing.assert_close(snippet.bias_gelu_triton(x, bias, block=block),
                                   snippet.bias_gelu(x, bias))
