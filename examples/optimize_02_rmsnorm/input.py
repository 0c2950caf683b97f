"""Starting kernel for the RMSNorm example: simple and correct, one (batch, spatial block) per program.

Each program loads all FEATURES values of BLOCK_S spatial positions, reduces the squares over the
feature axis in fp32 and writes the normalised tile. FEATURES is a tl.constexpr (the Triton
interpreter needs static shapes and loop bounds).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, S, eps, FEATURES: tl.constexpr, BLOCK_S: tl.constexpr):
    pid_s = tl.program_id(0)
    b = tl.program_id(1)
    feats = tl.arange(0, FEATURES)
    pos = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = pos < S
    base = b * FEATURES * S
    offs = base + feats[:, None] * S + pos[None, :]
    x = tl.load(x_ptr + offs, mask=mask[None, :], other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / FEATURES
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    y = x * rstd[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask[None, :])


def kernel_function(*args, **kwargs):
    """RMSNorm over dim 1. Positional: x; keyword: eps (default 1e-5), features (checked if given)."""
    if not args:
        raise ValueError("kernel_function expects the input tensor x as its first argument")
    x = args[0]
    eps = float(kwargs.get("eps", args[1] if len(args) > 1 else 1e-5))
    if x.dim() != 4:
        raise ValueError(f"expected a 4-D tensor (N, C, H, W), got shape {tuple(x.shape)}")
    features = x.shape[1]
    if "features" in kwargs and int(kwargs["features"]) != features:
        raise ValueError(f"features={kwargs['features']} but x has {features} channels")
    if features & (features - 1):
        raise ValueError(f"this kernel needs a power-of-two feature count, got {features}")
    x = x.contiguous()
    n = x.shape[0]
    s = x.shape[2] * x.shape[3]
    y = torch.empty_like(x)
    BLOCK_S = 64
    grid = (triton.cdiv(s, BLOCK_S), n)
    rmsnorm_kernel[grid](x, y, s, eps, FEATURES=features, BLOCK_S=BLOCK_S)
    return y
