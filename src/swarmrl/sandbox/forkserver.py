"""The persistent sandbox's server: one per pool slot, alive inside one bubblewrap sandbox.

Standard library only, and never imported by swarmrl itself: its source is appended to
harness.py's and handed to the sandboxed interpreter (`python -I -S -u -c SOURCE server
CTL_FD CPU_S OWN_UID`), so the names it uses (`harness`, `worker`, `Forked`, `PREFORKED`, `select`,
...) are harness.py's globals.

Why a server. Interpreter start-up and imports, twice per execution (harness and worker),
were most of a sandboxed execution's cost. The server pays them once; per execution it
forks a harness (H), which forks the worker (W) at once. A fork is a private copy: nothing
either child does reaches the server's memory.

What the server never does, so that it has nothing to leak and nothing to be corrupted
with: run submitted code, or read a job. It receives one byte and four descriptors per
execution from the parent (the job pipe, the result channel, stdout, stderr) on a control
socket that H and W close before anything else runs, forks, and forgets the descriptors.
W is forked before H reads the job, so W's memory holds no test of the job (as in the
two-process design, where the worker is a separate interpreter).

Between executions, after H has ended, the server restores the sandbox to its state at
start: SIGKILL to every process it may signal in its PID namespace (all the submission's
processes share its uid; the namespace's init, bwrap, is not a target), repeated until
/proc shows only init and itself; scratch (/tmp) and the mqueue mount emptied; no System
V IPC object left; and the slot uid's keyrings cleared. If any of that fails it exits, and the parent starts a fresh
sandbox. It tells the parent `clean` only after all of it; the parent sends the next job
only to a server that said so.
"""

import json as _json
import os as _os
import resource as _resource
import socket as _socket

_WIPE = ("/tmp", "/dev/mqueue")
_SYSV = ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem")


def _in_own_sandbox():
    """The cleanup kills every process it may signal and empties /tmp: only ever inside a
    bwrap PID namespace with a private tmpfs at /tmp, never on a host."""
    try:
        comm = open("/proc/1/comm").read().strip()
        mounts = [line.split() for line in open("/proc/self/mounts")]
    except OSError:
        return False
    return comm == "bwrap" and any(m[1] == "/tmp" and m[2] == "tmpfs" for m in mounts)


def _wipe(path):
    """Remove everything under `path` (the submission may have made directories read-only)."""
    for entry in _os.scandir(path):
        full = entry.path
        if entry.is_dir(follow_symlinks=False):
            _os.chmod(full, 0o700)
            _wipe(full)
            _os.rmdir(full)
        else:
            _os.unlink(full)


_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(_os.uname().machine)  # keyctl(2)'s syscall number
_LIBC = []  # ctypes' libc, once the server has loaded it
_OWN_UID = []  # non-empty: the uid is the pool slot's own (the parent ran as root)


def _clear_keys():
    """Keys added to the uid's keyrings (`add_key(..., @u)`) belong to the uid, not to a
    process or a sandbox: they would outlive the submission, and even a fresh sandbox of
    this slot. Cleared (KEYCTL_CLEAR) at start and after each execution, only when the
    uid is the slot's own (as root); else it is the user's, whose keys are not ours to clear."""
    if _KEYCTL is None or not _LIBC or not _OWN_UID:
        return True
    libc = _LIBC[0]
    persistent = libc.syscall(_KEYCTL, 22, -1, -4)  # KEYCTL_GET_PERSISTENT (linked into @u)
    if persistent > 0:
        libc.syscall(_KEYCTL, 7, persistent)
    if not all(libc.syscall(_KEYCTL, 7, ring) == 0 for ring in (-4, -5)):  # @u, @us
        return False
    # An unlinked key stays listed in /proc/keys, description and all, until the kernel's
    # key collector runs (asynchronously): wait for it, so the next submission cannot read it.
    for _ in range(200):
        if not _own_keys():
            return True
        time.sleep(0.005)  # noqa: F821
    return False


def _own_keys():
    """Keys and keyrings of our uid in /proc/keys, but the kernel's own per-uid keyrings."""
    try:
        lines = open("/proc/keys").read().splitlines()
    except OSError:
        return []
    uid, out = str(_os.getuid()), []
    for line in lines:
        parts = line.split(None, 8)
        if len(parts) == 9 and parts[5] == uid and not parts[8].startswith(("_uid.", "_uid_ses.", "_persistent.")):
            out.append(parts[8])
    return out


def _others():
    me = _os.getpid()
    return [p for p in _os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]


