"""Wrong: launches a Triton kernel that writes zeros (a sloppy or hostile answer).
# cheat: wrong
# expect: mismatch
"""
import torch
import triton
import triton.language as tl


@triton.jit
def zero_kernel(y_ptr, M, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32).to(y_ptr.dtype.element_ty), mask=offs < M)


def kernel_function(A, B):
    y = torch.empty((A.shape[0], 1), device=A.device, dtype=A.dtype)
    zero_kernel[(triton.cdiv(A.shape[0], 64),)](y, A.shape[0], BLOCK=64)
    return y
