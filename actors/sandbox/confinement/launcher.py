"""The launcher every run_terminal command starts through (stdlib only, run as a script).

``python -I -S -B launcher.py <spec json>``  or  ``launcher.py --probe``

It exists because the sandbox is multi-threaded, where ``preexec_fn`` may deadlock, and
because confining a command takes steps that must happen in the command's own process
tree, in order:

1. ``PR_SET_PDEATHSIG``: the launcher dies with the sandbox (checked against a race).
2. Join the per-command pids cgroup, when the sandbox made one (a fork bomb stops there).
3. rlimits: CPU seconds, address space, file size, open files, processes, no core files.
4. Contain the tree, by ``mode``:

   ``bwrap``      exec bubblewrap, which gives a PID namespace (``--unshare-pid``) whose
                  init takes every process with it, ``--die-with-parent`` and the rest.
   ``pidns``      ``unshare(CLONE_NEWPID | CLONE_NEWNS)`` (root, or inside a new user
                  namespace mapping only our own uid); in the private mount namespace the
                  protected paths (``seal``: actors/sandbox/confinement/sealed.py) are bound read-only
                  over the workspace, as bubblewrap binds them; the next fork is the
                  namespace's init, which forks
                  the command and reaps; when the command exits, init exits and the
                  kernel SIGKILLs whatever is left in the namespace, children that called
                  ``setsid`` or double-forked included. init dies with the launcher
                  (PDEATHSIG SIGKILL, plus a lifeline pipe for the fork window).
   ``subreaper``  the fallback where namespaces are refused: the launcher marks itself a
                  child subreaper, so orphaned descendants are re-parented to it rather
                  than to init, and after the command exits (or on SIGTERM, which is also
                  its PDEATHSIG and may come several times) it SIGKILLs and reaps every
                  descendant until none is left.

5. In the command's process, just before ``execve``: Landlock (when ``landlock_abi`` > 0):
   read and execute only beneath the ``readable`` and ``writable`` paths (see
   ``visible.py``), write only beneath the ``writable`` ones (but never a device node), no
   TCP bind or connect (ABI 4+), no signals to and no abstract sockets of processes
   outside the domain (ABI 6+); and, when root, the capabilities that read around path
   rules (raw I/O, file handles, mknod, modules, mounts, ptrace, BPF) leave the bounding set;
   then a seccomp filter refuses AF_UNIX sockets and io_uring (Landlock does not confine
   connecting to a socket by its path).

The status pipe (``status_fd``) tells the sandbox what happened, one JSON object a line:
``{"started": true}`` once the command's ``execve`` succeeded, or
``{"error": errno, "reason": "..."}`` when it could not start; and at the end, in the
pidns and subreaper modes, ``{"exit": n}`` or ``{"signal": n}``. In bwrap mode the status
after "started" is bubblewrap's exit code, which is the command's.

``--probe`` prints what this machine allows, as JSON: whether PID and mount namespaces can
be made, with a read-only bind in the latter (``pidns``), and the Landlock ABI version (0:
none).

Size: one file on purpose: it runs by path under ``python -I -S``, which puts neither its
folder nor site-packages on ``sys.path``, so it can import no sibling module; and its steps
read in the order the one process takes them.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import sys

# typing costs ~10 ms at the start of every command; mypy takes any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNS = 0x00020000
_SYS = {"x86_64": {"unshare": 272, "create": 444, "add": 445, "restrict": 446},
        "aarch64": {"unshare": 97, "create": 444, "add": 445, "restrict": 446}}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(name: str, *args: object) -> int:
    number = _SYS.get(os.uname().machine, {}).get(name)
    if number is None:
        raise OSError(errno.ENOSYS, f"no {name} syscall number for {os.uname().machine}")
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def _prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


# --- Landlock ------------------------------------------------------------------------------

_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_WRITE_ALL_V1 = sum(1 << bit for bit in range(4, 13))  # remove_dir .. make_sym
_FS_MAKE_CHAR, _FS_MAKE_BLOCK = 1 << 6, 1 << 11
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_RULE_PATH_BENEATH = 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    try:
        return int(_syscall("create", None, ctypes.c_size_t(0), ctypes.c_uint32(1)))
    except OSError:
        return 0


def _landlock(abi: int, readable: Iterable[str], writable: Iterable[str], *, network: bool = False) -> None:
    """Confine this process (and what it execs): reads beneath ``readable`` and
    ``writable`` only, writes beneath ``writable`` only; no device nodes made anywhere;
    no TCP unless ``network`` (an MCP server configured with ``network: true``)."""
    read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    write = _FS_WRITE_FILE | _FS_WRITE_ALL_V1
    if abi >= 2:
        write |= _FS_REFER
    if abi >= 3:
        write |= _FS_TRUNCATE
    granted_write = write & ~(_FS_MAKE_CHAR | _FS_MAKE_BLOCK)  # a device node would read the raw disk
    handled_fs = read | write | (_FS_IOCTL_DEV if abi >= 5 else 0)
    attr = _RulesetAttr(handled_fs, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 and not network else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _syscall("create", ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        rules = [(path, read) for path in readable]
        rules += [(path, read | granted_write | (_FS_IOCTL_DEV if abi >= 5 else 0)) for path in writable]
        for device in ("/dev/null", "/dev/tty"):
            rules.append((device, _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)))
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # a path gone since the sandbox listed it: nothing there to grant
            try:
                if not os.path.isdir(path):
                    access &= _FS_READ_FILE | _FS_WRITE_FILE | _FS_EXECUTE | _FS_TRUNCATE | _FS_IOCTL_DEV
                beneath = _PathBeneath(access, fd)
                _syscall("add", ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(beneath),
                         ctypes.c_uint32(0))
            finally:
                os.close(fd)
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        _syscall("restrict", ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


# Capabilities that would let root read around Landlock's path rules: raw I/O (/proc/kcore,
# /dev/mem), file handles (open_by_handle_at), device nodes, modules, mounts, ptrace, BPF.
_DANGEROUS_CAPS = (2, 16, 17, 19, 21, 27, 38, 39)  # DAC_READ_SEARCH SYS_MODULE SYS_RAWIO SYS_PTRACE
#                                                    SYS_ADMIN MKNOD PERFMON BPF
_PR_CAPBSET_DROP = 24


def _drop_capabilities() -> None:
    """Root keeps its other capabilities; these leave the bounding set, so the exec'd
    command never has them. A kernel that does not know one refuses it: nothing to drop."""
    if os.geteuid() != 0:
        return
    for cap in _DANGEROUS_CAPS:
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)


# --- seccomp: no AF_UNIX socket below Landlock ----------------------------------------------
# Landlock's path rules do not cover connect(2) to a socket by its path: a command could
# reach acode's own broker, an ssh-agent, the D-Bus session bus (and its keyring) or
# docker.sock, and read through them what it cannot open. So under Landlock a command may
# not create an AF_UNIX socket (socketpair(2) still works), nor use io_uring, which makes
# sockets without socket(2); other architectures' and x32 system calls are refused.

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR = {"x86_64": {"socket": 41, "io_uring_setup": 425}, "aarch64": {"socket": 198, "io_uring_setup": 425}}
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_EACCES = 0x7FFF0000, 0x00050000 | errno.EACCES
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _deny_unix_sockets() -> None:
    machine = os.uname().machine
    if machine not in _AUDIT_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine}")
    nr = _NR[machine]
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # arch
        (_BPF_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        (_BPF_RET_K, 0, 0, _RET_EACCES),  # another architecture's system call
        (_BPF_LD_W_ABS, 0, 0, 0),  # nr
        (_BPF_JGE_K, 5, 0, 0x40000000),  # x32
        (_BPF_JEQ_K, 4, 0, nr["io_uring_setup"]),
        (_BPF_JEQ_K, 0, 2, nr["socket"]),
        (_BPF_LD_W_ABS, 0, 0, 16),  # args[0], low half: the family
        (_BPF_JEQ_K, 1, 0, 1),  # AF_UNIX
        (_BPF_RET_K, 0, 0, _RET_ALLOW),
        (_BPF_RET_K, 0, 0, _RET_EACCES),
    ]
    filters = (_SockFilter * len(program))(*(_SockFilter(*op) for op in program))
    fprog = _SockFprog(len(program), filters)
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter refused: {os.strerror(err)}")


# --- the steps -----------------------------------------------------------------------------

def _say(status_fd: int, **message: object) -> None:
    try:
        os.write(status_fd, (json.dumps(message) + "\n").encode())
    except OSError:
        pass  # the sandbox is gone; PDEATHSIG is on its way


def _rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        which = getattr(resource, f"RLIMIT_{name.upper()}")
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def _exec(spec: dict[str, Any], exec_w: int) -> None:
    """In the command's process: Landlock, then execve. Reports a failure on ``exec_w``."""
    try:
        os.set_blocking(exec_w, True)
        if spec.get("landlock_abi", 0) > 0:
            _drop_capabilities()
            _landlock(spec["landlock_abi"], spec["readable"], spec["writable"], network=spec.get("network", False))
            _deny_unix_sockets()
        os.execve(spec["executable"], spec["argv"], spec["env"])
    except OSError as exc:
        os.write(exec_w, json.dumps({"error": exc.errno or 0, "reason": exc.strerror or str(exc)}).encode())
    except BaseException as exc:  # noqa: BLE001 - whatever it is, the sandbox must hear it
        os.write(exec_w, json.dumps({"error": 0, "reason": repr(exc)}).encode())
    os._exit(127)


