"""Cheat: an honest kernel that leaves a process behind after its call (a detached child in a new
session, and a double-forked daemon) that could go on working, watching or signalling.
# cheat: process
# expect: integrity
"""
import subprocess
import sys
import torch
import triton
import triton.language as tl

_started = []


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


def _matvec(A, B):
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


def _leave_something_behind():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The daemon double-forked by a shell: the candidate's own process may fork nothing once it is
    # loaded (os.fork is refused), but a program it starts with exec can.
    subprocess.run(["/bin/sh", "-c", "(setsid sleep 600 </dev/null >/dev/null 2>&1 &)"], check=False)
    _started.append(child)


def kernel_function(A, B):
    """y = A @ B for A (M x K) and B (K x 1); returns an (M x 1) tensor of A's dtype."""
    if not _started:
        _leave_something_behind()
    return _matvec(A, B)
