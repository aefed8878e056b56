"""Helpers of the sandbox tests: a real bubblewrap pool (skipped, with the reason, only
where bwrap cannot run at all), and a look for processes left behind on the host."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from swarmrl.sandbox import Limits, SandboxPool, SandboxUnavailable

LIMITS = Limits(cpu_time_s=2, wall_time_s=2.0, memory_mb=512, max_processes=16, max_file_mb=4,
                max_output_bytes=1 << 20)


def make_checked_pool(limits: Limits = LIMITS, workers: int = 2, persistent: bool = True) -> SandboxPool:
    pool = SandboxPool(limits, "bwrap", workers, persistent)
    try:
        pool.check()
    except SandboxUnavailable as e:
        pool.close()
        pytest.skip(f"bubblewrap sandbox cannot run on this machine: {e}")
    return pool


def processes_of(uids) -> list[int]:
    """Host pids whose real uid is one of `uids` (what a sandbox could leave behind)."""
    wanted, out = {str(u) for u in uids}, []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                uid_line = next(line for line in (d / "status").read_text().splitlines() if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if uid_line.split()[1] in wanted:
                out.append(int(d.name))
    return out


def _ns_pid(pid: int) -> str:
    try:
        line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("NSpid:"))
    except (OSError, StopIteration):
        return ""
    return line.split()[-1]


def leftovers(pool: SandboxPool) -> list[int]:
    """Host pids of the pool's uids that outlived their execution. A persistent pool's
    servers are PID 2 of their sandbox's namespace (PID 1 is bwrap, as root): not leftovers."""
    pids = processes_of(pool_uids(pool))
    return [p for p in pids if not (pool.persistent and _ns_pid(p) == "2")]


def leftovers_after(pool: SandboxPool, seconds: float = 2.0) -> list[int]:
    """`leftovers` once they are gone, or after `seconds`: a sandbox killed whole (bwrap's
    group) takes its PID namespace down asynchronously, after our kill returns."""
    deadline = time.monotonic() + seconds
    while (left := leftovers(pool)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def fn_job(solution: str, test: str = "assert candidate() == 'escaped'") -> dict:
    """A one-test job: the hostile `f` passes only if it breaks out (returns 'escaped')."""
    return {"solution": solution, "entry_point": "f", "tests": [{"kind": "assert", "code": test}]}


def pool_uids(pool: SandboxPool) -> list[int]:
    return list(pool.uids)


IS_ROOT = os.geteuid() == 0
