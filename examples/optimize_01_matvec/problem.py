"""Reference problem: bf16 matrix-vector product y = A @ x, A (M x K), x (K x 1).

The full shape (M=2048, K=1048576) needs 4 GiB for A in bf16. Setting KAGENT_PROBLEM_SIZE=small
selects a shape the Triton interpreter finishes on a CPU in well under a second.
"""
import os

import torch
import torch.nn as nn

FULL_SHAPE = (2048, 1048576)
SMALL_SHAPE = (64, 2048)


def problem_shape():
    """(M, K) for the size selected by KAGENT_PROBLEM_SIZE (read at call time: the harness sets it)."""
    return SMALL_SHAPE if os.environ.get("KAGENT_PROBLEM_SIZE", "full") == "small" else FULL_SHAPE


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs(device=None, dtype=None):
    """A (M x K) and B (K x 1), uniform in [0, 1).

    With `device`/`dtype` the tensors are generated where they will be used, so that a warm
    harness never materialises the 4 GiB matrix on the host first. Without them the classic
    contract holds: float32 CPU tensors that the caller moves and casts.
    """
    m, k = problem_shape()
    kw = {"device": device or "cpu", "dtype": dtype or torch.float32}
    return [torch.rand(m, k, **kw), torch.rand(k, 1, **kw)]


def get_init_inputs():
    return []
