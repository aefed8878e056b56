"""Tasks: problems, prompts and graders."""

from swarmrl.config import SandboxConfig, TaskConfig
from swarmrl.tasks.arith import ArithTask


def make_task(cfg: TaskConfig, sandbox: SandboxConfig | None = None):
    """The task named by `cfg.name`. `code` also builds the sandbox pool from `sandbox`
    (default settings if None) and checks it, so a run without a working sandbox stops here."""
    if cfg.name == "arith":
        return ArithTask(cfg)
    if cfg.name == "math":
        from swarmrl.tasks.math import MathTask  # math-verify/sympy load only when used

        return MathTask(cfg)
    if cfg.name == "code":
        from swarmrl.sandbox import make_pool
        from swarmrl.tasks.code import CodeTask

        return CodeTask(cfg, make_pool(sandbox or SandboxConfig()))
    raise ValueError(f"unknown task '{cfg.name}'")


def close_task(task) -> None:
    """Release what a task holds. `close()` is optional in the task protocol: only tasks that own
    something (the code task: its sandbox pool and the processes in flight) define it."""
    close = getattr(task, "close", None)
    if close is not None:
        close()
