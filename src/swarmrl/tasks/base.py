"""The task protocol: sample problems, show them to agents, grade submissions.

Kept small on purpose (nanochat's `Task`): a task is a tiny class; everything about
teams, time and messages lives in the runtime.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np


class Problem(Protocol):
    id: str

    def text(self) -> str: ...  # what every agent of the rollout is shown

    @property
    def num_items(self) -> int: ...  # independently graded parts; the score is their mean


class Task(Protocol):
    name: str

    def sample(self, rng: np.random.Generator, n: int) -> Sequence[Problem]: ...

    def parse_item(self, problem: Problem, ref: str) -> int | None: ...  # agent's item name -> index

    def grade(self, problem: Problem, item: int, answer: str) -> bool: ...
