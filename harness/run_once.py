#!/usr/bin/env python3
"""Verify and/or benchmark ONE candidate in this fresh process (isolation mode "process").

Prints (and with --json writes) the same JSON object the warm evaluator server replies with, so the
caller parses one format. --cold adds a breakdown of where a fresh process spends its time
(interpreter start, imports, input generation, JIT compile with an empty Triton cache) so the
per-candidate cost of cold and warm evaluation can be measured side by side.

Exit status: 0 when every requested step succeeded, 1 when the candidate failed, 2 on bad usage,
3 when the device context was poisoned.
"""
import argparse
import json
import os
import sys
import tempfile
import time

T_MAIN = time.perf_counter()


def seconds_since_process_start():
    """Wall time since the kernel started this process (Linux /proc), or None elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def main(argv=None):
    startup_s = seconds_since_process_start()
    ap = argparse.ArgumentParser(description="verify/benchmark one candidate in a fresh process")
    ap.add_argument("--problem", required=True, help="problem.py or a kernel directory")
    ap.add_argument("--kernel", required=True, help="candidate file defining kernel_function")
    ap.add_argument("--device", default="cuda", help="cuda (the pinned GPU) or cpu (Triton interpreter)")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--size", default=None, help="problem size variant (KAGENT_PROBLEM_SIZE), e.g. small")
    ap.add_argument("--mode", default="both", choices=["verify", "benchmark", "both", "hash"])
    ap.add_argument("--trials", type=int, default=3, help="correctness trials (extra ones use new random inputs)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up iterations (not timed)")
    ap.add_argument("--repeat", type=int, default=50, help="timed iterations")
    ap.add_argument("--targets", default="candidate,eager", help="comma list of candidate,eager,compile")
    ap.add_argument("--do-bench", action="store_true", help="also report triton.testing.do_bench")
    ap.add_argument("--cold", action="store_true", help="empty Triton cache and a cold-cost breakdown")
    ap.add_argument("--json", help="also write the result to this file")
    ap.add_argument("--peak-gbps", type=float, default=None, help="device peak bandwidth, for the physics floor")
    ap.add_argument("--sandbox-prefix", default="[]", help="JSON list: argv before the candidate process")
    args = ap.parse_args(argv)

    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    if args.cold:
        # Before triton is imported: its cache location is read at import / first compile.
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kagent-cold-triton-")
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        if args.size is None:
            args.size = "small"  # the full example shapes are GPU-sized
    if args.size:
        os.environ["KAGENT_PROBLEM_SIZE"] = args.size

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    t0 = time.perf_counter()
    import harness_core as core
    import torch  # noqa: F401 - timed here on purpose: it dominates a cold start
    import triton  # noqa: F401
    import_s = time.perf_counter() - t0

    reply = {"op": args.mode, "ok": False, "poisoned": False, "isolation": "process"}
    t_req = time.perf_counter()
    cold = {"process_start_to_main_s": startup_s, "import_torch_triton_s": import_s}
    status = 1
    import judge as judge_mod
    log_dir = tempfile.mkdtemp(prefix="kagent-run-once-")
    jd = judge_mod.Judge(log_dir)
    try:
        problem_path = os.path.abspath(args.problem)
        if os.path.isdir(problem_path):
            problem_path = os.path.join(problem_path, "problem.py")
        kernel_path = os.path.abspath(args.kernel)
        if not os.path.isfile(problem_path) or not os.path.isfile(kernel_path):
            missing = problem_path if not os.path.isfile(problem_path) else kernel_path
            print(f"run_once: file not found: {missing}", file=sys.stderr)
            return 2
        with open(kernel_path, encoding="utf-8") as f:
            source = f.read()
        banned = core.ban_check(source)
        if banned:
            raise core.CandidateError(banned)
        key = core.sha256(source)
        t0 = time.perf_counter()
        # This process is the judge: the candidate runs in a worker process of its own, as in the
        # warm server; "process" isolation only adds a fresh judge (and references) per candidate.
        timeouts = {"start": 300.0, "verify": 300.0, "benchmark": 600.0}
        jd.load(problem_path, args.device, args.dtype, args.size, 0, max(1, args.trials),
                json.loads(args.sandbox_prefix), args.peak_gbps, 3, timeouts,
                max(5, args.repeat))
        cold["load_problem_s"] = time.perf_counter() - t0
        result = {}
        if args.mode in ("verify", "both", "hash"):
            t0 = time.perf_counter()
            result["verify"] = jd.verify(source, key, None, None)
            cold["verify_s"] = time.perf_counter() - t0
            if not result["verify"]["passed"]:
                reply.update(kind="mismatch", error=result["verify"]["error"])
            elif jd.current is not None:
                result["hash"] = jd.code_hash(source, jd.current[2])
        if args.mode in ("benchmark", "both") and "kind" not in reply:
            t0 = time.perf_counter()
            problem = jd.problem
            warmup = int(problem.benchmark_config.get("warmup", args.warmup))
            repeat = int(problem.benchmark_config.get("repeat", args.repeat))
            targets = [t for t in args.targets.split(",") if t]
            bench = {}
            if "candidate" in targets:
                bench = jd.benchmark(source, key, warmup, repeat, None, None)
                bench.pop("_tails", None)
            bench.update(jd.reference_timings([t for t in targets if t in ("eager", "compile")], warmup, repeat))
            cand = bench.get("candidate", {}).get("median_ms")
            for ref in ("eager", "compile"):
                ref_ms = bench.get(ref, {}).get("median_ms")
                if cand and ref_ms:
                    bench[f"speedup_vs_{ref}"] = ref_ms / cand
            result["benchmark"] = bench
            cold["benchmark_s"] = time.perf_counter() - t0
        if "hash" not in result and "kind" not in reply:
            result["hash"] = jd.code_hash(source, {})
        reply["result"] = result
        if "kind" not in reply:
            reply["ok"] = True
            status = 0
    except judge_mod.IntegrityError as exc:
        reply.update(kind="integrity", error=f"integrity: {exc}")
    except judge_mod.WorkerGone as exc:
        reply.update(kind="timeout" if exc.kind == "timeout" else "crashed", error=str(exc))
    except core.ProblemError as exc:
        reply.update(kind="problem_error", error=str(exc), traceback=exc.traceback_text)
    except core.CandidateError as exc:
        reply.update(kind="candidate_error", error=str(exc), traceback=exc.traceback_text)
    except Exception as exc:  # noqa: BLE001 - reported as JSON like the server does
        import traceback
        tb = traceback.format_exc()
        poisoned = core.is_poisoning(tb)
        reply.update(kind="poisoned" if poisoned else "harness_error", error=f"{type(exc).__name__}: {exc}",
                     traceback=tb[-core.TAIL_CHARS:], poisoned=poisoned)
        status = 3 if poisoned else 1
    finally:
        out, err = jd.finish_current()
        jd.shutdown_workers()
        import shutil
        shutil.rmtree(log_dir, ignore_errors=True)
    reply["stdout"], reply["stderr"] = out, err
    reply["timings"] = {"total_s": time.perf_counter() - t_req}
    if args.cold:
        cold["main_total_s"] = time.perf_counter() - T_MAIN
        reply["cold"] = cold
    text = json.dumps(reply, default=str)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
