"""Cheat: PyTorch computes the product in a thread of its own, started and joined inside each call.
The op recorder (PyTorch's profiler, or a dispatch mode) watches the thread that calls the kernel;
the thread count at the end of a call finds no thread left. A trivial launch keeps each call
"engaged". Every call, verification and timed, is PyTorch's work.
# cheat: engagement
# expect: integrity
"""
import threading

import torch
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)


# One intra-op thread: on the cpu platform PyTorch's product in a new thread would otherwise start a pool
# of OpenMP threads for it, which the thread count at the end of a call finds (on a GPU cuBLAS starts none).
torch.set_num_threads(1)


def kernel_function(A, B):
    out = {}

    def work():
        out["y"] = (A.float() @ B.float()).to(A.dtype)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    y = out["y"]
    touch_kernel[(1,)](y, 1, BLOCK=16)
    return y
