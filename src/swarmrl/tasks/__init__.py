"""Tasks: problems, prompts and graders."""

from swarmrl.config import TaskConfig
from swarmrl.tasks.arith import ArithTask


def make_task(cfg: TaskConfig):
    if cfg.name == "arith":
        return ArithTask(cfg)
    raise ValueError(f"unknown task '{cfg.name}'")
