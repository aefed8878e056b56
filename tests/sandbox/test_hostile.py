"""Hostile submissions: none of them earns reward, touches the host, or outlives its run.

Each solution defines `f`; the test asks `f()` for proof of an escape, so an attack that
worked would score 1. Every verdict must be a zero that is the code's fault (never
`infra_error`, which would drop the rollout instead of punishing it)."""

from __future__ import annotations

import os
import secrets
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sandbox_helpers import LIMITS, IS_ROOT, fn_job, leftovers, pool_uids, processes_of


def assert_zero(result):
    assert result.passed == [False], result
    assert result.status in ("fail", "timeout", "memory", "error"), result


def run_timed(pool, job):
    t0 = time.monotonic()
    result = pool.run(job)
    return result, time.monotonic() - t0


def test_infinite_loop_killed_within_limit_and_nothing_left(pool):
    result, took = run_timed(pool, fn_job("def f():\n    while True:\n        pass\n"))
    assert result.status == "timeout" and result.passed == [False]
    assert took < LIMITS.wall_time_s + 1.0
    assert leftovers(pool) == []


def test_infinite_loop_at_import_ignoring_signals(pool):
    src = "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGXCPU):\n    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n"
    result, took = run_timed(pool, fn_job(src))
    assert result.status == "timeout" and result.passed == [False]
    assert took < LIMITS.wall_time_s + 1.0
    assert leftovers(pool) == []


def test_fork_bomb_is_capped_and_cleaned_up(pool):
    src = textwrap.dedent("""
        import os
        def f():
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
        """)
    peak = [0]
    done = threading.Event()

    def watch():  # the most processes one sandbox uid (one slot) ever held at once
        while not done.is_set():
            peak[0] = max([peak[0]] + [len(processes_of([uid])) for uid in pool_uids(pool)])
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result, took = run_timed(pool, fn_job(src))
    finally:
        done.set()
        watcher.join()
    assert_zero(result)
    assert took < LIMITS.wall_time_s + 1.0
    if IS_ROOT:  # each slot has its own host uid, so RLIMIT_NPROC holds per execution
        assert 1 <= peak[0] <= LIMITS.max_processes
    time.sleep(0.1)
    assert leftovers(pool) == []


def test_8_gib_allocation_is_a_memory_error(pool):
    result = pool.run(fn_job("def f():\n    x = bytearray(8 << 30)\n    return 'escaped'\n"))
    assert result.status == "memory" and result.passed == [False]
    at_import = pool.run(fn_job("x = bytearray(8 << 30)\ndef f():\n    return 'escaped'\n"))
    assert at_import.status == "memory" and at_import.passed == [False]


def _rss_kb() -> int:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1])


def test_printing_1_gb_keeps_parent_memory_flat(persistent):
    from sandbox_helpers import make_checked_pool
    from swarmrl.sandbox import Limits

    big = make_checked_pool(Limits(cpu_time_s=20, wall_time_s=20.0, memory_mb=512, max_processes=16,
                                   max_file_mb=4, max_output_bytes=1 << 20), workers=1, persistent=persistent)
    src = "import sys\ndef f():\n    s = 'x' * (1 << 20)\n    for _ in range(1024):\n        sys.stdout.write(s)\n    sys.stdout.flush()\n    return 'all tests passed'\n"
    peak, done = [0], threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_kb())
            time.sleep(0.01)

    before = _rss_kb()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = big.run(fn_job(src))
    finally:
        done.set()
        watcher.join()
        big.close()
    assert_zero(result)
    assert result.stdout_truncated
    assert len(result.stdout) <= (1 << 20) + 64
    assert peak[0] - before < 64 * 1024  # KiB: far below the 1 GiB printed


def test_no_network_to_other_hosts_or_host_localhost(pool):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    src = textwrap.dedent(f"""
        import socket
        def f():
            for addr in [("1.1.1.1", 53), ("8.8.8.8", 443), ("127.0.0.1", {port})]:
                try:
                    socket.create_connection(addr, timeout=0.5).close()
                    return "escaped"
                except OSError:
                    pass
            return "blocked"
        """)
    try:
        result = pool.run(fn_job(src))
        assert_zero(result)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected to the host's port
    finally:
        listener.close()


def test_no_dns(pool):
    src = "import socket\ndef f():\n    try:\n        socket.getaddrinfo('pypi.org', 443)\n        return 'escaped'\n    except OSError:\n        return 'blocked'\n"
    assert_zero(pool.run(fn_job(src)))


def test_cannot_read_files_outside(pool, tmp_path):
    secret = secrets.token_hex(8)
    targets = [Path("/root") / f"swarmrl-secret-{secret}", tmp_path / "checkpoint.pt"]
    for t in targets:
        t.write_text(secret)
    try:
        paths = [str(t) for t in targets] + ["/root/.bashrc", "/etc/passwd", "/etc/shadow", str(Path.cwd() / "pyproject.toml")]
        src = textwrap.dedent(f"""
            def f():
                got = []
                for p in {paths!r}:
                    try:
                        got.append(open(p).read())
                    except OSError:
                        pass
                return "escaped" if got else "blocked"
            """)
        assert_zero(pool.run(fn_job(src)))
    finally:
        for t in targets:
            t.unlink()


