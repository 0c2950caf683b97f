"""The trusted side of candidate evaluation (docs/harness.md, "Threat model").

The judge lives in the evaluator server and never imports candidate code. It owns the problem's
input sets and reference outputs, a pool of pre-warmed single-use worker processes (harness/worker.py,
each started inside the sandbox), and receive slots the workers copy their outputs into. Every
verdict is taken here, from what this process can check itself:

- outputs, compared with references computed here, on several input sets drawn with different seeds,
  and on a random sample of the *timed* calls (whose inputs change between calls), so a candidate
  that caches, computes lazily or returns garbage when it believes it is not watched is caught;
- the wall clock of the timed loop as seen from here, which bounds the times the worker reports;
- the physics floor: no kernel moves its inputs and outputs faster than the device's peak bandwidth;
- the evidence the worker reports (Triton launches, aten ops, timers, threads): it can be forged, so
  it is only ever a reason to reject.
A worker serves one candidate and is killed afterwards; nothing it patched reaches another one.
"""
import base64
import collections
import contextlib
import ctypes
import json
import math
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

import compare as fastcmp
import harness_core as core

# How long a verification call may go without progress (Judge.progress_windows, recv_watching).
ProgressWindows = collections.namedtuple("ProgressWindows", "hang_s quiet_s")

HARNESS = os.path.dirname(os.path.abspath(__file__))
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_DUMPABLE = 4


_TRACE = os.environ.get("KAGENT_JUDGE_TRACE") == "1"
_T0 = time.monotonic()


def trace(*what):
    """Step-by-step log on stderr (KAGENT_JUDGE_TRACE=1), for debugging on a device."""
    if _TRACE:
        print(f"[judge {time.monotonic() - _T0:8.3f}]", *what, file=sys.stderr, flush=True)


class IntegrityError(Exception):
    """A candidate tried to fake its correctness or its time (failure cause `integrity`)."""


def error_of(msg):
    """The exception a worker's error reply stands for: integrity where it says what the candidate
    tried on its way to the error (a refused fork), else the candidate's own error."""
    if msg.get("integrity"):
        return IntegrityError(str(msg["integrity"])[:4000])
    return core.CandidateError(str(msg.get("error", "candidate error"))[:4000],
                               str(msg.get("traceback", ""))[-core.TAIL_CHARS:], msg.get("kind") == "poisoned")


def computing_ops(reply):
    """The ops of a worker's reply (its "aten": every op its recorder saw) that are PyTorch computing,
    decided here with this process's list: a candidate widened the worker's own
    (tests/cheats/matvec/allowlist_rebound.py)."""
    ops = reply.get("aten")
    return core.forbidden_ops(ops if isinstance(ops, list) else [])


def check_harness_unpatched(reply, what):
    """Rejects a reply whose worker found its harness code or data changed since before the candidate
    (worker.harness_code_changes); `what` says when."""
    names = reply.get("patched_harness")
    if names:
        raise IntegrityError(f"patched harness code ({', '.join(str(x) for x in names[:8])} {what})")


class WorkerGone(Exception):
    def __init__(self, message, kind="crash"):
        super().__init__(message)
        self.kind = kind


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def become_subreaper():
    """Orphans of our workers (a double-forked daemon) are re-parented to us, so we can end them."""
    libc = _libc()
    if libc is not None:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def not_dumpable():
    """No process of our user may read or write our memory (/proc/PID/mem, ptrace) from now on: without
    a sandbox a candidate runs as the same user, in the same PID namespace, and our memory holds the
    references, the choice of the sampled calls and the code that compares (harness/tests/test_trusted.py,
    JudgeMemory: it read it before). Our own /proc files stay readable to us."""
    libc = _libc()
    if libc is not None:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _child_setup():
    # Runs in the forked child before exec: die with the judge, whatever the sandbox does.
    libc = _libc()
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def parents():
    """{pid: ppid} of every process, from one pass over /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            out[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def children_of(pid):
    """Direct children of `pid`, from /proc."""
    return [p for p, pp in parents().items() if pp == pid]


def descendants(pid, table=None):
    """Every process below `pid`, from one pass over /proc (or `table`, a parents() taken once for
    several lookups): the census after each candidate walked /proc once per process of the judge's
    tree (its spares, their sandboxes), 20-30 ms a candidate."""
    below = {}
    for p, pp in (parents() if table is None else table).items():
        below.setdefault(pp, []).append(p)
    seen, todo = [], [pid]
    while todo:
        for c in below.get(todo.pop(), []):
            if c not in seen:
                seen.append(c)
                todo.append(c)
    return seen


def run_queue_wait_ms(pid):
    """Milliseconds the process's main thread has spent runnable but waiting for a CPU, as the kernel
    counts it (/proc/PID/schedstat, second field); None where the kernel does not say. Read from
    here, outside the candidate's reach: a candidate can make its process wait (busy threads of its
    own), but not make the kernel count waiting it did not do."""
    try:
        with open(f"/proc/{int(pid)}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def thread_count(pid):
    """How many threads the process has (/proc/PID/task), read from here: a thread started with
    `_thread`, or one that hides from `threading`, is counted too. None where /proc does not say."""
    try:
        return len(os.listdir(f"/proc/{int(pid)}/task"))
    except (OSError, ValueError):
        return None


def _children_file(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
        return [int(x) for x in f.read().split()]


CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def children_fast(pid, every_thread=True):
    """The children of `pid` from its threads' `children` files (a child is listed under the thread
    that forked it): a few reads where parents() reads all of /proc. `every_thread=False` reads the
    main thread's only (a process that runs no candidate code forks from there)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task") if every_thread else [str(pid)]
    except OSError:
        return []
    out = []
    for t in tids:
        with contextlib.suppress(OSError, ValueError):
            out.extend(_children_file(pid, t))
    return out


def new_below(root, known, watched, skip):
    """Live processes below `root` that are not in `known`, walking the children files: the
    processes in `known` (which ran no candidate code) by their main thread, everything else (the
    `watched` worker, whatever appeared) by every thread; the subtrees of `skip` (spares, builders)
    are left out. Several hundred microseconds where a pass over /proc takes 20-30 ms."""
    if not CHILDREN_FILES:
        return sorted(p for p in descendants(root) if p not in known and p != watched and p not in skip and alive(p))
    out, todo, seen = [], [root], {root}
    while todo:
        p = todo.pop()
        for c in children_fast(p, every_thread=p == watched or p not in known):
            if c in seen or c in skip:
                continue
            seen.add(c)
            todo.append(c)
            if c not in known and c != watched and alive(c):
                out.append(c)
    return sorted(out)


