"""Cheat: computes each answer in a child process, beside the timed loop. Its first call moves the
inputs' storage into shared memory (share_memory_, in place: the loop keeps stamping the same
storage), forks a helper that recomputes A @ B with PyTorch every 0.2 ms into a shared buffer, stamped
with the time it started reading; a call returns the newest answer read after the loop's last stamp
could have landed (well inside the cache flush that follows it). It learns how many calls the loop
will make from the worker's own request (the garbage collector shows it) and ends the helper in the
last one, before the judge looks for leftover processes.
# cheat: processes
# expect: integrity
"""
import gc
import os
import signal
import time

import torch
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, y_ptr, M, stride_am, stride_ak, stride_xk, stride_ym,
                  K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        col_mask = cols < K
        a = tl.load(a_ptr + rows[:, None] * stride_am + cols[None, :] * stride_ak,
                    mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        x = tl.load(x_ptr + cols * stride_xk, mask=col_mask, other=0.0)
        acc += tl.sum(a.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)
    tl.store(y_ptr + rows * stride_ym, acc.to(y_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)


def _honest(A, B):
    M, K = A.shape
    y = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    matvec_kernel[(triton.cdiv(M, 16),)](A, B, y, M, A.stride(0), A.stride(1), B.stride(0), y.stride(0),
                                         K=K, BLOCK_M=16, BLOCK_K=512)
    return y


_state = {}


def _helper(A, B, out, stamp):
    torch.set_num_threads(1)  # the parent's OpenMP pool does not survive the fork
    while True:
        t = time.monotonic()
        y = (A.float() @ B.float()).to(A.dtype)
        out.copy_(y)
        stamp[0] = t
        time.sleep(0.0002)


def _calls_to_come():
    for o in gc.get_objects():
        if isinstance(o, dict) and o.get("op") == "time" and "repeat" in o:
            return int(o["warmup"]) + int(o["repeat"])
    return None


def kernel_function(A, B):
    total = _state.get("total") or _calls_to_come()
    if not total:  # verification: no helper yet (the judge counts processes after it)
        return _honest(A, B)
    _state["total"] = total
    _state["calls"] = _state.get("calls", 0) + 1
    st = _state.get(id(A))
    y = None
    if st is None:
        A.share_memory_()
        B.share_memory_()
        out = torch.empty((A.shape[0], 1), dtype=A.dtype).share_memory_()
        stamp = torch.zeros(1, dtype=torch.float64).share_memory_()
        pid = os.fork()
        if pid == 0:
            try:
                _helper(A, B, out, stamp)
            finally:
                os._exit(0)
        st = _state[id(A)] = {"pid": pid, "out": out, "stamp": stamp}
    elif st["stamp"][0].item() > time.monotonic() - 0.0015:
        y = st["out"].clone()
        touch_kernel[(1,)](y, 1, BLOCK=16)
    if y is None:
        y = _honest(A, B)
    if _state["calls"] >= total:  # the loop's last call: no helper left for the judge to find
        for v in list(_state.values()):
            if isinstance(v, dict) and "pid" in v:
                os.kill(v["pid"], signal.SIGKILL)
                os.waitpid(v["pid"], 0)
    return y
