#!/usr/bin/env python3
"""Writes benchmarks/h200/replay_matvec_wide/, the replay set of the wider H200 search
(nvidia_matvec_wide.yaml: async beam search 2 x 3 x 4 samples, 2 generations).

- optimize_001 ... optimize_160: replies served in the order the candidates ask (no front matter),
  each a distinct split-K matvec kernel (different tile sizes, splits or warps, so no two compile
  to the same code) or, about one in eight, a wrong one (partial sums scaled). No hanging or
  device-faulting kernel: those cost a 30-60 s timeout or an evaluator restart and were measured
  on their own (RESULTS.md, 2026-12-04, timeout run).
  The first twelve serve the first generation (the starting kernel x 3 directions x 4 samples):
  the two fastest kernels of the earlier set come first, so that they become the parents of the
  second generation, and the others are not faster than those two.
- bottleneck_001.md and reflexion_001.md carry a front-matter block without a `match:` line: each
  answers every request of its purpose and is never used up (docs/llm.md, "Matched replies").

160 optimize replies cover the worst case of the async schedule (every first-generation kernel
entering the beam: 12 + 12 x 12 = 156 candidates); the expected run has 36-48.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_replay  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "replay_matvec_wide"

# The split-K kernel of make_replay.py, tagged with its number.
SPLITK = "# variant: wide-{N:03d}\n" + make_replay.MATVEC_SPLITK

BOTTLENECK = '''[
  {"category": "memory", "summary": "The kernel streams its input once; the achieved DRAM bandwidth is the limit",
   "reasoning": "Arithmetic intensity is far below the ridge point of the device.",
   "root_causes": [{"cause": "Narrow tiles leave bandwidth unused", "evidence": [],
                    "fixes": [{"fix": "Use wider, vectorised loads and more rows per program", "rationale": "fewer, fuller memory transactions"}]}]},
  {"category": "underutilized", "summary": "Too few programs keep the SMs busy",
   "reasoning": "The grid is small relative to the number of SMs.",
   "root_causes": [{"cause": "Grid smaller than the device", "evidence": [],
                    "fixes": [{"fix": "Split the reduction dimension across more programs", "rationale": "more parallelism"}]}]},
  {"category": "compute", "summary": "Instruction overhead in the inner loop",
   "reasoning": "Address arithmetic and masks dominate the loop body.",
   "root_causes": [{"cause": "Per-iteration masking", "evidence": [],
                    "fixes": [{"fix": "Remove masks on full tiles and tune num_warps", "rationale": "fewer instructions per byte"}]}]}
]
'''

REFLEXION = '''{"was_diagnosis_correct": true, "was_fix_effective": true, "expected_outcome": "lower time",
 "actual_outcome": "see the measured times", "reasoning": "The rewrite followed the diagnosed direction.",
 "lessons": ["measure before and after every change"], "avoid_patterns": [], "try_patterns": ["wider tiles"]}
'''

CATCH_ALL = "<!-- replay\n# no match: line: answers every {what} request, never used up\n-->\n"

# (BLOCK_M, BLOCK_K, SPLIT, num_warps, wrong). The first twelve: the first generation.
FIRST = [
    (32, 256, 128, 8, False),   # 0.97 ms on the H200 (optimize_007 of replay_matvec)
    (16, 512, 64, 4, False),    # 0.98 ms (optimize_001)
    (16, 512, 64, 4, True),     # wrong: partial sums doubled (optimize_002)
    (8, 1024, 128, 8, False),   # 1.01 ms (optimize_004)
    (16, 512, 2, 4, False),     # 1.32 ms (optimize_008)
    (4, 2048, 256, 8, False),   # 1.03 ms (optimize_009)
    (1, 128, 8, 1, False),      # 2.10 ms (optimize_003)
    (16, 512, 4, 4, False),
    (8, 512, 8, 4, False),
    (32, 128, 16, 4, True),
    (16, 256, 8, 4, False),
    (4, 1024, 16, 4, False),
]


def grid():
    seen = {(bm, bk, s, w) for bm, bk, s, w, _ in FIRST}
    shapes = [(4, 1024), (4, 2048), (8, 512), (8, 1024), (16, 256), (16, 512), (32, 128), (32, 256), (64, 128)]
    for warps in (4, 8, 2):
        for split in (32, 64, 128, 256, 16, 512, 8):
            for bm, bk in shapes:
                if (bm, bk, split, warps) not in seen:
                    seen.add((bm, bk, split, warps))
                    yield (bm, bk, split, warps)


def main(total=160):
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*_*.md"):
        old.unlink()
    replies = list(FIRST)
    g = grid()
    while len(replies) < total:
        bm, bk, split, warps = next(g)
        replies.append((bm, bk, split, warps, len(replies) % 8 == 5))  # about one in eight wrong
    for n, (bm, bk, split, warps, wrong) in enumerate(replies, 1):
        code = (SPLITK.replace("{N:03d}", f"{n:03d}").replace("{BM}", str(bm)).replace("{BK}", str(bk))
                .replace("{SPLIT}", str(split)).replace("{WARPS}", str(warps))
                .replace("{SCALE}", " * 2.0" if wrong else ""))
        note = (f"Split-K, {bm} rows x {bk} columns per program, {split} splits, {warps} warps"
                + (" (wrong: partial sums doubled)." if wrong else "."))
        (OUT / f"optimize_{n:03d}.md").write_text(f"{note}\n\n```python\n{code}```\n")
    (OUT / "bottleneck_001.md").write_text(CATCH_ALL.format(what="bottleneck") + BOTTLENECK)
    (OUT / "reflexion_001.md").write_text(CATCH_ALL.format(what="reflexion") + REFLEXION)
    (OUT / "README.md").write_text(
        "# Replay set of the wide matvec search on the H200\n\n"
        "Written by `benchmarks/h200/make_replay_wide.py` (its docstring says what is here and why).\n"
        "Used by `benchmarks/h200/nvidia_matvec_wide.yaml` (`run_trusted.sh OUT busy_wide`).\n")
    print(f"{len(replies)} optimize replies, {sum(r[4] for r in replies)} wrong, in {OUT}")


if __name__ == "__main__":
    main()