def _fork_command(
    spec: dict[str, Any], status_fd: int, *, deathsig: int, unblock: Iterable[signal.Signals] = frozenset()
) -> int | None:
    """Fork the command; wait for its exec. Returns its pid, or None when it did not start."""
    exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(exec_r)
        os.close(status_fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, unblock)  # the mask survives execve
        _prctl(_PR_SET_PDEATHSIG, deathsig)
        if os.getppid() != parent:
            os._exit(125)  # the parent died before PDEATHSIG was armed
        _exec(spec, exec_w)
    os.close(exec_w)
    with os.fdopen(exec_r, "rb") as pipe:
        failure = pipe.read()  # EOF at execve
    if failure:
        _say(status_fd, **json.loads(failure))
        os.waitpid(pid, 0)
        return None
    _say(status_fd, started=True)
    return pid


def _status(wait_status: int) -> dict[str, int]:
    if os.WIFSIGNALED(wait_status):
        return {"signal": os.WTERMSIG(wait_status)}
    return {"exit": os.waitstatus_to_exitcode(wait_status)}


def _children() -> list[int]:
    """Pids whose parent is this process (orphans re-parented to the subreaper included)."""
    me, found = os.getpid(), list[int]()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.append(int(name))
    return found


def _sweep() -> None:
    """SIGKILL and reap every descendant: killed parents hand their children to us."""
    for _ in range(10_000):
        children = _children()
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _run_subreaper(spec: dict[str, Any], status_fd: int) -> None:
    """Fork the command, wait for it, then sweep; SIGTERM kills the command at any point.

    SIGTERM may come more than once: PDEATHSIG is sent each time the launcher's parent
    *thread* exits, and when the multi-threaded sandbox is killed its threads exit one by
    one, the launcher being handed to the next live thread (a signal each time) and at last
    to init or a subreaper (one more). A handler that raised on a late one (ESRCH: the
    command already reaped) would unwind through the sweep, leaving the re-parented orphans
    alive; one that killed a reaped pid could hit an unrelated process that reused it. So
    the command is waited for without reaping (its zombie holds the pid), forgotten, and
    only then reaped; the handler never raises; and the sweep runs whatever happens.
    """
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    command: list[int] = []

    def stop(*_: object) -> None:  # the sandbox's deadline, or its death (PDEATHSIG): end the command now
        for pid in command:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # a handler must not raise into whatever it interrupted (the sweep, say)

    signal.signal(signal.SIGTERM, stop)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = _fork_command(spec, status_fd, deathsig=signal.SIGKILL, unblock={signal.SIGTERM})
    if pid is None:
        return
    command.append(pid)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # PEP 475: retried after the handler runs
        command.clear()  # still a zombie, so its pid was not reused; late SIGTERMs find nothing to kill
        _, wait_status = os.waitpid(pid, 0)
    finally:
        _sweep()
    _say(status_fd, **_status(wait_status))


