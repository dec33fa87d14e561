"""The tiny launcher run_terminal starts a command through (stdlib only, run as a script).

``python -I -S launcher.py <status_fd> <sandbox_pid> <executable> <argv...>``

It exists because the sandbox is multi-threaded, where ``preexec_fn`` may deadlock. In
the freshly started launcher process it asks the kernel to SIGKILL it when the sandbox
dies (``PR_SET_PDEATHSIG``, kept across exec), exits if the sandbox is already gone,
marks the status pipe close-on-exec and execs the command in its own place (same pid).
A successful exec closes the status pipe with nothing written; a failed one writes
``"<errno>:<reason>"`` there, so the sandbox can tell "could not start" from "ran and
failed". Later isolation layers (Landlock, rlimits) belong here, before the exec.
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _fail(status_fd: int, err: int, reason: str) -> None:
    os.write(status_fd, f"{err}:{reason}".encode(errors="replace"))
    os._exit(127)


def main() -> None:
    status_fd, sandbox_pid, executable = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    argv = sys.argv[4:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        _fail(status_fd, ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != sandbox_pid:
        os._exit(125)  # the sandbox died before the kernel could be asked to kill us with it
    os.set_inheritable(status_fd, False)
    try:
        os.execv(executable, argv)
    except OSError as exc:
        _fail(status_fd, exc.errno or 0, exc.strerror or str(exc))


if __name__ == "__main__":
    main()
