"""A bounded pool of sandboxed executions, and the start-up check that refuses to train
without a working sandbox.

Threads, not processes: each execution is a child process tree; the thread only waits on
it. Each pool slot owns one host uid (as root), so RLIMIT_NPROC, which the kernel counts
per uid, bounds each execution on its own: a fork bomb in one slot cannot starve another.
"""

from __future__ import annotations

import os
import queue
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from swarmrl.sandbox.bwrap import missing_tools
from swarmrl.sandbox.limits import ExecResult, Limits
from swarmrl.sandbox.runner import run_job
from swarmrl.sandbox.server import ForkServer

MAX_WORKERS = 64
_PROBE = {"solution": "def f(x):\n    return x + 1\n", "entry_point": "f",
          "tests": [{"kind": "assert", "code": "assert candidate(1) == 2"}]}


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; the message says what is missing."""


def slot_uids(workers: int, pid: int | None = None) -> list[int]:
    """Host uids of the pool slots: a block of 64 chosen from the pid, far above real users,
    so two trainers on one machine do not share NPROC counts."""
    base = 200_000 + ((os.getpid() if pid is None else pid) % 20_000) * MAX_WORKERS
    return [base + i for i in range(workers)]


class SandboxPool:
    """`persistent` (bwrap mode only): each slot keeps one sandbox whose server forks a fresh
    harness and worker per execution and restores the sandbox after it (server.py,
    forkserver.py); otherwise every execution starts its own sandbox (runner.py)."""

    def __init__(self, limits: Limits, mode: str = "bwrap", workers: int = 2, persistent: bool = True):
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"sandbox workers must be in [1, {MAX_WORKERS}], got {workers}")
        self.limits, self.mode, self.workers = limits, mode, workers
        # unsafe_local has no PID namespace or private /tmp to restore: never persistent.
        self.persistent = persistent and mode == "bwrap"
        self.uids = slot_uids(workers)  # host uids of the slots (as root)
        self._uids: queue.Queue[int] = queue.Queue()
        for uid in self.uids:
            self._uids.put(uid)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox")
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-start")
        self._servers = {uid: ForkServer(limits, uid, self._starter) for uid in self.uids} if self.persistent else {}

    def run(self, job: dict) -> ExecResult:
        uid = self._uids.get()
        try:
            if self.persistent:
                return self._servers[uid].run(job)
            return run_job(job, self.limits, self.mode, uid)
        finally:
            self._uids.put(uid)

    def map(self, jobs: Sequence[dict]) -> list[ExecResult]:
        """Run jobs in parallel (at most `workers` at once); results in job order."""
        return list(self._executor.map(self.run, jobs))

    def check(self) -> None:
        """Raise SandboxUnavailable unless a trivial job passes in this sandbox."""
        missing = missing_tools(self.mode)
        if missing:
            raise SandboxUnavailable(missing)
        got = self.run(_PROBE)
        if got.status != "pass":
            raise SandboxUnavailable(
                f"sandbox ({self.mode}) failed its self-test: {got.status}: {got.detail}"
                + ("" if self.mode != "bwrap" else
                   "; if bwrap cannot create namespaces here, check `bwrap --unshare-pid --unshare-net"
                   " --ro-bind /usr /usr true`, or set `sandbox.mode: unsafe_local` for trusted code only"))

    def close(self) -> None:
        """Idempotent; `map` raises afterwards. Queued jobs are dropped, running ones finish
        (each is bounded by wall_time_s, and bwrap's --die-with-parent takes its processes with it)."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        for server in self._servers.values():
            server.kill()
        self._starter.shutdown(wait=True)


def limits_from_config(cfg) -> Limits:
    """SandboxConfig -> Limits (the sandbox package does not depend on the config module)."""
    return Limits(cpu_time_s=cfg.cpu_time_s, wall_time_s=cfg.wall_time_s, memory_mb=cfg.memory_mb,
                  max_processes=cfg.max_processes, max_file_mb=cfg.max_file_mb,
                  max_output_bytes=cfg.max_output_bytes)


def make_pool(cfg, check: bool = True) -> SandboxPool:
    """The pool a task uses; checked at once, so training refuses to start without a sandbox."""
    if cfg.mode == "unsafe_local":
        warnings.warn("sandbox.mode=unsafe_local: model-written code runs WITHOUT isolation "
                      "(only rlimits). Use it for trusted code only.", RuntimeWarning, stacklevel=2)
    pool = SandboxPool(limits_from_config(cfg), cfg.mode, cfg.workers, cfg.persistent)
    if check:
        pool.check()
    return pool
