#!/usr/bin/env python3
"""Probe for the trusted-evaluation design on a GPU machine: can a judge process export a CUDA buffer
to a freshly started worker process (CUDA IPC), also when the worker runs in its own PID and network
namespace (bubblewrap, or util-linux unshare)? Prints one JSON line per variant with timings.

Usage: probe_sandbox_ipc.py [--bwrap PATH]        (run as the judge; it starts the workers itself)
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import time


def worker():
    t0 = time.perf_counter()
    import torch
    t_import = time.perf_counter() - t0
    spec = json.loads(sys.stdin.readline())
    t1 = time.perf_counter()
    torch.cuda.init()
    x = torch.empty(1, device="cuda")
    t_ctx = time.perf_counter() - t1
    args = spec["handle"]
    storage = torch.UntypedStorage._new_shared_cuda(
        args[0], base64.b64decode(args[1]), args[2], args[3], base64.b64decode(args[4]), args[5],
        base64.b64decode(args[6]) if args[6] else b"", args[7])
    buf = torch.empty(0, dtype=torch.float32, device="cuda").set_(storage, 0, (spec["numel"],), (1,))
    t2 = time.perf_counter()
    buf.copy_(torch.arange(spec["numel"], device="cuda", dtype=torch.float32) * 2.0)
    torch.cuda.synchronize()
    t_copy = time.perf_counter() - t2
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    print(json.dumps({"import_torch_s": t_import, "cuda_ctx_s": t_ctx, "copy_s": t_copy, "visible_pids": len(pids),
                      "pid": os.getpid(), "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES")}), flush=True)
    sys.stdin.readline()  # wait until the judge has read the buffer


def judge(prefix, label):
    import torch
    numel = 256 << 20  # 1 GiB of float32
    buf = torch.zeros(numel, device="cuda", dtype=torch.float32)
    s = buf.untyped_storage()
    h = s._share_cuda_()
    handle = [h[0], base64.b64encode(h[1]).decode(), h[2], h[3], base64.b64encode(h[4]).decode(), h[5],
              base64.b64encode(h[6]).decode() if h[6] else "", h[7]]
    t0 = time.perf_counter()
    p = subprocess.Popen(prefix + [sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdin.write(json.dumps({"handle": handle, "numel": numel}) + "\n")
    p.stdin.flush()
    line = p.stdout.readline()
    t_total = time.perf_counter() - t0
    ok = False
    info = {}
    try:
        info = json.loads(line)
        torch.cuda.synchronize()
        ok = bool(torch.equal(buf, torch.arange(numel, device="cuda", dtype=torch.float32) * 2.0))
    except Exception as exc:  # noqa: BLE001
        info = {"error": repr(exc)}
    try:
        p.stdin.write("\n")
        p.stdin.flush()
    except OSError:
        pass
    err = p.stderr.read()[-1500:]
    p.wait(timeout=60)
    print(json.dumps({"variant": label, "ok": ok, "rc": p.returncode, "worker_total_s": t_total, **info,
                      "stderr_tail": "" if ok else err}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--bwrap", default="")
    a = ap.parse_args()
    if a.worker:
        return worker()
    judge([], "plain")
    judge(["unshare", "--pid", "--fork", "--mount-proc", "--net"], "unshare-pid-net")
    if a.bwrap:
        devs = [d for d in os.listdir("/dev") if d.startswith("nvidia")]
        binds = []
        for d in devs:
            binds += ["--dev-bind", "/dev/" + d, "/dev/" + d]
        tail = ["--proc", "/proc", "--tmpfs", "/tmp", "--unshare-pid", "--unshare-net", "--die-with-parent",
                "--new-session", "--"]
        b = [a.bwrap]
        judge(b + ["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev"] + tail, "bwrap-hostdev")
        judge(b + ["--ro-bind", "/", "/", "--dev", "/dev"] + binds + ["--bind", "/dev/shm", "/dev/shm"] + tail,
              "bwrap-dev+shm")
        judge(b + ["--bind", "/", "/", "--dev", "/dev"] + binds + tail, "bwrap-rw-root")
        judge(b + ["--ro-bind", "/", "/", "--dev", "/dev"] + binds + ["--ro-bind", "/sys", "/sys"] + tail[2:],
              "bwrap-no-newproc")
        judge(b + ["--ro-bind", "/", "/", "--dev", "/dev"] + binds + ["--dev-bind", "/dev/char", "/dev/char"] + tail,
              "bwrap-dev+char")
        judge([a.bwrap, "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--"], "bwrap-minimal")


if __name__ == "__main__":
    sys.exit(main())
