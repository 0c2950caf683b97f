"""What a process does before candidate code runs in it, when it may run as root without a sandbox
(stdlib only: the standbys import it before torch).

drop_all(): no capability for this process and every process it starts, and none to be regained through
a set-uid program (no_new_privs). A root candidate that kept its capabilities read kagent-actors'
memory, the API key in it, and the judge's, through /proc/PID/mem (tests/e2e_containment,
AnUnsandboxedCandidateCannotReadItsAncestorsMemory): Linux lets a process read another's memory only
if its capabilities include the other's, or with CAP_SYS_PTRACE. A root process without capabilities
still owns root's files: only the sandbox keeps it from them. In the sandbox bubblewrap has dropped
them already. Not for a process that starts a sandbox (a judge): bubblewrap needs its capabilities as
root. Best-effort: a failure leaves what was."""
import contextlib
import ctypes

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_all():
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # as runner.cpp's drop_every_capability
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # needs CAP_SETPCAP: before the capset below
        libc.capset(ctypes.byref(_Header(LINUX_CAPABILITY_VERSION_3, 0)), (_Data * 2)())
