"""The sandbox command line, checked as data, and the actionable message when a tool is missing."""

from __future__ import annotations

import pytest

from swarmrl.sandbox import Limits, SandboxPool, SandboxUnavailable
from swarmrl.sandbox import bwrap as bw

LIM = Limits(cpu_time_s=3, wall_time_s=5.0, memory_mb=256, max_processes=12, max_file_mb=2)


def test_prlimit_values_by_hand():
    args = bw.prlimit_args(LIM, "/usr/bin/prlimit")
    assert args == ["/usr/bin/prlimit", "--cpu=3:4", "--as=268435456", "--nproc=12",
                    "--fsize=2097152", "--core=0", "--"]  # 256 * 2**20, 2 * 2**20


def test_root_argv_drops_to_slot_uid_without_privileges():
    argv = bw.bwrap_argv(LIM, 200_123, True, "/opt/py/bin/python3.11", "/opt/py")
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--tmpfs") - 1] == str(2 << 20)  # scratch size = max_file_mb
    assert argv[argv.index("--tmpfs") + 1] == "/tmp"
    i = argv.index("/usr/bin/setpriv")
    assert argv[i + 1:i + 7] == ["--reuid=200123", "--regid=200123", "--clear-groups", "--inh-caps=-all",
                                 "--bounding-set=-all", "--no-new-privs"]
    assert argv[-3:] == ["/opt/py/bin/python3.11", "-I", "-S"]
    # Only read-only binds: nothing of the host is writable inside.
    assert "--bind" not in argv and "--dev-bind" not in argv
    assert ["--ro-bind", "/opt/py", "/opt/py"] == argv[argv.index("/opt/py") - 1:argv.index("/opt/py") + 2]
    assert "--unshare-user" not in argv  # as root a user namespace would map the sandbox to host uid 0


def test_non_root_argv_uses_a_user_namespace():
    argv = bw.bwrap_argv(LIM, 0, False, "/usr/bin/python3", "/usr")
    assert "--unshare-user" in argv and "--disable-userns" in argv
    assert "/usr/bin/setpriv" not in argv and "--cap-add" not in argv


def test_missing_bwrap_names_the_package(monkeypatch):
    monkeypatch.setattr(bw.os, "access", lambda path, mode: "bwrap" not in path)
    msg = bw.missing_tools("bwrap")
    assert "bwrap" in msg and "apt-get install -y bubblewrap" in msg
    pool = SandboxPool(LIM, "bwrap", 1)
    try:
        with pytest.raises(SandboxUnavailable, match="bubblewrap"):
            pool.check()
    finally:
        pool.close()


def test_server_argv_is_the_sandbox_plus_mqueue_without_a_cpu_limit():
    """The persistent server's sandbox: the same isolation; no CPU limit on the long-lived server
    (each execution's harness sets its own), and an mqueue mount it can empty."""
    base = bw.bwrap_argv(LIM, 200_123, True, "/opt/py/bin/python3.11", "/opt/py")
    argv = bw.server_argv(LIM, 200_123, True, "/opt/py/bin/python3.11", "/opt/py")
    assert argv[argv.index("--mqueue") + 1] == "/dev/mqueue" and "--cpu=unlimited" in argv
    without = [a for a in argv if a not in ("--mqueue", "/dev/mqueue", "--cpu=unlimited")]
    assert without == [a for a in base if a != "--cpu=3:4"]
