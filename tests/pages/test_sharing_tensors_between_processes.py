"""Claims of docs/several-gpus/sharing-tensors-between-processes.md: CPU tensors everywhere (spawn
and fork), CUDA tensors on a GPU."""

import os

import pytest
import torch

from snippets.several_gpus import sharing_tensors_between_processes as snippet
from tests.helpers import run_python, within

pytestmark = pytest.mark.snippet("snippets/several_gpus/sharing_tensors_between_processes.py")

CLAIMS = {"hogwild_loss_drop_min": 10}  # the page: the shared model's loss falls by more than this


def test_spawn_for_a_script_fork_for_python_c(tmp_path):
    # Both in a new Python: the test's own __main__ depends on the runner (pytest-xdist's
    # workers run as `python -c`).
    code = ("from snippets.several_gpus.sharing_tensors_between_processes import start_method\n"
            "print(start_method())")
    script = tmp_path / "script.py"
    script.write_text(code)
    for args, expected in ((["-c", code], "fork"), ([str(script)], "spawn")):
        result = run_python(args, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == expected, args


def test_forked_child_writes_to_its_own_copy_without_share_memory():
    assert snippet.what_the_parent_sees("fork", share=False) == ([0.0] * 4, False)


def test_share_memory_makes_a_forked_childs_writes_visible():
    assert snippet.what_the_parent_sees("fork", share=True) == ([1.0] * 4, True)


def test_spawn_moves_a_tensor_to_shared_memory_by_itself():
    assert snippet.what_the_parent_sees("spawn", share=False) == ([1.0] * 4, True)


def test_hogwild_processes_train_one_shared_model():
    # In a new Python: fork cannot be combined with autograd once a backward pass has run on
    # the GPU in this process (earlier tests do that), and the forked children train.
    code = ("from snippets.several_gpus.sharing_tensors_between_processes import hogwild\n"
            "print(*hogwild(workers=2, steps=100, method='fork'))")
    result = run_python(["-c", code], timeout=300)
    assert result.returncode == 0, result.stderr
    before, after = map(float, result.stdout.split()[-2:])
    assert after * CLAIMS["hogwild_loss_drop_min"] < before, (before, after)


def test_a_failing_child_is_reported_by_its_exit_code():
    assert snippet.run_in_children(snippet.add_one, [("not a tensor",)], "fork") == [1]


# --- CUDA ----------------------------------------------------------------------------------------

@pytest.mark.gpus(1)
def test_a_spawned_child_reads_the_parents_cuda_tensors():
    assert snippet.send_cuda_tensors(3) == [0.0, 1024.0, 2048.0]


@pytest.mark.gpus(1)
def test_a_spawned_child_writes_into_the_parents_gpu_memory():
    tensor = torch.zeros(4, device="cuda")
    assert snippet.run_in_children(snippet.add_one, [(tensor,)], "spawn") == [0]
    assert tensor.tolist() == [1.0] * 4  # the same memory: no copy went either way


@pytest.mark.gpus(1)
def test_a_forked_child_cannot_use_cuda():
    assert snippet.cuda_in_forked_child() == "Cannot re-initialize CUDA in forked subprocess"


def dies(*queues):
    os._exit(3)  # as a crash ends a process: no exception, nothing sent


@pytest.mark.gpus(1)
def test_a_child_that_dies_makes_the_sender_raise_instead_of_waiting(monkeypatch):
    monkeypatch.setattr(snippet, "consume", dies)  # spawn: the child imports it from here
    error = within(120, lambda: snippet.send_cuda_tensors(3))
    assert isinstance(error, RuntimeError) and "exit code 3" in str(error), error


@pytest.mark.gpus(1)
def test_a_forked_child_that_dies_silently_is_reported_not_waited_for(monkeypatch):
    monkeypatch.setattr(snippet, "try_cuda", dies)
    assert within(120, snippet.cuda_in_forked_child) == "the child exited with code 3 and said nothing"
