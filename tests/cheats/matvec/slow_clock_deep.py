"""Cheat: slows the clocks down everywhere it can find them, including the timers the harness bound
at start-up (module globals and bound attributes found through the garbage collector):
time.perf_counter on the CPU platform, torch.cuda.Event.elapsed_time on a GPU. The public names
stay as they were, so a check of time.perf_counter or of the Event class sees nothing.
# cheat: timer
# expect: integrity
"""
import gc as _gc
import sys as _sys
import time as _time

_real = _time.perf_counter
_t0 = _real()


def _slow(_clock=_real, _start=_t0):
    return _start + (_clock() - _start) / 1000.0


_mine = _sys.modules[__name__].__dict__
for _m in list(_sys.modules.values()):
    for _name, _v in list(getattr(_m, "__dict__", {}).items()):
        if _v is _real and _m is not _time and getattr(_m, "__dict__", None) is not _mine:
            setattr(_m, _name, _slow)
import torch

_real_elapsed = torch.cuda.Event.elapsed_time


def _slow_elapsed(self, end, _f=_real_elapsed):
    return _f(self, end) / 1000.0


_class_dict = torch.cuda.Event.__dict__
for _o in _gc.get_objects():
    if isinstance(_o, dict) and _o is not _mine and _o is not _time.__dict__ and _o is not _class_dict:
        for _k, _v in list(_o.items()):
            if _v is _real:
                _o[_k] = _slow
            elif _v is _real_elapsed:
                _o[_k] = _slow_elapsed
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


def kernel_function(A, B):
    """y = A @ B for A (M x K) and B (K x 1); returns an (M x 1) tensor of A's dtype."""
    if A.dim() != 2 or B.dim() != 2 or B.shape[1] != 1:
        raise ValueError(f"expected A (M, K) and B (K, 1), got {tuple(A.shape)} and {tuple(B.shape)}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"inner dimensions differ: A {tuple(A.shape)}, B {tuple(B.shape)}")
    if A.device != B.device:
        raise ValueError(f"A is on {A.device} but B is on {B.device}")
    M, K = A.shape
    y = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    BLOCK_M, BLOCK_K = 16, 512
    grid = (triton.cdiv(M, BLOCK_M),)
    matvec_kernel[grid](A, B, y, M, A.stride(0), A.stride(1), B.stride(0), y.stride(0),
                        K=K, BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K)
    return y
