"""The persistent mode, parent side: one long-lived sandbox per pool slot, forkserver.py inside.

Per execution the parent makes the same four pipes as the per-execution mode (job in,
result channel, stdout, stderr), hands the sandbox's ends to the server over a control
socket (SCM_RIGHTS), and reads them exactly as runner.py does; the verdict rules are the
same (`runner.verdict`). The server answers once the execution is over and the sandbox is
restored (`{"exit": harness exit code, "clean": true}`); anything else (no answer in time,
`clean: false`, the server gone) and this sandbox is killed whole, bwrap's process group as
in the per-execution mode, and the next execution starts a fresh one. So an execution runs
only in a sandbox that is new or was restored after the previous one.

Status rules on top of runner's: a server that cannot start, or dies before the job was
handed over twice in a row, is an `infra_error`; the wall limit kills the whole sandbox
(`timeout`), as before.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from concurrent.futures import Executor
from pathlib import Path

from swarmrl.sandbox.bwrap import python_paths, server_argv
from swarmrl.sandbox.limits import ExecResult, Limits
from swarmrl.sandbox.runner import (HARNESS_SOURCE, KILL_GRACE_S, CappedReader, _feed, _kill_group,
                                    job_payload, verdict)

SERVER_SOURCE = HARNESS_SOURCE + "\n" + Path(__file__).with_name("forkserver.py").read_text()
START_TIMEOUT_S = 10.0  # a server that has not said `ready` by then is an infra_error
CLEAN_TIMEOUT_S = 2.0  # after the verdict, the restore must be done by then, else a new sandbox


class ForkServer:
    """One pool slot's sandbox. Not thread-safe: the pool gives a slot to one thread at a time.

    `starter` starts the sandbox from a thread that lives as long as the pool: bwrap's
    --die-with-parent follows the thread that started it, and a sandbox killed because
    some caller's thread ended would look like a submission that killed its harness."""

    def __init__(self, limits: Limits, uid: int, starter: Executor | None = None):
        self.limits, self.uid, self.starter = limits, uid, starter
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self.err: CappedReader | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.ctl is not None and self.proc.poll() is None

    def argv(self, ctl_fd: int) -> list[str]:
        python, prefix = python_paths()
        as_root = os.geteuid() == 0  # then the sandbox runs as the slot's own uid
        return server_argv(self.limits, self.uid, as_root, python, prefix) + [
            "-u", "-c", SERVER_SOURCE, "server", str(ctl_fd), str(self.limits.cpu_time_s), str(int(as_root))]

    def start(self) -> str | None:
        """Start (or restart) the sandbox; None once it said `ready`, else why not."""
        if self.starter is not None:
            return self.starter.submit(self._start).result()
        return self._start()

    def _start(self) -> str | None:
        self.kill()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                self.argv(child.fileno()),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=(child.fileno(),), start_new_session=True, env={"PATH": "/usr/bin:/bin"})
        except OSError as e:
            parent.close()
            return f"sandbox did not start: {e}"
        finally:
            child.close()
        self.ctl = parent
        self.err = CappedReader(os.dup(self.proc.stderr.fileno()), 1 << 16)
        self.proc.stderr.close()
        if self._message(START_TIMEOUT_S).get("ready"):
            return None
        code = self.kill()
        self.err.join(timeout=2.0)
        tail = self.err.text().strip()[-500:] or "(no output)"
        return f"sandbox did not start (exit {code}): {tail}"

    def _message(self, timeout: float) -> dict:
        """The server's next message, or {} (timeout, the server gone, junk)."""
        try:
            self.ctl.settimeout(timeout)
            got = json.loads(self.ctl.recv(4096) or b"{}")
            return got if isinstance(got, dict) else {}
        except (OSError, ValueError):
            return {}

    def _hand_over(self, fds: list[int]) -> str | None:
        """Give the server an execution's descriptors; restart it once if it is gone."""
        for attempt in range(2):
            if not self.alive():
                why = self.start()
                if why:
                    return why
            try:
                socket.send_fds(self.ctl, [b"J"], fds)
                return None
            except OSError as e:
                self.kill()
                if attempt:
                    return f"sandbox server unreachable: {e}"
        return "sandbox server unreachable"

    def run(self, job: dict) -> ExecResult:
        """As runner.run_job, in this slot's persistent sandbox."""
        t0 = time.monotonic()
        payload = job_payload(job, self.limits)
        (job_r, job_w), (res_r, res_w), (out_r, out_w), (err_r, err_w) = (os.pipe() for _ in range(4))
        inner = [job_r, res_w, out_w, err_w]
        why = self._hand_over(inner)
        for fd in inner:
            os.close(fd)
        if why:
            for fd in (job_w, res_r, out_r, err_r):
                os.close(fd)
            return ExecResult("infra_error", detail=why, wall_s=time.monotonic() - t0)
        cap = self.limits.max_output_bytes
        out, err, res = CappedReader(out_r, cap), CappedReader(err_r, cap), CappedReader(res_r, cap)
        threading.Thread(target=_feed, args=(os.fdopen(job_w, "wb"), payload), daemon=True).start()
        res.join(timeout=self.limits.wall_time_s + KILL_GRACE_S)  # EOF: the harness has ended
        killed = res.is_alive()
        done = {} if killed else self._message(CLEAN_TIMEOUT_S)
        if not done.get("clean"):
            self.kill()  # the whole sandbox, and everything in it
        for reader in (out, err, res):
            reader.join(timeout=2.0)
        result = verdict(res.data.decode(errors="replace"), killed, done.get("exit"), err.text())
        result.stdout, result.stderr = out.text(), err.text()
        result.stdout_truncated, result.stderr_truncated = out.truncated, err.truncated
        result.wall_s = time.monotonic() - t0
        return result

    def kill(self) -> int | None:
        """Kill the sandbox (idempotent); its exit code, if it had one."""
        code = None
        if self.proc is not None:
            _kill_group(self.proc)
            code, self.proc = self.proc.returncode, None
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        return code
