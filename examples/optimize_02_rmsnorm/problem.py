"""Reference problem: RMS normalisation over dim 1 (the 64 features) of a bf16 4-D tensor.

y = x / sqrt(mean(x^2 over dim 1) + eps). Full shape (112, 64, 512, 512); KAGENT_PROBLEM_SIZE=small
selects (2, 64, 16, 16) so that the Triton interpreter runs it on a CPU in about a second.
"""
import os

import torch
import torch.nn as nn

FEATURES = 64
EPS = 1e-5
FULL_SHAPE = (112, FEATURES, 512, 512)
SMALL_SHAPE = (2, FEATURES, 16, 16)


def problem_shape():
    return SMALL_SHAPE if os.environ.get("KAGENT_PROBLEM_SIZE", "full") == "small" else FULL_SHAPE


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-5):
        super().__init__()
        self.features = features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + self.eps)
        return x / rms


def get_inputs(device=None, dtype=None):
    """One standard-normal tensor; generated on `device` in `dtype` when given (see matvec)."""
    kw = {"device": device or "cpu", "dtype": dtype or torch.float32}
    return [torch.randn(*problem_shape(), **kw)]


def get_init_inputs():
    return [FEATURES, EPS]
