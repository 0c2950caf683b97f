"""Cheat: computes only what the stamp changed. The worker keeps the current call's stamp as views of
the windows it rolled and their former contents (its loop frame's `saved`); with the answer for the
unstamped inputs kept from the warm-up calls, y = y0 + A[:, wB] (B'[wB] - B0[wB]) for the rows of A
outside its window, and the rows inside it computed afresh: about a fifth of the work on the small
matvec, all in Triton. Right for its inputs, as long as the stamp leaves most of B as it was.
# cheat: cache
# expect: any (not in the corpus: see benchmarks/attacks/README.md)
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
def matvec_acc_kernel(a_ptr, x_ptr, x0_ptr, y_ptr, M, stride_am, c0, L: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """y[r] += A[r, c0:c0+L] . (x - x0) for every row r."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    acc = tl.load(y_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)
    for k0 in tl.range(0, L, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        col_mask = cols < L
        a = tl.load(a_ptr + rows[:, None] * stride_am + (c0 + cols)[None, :],
                    mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        d = tl.load(x_ptr + cols, mask=col_mask, other=0.0).to(tl.float32) - \
            tl.load(x0_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        acc += tl.sum(a.to(tl.float32) * d[None, :], axis=1)
    tl.store(y_ptr + rows, acc, mask=row_mask)


def _honest(A, B):
    M, K = A.shape
    y = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    matvec_kernel[(triton.cdiv(M, 16),)](A, B, y, M, A.stride(0), A.stride(1), B.stride(0), y.stride(0),
                                         K=K, BLOCK_M=16, BLOCK_K=512)
    return y



_getframe = getattr(sys, "_get" + "frame")  # past the ban list, which is only the first filter
_y0 = {}  # id(A) -> its answer on the unstamped inputs (float32)


def _saved():
    f = _getframe(1)
    while f is not None:
        if f.f_code.co_name == "loop":
            return getattr(f, "f_" + "locals").get("saved")
        f = f.f_back
    return None


def kernel_function(A, B):
    saved = _saved()
    if not saved:  # a verification call or a warm-up call: unstamped inputs
        M, K = A.shape
        y32 = torch.empty((M, 1), device=A.device, dtype=torch.float32)
        matvec_kernel[(triton.cdiv(M, 16),)](A, B, y32, M, A.stride(0), A.stride(1), B.stride(0), y32.stride(0),
                                             K=K, BLOCK_M=16, BLOCK_K=512)
        _y0[id(A)] = y32
        return y32.to(A.dtype)
    y0 = _y0.get(id(A))
    if y0 is None:
        return _honest(A, B)
    M, K = A.shape
    win = {}
    for view, old in saved:
        win[view.untyped_storage().data_ptr()] = (view.storage_offset(), view.numel(), old, view)
    sA, lA, _, _ = win[A.untyped_storage().data_ptr()]
    sB, lB, oldB, viewB = win[B.untyped_storage().data_ptr()]
    y = torch.empty((M,), dtype=torch.float32, device=A.device)
    y.copy_(y0.view(-1))
    matvec_acc_kernel[(triton.cdiv(M, 16),)](A, viewB, oldB, y, M, A.stride(0), sB, L=lB, BLOCK_M=16, BLOCK_K=128)
    out = y.to(A.dtype).view(M, 1)
    r0, r1 = sA // K, min(M, -(-(sA + lA) // K))
    part = A[r0:r1]
    yr = out[r0:r1]
    matvec_kernel[(triton.cdiv(r1 - r0, 16),)](part, B, yr, r1 - r0, part.stride(0), part.stride(1), B.stride(0),
                                                yr.stride(0), K=K, BLOCK_M=16, BLOCK_K=512)
    return out
