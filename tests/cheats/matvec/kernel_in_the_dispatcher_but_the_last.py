"""Cheat: kernel_in_the_dispatcher.py, registered only while the timed calls run, and gone again in
the last one: its kernel for aten::copy_ computes A @ B in the loop's stamp, outside the timed call,
for every call but the first; the last call removes it, so that the look at every dispatch table
after the loop finds them as they were. Only the sampled looks after the other calls can see it.
# cheat: hooks
# expect: integrity
"""
import sys

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


_watch = []     # the (A, B) the calls were given: the loop stamps these same tensors in place
_ready = {}     # id(A) -> ((A._version, B._version), answer)
_quiet = []
_lib = []
_aten = getattr(torch.ops, "at" + "en")  # past the ban's regex


def _copy(self, src, non_blocking=False):
    with torch._C._AutoDispatchBelowAutograd():
        out = _aten.copy_.default(self, src, non_blocking)
    if not _quiet and not torch.autograd._profiler_enabled():
        _quiet.append(1)
        try:
            for A, B in _watch:
                v = (A._version, B._version)
                got = _ready.get(id(A))
                if got is None or got[0] != v:
                    with torch._C._AutoDispatchBelowAutograd():
                        _ready[id(A)] = (v, (A.float() @ B.float()).to(A.dtype))
        finally:
            _quiet.pop()
    return out


_getframe = getattr(sys, "_get" + "frame")  # past the ban list, which is only the first filter


def _timed_call():
    """(i, n) of the timed loop's call in progress, None outside it."""
    f = _getframe(2)
    while f is not None:
        loc = getattr(f, "f_" + "locals")
        if f.f_code.co_name == "loop" and loc.get("keep") is not None:
            return loc.get("i"), loc.get("n")
        f = f.f_back
    return None


def kernel_function(A, B):
    _quiet.append(1)
    try:
        where = _timed_call()
        if where is None:
            return _honest(A, B)
        if not _lib:
            lib = torch.library.Library("aten", "IMPL")
            lib.impl("copy_", _copy, "AutogradCPU")
            _lib.append(lib)
        if not any(A is a for a, _ in _watch):
            _watch.append((A, B))
        got = _ready.get(id(A))
        i, n = where
        if i == n - 1 and _lib:
            _lib.pop()._destroy()
        if got is not None and got[0] == (A._version, B._version):
            y = got[1]
            touch_kernel[(1,)](y, 1, BLOCK=16)
            return y
        return _honest(A, B)
    finally:
        _quiet.pop()