def cmdline_of(pid):
    """The first 60 characters of the process's command line ("" when it is gone)."""
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:60]
    return ""


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().decode(errors="replace").rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def host_pid_of(root_pid, ns_pid):
    """The pid, as we see it, of the process that calls itself `ns_pid` in its own PID namespace,
    among the descendants of `root_pid` (bwrap's namespace, or no namespace at all)."""
    for p in descendants(root_pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        if int(line.split()[-1]) == ns_pid:
                            return p
                        break
        except (OSError, ValueError):
            continue
    return None


class Zygote:
    """The fork server (worker.py --zygote) inside the sandbox: it imported torch and triton once, and
    forks a fresh worker per candidate in milliseconds instead of seconds."""

    def __init__(self, judge):
        self.judge = judge
        root = os.path.join(judge.scratch_root, "zygote")
        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = parent
        env = dict(os.environ)
        env["TMPDIR"] = os.path.join(root, "tmp")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # The zygote must be able to write every worker's scratch: its root is the sandbox's writable dir.
        argv = [a.replace("{scratch}", judge.scratch_root) for a in judge.sandbox_prefix]
        argv += [sys.executable, "-u", os.path.join(HARNESS, "worker.py"), "--zygote", "--fd", str(child.fileno())]
        self.log = open(os.path.join(root, "zygote.log"), "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env,
                                     cwd=root, pass_fds=(child.fileno(),), start_new_session=True,
                                     preexec_fn=_child_setup)
        child.close()
        self.hello = False

    def call(self, obj, fds=(), timeout=300.0):
        try:
            socket.send_fds(self.ctl, [json.dumps(obj).encode()], list(fds))
        except OSError as exc:
            raise WorkerGone(f"the fork server is gone ({exc})", "harness") from None
        return self.read(timeout)

    def read(self, timeout):
        r, _, _ = select.select([self.ctl], [], [], timeout)
        if not r:
            raise WorkerGone(f"the fork server did not answer within {timeout:g} s", "harness")
        data = self.ctl.recv(1 << 16)
        if not data:
            raise WorkerGone("the fork server is gone", "harness")
        return json.loads(data)

    def wait_hello(self, timeout):
        if not self.hello:
            msg = self.read(timeout)
            if msg.get("ev") != "hello":
                raise WorkerGone("the fork server did not start", "harness")
            self.hello = True

    def alive(self):
        return self.proc.poll() is None

    def status(self, ns_pid):
        with contextlib.suppress(Exception):
            return self.call({"op": "status", "pid": ns_pid}, timeout=2.0)
        return {}

    def stop(self):
        for p in [self.proc.pid] + descendants(self.proc.pid):
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            self.ctl.close()
        with contextlib.suppress(OSError):
            self.log.close()


class Worker:
    """One single-use candidate process (forked by the zygote) and its protocol channel."""

    counter = 0

    def __init__(self, judge):
        Worker.counter += 1
        self.judge = judge
        self.name = f"w{os.getpid()}_{Worker.counter}"
        self.scratch = os.path.join(judge.scratch_root, self.name)
        os.makedirs(os.path.join(self.scratch, "tmp"), exist_ok=True)
        self.state = "starting"
        self.stopped = False
        self.buf = b""
        self.info = {}
        self.slot_tensors = {}
        self.first_progress_s = None  # the last watched request: seconds to its first progress line
        parent, child = socket.socketpair()
        self.sock = parent
        z = judge.fork_server()
        try:
            msg = z.call({"op": "fork", "scratch": self.scratch}, fds=[child.fileno()], timeout=judge.timeouts["start"])
        finally:
            child.close()
        if msg.get("ev") != "forked":
            raise WorkerGone(f"the fork server could not start a worker: {msg.get('error')}", "harness")
        self.ns_pid = int(msg["pid"])
        trace(self.name, "forked", msg)
        self.zygote = z
        self.pid = host_pid_of(z.proc.pid, self.ns_pid) or -1
        self.started = time.monotonic()

    def running(self):
        return self.pid > 0 and alive(self.pid)

    # -- channel ---------------------------------------------------------------------------------
    def send(self, obj):
        try:
            self.sock.sendall((json.dumps(obj) + "\n").encode())
        except OSError as exc:
            raise WorkerGone(f"the candidate process is gone ({exc})") from None

    def recv(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerGone(f"the candidate process did not answer within {timeout:g} s", "timeout")
            r, _, _ = select.select([self.sock], [], [], min(left, 1.0))
            if not r:
                if not self.running():
                    raise WorkerGone(self.ended())
                continue
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise WorkerGone(self.ended())
            self.buf += chunk
            if len(self.buf) > (64 << 20):
                raise WorkerGone("the candidate process sent an oversized message", "integrity")
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            raise WorkerGone("the candidate process broke the protocol (not JSON)", "integrity") from None
        if not isinstance(msg, dict):
            raise WorkerGone("the candidate process broke the protocol", "integrity")
        return msg

    def recv_watching(self, timeout, hang_s, quiet_s):
        """recv(timeout), reading the worker's progress lines (worker.Progress). The call must show
        progress: a Triton compile or a kernel launch within quiet_s of its start, and once a kernel is
        launched, the reply (or another launch) within hang_s of the last launch; else it is stopped as
        stuck or hung. A compile puts the whole timeout back until the next launch: compiles (and an
        autotuner's compiles) can take long; a launched kernel of this tool's kind, or a wrapper's host
        code, does not."""
        deadline = time.monotonic() + timeout
        mark, window = time.monotonic(), quiet_s  # (since when, how long) no progress is allowed
        start, self.first_progress_s = mark, None
        while True:
            limit = deadline if mark is None else min(deadline, mark + window)
            try:
                msg = self.recv(max(0.05, limit - time.monotonic()))
            except WorkerGone as exc:
                if exc.kind == "timeout" and mark is not None and mark + window < deadline:
                    if window == hang_s:
                        raise WorkerGone(f"the candidate's kernel did not finish within {hang_s:g} s of its launch "
                                         f"(a hung kernel: once a kernel is launched, verification waits {hang_s:g} s, "
                                         f"not the whole {timeout:g} s)", "timeout") from None
                    raise WorkerGone(f"the candidate's call compiled and launched nothing within {quiet_s:g} s "
                                     f"(a stuck call: verification waits {quiet_s:g} s for a first compile or launch, "
                                     f"not the whole {timeout:g} s)", "timeout") from None
                raise
            if msg.get("ev") != "progress":
                return msg
            if self.first_progress_s is None:
                self.first_progress_s = time.monotonic() - start
            if msg.get("what") == "launch":
                mark, window = time.monotonic(), hang_s
            else:
                mark = None

    def ended(self):
        deadline = time.monotonic() + 2.0
        st = {}
        while time.monotonic() < deadline and self.zygote.alive():
            st = self.zygote.status(self.ns_pid)
            if st.get("exited"):
                break
            time.sleep(0.02)
        if st.get("signal"):
            try:
                name = signal.Signals(st["signal"]).name
            except ValueError:
                name = str(st["signal"])
            why = " (its CPU time limit, sandbox.max_cpu_s)" if name == "SIGXCPU" else ""
            return f"the candidate process was killed by signal {st['signal']} ({name}){why}"
        if st.get("exited"):
            return f"the candidate process exited with status {st.get('code')}"
        return "the candidate process closed its channel"

    def request(self, obj, timeout, windows=None):
        """One request and its reply; windows (ProgressWindows): watch the worker's progress lines
        (recv_watching) with those windows."""
        trace(self.name, "->", obj.get("op"))
        t0 = time.monotonic()
        self.send(obj)
        msg = self.recv(timeout) if windows is None else self.recv_watching(timeout, *windows)
        trace(self.name, "<-", msg.get("ev"), f"{time.monotonic() - t0:.3f} s")
        if msg.get("ev") == "error":
            raise error_of(msg)
        return msg

    # -- lifecycle --------------------------------------------------------------------------------
    def wait_hello(self, timeout):
        if self.state == "starting":
            msg = self.recv(timeout)
            if msg.get("ev") != "hello":
                raise WorkerGone("the candidate process did not start", "harness")
            self.state = "started"

    def signal_all(self, sig):
        if self.pid <= 0:
            return
        for p in [self.pid] + descendants(self.pid):
            with contextlib.suppress(OSError):
                os.kill(p, sig)

    def pause(self):
        """Freezes a warming spare while something is timed, so its start-up cannot disturb a timing."""
        if self.running() and not self.stopped:
            self.signal_all(signal.SIGSTOP)
            self.stopped = True

    def resume(self):
        # Always: another candidate may have stopped us (it shares our PID namespace).
        self.signal_all(signal.SIGCONT)
        self.stopped = False

    def tails(self):
        res = []
        for name in ("candidate.stdout", "candidate.stderr"):
            try:
                with open(os.path.join(self.scratch, name), "rb") as f:
                    f.seek(0, os.SEEK_END)
                    size = f.tell()
                    f.seek(max(0, size - core.TAIL_CHARS))
                    res.append(f.read().decode(errors="replace"))
            except OSError:
                res.append("")
        return res

    def kill(self):
        """Kills the process, everything it started, and waits until none of it runs any more."""
        trace(self.name, "kill")
        pids = ([self.pid] + descendants(self.pid)) if self.pid > 0 else []
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.005)
        self.judge.reap_orphans()
        with contextlib.suppress(OSError):
            self.sock.close()

    def discard(self):
        out, err = self.tails()
        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
        return out, err


class Slot:
    """A receive buffer in this process that a worker copies one output into."""

    def __init__(self, ref, directory, index, gpu):
        torch = core.torch_module()
        self.ref = ref
        self.gpu = gpu
        self.index = index
        self.shape = list(ref.shape)
        self.dtype = str(ref.dtype).replace("torch.", "")
        if gpu:
            self.tensor = torch.empty_like(ref).contiguous()
        self.path = None
        self.directory = directory

    def spec_for(self, worker):
        """How `worker` maps this slot: CUDA IPC of our buffer, or a shared file in its scratch."""
        torch = core.torch_module()
        spec = {"shape": self.shape, "dtype": self.dtype}
        if self.gpu:
            h = self.tensor.untyped_storage()._share_cuda_()
            spec.update(kind="cuda_ipc", handle=[h[0], base64.b64encode(h[1]).decode(), h[2], h[3],
                                                 base64.b64encode(h[4]).decode(), h[5],
                                                 base64.b64encode(h[6]).decode() if h[6] else "", h[7]])
            return spec
        path = os.path.join(worker.scratch, f"slot{self.index}.bin")
        numel = self.ref.numel()
        with open(path, "wb") as f:
            f.truncate(numel * self.ref.element_size())
        worker.slot_tensors[self.index] = torch.from_file(path, shared=True, size=numel,
                                                          dtype=self.ref.dtype).view(self.ref.shape)
        spec.update(kind="file", path=path)
        return spec

    def tensor_of(self, worker):
        return self.tensor if self.gpu else worker.slot_tensors[self.index]

    def poison(self, worker):
        torch = core.torch_module()
        t = self.tensor_of(worker)
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype != torch.bool:
            t.fill_(torch.iinfo(t.dtype).min)


MAX_PAD_US = 1000.0


def pad_credit_ms(reported_pad_us, reported_ms):
    """What the judge credits of the device sleep the worker says it queued before each timed call:
    at most MAX_PAD_US and at most half the call's median time. The figure comes from the candidate's
    process and is forgeable; this bound is what a lie can buy (see docs/harness.md)."""
    try:
        pad = float(reported_pad_us)
    except (TypeError, ValueError):
        return 0.0
    if not pad == pad or pad <= 0 or not reported_ms:
        return 0.0
    med = sorted(reported_ms)[len(reported_ms) // 2]
    return min(pad, MAX_PAD_US, 500.0 * med) / 1e3


def wall_bound_excess(wall_ms, n, calib_per_call_ms, reported_ms, gpu, pad_ms=0.0):
    """How much of the judge's wall clock the reported per-call times leave unexplained, and how much
    is allowed: half of what was reported, a quarter of the calibrated loop overhead, and per-call
    scheduling jitter (larger on the CPU platform, whose calls are interpreted Python). `pad_ms` is
    the credited device sleep before each call (pad_credit_ms)."""
    explained = sum(reported_ms) + n * (calib_per_call_ms + pad_ms)
    excess = wall_ms - explained
    # On the CPU platform the loop's overhead (flush, stamps, round trips: milliseconds of Python)
    # moves with the load of the machine, so the whole calibrated overhead may double there.
    allowed = (0.5 * sum(reported_ms) + (0.25 if gpu else 1.0) * n * calib_per_call_ms
               + n * (0.05 if gpu else 1.0) + 5.0)
    return excess, allowed


# Inputs up to this size are permuted whole in every timed call (a gather, 0.05 ms a call for matvec's
# 2 MiB vector); larger ones have a sixteenth of them rolled (stamps_for).
WHOLE_STAMP_BYTES = 64 << 20


def coprime_multiplier(n, rng):
    """A multiplier in [2, n) coprime to n (n > 2; n - 1 always is), drawn from rng."""
    for _ in range(64):
        m = rng.randrange(2, n)
        if math.gcd(m, n) == 1:
            return m
    return n - 1


def spare_depth(lean, gpu, forced=None):
    """How many prepared workers may warm up beside the running candidate. Lean: none (one is started
    between requests). The CPU platform: one (a warming worker takes the cores the candidate runs on).
    A GPU: up to three, each beyond the first only while the device has room for it (room_for_spare).
    KAGENT_JUDGE_SPARES=N (1-8) forces N where the judge is not lean (still bounded by room_for_spare)."""
    if lean:
        return 0
    if forced:
        try:
            return max(1, min(8, int(forced)))
        except ValueError:
            pass
    return 3 if gpu else 1


def needed_for_two(worker_bytes, input_bytes, output_bytes, lean_sets):
    """The free device memory a second worker needs beside the first (measured `worker_bytes`): itself,
    the running candidate's outputs and temporaries (four outputs), 2 GiB of slack, and with lean input
    sets one trial's inputs and reference drawn again from its seed during a verification. None when
    the worker's size is unknown (the CPU platform).

    Lean input sets alone no longer make the judge lean: RMSNorm on an 80 GB H100 keeps one trial
    resident and has 45.1 GiB free beside a 12.3 GiB worker, 35.3 GiB needed for two, and one worker
    at a time put 0.8-1.0 s of worker loading before every back-to-back candidate
    (benchmarks/RESULTS.md, eleventh session). A test.py runs beside a loaded worker either way (a
    lean judge loads the next one between requests, while the test runs)."""
    if worker_bytes is None:
        return None
    need = worker_bytes + 4 * output_bytes + (2 << 30)
    if lean_sets:
        need += input_bytes + output_bytes
    return need


def room_for_spare(worker_bytes, free_bytes, output_bytes, pending=0):
    """Whether one more spare fits on the device now: its own memory, and after it still a worker's worth
    (the running candidate's own allocations) plus four outputs and 2 GiB of slack. `pending` spares
    have started but may not hold their memory yet: each counts as a worker. Unknown sizes: yes (the
    CPU platform, where depth decides alone)."""
    if worker_bytes is None or free_bytes is None:
        return True
    worker = max(worker_bytes, 1)
    return free_bytes - pending * worker >= 2 * worker + 4 * output_bytes + (2 << 30)


class Judge:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.scratch_root = os.path.join(log_dir, "sandbox")
        os.makedirs(self.scratch_root, exist_ok=True)
        self.problem = None
        self.spares = []             # prepared workers for the next candidates, oldest (warmest) first
        self.depth = 1               # how many spares may warm up at once (spare_depth, room_for_spare)
        self.worker_bytes = None     # a worker's device memory, measured at load (None: unknown, CPU)
        self.current = None          # (code hash, Worker, state dict)
        self.sandbox_prefix = []
        self.sets = []
        self.refs = []
        self.slots = []
        self.calib = {"per_call_ms": 0.0}
        self.slot_pool = None        # the slots' private device memory pool (slot_memory)
        self.zygote = None
        self.gpu = False
        self.launchers = None
        self.lean = False            # True: no spare is prepared while a candidate holds the device memory
        # When a taken spare is replaced: "take" (at once, beside the candidate's first call) or
        # "verified" (once its verification is over: the replacement's CUDA start-up and compile do not
        # run beside the candidate's compile). KAGENT_JUDGE_REFILL; a measurement knob for now.
        self.refill_when = "verified" if os.environ.get("KAGENT_JUDGE_REFILL") == "verified" else "take"
        self.refill_due = False
        self.lean_sets = False       # True: only trial 0's inputs and reference stay on the device
        self.seeds = []
        self.memory = {}
        self.timeouts = {"start": 300.0, "verify": 300.0, "benchmark": 300.0}
        become_subreaper()

    # -- problem ------------------------------------------------------------------------------------
    def load(self, path, device, dtype, size, seed, trials, sandbox_prefix, peak_gbps, samples, timeouts,
             calib_repeat=20, launchers_dir=None):
        torch = core.torch_module()
        self.shutdown_workers()
        self.device = device
        self.gpu = device.startswith("cuda")
        self.dtype = dtype
        self.size = size
        self.sandbox_prefix = list(sandbox_prefix or [])
        if not self.sandbox_prefix:
            # Without a sandbox the workers share our PID namespace (with one they cannot even name us).
            not_dumpable()
        self.launchers = self.shared_launchers(launchers_dir)
        self.peak_gbps = peak_gbps
        self.timeouts = timeouts
        self.problem = core.Problem(path, device, dtype, size, seed)
        with core.blame_problem(path):  # get_inputs and Model.forward are the user's code too
            self.seeds = [seed + k for k in range(max(1, trials))]
            self.sets = [self.problem.inputs]
            self.refs = [self.problem.expected]
            core.synchronize(device)
        ref0 = self.refs[0]
        self.multi = isinstance(ref0, (tuple, list))
        ref_outs = list(ref0) if self.multi else [ref0]
        for r in ref_outs:
            if not torch.is_tensor(r):
                raise core.ProblemError(f"{os.path.basename(path)}: Model.forward returns {type(r).__name__}; "
                                        f"the harness compares tensors (return a tensor or a tuple of tensors)")
        self.output_bytes = sum(r.numel() * r.element_size() for r in ref_outs)
        self.input_bytes = self.problem.input_bytes()
        # Every trial's inputs and reference stay resident unless they would crowd out the workers
        # (lean_sets): then trials 1.. are drawn again from their seeds when needed.
        self.lean_sets = self.choose_resident_sets(trials, samples)
        if not self.lean_sets:
            with core.blame_problem(path):
                self.sets += [self.problem.inputs_for_seed(s) for s in self.seeds[1:]]
                self.refs += [self.problem.reference(s) for s in self.sets[1:]]
                core.synchronize(device)
        # Slot group 0 receives verification outputs; groups 0..samples-1 then receive the sampled timed
        # calls' (a verification is over and compared before any timed call: one output copy less,
        # 3.7 GB for RMSNorm).
        self.samples = max(1, samples)
        with self.slot_memory():
            self.slots = [[Slot(r, self.scratch_root, g * len(ref_outs) + k, self.gpu) for k, r in enumerate(ref_outs)]
                          for g in range(self.samples)]
        self.flush_bytes = (256 << 20) if self.gpu else (32 << 20)
        free_before = self.free_device_bytes()
        self.depth = 1
        self.spares = [self.spawn()]
        for r in ref_outs:
            if fastcmp.fused_applies(r, r):
                fastcmp.stats(r, r, 0.0, 0.0)  # compiles the comparison now, while the spare worker starts
                break
        self.calibrate(calib_repeat)
        self.choose_memory_mode(free_before)
        self.refill()
        return dict(self.problem.describe(), calibration_ms_per_call=self.calib["per_call_ms"],
                    trials=self.trials(), output_bytes=self.output_bytes, memory=self.memory,
                    private_slots=self.slot_pool is not None or not self.gpu)

    @contextlib.contextmanager
    def slot_memory(self):
        """Where the slots are allocated. CUDA IPC maps the whole allocation a shared tensor lives in,
        not only the tensor: a worker can write anywhere in it. From the caching allocator's shared
        pool a slot shares its allocation with whatever the judge put beside it, e.g. the references
        (matvec's 4 KiB outputs all sit in one 2 MiB block), so a candidate could overwrite the
        reference it is compared with (tests/cheats/matvec/scribble_segment.py). The slots therefore
        come from a private pool (torch.cuda.MemPool) that holds nothing else. Without one (an older
        torch) the references the verification compares stay reachable, which server.log and
        `private_slots: false` in load_problem's reply say; the sampled checks then compute theirs
        only after the worker is ended (early_references)."""
        torch = core.torch_module()
        self.slots = []  # the last problem's slots die with their pool, not after it
        self.slot_pool = None
        if self.gpu:
            why = "this torch has no torch.cuda.MemPool"
            if hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool"):
                try:
                    self.slot_pool = torch.cuda.MemPool()
                except Exception as exc:  # noqa: BLE001 - a build without private pools: as before, and said
                    why = str(exc)
            if self.slot_pool is None:
                self.notice(f"judge: no private memory pool for the receive slots ({why}): a worker can reach "
                            "device memory beside its slot; the sampled checks of timed calls still compute "
                            "their references only after it is ended")
        if self.slot_pool is not None:
            with torch.cuda.use_mem_pool(self.slot_pool):
                yield
            return
        yield

    def trials(self):
        return len(self.seeds)

    def inputs_of(self, j):
        """Trial j's inputs: resident, or drawn again from its seed (lean_sets; bit-identical on the
        same device, as the workers draw theirs from the same seeds)."""
        if j < len(self.sets):
            return self.sets[j]
        return self.problem.inputs_for_seed(self.seeds[j])

    def reference_of(self, j):
        if j < len(self.refs):
            return self.refs[j]
        return self.problem.reference(self.inputs_of(j))

    def choose_resident_sets(self, trials, samples):
        """Keeps every trial's inputs and reference on the device when that leaves room for the rest:
        the output slots, two workers (each holds every trial's inputs and writes an output) and a
        process of the user's (test.py, or the reference timed eagerly here) of about four inputs and
        outputs. RMSNorm's 3.5 GiB tensors on an 80 GB H100 did not fit: the judge alone held 42.6
        GiB. Otherwise only trial 0 stays; the others are drawn again from their seeds for each
        verification and sampled check (a few ms each on a GPU) and the eager and torch.compile
        timings use trial 0's inputs. Decided before the workers start, so it cannot count on their
        measured size (input_bytes and output_bytes are set). KAGENT_JUDGE_LEAN=1/0 forces lean or not; lean here means one worker at a
        time too (choose_memory_mode)."""
        forced = os.environ.get("KAGENT_JUDGE_LEAN")
        if forced in ("0", "1"):
            return forced == "1" and trials > 1
        free_now = self.free_device_bytes()
        if free_now is None or trials <= 1:
            return False
        in_b, out_b = self.input_bytes, self.output_bytes
        need = ((trials - 1) * (in_b + out_b) + max(1, samples) * out_b
                + 2 * (trials * in_b + 2 * out_b) + 4 * (in_b + out_b) + (2 << 30))
        lean = free_now < need
        self.memory_sets = {"lean_sets": lean, "free_bytes_at_load": free_now, "needed_resident": need}
        if lean:
            self.notice(f"judge: lean input sets: trial 0 resident, trials 1-{trials - 1} drawn from their seeds "
                        f"when needed ({free_now / 2**30:.1f} GiB free, {need / 2**30:.1f} GiB needed to keep them all)")
        return lean

    def free_device_bytes(self):
        torch = core.torch_module()
        if not self.gpu:
            return None
        torch.cuda.synchronize()
        return int(torch.cuda.mem_get_info()[0])

    def choose_memory_mode(self, free_before):
        """Two workers at once (the candidate's and the next one, warming up) need twice a worker's
        device memory. Where that does not fit beside the judge's own inputs, references and slots
        (RMSNorm's 3.5 GiB tensors on an 80 GB H100: every candidate ran out of memory), the judge
        goes lean: the next worker is prepared only once the current candidate is done (between
        requests, so usually while the LLM writes the next candidate). What two need:
        needed_for_two. KAGENT_JUDGE_LEAN=1/0 forces it."""
        forced = os.environ.get("KAGENT_JUDGE_LEAN")
        free_now = self.free_device_bytes()
        worker = (free_before - free_now) if free_before is not None and free_now is not None else None
        need = needed_for_two(worker, self.input_bytes, self.output_bytes, self.lean_sets)
        if forced in ("0", "1"):
            self.lean = forced == "1"
        elif need is None:
            self.lean = self.lean_sets  # sizes unknown: lean input sets mean little room
        else:
            self.lean = free_now < need
        self.worker_bytes = worker
        spares = os.environ.get("KAGENT_JUDGE_SPARES")
        self.depth = spare_depth(self.lean, self.gpu, spares)
        if spares and not spares.strip().isdigit():
            self.notice(f"judge: KAGENT_JUDGE_SPARES={spares!r} is not a number of spares (1-8); "
                        f"keeping the default, {self.depth}")
        self.memory = {"lean": self.lean, "spares": self.depth, "worker_bytes": worker, "free_bytes": free_now,
                       "needed_for_two": need,
                       "forced": forced in ("0", "1"), "lean_sets": self.lean_sets,
                       "resident_trials": len(self.sets)}
        self.memory.update(getattr(self, "memory_sets", {}))
        trace("memory", self.memory)
        if self.lean:
            gib = (lambda b: f"{b / 2**30:.1f} GiB" if b is not None else "unknown")
            self.notice(f"judge: lean memory mode (one worker at a time): a worker takes {gib(worker)}, "
                        f"{gib(free_now)} free, {gib(need)} needed for two{' (forced)' if forced in ('0', '1') else ''}")

    def notice(self, line):
        """A decision about this judge, for the user: on stderr (the request's output) and appended to
        server.log in the log directory (while a request runs, our stderr goes to its capture file, not
        to the server's log)."""
        print(line, file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            with open(os.path.join(self.log_dir, "server.log"), "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def shared_launchers(self, directory):
        """The launcher cache shared by this judge's workers (launchers.py) in `directory`, which the
        runtime names in load_problem's `launchers_dir` when it shares launchers (NVIDIA, bwrap,
        KAGENT_SHARED_LAUNCHERS: device_backend.hpp, launchers_shareable; test.py's and the profiler's
        processes read the same directory). The workers' prefix gets a read-only bind of it (it may lie
        under a /tmp that the sandbox replaces); without a bwrap prefix that bind cannot be made, so
        nothing is shared whatever the request says."""
        prefix = self.sandbox_prefix
        if not directory or not self.gpu:
            return None
        if not prefix or not os.path.basename(prefix[0]).startswith("bwrap") or "--" not in prefix:
            return None
        torch = core.torch_module()
        if getattr(torch.version, "hip", None):
            return None
        try:
            import launchers
            cache = launchers.LauncherCache(directory, prefix)
        except Exception as exc:  # noqa: BLE001 - no sharing, as before
            trace("launcher cache off:", exc)
            return None
        cut = prefix.index("--")
        self.sandbox_prefix = prefix[:cut] + ["--ro-bind", cache.dir, cache.dir] + prefix[cut:]
        return cache

    def builder_processes(self, table=None):
        """The launcher builders and everything below them: the judge's own children, never a
        candidate's (a candidate's orphans are re-parented to the judge, not to a builder)."""
        if self.launchers is None:
            return set()
        out = set()
        for pid in self.launchers.live_pids():
            out.add(pid)
            out.update(descendants(pid, table))
        return out

    def offer_launchers(self, msg):
        if self.launchers is not None and isinstance(msg, dict):
            self.launchers.offer(msg.get("launchers"))

    def floor_ms(self):
        if not self.peak_gbps:
            return None
        return (self.input_bytes + self.output_bytes) / (self.peak_gbps * 1e9) * 1e3

    # -- workers ------------------------------------------------------------------------------------
    def fork_server(self):
        """The zygote, (re)started when it is not running (a candidate may have killed it)."""
        if self.zygote is None or not self.zygote.alive():
            if self.zygote is not None:
                self.zygote.stop()
            self.zygote = Zygote(self)
        self.zygote.wait_hello(self.timeouts["start"])
        return self.zygote

    def spawn(self):
        """A new spare: forked by the zygote, it loads the problem's inputs at once (the spare is
        paused whenever something is being timed)."""
        try:
            w = Worker(self)
        except WorkerGone:
            # The fork server died (a candidate can kill it): one fresh start.
            if self.zygote is not None:
                self.zygote.stop()
                self.zygote = None
            w = Worker(self)
        specs = [s.spec_for(w) for group in self.slots for s in group]
        w.send({"op": "prepare", "problem": self.problem.path, "device": self.device, "dtype": self.dtype,
                "size": self.size, "seeds": self.seeds, "slots": specs, "flush_bytes": self.flush_bytes,
                "launcher_dir": self.launchers.dir if self.launchers is not None else None})
        return w

    def ready(self, w):
        """Waits until `w` has loaded the problem."""
        w.resume()
        if w.state == "ready":
            return
        w.wait_hello(self.timeouts["start"])
        msg = w.recv(self.timeouts["start"])
        if msg.get("ev") != "ready":
            raise core.CandidateError(str(msg.get("error", "the candidate process could not load the problem"))[:4000],
                                      str(msg.get("traceback", ""))[-core.TAIL_CHARS:])
        w.info["prepare"] = msg
        # Every thread the worker has before any candidate code exists (torch's and the driver's
        # included: prepare started them): the timed calls are watched against this.
        w.info["threads_at_ready"] = thread_count(w.pid)
        self.offer_launchers(msg)
        w.state = "ready"
        trace(w.name, "ready")

    def calibrate(self, repeat):
        """The per-call overhead of the timed loop (stamps, flush, synchronisation, our round trip),
        measured on the spare before any candidate code exists in it."""
        w = self.spares[0]
        self.ready(w)
        m = self.timed(w, None, 0, max(5, repeat), calibrate=True)
        self.calib = m

    def refill(self):
        """Starts spares until `depth` of them warm up (none while lean: see idle). The first always (as
        one spare always did); each further one only where the device has room for it now, measured, so
        that the spares never take the memory a candidate needs (on an H100, four matvec workers of 13 GiB
        beside the judge left 1.75 GiB and a fifth could not load its inputs)."""
        if self.lean:
            return
        while len(self.spares) < self.depth:
            if self.spares:
                pending = sum(1 for w in self.spares if w.state != "ready")
                if not room_for_spare(self.worker_bytes, self.free_device_bytes(), self.output_bytes, pending):
                    break
            self.spares.append(self.spawn())

    def take(self):
        """A prepared worker for the next candidate (the warmest spare); replacements start warming up at
        once. With candidates back to back, one spare had too little time to get ready between them (it
        is paused while anything is timed): on an H100 the next candidate waited 0.77 s for it (median,
        benchmarks/RESULTS.md); several spares warm side by side."""
        self.refill_now()  # one left due by a candidate whose request ended without idle()
        for attempt in range(2):
            w = self.spares.pop(0) if self.spares else self.spawn()
            try:
                self.ready(w)
                break
            except (WorkerGone, core.CandidateError) as exc:
                # A spare that another candidate killed or broke is replaced once.
                out, err = w.discard()
                if attempt == 1:
                    raise WorkerGone(f"a candidate process could not be prepared: {exc}\n{err[-1500:]}",
                                     "harness") from None
        if self.refill_when == "take":
            self.refill()
        else:
            self.refill_due = True  # once the candidate's verification is over (verify, idle)
        return w

    def refill_now(self):
        """The replacements take() left for later (KAGENT_JUDGE_REFILL=verified)."""
        if self.refill_due:
            self.refill_due = False
            self.refill()

    def census(self, table=None):
        """Every live process below us (the fork server's tree, workers, orphans re-parented to us)."""
        return {p for p in descendants(os.getpid(), table) if alive(p)}

    def leftovers(self, w, state):
        """Processes that appeared since `w` got its candidate and are neither `w` nor the spare's.
        One pass over /proc serves every lookup (it was one per spare and builder more)."""
        before = state.get("census")
        if before is None:
            return []
        table = parents()
        keep = {w.pid} | self.builder_processes(table)
        for spare in self.spares:
            if spare.pid > 0:
                keep.add(spare.pid)
                keep.update(descendants(spare.pid, table))
        left = [p for p in self.census(table) - before - keep if alive(p)]
        if left:
            # A process that ends on its own a moment later (a compiler finishing) was not left
            # running; a daemon that waits is still there after the grace.
            time.sleep(0.5)
            builders = self.builder_processes()
            left = [p for p in left if alive(p) and p not in builders]
        return sorted(left)

    @staticmethod
    def leftover_error(left, where):
        """The integrity failure for processes `left` behind, naming up to three of them."""
        names = [cmdline_of(p) for p in left[:3]]
        return IntegrityError(f"the candidate left {len(left)} process(es) running after its calls ({where}): "
                              + "; ".join(n for n in names if n))

    def reap_orphans(self):
        """Ends processes re-parented to us (we are a subreaper) that are not our spare."""
        keep = set(self.launchers.live_pids()) if self.launchers is not None else set()
        if self.zygote is not None:
            keep.add(self.zygote.proc.pid)
        for pid in children_of(os.getpid()):
            if pid in keep:
                continue
            for p in [pid] + descendants(pid):
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)

    def shutdown_workers(self):
        if self.current is not None:
            self.current[1].discard()
            self.current = None
        for spare in self.spares:
            spare.discard()
        self.spares = []
        if self.zygote is not None:
            self.zygote.stop()
            self.zygote = None

    def idle(self):
        """Between requests: let the spares warm up (they are paused while anything is timed). Lean: start
        one now, once no candidate holds device memory."""
        if self.lean and not self.spares and self.current is None and self.problem is not None:
            self.spares.append(self.spawn())
        self.refill_now()
        for spare in self.spares:
            spare.resume()

    # -- evaluation -----------------------------------------------------------------------------------
    def candidate(self, code, key):
        """The worker holding this candidate (loaded and verified), or a fresh one loading it."""
        if self.current is not None and self.current[0] == key:
            return self.current[1], self.current[2]
        if self.current is not None:
            self.current[1].discard()
            self.current = None
        w = self.take()
        path = os.path.join(w.scratch, "kernel.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code)
        state = {"verified": False, "census": self.census()}
        self.current = (key, w, state)
        msg = w.request({"op": "load", "path": path}, self.timeouts["verify"])
        state["import_s"] = msg.get("import_s")
        return w, state

    def finish_current(self):
        if self.current is None:
            return "", ""
        out, err = self.current[1].discard()
        self.current = None
        return out, err

    def progress_windows(self):
        """ProgressWindows(hang_s, quiet_s): how long a verification call may go without a reply
        once its kernel is launched, a sixth of the verification timeout and at least 5 s; and how
        long it may run before its first compile or launch. On a GPU that is a thirtieth, at least
        1 s: a wrapper's host code before its first launch takes milliseconds (an honest kernel's
        first progress line came 3 ms after its call, at most 33 ms, over 24 first calls of the
        replay kernels on an H100: 1 s is thirty times that) and compute ops are not allowed there
        anyway; a stuck call held the device 10 s, then 3 s, before. On the cpu platform a third, at
        least 10 s (two cores shared with the rest of the run). CUDA's test_timeout_s of 30 s: 5 s
        and 1 s; the cpu platform's 300 s: 50 s and 100 s (the interpreter runs a kernel inside its
        launch)."""
        v = self.timeouts["verify"]
        quiet = max(1.0, v / 30.0) if self.gpu else max(10.0, v / 3.0)
        return ProgressWindows(hang_s=max(5.0, v / 6.0), quiet_s=quiet)

    def compare(self, got, ref, rtol, atol, max_bad_frac=0.0):
        """One pass over the output and its reference (harness/compare.py: a fused Triton kernel on a GPU)."""
        return fastcmp.compare(got, ref, rtol, atol, max_bad_frac)

    def check_group(self, w, group, ref, rtol, atol, max_bad_frac=0.0):
        refs = list(ref) if self.multi else [ref]
        for k, (slot, r) in enumerate(zip(self.slots[group], refs)):
            err = self.compare(slot.tensor_of(w), r, rtol, atol, max_bad_frac)
            if err:
                return f"output {k}: {err}" if self.multi else err
        return None

    def evidence(self, call, where):
        """Rejects on what the worker itself reports (forgeable, so only ever a reason to reject)."""
        if call.get("integrity"):
            raise IntegrityError(call["integrity"])
        computing = computing_ops(call)
        if computing:
            raise IntegrityError(f"torch compute op {computing[0]} in the candidate's call ({where}); "
                                 "only allocation, views, copies and fills may run in PyTorch")
        if int(call.get("launches", 0)) < 1:
            raise IntegrityError(f"no Triton kernel launched in the candidate's call ({where})")

    def verify(self, code, key, rtol, atol):
        d_rtol, d_atol = core.default_tolerance(self.dtype)
        rtol = d_rtol if rtol is None else float(rtol)
        atol = d_atol if atol is None else float(atol)
        t_take = time.perf_counter()
        w, state = self.candidate(code, key)
        timings = {"import_s": state.get("import_s"), "take_and_load_s": time.perf_counter() - t_take,
                   "spares": len(self.spares), "compare_s": 0.0}
        # Set 0 twice (the first call compiles), then every other set; each output is compared here.
        plan = [0] + list(range(self.trials()))
        error = None
        for n, j in enumerate(plan):
            for slot in self.slots[0]:
                slot.poison(w)
            core.synchronize(self.device)
            # The compiled kernels (for the hash) only with the last call: normalising their PTX
            # took 5-15 ms a request.
            msg = w.request({"op": "verify", "calls": [{"set": j, "slots": [s.index for s in self.slots[0]]}],
                             "asm": n == len(plan) - 1},
                            self.timeouts["verify"], windows=self.progress_windows())
            call = msg["calls"][0]
            timings["first_call_s" if n == 0 else f"call{n}_s"] = call.get("wall_s")
            if n == 0:
                timings["first_progress_s"] = w.first_progress_s
                timings["first_compile_s"] = call.get("compile_s")  # reported by the worker: a diagnostic only
                self.offer_launchers(msg)
                timings["shared_launchers_loaded"] = msg.get("launcher_hits")
                if self.launchers is not None:
                    timings["shared_launchers"] = {"built": self.launchers.built, "failed": self.launchers.failed,
                                                   "building": len(self.launchers.pending)}
            self.evidence(call, "verification")
            check_harness_unpatched(msg, "changed during the candidate's verification call")
            if call.get("error"):
                error = call["error"]
                break
            core.synchronize(self.device)
            t_cmp = time.perf_counter()
            ref = self.reference_of(j)
            err = self.check_group(w, 0, ref, rtol, atol)
            del ref
            timings["compare_s"] += time.perf_counter() - t_cmp
            if err:
                error = err if j == 0 else f"trial {j} (seed {self.seeds[j]}): {err}"
                break
            if "asm" in msg:
                state["asm"] = msg.get("asm") or {}
            state["in_place"] = bool(msg.get("in_place"))
        if error is None:
            left = self.leftovers(w, state)
            if left:
                raise self.leftover_error(left, "verification")
        state["verified"] = error is None
        state["rtol"], state["atol"] = rtol, atol
        self.refill_now()
        return {"passed": error is None, "error": error, "rtol": rtol, "atol": atol, "trials": self.trials(),
                "timings": timings}

    def code_hash(self, code, state):
        """The wrapper's normalised source together with the compiled kernels: a different wrapper
        around the same kernel is a different program; comment or layout edits are not."""
        asm = state.get("asm") or {}
        src = core.normalize_source(code)
        if asm.get("hash"):
            return {"hash": core.sha256(src + "\n\x00asm\x00\n" + asm["hash"]), "kind": f"source+{asm.get('kind')}",
                    "kernels": asm.get("kernels", 0)}
        return {"hash": core.sha256(src), "kind": "source", "kernels": 0}

    def stamps_for(self, n, rng):
        """Per call and input tensor: [k, start, length, shift, mult] (core.stamp_index). A small input
        (at most WHOLE_STAMP_BYTES and a sixteenth of the largest one) has all of its elements moved by
        an affine permutation drawn afresh (mult coprime to its size); any other has a window of a
        sixteenth of it rolled by `shift` (mult 1), which costs less per call than a gather of it.
        Every output then depends on changed inputs: a window alone left most of matvec's product
        computable from an earlier answer plus the window's share (A's rows in it and B's window's
        columns, an eighth of the work), and a roll of the whole of B one of only K answers."""
        torch = core.torch_module()
        out = []
        for i in range(n):
            inputs = self.sets[(i % self.trials()) % len(self.sets)]  # every trial has the same shapes
            largest = max((t.numel() * t.element_size() for t in inputs if torch.is_tensor(t)), default=0)
            small = min(WHOLE_STAMP_BYTES, largest // 16)
            st = []
            for k, t in enumerate(inputs):
                if torch.is_tensor(t) and t.numel() >= 2 and t.is_contiguous():
                    n_el = t.numel()
                    if n_el * t.element_size() <= small and n_el > 2:
                        st.append([k, 0, n_el, rng.randrange(0, n_el), coprime_multiplier(n_el, rng)])
                    else:
                        length = max(2, n_el // 16)
                        start = rng.randrange(0, n_el - length + 1)
                        st.append([k, start, length, rng.randrange(1, length), 1])
            out.append(st)
        return out

    def loop_stamps(self, warmup, repeat, rng):
        """The stamps of a timed loop: none for the warm-up calls (nothing checks or times them, and
        each stamp costs three copies of a sixteenth of every input: 0.5 ms a call for matvec's 4 GiB
        on an H100), one per input tensor for each timed call."""
        return [[] for _ in range(warmup)] + self.stamps_for(repeat, rng)

    def stamped(self, j, stamp):
        torch = core.torch_module()
        inputs = ([t.clone() if torch.is_tensor(t) else t for t in self.sets[j]] if j < len(self.sets)
                  else list(self.inputs_of(j)))  # drawn again: already a fresh copy
        for k, start, length, shift, *rest in stamp:
            view = inputs[k].view(-1)[start:start + length]
            mult = rest[0] if rest else 1
            if mult == 1:
                view.copy_(view.roll(shift))
            else:
                view.copy_(view[core.stamp_index(length, shift, mult, view.device)])
        return inputs

    def sample_reference(self, j, stamp):
        """The reference output for trial j's inputs under a timed call's stamp (queued on the device)."""
        inputs = self.stamped(j, stamp)
        return self.problem.reference(inputs, copy=False)  # stamped() made them ours

    def early_references(self, m, warmup):
        """{call: reference} of the sampled calls whose references may be computed before the worker is
        ended: none unless the slots have a private pool (slot_memory: else a live worker could
        write into memory beside its slot), and only as many as the device has room for now, beside
        the worker (a stamped copy of the inputs and the outputs, 2 GiB to spare)."""
        if self.slot_pool is None or not m["keep"]:
            return {}
        try:
            free = self.free_device_bytes()
        except Exception:  # noqa: BLE001 - no figure, no early work
            return {}
        room = free - self.input_bytes - (2 << 30)
        early = {}
        try:
            for i in m["keep"]:
                if room < self.output_bytes:
                    break
                room -= self.output_bytes
                early[i] = self.sample_reference(i % self.trials(), m["stamps"][warmup + i])
        except Exception:  # noqa: BLE001 - e.g. out of memory beside the live worker: computed after it, as before
            early = {}
            core.release()
        return early

    def timed(self, w, state, warmup, repeat, calibrate=False):
        """Runs the worker's timed loop, watching it with our own clock. Returns what was measured."""
        rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        stamps = self.loop_stamps(warmup, repeat, rng)
        keep_at = set() if calibrate else set(rng.sample(range(repeat), min(self.samples, repeat)))
        group_of = {i: g for g, i in enumerate(sorted(keep_at))}
        if not calibrate:
            for g in range(self.samples):
                for slot in self.slots[g]:
                    slot.poison(w)
            core.synchronize(self.device)
        # The worker is given one timed call's stamp at a time: the first one now, each next one in our
        # answer to the call before it. Given them all at once, a candidate read them from the
        # worker's frames in a warm-up call and computed every timed call's answer ahead, where
        # nothing times it (tests/cheats/matvec/future_stamps.py: verified at 1.28 ms against the
        # honest 24.6 ms on the cpu platform).
        op = {"op": "calibrate" if calibrate else "time", "warmup": warmup, "repeat": repeat,
              "stamps": stamps[:warmup + 1], "max_pad_us": MAX_PAD_US if self.gpu and not calibrate else 0.0}
        timeout = self.timeouts["start" if calibrate else "benchmark"]
        w.send(op)
        t_start = time.perf_counter()
        waited_from = run_queue_wait_ms(w.pid)
        t_warm = None
        most_threads = None  # the most threads the worker had at the end of a timed call
        # Processes that appeared since the candidate was loaded, looked for at the end of every timed
        # call: the census after the calls cannot see a helper that the last call ended.
        beside = None
        known = None if calibrate or state is None or state.get("census") is None else set(state["census"])
        skip = set()
        if known is not None:
            skip = {sp.pid for sp in self.spares if sp.pid > 0}
            if self.launchers is not None:
                skip.update(self.launchers.live_pids())
        deadline = time.monotonic() + timeout
        while True:
            msg = w.recv(max(0.1, deadline - time.monotonic()))
            ev = msg.get("ev")
            if ev == "warm":
                t_warm = time.perf_counter()
                waited_from = run_queue_wait_ms(w.pid)
            elif ev == "called":
                i = int(msg.get("i", -1))
                g = group_of.get(i)
                nxt = stamps[warmup + i + 1] if 0 <= i and warmup + i + 1 < len(stamps) else None
                w.send({"keep": [s.index for s in self.slots[g]] if g is not None else None, "stamp": nxt})
                if not calibrate:
                    n = thread_count(w.pid)
                    if n is not None and (most_threads is None or n > most_threads):
                        most_threads = n
                    if beside is None and known is not None:
                        found = new_below(os.getpid(), known, w.pid, skip)
                        if found:
                            beside = [(pid, cmdline_of(pid)) for pid in found]  # named now: the next call may end them
            elif ev == "timed":
                t_end = time.perf_counter()
                waited_to = run_queue_wait_ms(w.pid)
                break
            elif ev == "error":
                raise error_of(msg)
            else:
                raise WorkerGone("the candidate process broke the protocol", "integrity")
        times = [float(x) for x in msg.get("times_ms", [])]
        if len(times) != repeat or not all(x == x and x >= 0 for x in times):
            raise IntegrityError(f"the candidate process reported {len(times)} timings for {repeat} timed calls")
        wall_ms = (t_end - (t_warm if t_warm is not None else t_start)) * 1e3
        # Of that wall time, what the worker's loop spent waiting for a CPU on a loaded machine (a CI
        # runner's other jobs): no work of anyone's in that process, so it explains nothing a timer
        # hid and is not held against the reported times (nor counted in the loop's overhead).
        waited_ms = 0.0
        if waited_from is not None and waited_to is not None:
            waited_ms = min(max(0.0, waited_to - waited_from), wall_ms)
        if calibrate:
            return {"per_call_ms": max(0.0, (wall_ms - waited_ms - sum(times)) / max(1, repeat)), "wall_ms": wall_ms,
                    "run_queue_wait_ms": waited_ms}
        return {"times": times, "wall_ms": wall_ms, "run_queue_wait_ms": waited_ms, "keep": sorted(keep_at),
                "group_of": group_of, "stamps": stamps, "msg": msg, "most_threads": most_threads, "beside": beside}

    def benchmark(self, code, key, warmup, repeat, rtol, atol):
        torch = core.torch_module()
        w, state = self.candidate(code, key)
        phases = {}
        if not state.get("verified"):
            # Not the candidate process verified last (another candidate's request came between, or
            # a benchmark without a verify): a fresh one is verified first, in full.
            t_again = time.perf_counter()
            res = self.verify(code, key, rtol, atol)
            phases["verify_again_s"] = time.perf_counter() - t_again
            if not res["passed"]:
                raise core.CandidateError(f"verification failed before the benchmark: {res['error']}")
            # verify() used the process self.candidate() just gave us (w, state), and marked it verified.
        for spare in self.spares:
            spare.pause()
        t_phase = time.perf_counter()
        with core.working_directory(self.scratch_root):
            m = self.timed(w, state, warmup, repeat)
        phases["timed_loop_s"] = time.perf_counter() - t_phase
        msg = m["msg"]
        # The sampled calls' references go to the device now, to run while the census below reads
        # /proc and the worker is ended (0.015-0.02 s a candidate on an H100): only where the worker
        # cannot reach them (the slots have a pool of their own) and the device has room for them
        # beside the worker still alive.
        t_phase = time.perf_counter()
        early = self.early_references(m, warmup)
        phases["early_references_s"] = time.perf_counter() - t_phase
        t_phase = time.perf_counter()
        left = self.leftovers(w, state)
        # Nothing the candidate left behind may run on while we look at its outputs.
        out, err = self.finish_current()
        phases["census_and_discard_s"] = time.perf_counter() - t_phase
        if left:
            raise self.leftover_error(left, "timed calls")
        if msg.get("patched"):
            raise IntegrityError(f"patched timer ({', '.join(msg['patched'])} replaced during the candidate's run)")
        check_harness_unpatched(msg, "replaced during the candidate's run: code the timed loop runs outside the "
                                     "timed calls")
        if msg.get("hooks"):
            raise IntegrityError(f"a hook of the candidate runs its code in the timed loop between the calls "
                                 f"({', '.join(str(h) for h in msg['hooks'][:6])} changed during the timed calls)")
        if msg.get("forks"):
            raise IntegrityError(str(msg["forks"]))
        if msg.get("mark_problem"):
            raise IntegrityError(f"the op recorder's marks of the timed loop's calls do not pair up: {msg['mark_problem']}")
        marked = min(warmup, core.WATCHED_WARMUPS) + repeat  # the watched warm-up calls and the timed ones
        if msg.get("marks") is not None and int(msg["marks"]) != marked:
            raise IntegrityError(f"the op recorder held {int(msg['marks'])} marked calls of the {marked} "
                                 "the timed loop made under it")
        computing = computing_ops(msg)
        if computing:
            raise IntegrityError(f"torch compute op {computing[0]} in the candidate's call (a call of the timed loop); "
                                 f"all: {', '.join(computing[:8])}")
        launches = [int(x) for x in msg.get("launches", [])]
        if launches and min(launches) < 1:
            raise IntegrityError("no Triton kernel launched in a timed call (a cached or precomputed result?)")
        if int(msg.get("compiles", 0)) > 0:
            raise IntegrityError(f"Triton compiled {int(msg['compiles'])} kernel(s) during the timed calls "
                                 "(compile-time code runs unobserved; an honest kernel compiles in its first call)")
        prep = w.info.get("prepare", {})
        if m.get("beside"):
            names = "; ".join(n for _, n in m["beside"][:3] if n)
            raise IntegrityError(f"{len(m['beside'])} process(es) of the candidate ran beside its timed calls "
                                 f"(seen at the end of a timed call): {names}")
        before = w.info.get("threads_at_ready")
        if before is not None and m.get("most_threads") is not None and m["most_threads"] > before:
            # Counted by us from /proc at the end of every timed call: a thread alive then (however it
            # was started) could compute beside the loop, between the calls, where no timer runs and
            # nothing records its ops (tests/cheats/matvec/work_beside_the_loop.py).
            raise IntegrityError(f"a thread of the candidate ran beside its timed calls ({m['most_threads']} threads in "
                                 f"its process at the end of a timed call, {before} before it was loaded)")
        if int(msg.get("threads", 0)) > int(prep.get("threads", 0)):
            extra = int(msg["threads"]) - int(prep.get("threads", 0))
            raise IntegrityError(f"the candidate left {extra} thread(s) running after its calls")
        rtol, atol = state.get("rtol", rtol), state.get("atol", atol)
        t_phase = time.perf_counter()
        for i in m["keep"]:
            j = i % self.trials()
            ref = early.pop(i, None)
            if ref is None:
                ref = self.sample_reference(j, m["stamps"][warmup + i])
            core.synchronize(self.device)
            # Fresh random inputs: an honest kernel may round a stray element just past the tolerance
            # (the verification sets are fixed; these are not). A stale or faked output differs in
            # every row the stamp touched (1/16 of the inputs), far more than 1 % of the elements.
            err_txt = self.check_group(w, m["group_of"][i], ref, rtol, atol, max_bad_frac=0.01)
            if err_txt:
                raise IntegrityError(f"output of a timed call differs from the reference for its inputs "
                                     f"(call {i}, input set {j}): {err_txt}")
            del ref
        phases["sample_checks_s"] = time.perf_counter() - t_phase
        stats = core.stats(m["times"])
        calib = self.calib
        pad_ms = pad_credit_ms(msg.get("pad_us"), m["times"]) if self.gpu else 0.0
        waited = m["run_queue_wait_ms"]
        excess, allowed = wall_bound_excess(m["wall_ms"] - waited, repeat, calib["per_call_ms"], m["times"], self.gpu,
                                            pad_ms)
        if excess > allowed:
            raise IntegrityError(
                f"reported times do not account for the wall clock: {repeat} timed calls took {m['wall_ms']:.1f} ms "
                f"seen from the judge ({waited:.1f} ms of it waiting for a CPU), {sum(m['times']):.1f} ms reported plus "
                f"{repeat * (calib['per_call_ms'] + pad_ms):.1f} ms "
                f"of loop overhead (a slowed or patched timer, or work outside the timed call)")
        floor = self.floor_ms()
        result = {"method": "cuda_event" if self.gpu else "perf_counter", "warmup": warmup, "repeat": repeat,
                  "input_sets": self.trials(), "flush_bytes": self.flush_bytes, "timings": {},
                  "candidate": stats, "wall_ms": m["wall_ms"], "run_queue_wait_ms": waited, "sampled_calls": m["keep"],
                  "calibration_ms_per_call": calib["per_call_ms"], "pad_ms": pad_ms, "bytes": self.input_bytes + self.output_bytes,
                  "phases_s": phases}
        if floor is not None:
            result["floor_ms"] = floor
            result["floor_fraction"] = floor / stats["median_ms"] if stats["median_ms"] > 0 else None
            if stats["median_ms"] < floor:
                raise IntegrityError(f"reported time below the hardware floor ({stats['median_ms']:.4g} ms < "
                                     f"{floor:.4g} ms: {self.input_bytes + self.output_bytes} bytes at "
                                     f"{self.peak_gbps:g} GB/s)")
        result["_tails"] = (out, err)
        del torch
        return result

    def reference_timings(self, targets, warmup, repeat):
        """eager / torch.compile timings, here (trusted, no candidate ever ran in this process), with
        the same loop shape: flush, events (or perf_counter), device synchronised after each call."""
        torch = core.torch_module()
        res = {}
        timer = core.Timer(self.device, self.flush_bytes)
        sets = self.sets
        with torch.no_grad():
            if "eager" in targets:
                res["eager"] = timer.time(lambda i: self.problem.model(*sets[i % len(sets)]), warmup, repeat)
            if "compile" in targets:
                try:
                    t0 = time.perf_counter()
                    compiled = self.problem.compiled()
                    compiled(*sets[0])
                    core.synchronize(self.device)
                    res["compile_s"] = time.perf_counter() - t0
                    res["compile"] = timer.time(lambda i: compiled(*sets[i % len(sets)]), warmup, repeat)
                except Exception as exc:  # noqa: BLE001 - an unavailable compiler is reported, not fatal
                    res["compile"] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        return res
