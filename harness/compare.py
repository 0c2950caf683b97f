"""The judge's output comparison (trusted side: this module never sees candidate code).

One pass over the output and its reference gathers every statistic a verdict needs; the verdict is
then taken from those numbers alone, the same way whichever path gathered them:

- on a GPU, for outputs of a million elements or more, one fused Triton kernel reads both tensors
  once (RMSNorm's 3.7 GB output: the former chain of torch ops made float32 copies, masks and
  differences of the whole tensor, about 0.1 s per comparison on the H200);
- elsewhere (the cpu platform, small or non-float outputs), torch ops over chunks of the flattened
  tensors, so memory stays bounded.

The rules (docs/harness.md, "Checks out of the candidate's reach"):
- a non-finite output element where the reference is finite fails (unwritten elements are poisoned
  with NaN by the judge before every call);
- a constant output where the reference spans more than four tolerance bands fails;
- otherwise the output must be close to the reference as torch.allclose(rtol, atol, equal_nan=True)
  defines it, except for at most `max_bad_frac` of the elements (sampled timed calls only).
"""
import harness_core as core

FUSED_MIN_NUMEL = 1 << 20
CHUNK = 1 << 24
BLOCK = 4096
_FLOATS = ("torch.bfloat16", "torch.float16", "torch.float32")
_KERNEL = None


def _kernel():
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        def compare_stats(O, E, N, rtol, atol, COUNTS, FLOATS, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            m = offs < N
            o = tl.load(O + offs, mask=m, other=0.0).to(tl.float32)
            e = tl.load(E + offs, mask=m, other=0.0).to(tl.float32)
            o0 = tl.load(O).to(tl.float32)
            big = 3.4028234663852886e38  # the largest float32: finite means |x| <= big (false for NaN)
            o_fin = tl.abs(o) <= big
            e_fin = tl.abs(e) <= big
            diff = tl.abs(o - e)
            d_num = diff == diff  # not NaN (an infinite difference is reported as such)
            close = (o == e) | ((o != o) & (e != e)) | ((diff <= big) & (diff <= atol + rtol * tl.abs(e)))
            bad_nonfinite = m & (o_fin == 0) & e_fin
            not_close = m & (close == 0)
            not_first = m & (o != o0)
            e_ok = m & e_fin
            tl.store(COUNTS + pid * 3 + 0, tl.sum(bad_nonfinite.to(tl.int32), axis=0))
            tl.store(COUNTS + pid * 3 + 1, tl.sum(not_close.to(tl.int32), axis=0))
            tl.store(COUNTS + pid * 3 + 2, tl.sum(not_first.to(tl.int32), axis=0))
            tl.store(FLOATS + pid * 4 + 0, tl.min(tl.where(e_ok, e, big), axis=0))
            tl.store(FLOATS + pid * 4 + 1, tl.max(tl.where(e_ok, e, -big), axis=0))
            tl.store(FLOATS + pid * 4 + 2, tl.max(tl.where(e_ok, tl.abs(e), 0.0), axis=0))
            tl.store(FLOATS + pid * 4 + 3, tl.max(tl.where(m & d_num, diff, 0.0), axis=0))

        _KERNEL = triton.jit(compare_stats)
    return _KERNEL


def fused_applies(got, ref):
    return (got.is_cuda and ref.is_cuda and got.numel() >= FUSED_MIN_NUMEL and got.numel() == ref.numel()
            and str(got.dtype) in _FLOATS and str(ref.dtype) in _FLOATS)


def stats_fused(got, ref, rtol, atol):
    torch = core.torch_module()
    o, e = got.contiguous().view(-1), ref.contiguous().view(-1)
    n = o.numel()
    blocks = (n + BLOCK - 1) // BLOCK
    counts = torch.empty(blocks * 3, dtype=torch.int32, device=o.device)
    floats = torch.empty(blocks * 4, dtype=torch.float32, device=o.device)
    _kernel()[(blocks,)](o, e, n, float(rtol), float(atol), counts, floats, BLOCK=BLOCK, num_warps=8)
    c = counts.view(blocks, 3).sum(dim=0, dtype=torch.int64)
    f = floats.view(blocks, 4)
    head = torch.stack([f[:, 0].min(), f[:, 1].max(), f[:, 2].max(), f[:, 3].max(), o[0].float()])
    cs, fs = c.tolist(), head.tolist()
    return {"numel": n, "nonfinite_bad": cs[0], "not_close": cs[1], "not_first": cs[2], "e_min": fs[0],
            "e_max": fs[1], "e_absmax": fs[2], "max_diff": fs[3], "first": fs[4]}


def stats_torch(got, ref, rtol, atol):
    torch = core.torch_module()
    o_all, e_all = got.reshape(-1), ref.reshape(-1)
    n = o_all.numel()
    s = {"numel": n, "nonfinite_bad": 0, "not_close": 0, "not_first": 0, "e_min": float("inf"),
         "e_max": float("-inf"), "e_absmax": 0.0, "max_diff": 0.0, "first": float(o_all[0].float()) if n else 0.0}
    first = torch.tensor(s["first"], dtype=torch.float32, device=o_all.device)
    for start in range(0, n, CHUNK):
        o = o_all[start:start + CHUNK].float()
        e = e_all[start:start + CHUNK].float()
        o_fin, e_fin = torch.isfinite(o), torch.isfinite(e)
        s["nonfinite_bad"] += int((~o_fin & e_fin).sum())
        s["not_close"] += int((~torch.isclose(o, e, rtol=rtol, atol=atol, equal_nan=True)).sum())
        s["not_first"] += int((o != first).sum())
        if bool(e_fin.any()):
            ef = e[e_fin]
            s["e_min"] = min(s["e_min"], float(ef.min()))
            s["e_max"] = max(s["e_max"], float(ef.max()))
            s["e_absmax"] = max(s["e_absmax"], float(ef.abs().max()))
        diff = (o - e).abs()
        d = diff[~torch.isnan(diff)]
        if d.numel():
            s["max_diff"] = max(s["max_diff"], float(d.max()))
    return s


def stats(got, ref, rtol, atol):
    if fused_applies(got, ref):
        return stats_fused(got, ref, rtol, atol)
    return stats_torch(got, ref, rtol, atol)


def verdict(s, rtol, atol, max_bad_frac=0.0):
    """The error text for these statistics, or None when the output passes."""
    n = s["numel"]
    if s["nonfinite_bad"]:
        return (f"output contains {s['nonfinite_bad']} NaN/Inf element(s) of {n} where the reference is finite "
                f"(unwritten output elements are NaN-poisoned)")
    # A constant output (zeros, say) where the reference spreads over several tolerance bands can not be
    # right, however loose the tolerance. Within a band it can: a bf16 sum over a million terms rounds
    # most rows to the same value.
    band = atol + rtol * s["e_absmax"] if n else 0.0
    spread = s["e_max"] - s["e_min"] if s["e_max"] >= s["e_min"] else 0.0
    if n > 1 and s["not_first"] == 0 and spread > 4 * band:
        return f"output is constant ({s['first']}) where the reference is not"
    if s["not_close"] and s["not_close"] > max_bad_frac * n:
        return (f"FAIL: max difference = {s['max_diff']} ({s['not_close']} of {n} elements outside "
                f"rtol={rtol}, atol={atol})")
    return None


def compare(got, ref, rtol, atol, max_bad_frac=0.0):
    return verdict(stats(got, ref, rtol, atol), rtol, atol, max_bad_frac)
