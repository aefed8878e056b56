"""Tasks: problems, prompts and graders (the protocol: tasks/base.py).

`task.name` selects one: a built-in below, or a user's class by `module:Name` spec.
"""

from swarmrl.config import Config, SandboxConfig, TaskConfig
from swarmrl.registry import Registry
from swarmrl.tasks.arith import ArithTask
from swarmrl.tasks.base import TASK_METHODS

TASKS: Registry = Registry("task", required=TASK_METHODS)
TASKS.add("arith", ArithTask)
# Lazy: math-verify / sympy and the sandbox load only when a run uses them.
TASKS.add("math", "swarmrl.tasks.math:MathTask")
TASKS.add("code", "swarmrl.tasks.code:CodeTask")


def task_from_config(cfg: Config):
    """The task `cfg.task.name` names: `Cls.from_config(cfg)` when the class has it, else `Cls(cfg.task)`.
    The code task builds and checks its sandbox pool here, so a run without a working sandbox stops here."""
    cls = TASKS.get(cfg.task.name)
    return cls.from_config(cfg) if hasattr(cls, "from_config") else cls(cfg.task)


def make_task(cfg: TaskConfig, sandbox: SandboxConfig | None = None):
    """`task_from_config` for a task section alone (default sandbox settings if None)."""
    return task_from_config(Config(task=cfg, sandbox=sandbox or SandboxConfig()))


def close_task(task) -> None:
    """Release what a task holds. `close()` is optional in the task protocol: only tasks that own
    something (the code task: its sandbox pool and the processes in flight) define it."""
    close = getattr(task, "close", None)
    if close is not None:
        close()
