"""Out-of-memory errors, continued: record the allocator's history, and when a step runs out
of memory, dump a snapshot from the except block, to open at the failing allocation in
https://pytorch.org/memory_viz. The allocator's history is CUDA's: on a CPU the step just runs.

Run it: python -m snippets.memory.out_of_memory_errors_snapshot
"""

GPUS_NEEDED = 0  # picks CUDA at run time; without one there is no history to record

# --8<-- [start:snapshot]
import pickle

import torch

device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def run_or_dump(step, path="oom_snapshot.pickle", max_entries=100_000):
    """Run `step()` while the CUDA allocator records its history (the last
    `max_entries` events, each with its Python stack). If the step runs out of memory,
    write a snapshot to `path`, then raise the error again. A recording the caller
    started is used as it is, and left on."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.init()  # the allocator exists only once CUDA is set up
    ours = cuda and not torch._C._cuda_isHistoryEnabled()  # not recording yet
    if ours:
        torch.cuda.memory._record_memory_history(max_entries=max_entries)
    try:
        return step()
    except torch.OutOfMemoryError:
        if cuda:  # still inside the except block: nothing is freed yet
            torch.cuda.memory._dump_snapshot(path)
        raise
    finally:
        if ours:  # stop only the recording this call started
            torch.cuda.memory._record_memory_history(enabled=None)
# --8<-- [end:snapshot]


# --8<-- [start:failed]
def failed_allocation(path):
    """(bytes asked for, bytes CUDA still had free) of the last allocation that failed
    in the snapshot at `path`: the "oom" event that ends its history."""
    with open(path, "rb") as file:
        snapshot = pickle.load(file)  # a file you wrote: pickle runs what it holds
    for history in snapshot["device_traces"]:  # one list of events per GPU
        for event in reversed(history):
            if event["action"] == "oom":
                return event["size"], event["device_free"]
    return None
# --8<-- [end:failed]


if __name__ == "__main__":
    # --8<-- [start:main]
    def too_big():  # twice what the GPU has free, in one tensor
        free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else 2**20
        return torch.empty(2 * free, dtype=torch.uint8, device=device)

    try:
        run_or_dump(too_big)
        print(f"on the {device.type}: it fit, nothing was recorded")
    except torch.OutOfMemoryError:
        asked, free = failed_allocation("oom_snapshot.pickle")
        print(f"oom_snapshot.pickle: {asked / 2**30:.1f} GiB asked for, "
              f"{free / 2**30:.1f} GiB free")
    # --8<-- [end:main]
