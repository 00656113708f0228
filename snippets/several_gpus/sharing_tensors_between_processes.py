"""Processes that share tensors: torch.multiprocessing, share_memory_(), CUDA tensors passed between
processes, and why a forked process cannot use CUDA.

Run it: python -m snippets.several_gpus.sharing_tensors_between_processes
(the CUDA parts run where there is a GPU)
"""

GPUS_NEEDED = 0  # CPU tensors everywhere; CUDA tensors where there is a GPU

# --8<-- [start:processes]
import sys
import warnings

import torch
import torch.multiprocessing as mp


def start_method():
    """spawn where it can work: it starts a fresh Python that imports your script
    to find the function to run, so __main__ must be a file (not a notebook, and
    not python -c)."""
    return "spawn" if hasattr(sys.modules["__main__"], "__file__") else "fork"


def run_in_children(target, args_per_child, method):
    """Start target(*args) in one new process per args tuple; wait for all of them."""
    ctx = mp.get_context(method)
    children = [ctx.Process(target=target, args=args) for args in args_per_child]
    with warnings.catch_warnings():
        # Python 3.12+ warns that fork() in a process with threads can deadlock; the
        # examples fork on purpose, and their children only run `target`
        warnings.filterwarnings("ignore", "This process .* is multi-threaded",
                                DeprecationWarning)
        for child in children:
            child.start()
    for child in children:
        child.join()
    return [child.exitcode for child in children]
# --8<-- [end:processes]


# --8<-- [start:share_memory]
def add_one(tensor):
    """Runs in the child: writes into the tensor it was given."""
    tensor.add_(1)


def what_the_parent_sees(method, share):
    """A child adds 1 to a tensor of zeros: does the parent see the ones?"""
    tensor = torch.zeros(4)
    if share:
        tensor.share_memory_()  # move its storage to shared memory, in place
    run_in_children(add_one, [(tensor,)], method)
    return tensor.tolist(), tensor.is_shared()
# --8<-- [end:share_memory]


# --8<-- [start:hogwild]
from torch import nn


def train_shared_model(model, steps, seed):
    """Runs in each child: SGD on the *shared* parameters, without any locking."""
    torch.manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        x = torch.randn(32, 8)
        loss = nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # writes straight into the memory every process shares


def loss_of(model):
    torch.manual_seed(123)
    x = torch.randn(256, 8)
    with torch.no_grad():
        return nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True)).item()


def hogwild(workers=2, steps=200, method=None):
    """Several processes train one model in shared memory (the "Hogwild" recipe)."""
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    model.share_memory()  # every parameter's storage into shared memory
    before = loss_of(model)
    jobs = [(model, steps, seed) for seed in range(workers)]  # one seed per process
    run_in_children(train_shared_model, jobs, method or start_method())
    return before, loss_of(model)
# --8<-- [end:hogwild]


# --8<-- [start:cuda_tensors]
from queue import Empty


def consume(queue, sums):
    """Runs in the child: receives CUDA tensors that live in the parent's memory."""
    while (tensor := queue.get()) is not None:
        sums.put(tensor.sum().item())  # reads the parent's GPU memory, no copy
        del tensor  # drop the handle at once, so the parent may free the memory


def send_cuda_tensors(count, method="spawn"):
    """The parent makes CUDA tensors and a spawned child sums them."""
    ctx = mp.get_context(method)
    queue, sums = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=consume, args=(queue, sums))
    child.start()
    sent = []  # keep every tensor alive until the child is done with it
    for i in range(count):
        tensor = torch.full((1024,), float(i), device="cuda")
        sent.append(tensor)
        queue.put(tensor)  # sends a handle to the memory, not the data
    results = []
    while len(results) < count:
        try:
            results.append(sums.get(timeout=1))
        except Empty:  # nothing yet: a dead child would never answer
            if (code := child.exitcode) is not None:
                raise RuntimeError(f"the child died: exit code {code}") from None
    queue.put(None)
    child.join()
    return results  # only now may `sent` go
# --8<-- [end:cuda_tensors]


# --8<-- [start:fork_and_cuda]
def try_cuda(errors):
    """Runs in the child: use CUDA, and report the error if there is one."""
    try:
        torch.zeros(1, device="cuda")
        errors.put("no error")
    except RuntimeError as exc:
        errors.put(str(exc).split(".")[0])


def cuda_in_forked_child():
    """The parent uses CUDA, then forks: what happens when the child uses it too?"""
    torch.zeros(1, device="cuda")  # the parent's CUDA is now initialized
    ctx = mp.get_context("fork")
    errors = ctx.SimpleQueue()
    (exitcode,) = run_in_children(try_cuda, [(errors,)], "fork")
    if errors.empty():  # it died before it could tell: get() would wait forever
        return f"the child exited with code {exitcode} and said nothing"
    return errors.get()
# --8<-- [end:fork_and_cuda]


if __name__ == "__main__":
    # --8<-- [start:main]
    method = start_method()
    print(f"start method: {method}")
    for how, share in ((method, False), ("fork", False), ("fork", True)):
        values, shared = what_the_parent_sees(how, share)
        print(f"{how}, share_memory_()={share}: "
              f"the parent sees {values} (shared: {shared})")
    before, after = hogwild()
    print(f"hogwild, two processes on one shared model: loss {before:.3f} -> {after:.3f}")
    if torch.cuda.is_available() and method == "spawn":
        print(f"a spawned child summed the parent's CUDA tensors: {send_cuda_tensors(3)}")
        print(f"a forked child using CUDA: {cuda_in_forked_child()}")
    elif torch.cuda.is_available():
        print("CUDA tensors between processes need spawn: run this as a script file")
    else:
        print("no CUDA GPU: the CUDA examples are skipped")
    # --8<-- [end:main]
