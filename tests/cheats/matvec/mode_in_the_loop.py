"""Cheat: leaves a torch function mode on for good (entered in its first call, never left): every
PyTorch call the timed loop makes between the calls (the stamp's copies, the cache flush) then runs
through its handler, which computes A @ B for the stamped inputs there, outside the timed call, while
no op recorder is on. Nothing of the harness is rebound, no thread, no process, no Python hook.
# cheat: hooks
# expect: integrity
"""
import torch
import triton
import triton.language as tl
from torch.overrides import TorchFunctionMode


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


_watch = []     # the (A, B) the calls were given: the loop stamps these same tensors in place
_ready = {}     # id(A) -> ((A._version, B._version), answer)
_in_call = []


class _Beside(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not _in_call and not torch.autograd._profiler_enabled():
            for A, B in _watch:
                v = (A._version, B._version)
                got = _ready.get(id(A))
                if got is None or got[0] != v:
                    _ready[id(A)] = (v, (A.float() @ B.float()).to(A.dtype))
        return out


_mode = []


def kernel_function(A, B):
    _in_call.append(1)
    try:
        if not _mode:
            _mode.append(_Beside())
            _mode[0].__enter__()
        if not any(A is a for a, _ in _watch):
            _watch.append((A, B))
        got = _ready.get(id(A))
        if got is not None and got[0] == (A._version, B._version):
            y = got[1]
            touch_kernel[(1,)](y, 1, BLOCK=16)
            return y
        return _honest(A, B)
    finally:
        _in_call.pop()
