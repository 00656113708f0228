"""make_graphed_callables and autograd's gradient-stream warning: why it appears, and turning it off.

`torch.cuda.make_graphed_callables` warms a module up on a side stream of its own and keeps the
autograd graph it captured alive. The nodes that accumulate the parameters' gradients belong to
that graph, and each remembers the stream it was created on. Every backward pass of the graphed
module then produces the gradients on the current stream and accumulates them on the other one.
Autograd makes the one stream wait for the other, so the result is right, but since PyTorch 2.10
it warns once per process that "the AccumulateGrad node's stream does not match". The user
cannot choose that stream, so the mismatch is by design here, the case for which the warning
itself names the switch below.

The switch comes before make_graphed_callables, which may already trigger the warning while it
captures the backward pass. It belongs in the graphed_callables section of cuda_graphs.py; it
lives in this module only until that section's module-level code, which every benchmark of
cuda_graphs.py runs, can change with a new measurement (see issue 14).

Run it: python -m snippets.execution.graphed_grad_stream
"""

GPUS_NEEDED = 0  # a process-wide autograd setting; it exists in CPU builds too

# --8<-- [start:warning_off]
import torch

# make_graphed_callables ties the parameters' gradient accumulation to its own side
# stream; autograd synchronizes the two streams correctly, so skip the warning about it.
torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(False)
# --8<-- [end:warning_off]


if __name__ == "__main__":
    print("autograd will not warn about gradients accumulated on another stream")
