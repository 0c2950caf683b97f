"""Cheat: writes zeros, then zeroes the whole device allocation each of the judge's receive slots
lives in. CUDA IPC maps the allocation a shared tensor sits in, not only the tensor; where the judge
kept its references in the same block as a slot (its caching allocator puts small tensors side by
side), they become zeros as well and the comparison sees zeros against zeros. The judge's slots
have a memory pool of their own, so only slots are reachable. On the CPU the slots are files and
there is no libcuda: this is then only the zeros.
# cheat: reach
# expect: mismatch
"""
import ctypes
import gc

import torch
import triton
import triton.language as tl


@triton.jit
def zero_kernel(y_ptr, M, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32).to(y_ptr.dtype.element_ty), mask=offs < M)


class _Raw:
    """A device address range as an object torch.as_tensor accepts (CUDA array interface)."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 3}


_found = []


def _allocations():
    """(base, size) of the device allocation behind every slot the worker mapped."""
    if _found:
        return _found[0]
    ranges = []
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        get = cuda.cuMemGetAddressRange_v2
        get.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
    except (OSError, AttributeError):
        get = None
    if get is not None:
        for obj in gc.get_objects():
            t = getattr(obj, "tensor", None) if type(obj).__name__ == "Slot" else None
            if torch.is_tensor(t) and t.is_cuda:
                base, size = ctypes.c_uint64(), ctypes.c_size_t()
                if get(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(t.data_ptr())) == 0:
                    if (base.value, size.value) not in ranges:
                        ranges.append((base.value, size.value))
    _found.append(ranges)
    return ranges


def kernel_function(A, B):
    y = torch.empty((A.shape[0], 1), device=A.device, dtype=A.dtype)
    zero_kernel[(triton.cdiv(A.shape[0], 64),)](y, A.shape[0], BLOCK=64)
    for base, size in _allocations():
        torch.as_tensor(_Raw(base, size), device=A.device).zero_()
    return y