def _restore():
    """Kill every leftover process, empty the writable places; True if the sandbox is as new."""
    for _ in range(500):
        try:
            _os.kill(-1, signal.SIGKILL)  # noqa: F821 (harness.py's global)
        except ProcessLookupError:
            pass
        if not _others():
            break
        time.sleep(0.002)  # noqa: F821 (init reaps the killed orphans)
    else:
        return False
    try:
        for path in _WIPE:
            if _os.path.isdir(path):
                _wipe(path)
        left = [p for p in _WIPE if _os.path.isdir(p) and _os.listdir(p)]
        sysv = [f for f in _SYSV if _os.path.exists(f) and len(open(f).readlines()) > 1]
    except OSError:
        return False
    return not left and not sysv and _clear_keys()


def _close_all_but(keep):
    last = -1
    for fd in sorted(keep):
        if fd > last + 1:  # os.closerange(n, n) would close everything from n on
            _os.closerange(last + 1, fd)
        last = fd
    _os.closerange(last + 1, 1 << 16)


def _worker_child(req_r, rep_w):
    """W: its own session, stdout/stderr, two private pipes, nothing else; then the worker."""
    code = 1
    try:
        _os.setsid()
        _close_all_but({1, 2, req_r, rep_w})
        null = _os.open(_os.devnull, _os.O_RDONLY)
        _os.dup2(null, 0)
        _os.close(null)
        worker(req_r, rep_w)  # noqa: F821
    except BaseException:
        pass
    finally:
        _os._exit(code)


def _harness_child(ctl, fds, cpu_s):
    """H: the execution's descriptors in place, the CPU limit, W forked, then the harness."""
    code = 1
    try:
        ctl.close()
        job_r, res_w, out_w, err_w = fds
        for src, dst in ((job_r, 0), (out_w, 1), (err_w, 2)):
            _os.dup2(src, dst)
        _close_all_but({0, 1, 2, res_w})
        # Per execution, like prlimit's in the per-execution mode; a hard limit cannot be raised again.
        _resource.setrlimit(_resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        req_r, req_w = _os.pipe()
        rep_r, rep_w = _os.pipe()
        pid = _os.fork()
        if pid == 0:
            _worker_child(req_r, rep_w)
        _os.close(req_r)
        _os.close(rep_w)
        PREFORKED.append((Forked(pid), req_w, rep_r))  # noqa: F821
        harness(res_w)  # noqa: F821
        code = 0
    except BaseException as e:  # on stderr for people; the parent's status rules decide the verdict
        _os.write(2, ("sandbox harness: %s: %s\n" % (type(e).__name__, e)).encode())
    finally:
        _os._exit(code)


def serve(ctl_fd, cpu_s, own_uid):
    """The server's loop: one fork per job, a full restore after each, until the parent goes."""
    if not _in_own_sandbox():
        raise SystemExit("forkserver: not inside a bwrap sandbox with a private /tmp; refusing to run")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,  # noqa: F821
                signal.SIGALRM, signal.SIGQUIT, signal.SIGPIPE):  # noqa: F821
        signal.signal(sig, signal.SIG_IGN)  # noqa: F821
    import ctypes
    # Not dumpable: a process of the same uid cannot ptrace the server or open its descriptors.
    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_DUMPABLE) failed")
    _LIBC.append(ctypes.CDLL(None, use_errno=True))
    _OWN_UID.extend([True] if own_uid else [])
    if not _clear_keys():  # what a previous sandbox of this slot may have left
        raise SystemExit("forkserver: cannot clear the uid's keyrings")
    ctl = _socket.socket(fileno=ctl_fd)
    ctl.send(b'{"ready": true}')
    while True:
        try:
            msg, fds, _, _ = _socket.recv_fds(ctl, 16, 4)
        except OSError:
            return
        if not msg or len(fds) != 4:
            return  # the parent is gone (or broke the protocol): the sandbox ends with us
        pid = _os.fork()
        if pid == 0:
            _harness_child(ctl, fds, cpu_s)
        for fd in fds:
            _os.close(fd)
        _, status = _os.waitpid(pid, 0)
        clean = _restore()
        ctl.send(_json.dumps({"exit": _os.waitstatus_to_exitcode(status), "clean": clean}).encode())
        if not clean:
            return


if __name__ == "__main__" and sys.argv[1] == "server":  # noqa: F821
    select, signal, subprocess = __import__("select"), __import__("signal"), __import__("subprocess")
    serve(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1")  # noqa: F821
