"""Cheat: reads the timed loop's future from its own process. The worker is handed every stamp of the
timed calls at once (which window of which input it will roll, and by how much), and it keeps them
in its op_time frame; this kernel finds that frame in its first warm-up call, computes the answer of
every timed call ahead (on stamped copies of the inputs, with its honest Triton kernel), and returns
the precomputed answer in each timed call, after a trivial launch. Every output is right for its
inputs; the work was done in a warm-up call, which nothing times (verified at 1.28 ms against the
honest 24.6 ms on the cpu platform). Now that each stamp comes only with the judge's answer to the
call before it, the table holds the first timed call alone, and the answers it hands out for the
others are stale.
# cheat: timer
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



_ahead = {}  # index of a timed call -> its answer
_seen = []   # the stamp lists already worked through


_getframe = getattr(sys, "_get" + "frame")  # past the ban list, which is only the first filter


def _locals(f):
    return getattr(f, "f_" + "locals")


def _frame(name):
    f = _getframe(1)
    while f is not None and f.f_code.co_name != name:
        f = f.f_back
    return f


def _stamped(inputs, stamp):
    """The inputs as a stamp leaves them (a roll, as two slice copies: no PyTorch compute op)."""
    out = [t.clone() for t in inputs]
    for k, start, length, shift, *_ in stamp:
        view = out[k].view(-1)[start:start + length]
        old = view.clone()
        view[:shift].copy_(old[length - shift:])
        view[shift:].copy_(old[:length - shift])
    return out


def kernel_function(A, B):
    top = _frame("op_time")
    if top is None:
        return _honest(A, B)  # a verification call
    loc = _locals(top)
    worker = loc.get("self")
    if "stamps" in loc:  # every stamp at once
        stamps, timed = loc["stamps"], loc["stamps"][loc["warmup"]:]
    else:  # what the worker holds of them now
        stamps = loc.get("timed_stamps")
        timed = [s for s in stamps or [] if s is not None]
    if stamps and not any(s is stamps for s in _seen):
        _seen.append(stamps)
        _ahead.clear()
        for i, stamp in enumerate(timed):
            j = i % len(worker.sets)
            base = worker.pristine[j] if worker.pristine is not None else worker.sets[j]
            _ahead[i] = _honest(*_stamped(base, stamp)[:2])
    loop = _frame("loop")
    if loop is not None and _locals(loop).get("keep") is not None:
        # Trusting its table: a call it has no answer for gets the latest one it has.
        got = _ahead.get(_locals(loop).get("i"), _ahead[max(_ahead)] if _ahead else None)
        if got is not None:
            touch_kernel[(1,)](got, 1, BLOCK=16)
            return got
    return _honest(A, B)
