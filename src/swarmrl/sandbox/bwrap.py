"""The sandbox command line: bubblewrap namespaces, rlimits, and a non-root host uid.

Pure functions (the argv is checked in tests without running anything) plus a probe that
says exactly what is missing when the sandbox cannot start.

Isolation, from the outside in:
* `bwrap`: new PID, network, IPC, UTS (and cgroup, if possible) namespaces; a root made
  of read-only binds of `/usr` (and the Python install), fresh `/proc` and `/dev`, and a
  size-capped tmpfs at `/tmp` (the only writable place, and the working directory); no
  `/etc`, `/home`, `/root` contents, `/work` or checkpoints; the environment cleared;
  `--die-with-parent --new-session` (no terminal injection, nothing outlives the parent).
* `prlimit`: CPU time, address space, process count, file size, no core dumps; inherited
  by everything inside.
* the uid. When we are root (CI, containers) bwrap runs without a user namespace and
  `setpriv` drops to a real, unprivileged host uid, one per pool slot, with no
  capabilities and `no_new_privs`. Why not `--unshare-user --uid 65534`: run by root, that
  maps the sandbox uid to host uid 0, and the kernel exempts uid 0 from RLIMIT_NPROC, so
  a fork bomb would be unbounded (measured). Run by a normal user, bwrap makes a user
  namespace instead (`--unshare-user --disable-userns`) and the sandbox keeps that user's uid.

Known limits: memory is capped per process (RLIMIT_AS), so one execution can hold up to
memory_mb x max_processes; a cgroup memory limit would cap the total but needs a writable
cgroup tree (not available in containers like ours). There is no seccomp filter, so the
code can still make kernel calls an unprivileged user may make (e.g. create a user namespace).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from swarmrl.sandbox.limits import Limits

SCRATCH = "/tmp"
BWRAP_HINT = "install it with `apt-get install -y bubblewrap` (scripts/setup.sh does this when run as root)"


def python_paths() -> tuple[str, str]:
    """(interpreter, installation prefix) of the Python that runs inside: the base
    interpreter, not the venv (the harness needs only the standard library)."""
    exe = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if not os.path.exists(exe):
        exe = os.path.realpath(sys.executable)
    return exe, sys.base_prefix


def prlimit_args(limits: Limits, prlimit: str = "/usr/bin/prlimit") -> list[str]:
    mb = 1 << 20
    # Soft CPU limit first (SIGXCPU), hard one second later (SIGKILL) for code that ignores it.
    return [prlimit, f"--cpu={limits.cpu_time_s}:{limits.cpu_time_s + 1}",
            f"--as={limits.memory_mb * mb}", f"--nproc={limits.max_processes}",
            f"--fsize={limits.max_file_mb * mb}", "--core=0", "--"]


def _root_binds(prefix: str) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        p = Path(top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(top), top]
        elif p.is_dir():
            args += ["--ro-bind", top, top]
    if not prefix.startswith("/usr/"):
        # bwrap would create the missing parents (e.g. /root) with the host's 0700 mode,
        # which the sandbox uid cannot cross: make them 0755 (they hold only this bind).
        parents = [str(p) for p in reversed(Path(prefix).parents) if str(p) != "/"]
        for parent in parents:
            args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", prefix, prefix]
    return args


def bwrap_argv(limits: Limits, uid: int, as_root: bool, python: str, prefix: str,
               bwrap: str = "/usr/bin/bwrap") -> list[str]:
    """Everything before the interpreter's own arguments."""
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", *_root_binds(prefix),
            "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(limits.max_file_mb << 20), "--tmpfs", SCRATCH,
            "--chdir", SCRATCH, "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
            "--setenv", "HOME", SCRATCH, "--setenv", "LANG", "C.UTF-8",
            "--die-with-parent", "--new-session"]
    if as_root:
        args += ["--cap-add", "CAP_SETUID,CAP_SETGID,CAP_SETPCAP", *prlimit_args(limits),
                 "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        args[1:1] = ["--unshare-user", "--disable-userns"]
        args += prlimit_args(limits)
    return args + [python, "-I", "-S"]


def server_argv(limits: Limits, uid: int, as_root: bool, python: str, prefix: str) -> list[str]:
    """The persistent mode's sandbox (forkserver.py): as `bwrap_argv`, plus an mqueue mount
    (so the server can see and remove the message queues a submission leaves), and no CPU
    limit on the long-lived server itself: each execution's harness sets its own."""
    argv = bwrap_argv(limits, uid, as_root, python, prefix)
    i = argv.index("--dev") + 2
    argv[i:i] = ["--mqueue", "/dev/mqueue"]
    return ["--cpu=unlimited" if a.startswith("--cpu=") else a for a in argv]


def local_argv(limits: Limits, python: str) -> list[str]:
    """`unsafe_local`: the same harness and rlimits, no namespaces (trusted code only)."""
    pre = prlimit_args(limits, shutil.which("prlimit") or "prlimit")
    return pre + [python, "-I", "-S"]


def missing_tools(mode: str) -> str | None:
    """What is missing to start the sandbox in `mode`, as an actionable message; None if nothing."""
    need = [("prlimit", "util-linux")]
    if mode == "bwrap":
        need = [("bwrap", "bubblewrap")] + need
        if os.geteuid() == 0:
            need.append(("setpriv", "util-linux"))
    for tool, package in need:
        path = f"/usr/bin/{tool}" if mode == "bwrap" else shutil.which(tool)
        if not path or not os.access(path, os.X_OK):
            hint = BWRAP_HINT if tool == "bwrap" else f"install the Debian package `{package}`"
            where = " in /usr/bin (the sandbox sees only /usr)" if mode == "bwrap" else ""
            return f"sandbox: `{tool}` not found{where}; {hint}"
    return None