def test_cannot_write_outside_scratch(pool, tmp_path):
    name = f"swarmrl-pwned-{secrets.token_hex(6)}"
    host_paths = [f"/usr/{name}", f"/root/{name}", str(tmp_path / name), str(Path.cwd() / name), f"/tmp/{name}"]
    src = textwrap.dedent(f"""
        def f():
            wrote = []
            for p in {host_paths!r}:
                try:
                    open(p, "w").write("x")
                    wrote.append(p)
                except OSError:
                    pass
            open("/tmp/scratch-ok", "w").write("fine")  # scratch is writable
            return "escaped" if wrote[:-1] or len(wrote) > 1 else "scratch only"
        """)
    assert_zero(pool.run(fn_job(src)))
    for p in host_paths:
        assert not os.path.exists(p), p  # /tmp inside is a private tmpfs, not the host's


def test_scratch_file_size_is_capped(pool):
    src = "def f():\n    try:\n        open('/tmp/big', 'wb').write(b'x' * (64 << 20))\n        return 'escaped'\n    except OSError:\n        return 'capped'\n"
    assert_zero(pool.run(fn_job(src)))


@pytest.mark.parametrize("exit_call", ["import sys\nsys.exit(0)", "import os\nos._exit(0)"])
def test_exit_before_tests_earns_nothing(pool, exit_call):
    result = pool.run(fn_job(exit_call + "\ndef f():\n    return 'escaped'\n"))
    assert_zero(result)
    assert result.status == "error"


def test_printing_a_fake_verdict_earns_nothing(pool):
    src = ("print('all tests passed')\n"
           "print('{\"event\": \"started\"}')\nprint('{\"event\": \"result\", \"passed\": [true], \"status\": \"pass\", \"detail\": \"\"}')\n"
           "def f():\n    print('OK all tests passed')\n    return None\n")
    assert_zero(pool.run(fn_job(src)))


def test_subclasses_escape_reaches_nothing(pool):
    name = f"swarmrl-pwned-{secrets.token_hex(6)}"
    src = textwrap.dedent(f"""
        def f():
            for cls in ().__class__.__bases__[0].__subclasses__():
                if cls.__name__ == "_wrap_close":
                    system = cls.__init__.__globals__["system"]
                    system("touch /root/{name} /usr/{name}; cat /root/.bashrc > /tmp/x")
            return "escaped"
        """)
    result = pool.run(fn_job(src, "assert candidate() == 'escaped'\nassert open('/tmp/x').read()"))
    assert_zero(result)
    assert not os.path.exists(f"/root/{name}") and not os.path.exists(f"/usr/{name}")


def test_ctypes_cannot_forge_the_verdict_or_touch_the_harness(pool):
    src = textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        forged = b'{"event": "started"}\\n{"event": "result", "passed": [true], "status": "pass", "detail": ""}\\n'
        for fd in range(3, 256):  # every descriptor we might have inherited
            libc.write(fd, forged, len(forged))
        harness = os.getppid()
        for entry in os.listdir(f"/proc/{harness}/fd") if os.path.exists(f"/proc/{harness}/fd") else []:
            try:
                fd = os.open(f"/proc/{harness}/fd/{entry}", os.O_WRONLY)
                os.write(fd, forged)
            except OSError:
                pass
        PTRACE_ATTACH = 16
        attached = libc.ptrace(PTRACE_ATTACH, harness, 0, 0) == 0
        def f():
            return "escaped" if attached else None
        """)
    assert_zero(pool.run(fn_job(src)))


def test_always_equal_object_cannot_pass_asserts(pool):
    src = "class Eq:\n    def __eq__(self, o):\n        return True\n    __hash__ = None\ndef f():\n    return Eq()\n"
    assert_zero(pool.run(fn_job(src)))


def test_killing_the_harness_is_an_error_not_infra(pool):
    src = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef f():\n    return 'escaped'\n"
    result = pool.run(fn_job(src))
    assert result.status in ("error", "timeout") and result.passed in ([], [False])


def test_garbage_on_the_reply_pipe_is_the_codes_error(pool):
    """The worker's own reply pipe is the one thing it may write: junk there (deep JSON,
    a list, a lie about loading) must not become an infra_error."""
    src = textwrap.dedent("""
        import os
        body = b"[" * 50000 + b"]" * 50000
        for fd in range(3, 64):
            try:
                os.write(fd, b"%08x" % len(body) + body)
            except OSError:
                pass
        os._exit(0)
        def f():
            return 'escaped'
        """)
    result = pool.run(fn_job(src))
    assert_zero(result)
    assert result.status == "error"


def test_program_that_closes_stdout_and_hangs_times_out(pool):
    job = {"solution": "import os, time\nos.close(1)\nwhile True:\n    pass\n",
           "tests": [{"kind": "stdio", "stdin": "", "stdout": "x"}]}
    result, took = run_timed(pool, job)
    assert result.status == "timeout" and result.passed == [False]
    assert took < LIMITS.wall_time_s + 1.0


def test_cpu_time_limit_ends_a_busy_loop_before_the_wall_limit(persistent):
    from sandbox_helpers import make_checked_pool
    from swarmrl.sandbox import Limits

    p = make_checked_pool(Limits(cpu_time_s=1, wall_time_s=8.0, memory_mb=512, max_processes=16, max_file_mb=4), workers=1,
                          persistent=persistent)
    try:
        result, took = run_timed(p, fn_job("def f():\n    while True:\n        pass\n"))
    finally:
        p.close()
    assert result.status == "timeout" and result.passed == [False]
    assert took < 4.0  # SIGXCPU at 1 s of CPU (SIGKILL at 2 s), not the 8 s wall limit
