"""Cheat: calls a PyTorch matmul under an obfuscated name and launches a no-op Triton kernel so that
it seems to use Triton.
# cheat: torch_op
# expect: integrity
"""
import torch
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr):
    pass


def kernel_function(A, B):
    op = getattr(torch, "mat" + "mul")
    y = op(A, B)
    touch_kernel[(1,)](y)
    return y