def _map_ids() -> None:
    uid, gid = os.getuid(), os.getgid()
    _syscall("unshare", ctypes.c_int(_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS))
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def _unshare_pid() -> None:
    """New PID and mount namespaces (inside a new user namespace unless root)."""
    if os.geteuid() == 0:
        _syscall("unshare", ctypes.c_int(_CLONE_NEWPID | _CLONE_NEWNS))
    else:
        _map_ids()


# --- the protected paths, read-only in the command's mount namespace ----------------------

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
# statvfs f_flag bits -> the mount flags a remount in a user namespace must keep (they are locked)
_LOCKED = ((1, 0), (2, _MS_NOSUID), (4, _MS_NODEV), (8, _MS_NOEXEC), (1024, _MS_NOATIME),
           (2048, _MS_NODIRATIME), (4096, _MS_RELATIME))
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]


def _mount(source: str | None, target: str, flags: int) -> None:
    if _libc.mount(source.encode() if source else None, target.encode(), None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount of {target} failed: {os.strerror(err)}")


def _seal(binds: Iterable[list[Any]]) -> None:
    """In this (new) mount namespace, nothing propagating back: bind each ``[source, target,
    writable]`` (see actors/sandbox/confinement/sealed.py), read-only unless ``writable``; a missing
    target directory is made first (the sandbox removes it again when it stays empty)."""
    _mount(None, "/", _MS_REC | _MS_PRIVATE)
    for source, target, writable in binds:
        if not os.path.lexists(target):
            try:
                os.mkdir(target, 0o755)
            except FileExistsError:  # a command started at the same time made it first
                pass
        _mount(source, target, _MS_BIND)
        if not writable:
            flags = os.statvfs(target).f_flag
            kept = sum(mount for bit, mount in _LOCKED if flags & bit)
            _mount(None, target, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | kept)


def _run_pidns(spec: dict[str, Any], status_fd: int) -> None:
    _unshare_pid()
    _seal(spec.get("seal", []))
    life_r, life_w = os.pipe2(os.O_CLOEXEC)
    init = os.fork()
    if init == 0:  # PID 1 of the new namespace
        os.close(life_w)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.read(life_r, 1) != b"g":  # the launcher died before PDEATHSIG was armed
            os._exit(125)
        command = _fork_command(spec, status_fd, deathsig=signal.SIGKILL)
        if command is None:
            os._exit(127)
        while True:  # reap everything; the command's exit ends the namespace
            pid, wait_status = os.wait()
            if pid == command:
                _say(status_fd, **_status(wait_status))
                os._exit(0)
    os.close(life_r)
    os.write(life_w, b"g")
    os.close(status_fd)  # init speaks for the command from here on
    while True:
        try:
            os.waitpid(init, 0)
            return
        except InterruptedError:
            continue


def probe() -> dict[str, object]:
    """What this machine allows: a PID namespace, and which Landlock ABI."""
    pidns = False
    child = os.fork()
    if child == 0:
        try:
            _unshare_pid()
            here = os.path.dirname(os.path.abspath(__file__))
            _seal([[here, here, False]])  # a read-only bind (the protected paths' kind) works here
            grandchild = os.fork()  # the namespace exists once its init runs
            if grandchild == 0:
                os._exit(0)
            os.waitpid(grandchild, 0)
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, wait_status = os.waitpid(child, 0)
    pidns = os.waitstatus_to_exitcode(wait_status) == 0
    return {"pidns": pidns, "landlock_abi": landlock_abi()}


def main() -> None:
    if sys.argv[1:] == ["--probe"]:
        print(json.dumps(probe()))
        return
    spec = json.loads(sys.argv[1])
    # "stderr": a status line goes to a private copy of stderr, which the command keeps
    # (an MCP server's launcher, started by the SDK, which passes no other descriptor)
    status_fd = os.dup(2) if spec["status_fd"] == "stderr" else spec["status_fd"]
    os.set_inheritable(status_fd, False)
    mode = spec["mode"]
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM if mode == "subreaper" else signal.SIGKILL)
        if os.getppid() != spec["sandbox_pid"]:
            os._exit(125)  # the sandbox died before the kernel could be asked to kill us with it
        if spec.get("cgroup"):
            with open(os.path.join(spec["cgroup"], "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))
        _rlimits(spec.get("rlimits", {}))
        if mode == "bwrap":
            _say(status_fd, started=True)
            os.execve(spec["bwrap"][0], spec["bwrap"] + spec["argv"], spec["env"])
        elif mode == "pidns":
            _run_pidns(spec, status_fd)
        else:
            _run_subreaper(spec, status_fd)
    except OSError as exc:
        _say(status_fd, error=exc.errno or 0, reason=exc.strerror or str(exc))
        os._exit(127)
    os._exit(0)


if __name__ == "__main__":
    main()
