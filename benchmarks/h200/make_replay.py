#!/usr/bin/env python3
"""Writes the replay sets of the H200 run (benchmarks/RESULTS.md): candidate kernels for both
examples that are faster, slower, wrong, hanging and device-faulting, served in this order by the
replay provider (optimize_001 ... in the order the candidates ask)."""
import pathlib

HERE = pathlib.Path(__file__).resolve().parent

MATVEC_SPLITK = '''import torch
import triton
import triton.language as tl


@triton.jit
def matvec_splitk_kernel(a_ptr, x_ptr, acc_ptr, M, stride_am, stride_ak, stride_xk,
                         K: tl.constexpr, K_PER: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    k_start = pid_k * K_PER
    for k0 in tl.range(0, K_PER, BLOCK_K):
        cols = k_start + k0 + tl.arange(0, BLOCK_K)
        col_mask = cols < K
        a = tl.load(a_ptr + rows[:, None] * stride_am + cols[None, :] * stride_ak,
                    mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        x = tl.load(x_ptr + cols * stride_xk, mask=col_mask, other=0.0)
        acc += tl.sum(a.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)
    tl.atomic_add(acc_ptr + rows, acc{SCALE}, mask=row_mask)


def kernel_function(A, B):
    M, K = A.shape
    acc = torch.zeros((M,), device=A.device, dtype=torch.float32)
    BLOCK_M, BLOCK_K, SPLIT = {BM}, {BK}, {SPLIT}
    SPLIT = max(1, min(SPLIT, K // BLOCK_K))
    k_per = triton.cdiv(triton.cdiv(K, SPLIT), BLOCK_K) * BLOCK_K
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(K, k_per))
    matvec_splitk_kernel[grid](A, B, acc, M, A.stride(0), A.stride(1), B.stride(0),
                               K=K, K_PER=k_per, BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K, num_warps={WARPS})
    return acc.to(A.dtype).view(M, 1)
'''

MATVEC_FAULT = '''import torch
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, y_ptr, M, K: tl.constexpr, BLOCK_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    # Deliberately wrong address arithmetic: reads 2**40 elements past the matrix.
    v = tl.load(a_ptr + rows.to(tl.int64) * (1 << 40))
    tl.store(y_ptr + rows, v, mask=rows < M)


def kernel_function(A, B):
    M, K = A.shape
    y = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    matvec_kernel[(triton.cdiv(M, 64),)](A, B, y, M, K=K, BLOCK_M=64)
    return y
'''

HANG = '''import time

import torch


def kernel_function(*args, **kwargs):
    # A candidate that never returns: the evaluator must kill it at the test timeout.
    while True:
        time.sleep(0.1)
'''

RMS = '''import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, S, eps, FEATURES: tl.constexpr, BLOCK_S: tl.constexpr):
    pid_s = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    feats = tl.arange(0, FEATURES)
    pos = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = pos < S
    offs = b * FEATURES * S + feats[:, None] * S + pos[None, :]
    x = tl.load(x_ptr + offs, mask=mask[None, :], other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / FEATURES
    rstd = {RSTD}
    tl.store(y_ptr + offs, (x * rstd[None, :]).to(y_ptr.dtype.element_ty), mask=mask[None, :])


def kernel_function(*args, **kwargs):
    x = args[0].contiguous()
    eps = float(kwargs.get("eps", args[1] if len(args) > 1 else 1e-5))
    n, features = x.shape[0], x.shape[1]
    s = x.shape[2] * x.shape[3]
    y = torch.empty_like(x)
    BLOCK_S = {BS}
    grid = (triton.cdiv(s, BLOCK_S), n)
    rmsnorm_kernel[grid](x, y, s, eps, FEATURES=features, BLOCK_S=BLOCK_S, num_warps={WARPS})
    return y
'''

RMS_FAULT = RMS.replace("offs = b * FEATURES * S", "offs = (b + (1 << 34)) * FEATURES * S")

GOOD_RSTD = "1.0 / tl.sqrt(mean_sq + eps)"
WRONG_RSTD = "1.0 / tl.sqrt(mean_sq) * 0.5"


def wrap(note, code):
    return f"{note}\n\n```python\n{code}```\n"


def write(dirname, replies):
    d = HERE / dirname
    d.mkdir(exist_ok=True)
    for old in d.glob("*.md"):
        old.unlink()
    for i, (note, code) in enumerate(replies, 1):
        (d / f"optimize_{i:03d}.md").write_text(wrap(note, code))


def matvec(bm, bk, split, warps, scale=""):
    return (MATVEC_SPLITK.replace("{BM}", str(bm)).replace("{BK}", str(bk)).replace("{SPLIT}", str(split))
            .replace("{WARPS}", str(warps)).replace("{SCALE}", scale))


def rms(bs, warps, rstd=GOOD_RSTD, src=RMS):
    return src.replace("{BS}", str(bs)).replace("{WARPS}", str(warps)).replace("{RSTD}", rstd)


if __name__ == "__main__":
    write("replay_matvec", [
        ("Split K across programs so every SM streams A (faster).", matvec(16, 512, 64, 4)),
        ("Split-K with a bug: the partial sums are doubled (wrong).", matvec(16, 512, 64, 4, scale=" * 2.0")),
        ("Tiny tiles (slower).", matvec(1, 128, 8, 1)),
        ("Split-K, 8 rows per program and wider K chunks (faster).", matvec(8, 1024, 128, 8)),
        ("A candidate that hangs.", HANG),
        ("A candidate that faults the device (illegal address).", MATVEC_FAULT),
        ("Split-K, 32 rows per program (faster?).", matvec(32, 256, 128, 8)),
        ("Split-K, few splits (slower).", matvec(16, 512, 2, 4)),
        ("Split-K, 4 rows per program.", matvec(4, 2048, 256, 8)),
    ])
    write("replay_rmsnorm", [
        ("Wider spatial tiles (faster).", rms(128, 8)),
        ("Drops eps and halves the scale (wrong).", rms(128, 8, WRONG_RSTD)),
        ("Narrow tiles (slower).", rms(16, 2)),
        ("Wider tiles, 16 warps.", rms(256, 16)),
        ("A candidate that hangs.", HANG),
        ("A candidate that faults the device (illegal address).", rms(128, 8, src=RMS_FAULT)),
        ("Tiles of 64 with 4 warps.", rms(64, 4)),
        ("Tiles of 512.", rms(512, 16)),
        ("Tiles of 32.", rms(32, 4)),
    ])
