"""What one sandboxed execution may use, and what it reports back.

Plain data, no behaviour: the runner, the pool, the tasks and the tests share these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Same vocabulary as tasks.base.GRADE_STATUSES (a task's Grade carries the sandbox status).
STATUSES = ("pass", "fail", "timeout", "memory", "error", "infra_error")


@dataclass(frozen=True)
class Limits:
    cpu_time_s: int = 10  # RLIMIT_CPU of every process in the sandbox
    wall_time_s: float = 10.0  # the whole execution; the parent kills it 0.5 s after this
    memory_mb: int = 1024  # RLIMIT_AS of every process (address space, not RSS)
    max_processes: int = 32  # RLIMIT_NPROC of the sandbox uid (one host uid per pool slot)
    max_file_mb: int = 16  # RLIMIT_FSIZE and the size of the scratch tmpfs
    max_output_bytes: int = 1 << 20  # stdout, stderr (each) and RPC replies kept by the parent


@dataclass
class ExecResult:
    status: str  # one of STATUSES
    passed: list[bool] = field(default_factory=list)  # one flag per counted test
    detail: str = ""  # the first failure, the missing tool, ...
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0

    @property
    def fraction(self) -> float:
        """Fraction of tests passed (0 for a run with no verdict)."""
        return sum(self.passed) / len(self.passed) if self.passed and self.status != "infra_error" else 0.0
