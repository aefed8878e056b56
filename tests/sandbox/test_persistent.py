"""Nothing of one submission reaches the next one on the same worker, in either mode; a
persistent sandbox that a submission breaks is replaced, and one that cannot start is an
infra_error."""

from __future__ import annotations

import os
import textwrap

import pytest

from sandbox_helpers import IS_ROOT, LIMITS, leftovers, leftovers_after, make_checked_pool
from swarmrl.sandbox import server as server_mod
from swarmrl.sandbox.server import ForkServer

PLANT = textwrap.dedent("""
    import builtins, ctypes, json, os, sys, time

    def f():
        open("/tmp/leak-file", "w").write("x")
        os.makedirs("/tmp/leak-dir/sub")
        open("/tmp/leak-dir/sub/x", "w").write("x")
        os.chmod("/tmp/leak-dir/sub", 0o500)  # read-only directories: harder to empty
        os.chmod("/tmp/leak-dir", 0o500)
        os.environ["LEAK"] = "1"
        json.LEAK = builtins.LEAK = sys.modules["__main__"].LEAK = 1
        builtins.sum = lambda *a: 42
        global KEEP
        KEEP = open("/tmp/leak-fd", "w")
        os.dup2(KEEP.fileno(), 40)
        try:
            open("/dev/mqueue/leakq", "w")  # a POSIX message queue, where that mount exists
        except OSError:
            pass
        if os.fork() == 0:  # a daemon: own session, orphaned, renamed, still writing files
            os.setsid()
            if os.fork() == 0:
                ctypes.CDLL(None).prctl(15, b"swarmleak", 0, 0, 0)  # PR_SET_NAME
                while True:
                    open("/tmp/late-file", "w").write("x")
                    time.sleep(0.01)
            os._exit(0)
        if os.fork() == 0:
            os.setsid()
            os.execv("/usr/bin/sleep", ["sleep", "1000"])
        if SYSV:
            ctypes.CDLL(None).shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        time.sleep(0.1)
        return "planted"
    """)

LOOK = textwrap.dedent("""
    import builtins, json, os, sys

    def f():
        found = []
        for root, dirs, files in os.walk("/tmp"):
            found += [os.path.join(root, x) for x in dirs + files]
        if os.path.isdir("/dev/mqueue"):
            found += os.listdir("/dev/mqueue")
        if "LEAK" in os.environ:
            found.append("environment")
        if any(hasattr(m, "LEAK") for m in (json, builtins, sys.modules["__main__"])):
            found.append("module attribute")
        if sum([1, 2]) != 3:
            found.append("builtins.sum")
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                comm = open("/proc/%s/comm" % pid).read().strip()
            except OSError:
                continue
            if comm in ("swarmleak", "sleep"):
                found.append("process " + comm)
        for fd in os.listdir("/proc/self/fd"):
            try:
                if "leak" in os.readlink("/proc/self/fd/" + fd):
                    found.append("fd " + fd)
            except OSError:
                pass
        try:
            os.fstat(40)
            found.append("fd 40")
        except OSError:
            pass
        if open("/proc/sysvipc/shm").readlines()[1:]:
            found.append("shm segment")
        return found
    """)


def _job(src: str, test: str, sysv: bool = False) -> dict:
    return {"solution": f"SYSV = {sysv}\n" + src, "entry_point": "f", "tests": [{"kind": "assert", "code": test}]}


@pytest.fixture(scope="module", params=[True, False], ids=["persistent", "per_execution"])
def one_slot(request):
    """One worker, so the second submission runs on the same slot (and server) as the first."""
    p = make_checked_pool(LIMITS, workers=1, persistent=request.param)
    yield p
    p.close()


def _server_pid(pool):
    server = next(iter(pool._servers.values()), None)
    return server.proc.pid if server is not None and server.proc is not None else None


@pytest.mark.parametrize("sysv", [False, True], ids=["restored", "replaced"])
def test_nothing_of_one_submission_survives_into_the_next(one_slot, sysv):
    before = _server_pid(one_slot)
    planted = one_slot.run(_job(PLANT, "assert candidate() == 'planted'", sysv))
    assert planted.status == "pass", planted
    # Seen from the host, the daemons are gone: at once where the persistent server restores
    # its sandbox in place (it restores before it answers). A sandbox killed whole (the
    # per-execution mode; a persistent one replaced after a System V object) takes its PID
    # namespace down asynchronously, after the kill returns.
    at_once = one_slot.persistent and not sysv
    assert (leftovers(one_slot) if at_once else leftovers_after(one_slot)) == []
    looked = one_slot.run(_job(LOOK, "r = candidate()\nassert r == [], r"))
    assert looked.status == "pass", looked.detail
    if one_slot.persistent:
        # Without a System V object the sandbox is restored in place; with one it is replaced.
        assert (_server_pid(one_slot) == before) != sysv


@pytest.mark.parametrize("attack, status", [
    ("os.kill(-1, signal.SIGKILL)", "error"),  # the server, the harness, everything it may signal
    ("os.kill(-1, signal.SIGSTOP)", "timeout"),  # frozen: the wall limit kills the sandbox
])
def test_a_broken_server_is_replaced_for_the_next_submission(one_slot, attack, status):
    src = f"import os, signal\n{attack}\ndef f():\n    return 'escaped'\n"
    got = one_slot.run(_job(src, "assert candidate() == 'escaped'"))
    assert got.status == status and got.passed in ([], [False]), got
    assert leftovers_after(one_slot) == []
    ok = one_slot.run(_job("def f():\n    return 1\n", "assert candidate() == 1"))
    assert ok.status == "pass", ok


def test_a_server_that_cannot_start_is_infra_error(monkeypatch):
    real = server_mod.server_argv
    monkeypatch.setattr(server_mod, "server_argv", lambda *a, **k: [real(*a, **k)[0], "--no-such-flag"])
    got = ForkServer(LIMITS, 200_000 + 62).run(_job("def f():\n    return 1\n", "assert candidate() == 1"))
    assert got.status == "infra_error" and "no-such-flag" in got.detail


ADD_KEY = textwrap.dedent("""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.syscall(248, b"user", b"swarmleakkey", b"v", 1, -4)  # add_key(.., @u)
    err = ctypes.get_errno()
    def f():
        return r > 0 or err
    """)

SEE_KEY = "def f():\n    return 'swarmleakkey' in open('/proc/keys').read()\n"


@pytest.mark.skipif(not (IS_ROOT and os.uname().machine == "x86_64"), reason="slot uids and add_key's x86_64 number")
@pytest.mark.parametrize("then", ["", "import os, signal\nos.kill(-1, signal.SIGKILL)\n"], ids=["restored", "killed"])
def test_keys_added_to_the_uid_keyring_are_cleared(then):
    """A key belongs to the uid, not to the sandbox: only the persistent mode clears it, after
    each execution and when a slot's sandbox starts (the per-execution mode does not)."""
    p = make_checked_pool(LIMITS, workers=1, persistent=True)
    try:
        planted = p.run(_job(ADD_KEY + then, "r = candidate()\nassert r is True, r"))
        assert planted.status == ("pass" if not then else "error"), planted
        seen = p.run(_job(SEE_KEY, "assert not candidate()"))
        assert seen.status == "pass", seen
    finally:
        p.close()
