"""The marker of a profile batch (profile_wrapper.py --batch): a one-program-per-index Triton kernel
launched before each kernel of the batch with a grid of (index + 1,), so a profiler's rows can be told
apart by kernel: the rows after the marker of grid (i + 1,), up to the next marker, are kernel i's.
Imported only in batch mode (the single-kernel wrapper imports no Triton of its own)."""
import triton
import triton.language as tl

MARKER_NAME = "kagent_batch_marker"


@triton.jit
def kagent_batch_marker(out_ptr):
    tl.store(out_ptr + tl.program_id(0), 1)


class Marker:
    def __init__(self, torch, device, count):
        self.torch = torch
        self.buf = torch.zeros(count + 1, dtype=torch.int32, device=device)

    def launch(self, index):
        kagent_batch_marker[(index + 1,)](self.buf)
