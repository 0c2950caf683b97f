"""The judge's comparison: the fused Triton pass (run here by Triton's interpreter on CPU tensors)
and the chunked torch pass must gather the same statistics, and the verdict must keep the rules the
judge has always applied (torch.allclose with equal_nan, poisoned elements, constant outputs)."""
import math
import unittest

import support  # noqa: F401
import compare
import harness_core as core

torch = core.torch_module()
RTOL, ATOL = 1e-2, 1e-2


def both(o, e, rtol=RTOL, atol=ATOL, frac=0.0):
    a = compare.stats_fused(o, e, rtol, atol)
    b = compare.stats_torch(o, e, rtol, atol)
    return a, b, compare.verdict(a, rtol, atol, frac), compare.verdict(b, rtol, atol, frac)


def former(got, ref, frac):
    o, e = got.float(), ref.float()
    if (~torch.isfinite(o) & torch.isfinite(e)).any():
        return "nonfinite"
    band = ATOL + RTOL * float(e.abs().max())
    if o.numel() > 1 and bool((o == o.flatten()[0]).all()) and float(e.max() - e.min()) > 4 * band:
        return "constant"
    if not torch.allclose(o, e, rtol=RTOL, atol=ATOL, equal_nan=True):
        n = int(((o - e).abs() > ATOL + RTOL * e.abs()).sum())
        return None if n <= frac * o.numel() else "fail"
    return None


class FusedAndTorchAgree(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(7)
        self.e = torch.randn(3 * compare.BLOCK + 17, dtype=torch.bfloat16)

    def check(self, o, e, expect, frac=0.0, former_agrees=True):
        a, b, va, vb = both(o, e, frac=frac)
        for k in ("numel", "nonfinite_bad", "not_close", "not_first"):
            self.assertEqual(a[k], b[k], k)
        for k in ("e_absmax", "max_diff", "first"):
            self.assertTrue(a[k] == b[k] or math.isclose(a[k], b[k], rel_tol=1e-6), (k, a[k], b[k]))
        self.assertEqual(va, vb)
        if expect is None:
            self.assertIsNone(va)
        else:
            self.assertIsNotNone(va)
            self.assertIn(expect, va)
        # The judge's former chain of torch ops (whole-tensor float copies) passed and failed the same.
        if former_agrees:
            self.assertEqual(va is None, former(o, e, frac) is None)
        return a

    def test_identical_output_passes(self):
        self.check(self.e.clone(), self.e, None)

    def test_a_poisoned_element_fails_as_nan(self):
        o = self.e.clone()
        o[compare.BLOCK + 3] = float("nan")
        a = self.check(o, self.e, "NaN/Inf element(s)")
        self.assertEqual(a["nonfinite_bad"], 1)

    def test_an_infinite_element_fails_where_the_reference_is_finite(self):
        o = self.e.clone()
        o[-1] = float("-inf")
        self.check(o, self.e, "1 NaN/Inf element(s)")

    def test_nan_and_inf_where_the_reference_has_them_too_pass(self):
        e = self.e.clone()
        e[5], e[9] = float("nan"), float("inf")
        self.check(e.clone(), e, None)

    def test_a_finite_value_where_the_reference_is_infinite_fails_with_an_infinite_difference(self):
        e = self.e.clone()
        e[5] = float("inf")
        o = e.clone()
        o[5] = 3.0
        # The former chain counted elements with |o - e| > atol + rtol * |e|, and inf > inf is false,
        # so it passed this output: a finite value where the reference overflowed.
        self.assertIsNone(former(o, e, 0.0))
        a = self.check(o, e, "max difference = inf (1 of", former_agrees=False)
        self.assertEqual(a["not_close"], 1)

    def test_zeros_fail_as_constant(self):
        self.check(torch.zeros_like(self.e), self.e, "output is constant (0.0)")

    def test_a_constant_within_the_tolerance_band_is_judged_by_closeness(self):
        e = torch.full((2 * compare.BLOCK,), 100.0, dtype=torch.bfloat16)
        e[::3] = 100.5  # a spread smaller than four bands of 1.01
        self.check(torch.full_like(e, 100.0), e, None)

    def test_a_few_wrong_elements_are_counted_and_the_largest_difference_named(self):
        o = self.e.clone()
        o[100:110] += 4
        a = self.check(o, self.e, "(10 of")
        self.assertGreaterEqual(a["max_diff"], 3.9)

    def test_the_sampled_calls_allowance_lets_a_stray_element_pass_but_not_a_stale_output(self):
        o = self.e.clone()
        o[3] += 1
        self.check(o, self.e, None, frac=0.01)
        stale = self.e.clone()
        stale[: len(stale) // 8] = torch.randn(len(stale) // 8, dtype=torch.bfloat16)
        self.check(stale, self.e, "elements outside", frac=0.01)

    def test_float32_and_mixed_precisions(self):
        e = torch.randn(compare.BLOCK + 1, dtype=torch.float32)
        self.check(e.to(torch.bfloat16), e, None)
        self.check(torch.randn_like(e), e, "elements outside")

    def test_the_fused_pass_is_chosen_only_for_large_gpu_float_tensors(self):
        small = torch.zeros(8)
        self.assertFalse(compare.fused_applies(small, small))
        big = torch.zeros(compare.FUSED_MIN_NUMEL)
        self.assertFalse(compare.fused_applies(big, big))  # CPU tensors take the torch path


if __name__ == "__main__":
    unittest.main()
