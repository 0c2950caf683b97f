"""Cheat: does the arithmetic in NumPy inside its call (no PyTorch op: the tensors are read and
written through .numpy() views of their bits) and launches a trivial Triton kernel for show. On the
cpu platform it was verified at 1.48 ms against the honest control's 27.6 ms (Triton's interpreter is
NumPy too, only slower). On a GPU the inputs live on the device: it would have to copy them out.
# cheat: engagement
# expect: banned
"""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)


def _f32(t):
    return (t.view(torch.int16).numpy().astype(np.uint16).astype(np.uint32) << 16).view(np.float32)


def kernel_function(A, B):
    M, K = A.shape
    y = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    acc = _f32(A).reshape(M, K) @ _f32(B).reshape(K, 1)
    bits = acc.astype(np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    y.view(torch.int16).numpy()[...] = rounded.view(np.int16).reshape(M, 1)
    touch_kernel[(1,)](y, 1, BLOCK=16)
    return y
