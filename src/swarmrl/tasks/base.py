"""The task protocol: sample problems, show them to agents, grade submissions.

Kept small on purpose (nanochat's `Task`): a task is a tiny class; everything about
teams, time and messages lives in the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np


GRADE_STATUSES = ("pass", "fail", "timeout", "memory", "error", "infra_error")


@dataclass(frozen=True)
class Grade:
    """One graded submission. `infra_error` means the grader itself failed (sandbox did not
    start, ...): the runtime counts it and the trainer drops the rollout from the loss
    instead of treating it as a zero reward."""

    score: float  # in [0, 1]; partial credit (e.g. the fraction of tests passed)
    status: str = "pass"  # one of GRADE_STATUSES
    detail: str = ""  # short human-readable evidence, written to samples/

    @property
    def correct(self) -> bool:
        return self.score > 0 and self.status != "infra_error"


class Problem(Protocol):
    id: str

    def text(self) -> str: ...  # what every agent of the rollout is shown

    @property
    def num_items(self) -> int: ...  # independently graded parts; the score is their mean


class Task(Protocol):
    """What the runtime, the trainer and the warm start call on a task. A task class is
    constructed as `Cls(cfg.task)`, or by its classmethod `from_config(cfg)` (the whole run
    config) when it has one; `close()` is optional (tasks that hold processes define it), and so
    is `instructions() -> str` (the task in words, for the chat protocol's system message), and
    `variant(problem, k) -> str` (group k's view of the problem, for `workflow.groups`; tasks/variants.py)."""

    name: str
    scripted: bool  # True when `scripts()` returns demonstrators (checked before a warm start)

    def sample(self, rng: np.random.Generator, n: int) -> Sequence[Problem]:
        """n problems; the same generator state must give the same problems (resume, eval)."""
        ...

    def parse_item(self, problem: Problem, ref: str) -> int | None:
        """An agent's item name ("C") -> 1-based item index, or None if there is no such item."""
        ...

    def take(self, problem: Problem, ref: str) -> list[int] | None:
        """A `<take item=...>` reference (one item, or a range such as "C-E") -> item indices, or None."""
        ...

    def render_item(self, problem: Problem, index: int, known: dict[int, str]) -> str:
        """The item in hand as one desk line, e.g. `C:4+1+2`; `known` holds results the agent has
        seen (item -> claimed value), for items that depend on others."""
        ...

    def learn(self, problem: Problem, line: str) -> dict[int, str]:
        """Results stated in a line the agent saw (item -> claimed value, possibly wrong)."""
        ...

    def grade(self, problem: Problem, item: int, answer: str) -> Grade:
        """Grade one submitted answer for one item."""
        ...

    def scripts(self):
        """Scripted demonstrators for the warm start (see tasks/arith_scripts.py `ArithScripts`:
        `solo_strategy()`, `team_strategy(rng, max_experts)`, `org_actor(...)`, `role_actor(...)`),
        or None when the task has none (then start from a model: `model.name_or_path`)."""
        ...


# Methods the task registry checks a task class for (`close` and `from_config` are optional).
TASK_METHODS = ("sample", "parse_item", "take", "render_item", "learn", "grade", "scripts")
