"""Run one job in the sandbox and read its verdict from the result channel.

The verdict travels on a pipe whose write end the parent hands only to the trusted harness
(see harness.py); stdout and stderr are only kept for people to read, capped in the
parent (the rest is read and dropped, so a program printing 1 GB neither blocks nor grows
our memory). Status rules, so that a broken sandbox is never a silent zero:

* no `started` event on the channel: the sandbox or the harness did not come up ->
  `infra_error`, with bwrap's own message;
* `started`, then a verdict: the verdict (the harness reports its own bugs as `infra_error`);
* `started`, no verdict: the tested code killed the harness or the parent hit the wall
  limit -> `error` or `timeout` (the code's fault: it scores 0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from swarmrl.sandbox.bwrap import bwrap_argv, local_argv, python_paths
from swarmrl.sandbox.limits import ExecResult, Limits

HARNESS_SOURCE = Path(__file__).with_name("harness.py").read_text()
KILL_GRACE_S = 0.5  # the parent kills the whole sandbox this long after wall_time_s
HARNESS_MARGIN_S = 0.3  # the harness stops the tests this long before wall_time_s, to report


class CappedReader(threading.Thread):
    """Drains a pipe to EOF and keeps the first `cap` bytes."""

    def __init__(self, fd: int, cap: int):
        super().__init__(daemon=True)
        self.fd, self.cap, self.data, self.truncated = fd, cap, bytearray(), False
        self.start()

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                room = self.cap - len(self.data)
                if len(chunk) > room:
                    self.truncated = True
                self.data += chunk[:max(room, 0)]
        except OSError:
            pass
        finally:
            os.close(self.fd)

    def text(self) -> str:
        return self.data.decode(errors="replace") + ("\n[truncated]" if self.truncated else "")


def _feed(stream, data: bytes) -> None:
    try:
        stream.write(data)
        stream.close()
    except OSError:  # the sandbox died before reading its job: reported by the status rules
        pass


def job_payload(job: dict, limits: Limits) -> bytes:
    full = {"setup": "", "entry_point": None, **job, "harness_source": HARNESS_SOURCE,
            "max_reply_bytes": limits.max_output_bytes,
            "time_budget_s": max(0.1, limits.wall_time_s - HARNESS_MARGIN_S)}
    return json.dumps(full).encode()


def command(limits: Limits, mode: str, uid: int, result_fd: int) -> list[str]:
    python, prefix = python_paths()
    if mode == "bwrap":
        pre = bwrap_argv(limits, uid, os.geteuid() == 0, python, prefix)
    elif mode == "unsafe_local":
        pre = local_argv(limits, python)
    else:
        raise ValueError(f"unknown sandbox mode {mode!r} (bwrap | unsafe_local)")
    return pre + ["-c", HARNESS_SOURCE, "harness", str(result_fd)]


def run_job(job: dict, limits: Limits, mode: str = "bwrap", uid: int = 65534) -> ExecResult:
    """Run `job` (setup, solution, entry_point, tests: see harness.py) and return its verdict."""
    t0 = time.monotonic()
    payload = job_payload(job, limits)
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(command(limits, mode, uid, w), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,),
                                start_new_session=True, env={"PATH": "/usr/bin:/bin"})
    except OSError as e:
        os.close(r)
        return ExecResult("infra_error", detail=f"sandbox did not start: {e}")
    finally:
        os.close(w)
    cap = limits.max_output_bytes
    out = CappedReader(os.dup(proc.stdout.fileno()), cap)
    err = CappedReader(os.dup(proc.stderr.fileno()), cap)
    res = CappedReader(r, cap)
    proc.stdout.close()
    proc.stderr.close()
    threading.Thread(target=_feed, args=(proc.stdin, payload), daemon=True).start()
    killed = False
    try:
        proc.wait(timeout=limits.wall_time_s + KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        killed = True
    _kill_group(proc)
    for reader in (out, err, res):
        reader.join(timeout=2.0)
    result = verdict(res.data.decode(errors="replace"), killed, proc.returncode, err.text())
    result.stdout, result.stderr = out.text(), err.text()
    result.stdout_truncated, result.stderr_truncated = out.truncated, err.truncated
    result.wall_s = time.monotonic() - t0
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL bwrap's process group; bwrap's PID-namespace init then dies with its parent
    (--die-with-parent), which takes every process in the sandbox with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def verdict(channel: str, killed: bool, returncode: int | None, stderr: str) -> ExecResult:
    """The status rules of the module docstring, from the result channel's lines."""
    events = []
    for line in channel.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    started = any(e.get("event") == "started" for e in events)
    final = next((e for e in events if e.get("event") == "result"), None)
    if not started:
        tail = stderr.strip()[-500:] or "(no output)"
        return ExecResult("infra_error", detail=f"sandbox did not start (exit {returncode}): {tail}")
    if final is None:
        if killed:
            return ExecResult("timeout", detail="wall time limit: the sandbox was killed")
        return ExecResult("error", detail=f"the harness ended without a verdict (exit {returncode})")
    return ExecResult(final["status"], passed=[bool(p) for p in final["passed"]], detail=final.get("detail", ""))
