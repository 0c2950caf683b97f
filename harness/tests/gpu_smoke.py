#!/usr/bin/env python3
"""Manual GPU smoke run of the harness (not part of the CPU unittest suite).

    python3 harness/tests/gpu_smoke.py [--out DIR] [--size full|small]

Drives evaluator.py over its socket protocol on device cuda with both examples: load_problem,
verify, benchmark (candidate, eager, compile, plus do_bench for comparison), PTX hash (and that a
reformatted copy hashes alike), a candidate that faults the device (must come back "poisoned"
with exit status 3), and run_once.py --cold for the cold-versus-warm comparison. Prints one JSON
summary and writes it to DIR/gpu_smoke.json.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.dirname(HERE)
ROOT = os.path.dirname(HARNESS)
EXAMPLES = {"matvec": os.path.join(ROOT, "examples", "optimize_01_matvec"),
            "rmsnorm": os.path.join(ROOT, "examples", "optimize_02_rmsnorm")}

FAULTING = """
import torch, triton, triton.language as tl

@triton.jit
def bad(y_ptr):
    tl.store(y_ptr + (1 << 40), 1.0)

def kernel_function(A, B):
    y = torch.empty((A.shape[0], 1), device=A.device, dtype=A.dtype)
    bad[(1,)](y)
    torch.cuda.synchronize()
    return y
"""


class Server:
    def __init__(self, log_dir):
        ours, theirs = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, os.path.join(HARNESS, "evaluator.py"), "--fd",
                                      str(theirs.fileno()), "--log-dir", log_dir], pass_fds=[theirs.fileno()],
                                     start_new_session=True)
        theirs.close()
        self.file = ours.makefile("rwb")
        self.sock = ours
        self.n = 0

    def rq(self, **req):
        self.n += 1
        req["id"] = self.n
        t0 = time.perf_counter()
        self.file.write((json.dumps(req) + "\n").encode())
        self.file.flush()
        line = self.file.readline()
        reply = json.loads(line) if line else {"ok": False, "error": "server died", "rc": self.proc.wait()}
        reply["client_wall_s"] = time.perf_counter() - t0
        return reply

    def close(self):
        try:
            self.rq(op="shutdown")
        except OSError:
            pass
        self.proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--size", default="full")
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    summary = {}
    log_dir = tempfile.mkdtemp(prefix="kagent-gpu-smoke-")
    server = Server(log_dir)
    summary["ping"] = server.rq(op="ping")
    for name, kdir in EXAMPLES.items():
        entry = summary[name] = {}
        entry["load"] = server.rq(op="load_problem", problem=kdir, device="cuda", dtype="bfloat16", size=args.size)
        path = os.path.join(kdir, "input.py")
        entry["verify_first"] = server.rq(op="verify", path=path)
        entry["verify_warm"] = server.rq(op="verify", path=path)
        entry["verify_trials"] = server.rq(op="verify", path=path, trials=3)
        entry["benchmark"] = server.rq(op="benchmark", path=path, warmup=10, repeat=args.repeat,
                                       targets=["candidate", "eager", "compile"], do_bench=True)
        entry["hash"] = server.rq(op="hash", path=path)
        with open(path) as f:
            source = f.read()
        reformatted = ("# reformatted copy\n\n" + source.replace("tl.program_id(0)", "tl.program_id(0)  # block")
                       .replace("\n\n\n", "\n\n\n\n"))
        entry["hash_reformatted"] = server.rq(op="hash", code=reformatted, workdir=log_dir)
        entry["hash_changed"] = server.rq(op="hash", code=source.replace("BLOCK_M, BLOCK_K = 16, 512",
                                                                        "BLOCK_M, BLOCK_K = 32, 512")
                                          .replace("BLOCK_S = 64", "BLOCK_S = 128"), workdir=log_dir)
        h = [entry[k].get("result", {}).get("hash") for k in ("hash", "hash_reformatted", "hash_changed")]
        entry["hash_checks"] = {"reformatted_equal": h[0] == h[1], "changed_differs": h[0] != h[2],
                                "kind": entry["hash"].get("result", {}).get("kind")}
    # A device fault: must be reported as poisoned, and the server must exit 3.
    server.rq(op="load_problem", problem=EXAMPLES["matvec"], device="cuda", dtype="bfloat16", size="small")
    fault = server.rq(op="verify", code=FAULTING, workdir=log_dir)
    summary["fault"] = {"reply": fault, "exit": server.proc.wait(timeout=120)}
    server.file.close()
    server.sock.close()

    # Cold, one process per candidate, for the cold-versus-warm comparison.
    cold = subprocess.run([sys.executable, os.path.join(HARNESS, "run_once.py"), "--problem", EXAMPLES["matvec"],
                           "--kernel", os.path.join(EXAMPLES["matvec"], "input.py"), "--device", "cuda",
                           "--size", args.size, "--cold", "--repeat", str(args.repeat)],
                          capture_output=True, text=True, timeout=400)
    try:
        summary["run_once_cold"] = json.loads(cold.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary["run_once_cold"] = {"rc": cold.returncode, "stderr": cold.stderr[-3000:]}
    summary["run_once_cold_rc"] = cold.returncode
    text = json.dumps(summary, indent=1, default=str)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_smoke.json"), "w") as f:
        f.write(text)
    # A short digest on stdout.
    for name in EXAMPLES:
        e = summary[name]
        b = e["benchmark"].get("result", {})
        print(name, "load", e["load"].get("ok"), round(e["load"]["client_wall_s"], 2), "s",
              "verify", e["verify_first"].get("ok"), round(e["verify_first"]["client_wall_s"], 3), "s, warm",
              round(e["verify_warm"]["client_wall_s"], 3), "s", e["verify_first"].get("error"),
              "| 3 trials", e["verify_trials"].get("ok"), round(e["verify_trials"]["client_wall_s"], 3), "s")
        print("  bench", {k: (b.get(k) or {}).get("median_ms") for k in ("candidate", "eager", "compile", "do_bench")},
              "iqr", (b.get("candidate") or {}).get("iqr_rel"), e["benchmark"].get("error"),
              "wall", round(e["benchmark"]["client_wall_s"], 2))
        print("  hash", e["hash_checks"], e["hash"].get("error"))
    print("fault", summary["fault"]["reply"].get("kind"), summary["fault"]["reply"].get("poisoned"),
          "exit", summary["fault"]["exit"], str(summary["fault"]["reply"].get("error"))[:300])
    c = summary["run_once_cold"]
    print("cold rc", summary["run_once_cold_rc"], c.get("cold"), c.get("error"))


if __name__ == "__main__":
    main()
