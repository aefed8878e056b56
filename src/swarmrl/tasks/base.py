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
    name: str

    def sample(self, rng: np.random.Generator, n: int) -> Sequence[Problem]: ...

    def parse_item(self, problem: Problem, ref: str) -> int | None: ...  # agent's item name -> index

    def grade(self, problem: Problem, item: int, answer: str) -> Grade: ...
