"""`SortTask`: a custom swarmrl task in one file, outside the package (a plugin example).

Each problem has K items (`task.items_per_problem`), labelled A, B, C, ...; each item is a
short list of small integers (`task.terms_per_item` numbers in 0..`task.modulus` - 1) to sort
in ascending order. The item in hand is shown as `B:3,1,2`; the answer is `1,2,3`
(whitespace is ignored when grading: ` 1, 2 ,3 ` is right too). Agents take one item (`B`)
or a range (`A-C`), and claims such as `B=1,2,3` in a message are what `learn` picks up.

The task has no scripted demonstrations (`scripted = False`, `scripts()` returns None), so
a run cannot warm-start on it: start from a model directory with `--init` (or
`model.name_or_path`). From the repository root (examples/README.md):

    # a tiny random model of the config's sizes to start from (any saved model dir works)
    python -c 'from swarmrl.config import load_config; from swarmrl.policy.model import build_tiny_policy, save_policy; save_policy(build_tiny_policy(load_config("configs/tiny_test.yaml", []).model), "runs/tiny_init")'
    swarmrl train configs/tiny_test.yaml --out runs/sort --init runs/tiny_init \
        task.name=examples/sort_task.py:SortTask rl.steps=2
    swarmrl eval runs/sort                          # the saved config.yaml names the plugin
    swarmrl train --resume runs/sort rl.steps=3     # continue one more step

A relative path in the spec is resolved against the working directory: use an absolute path
when you run from elsewhere (the saved config keeps the spec as written).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from swarmrl.collective.grading import item_label
from swarmrl.tasks.base import Grade

# A claim `B=1,2,3` (one label, '=', comma-separated integers) anywhere in a line.
_CLAIM = re.compile(r"\b([A-Z])=(\d+(?:,\d+)*)")


@dataclass(frozen=True)
class SortProblem:
    id: str
    items: tuple[tuple[int, ...], ...]  # item i (1-based) is items[i - 1]

    @property
    def num_items(self) -> int:
        return len(self.items)

    def text(self) -> str:
        """Every item, one per line: `A:3,1,2`."""
        return "\n".join(f"{item_label(i)}:{_join(v)}" for i, v in enumerate(self.items, 1))

    def answer(self, index: int) -> str:
        return _join(sorted(self.items[index - 1]))


def _join(values) -> str:
    return ",".join(str(v) for v in values)


class SortTask:
    """Sort K short lists of small integers; each list is one independently graded item."""

    name = "sort"
    scripted = False  # no demonstrators: runs start from a model (--init or model.name_or_path)

    def __init__(self, cfg):
        self.cfg = cfg  # the run's `task` section (TaskConfig)
        self.k = int(cfg.items_per_problem)
        self.length = max(2, int(cfg.terms_per_item))  # numbers per list
        self.high = int(cfg.modulus)  # values in 0..high-1: one digit each

    def sample(self, rng: np.random.Generator, n: int) -> list[SortProblem]:
        """n problems; the same generator state gives the same problems (resume, eval)."""
        out = []
        for _ in range(n):
            items = tuple(tuple(int(x) for x in rng.integers(0, self.high, size=self.length)) for _ in range(self.k))
            key = ";".join(_join(v) for v in items)
            out.append(SortProblem(id="sort-" + hashlib.sha1(key.encode()).hexdigest()[:10], items=items))
        return out

    def parse_item(self, problem: SortProblem, ref: str) -> int | None:
        ref = ref.strip()
        idx = ord(ref) - ord("A") + 1 if len(ref) == 1 and "A" <= ref <= "Z" else 0
        return idx if 1 <= idx <= problem.num_items else None

    def take(self, problem: SortProblem, ref: str) -> list[int] | None:
        """"B" -> [2]; "A-C" -> [1, 2, 3]; None for anything else (or a reversed range)."""
        a, _, b = ref.strip().partition("-")
        lo, hi = self.parse_item(problem, a), self.parse_item(problem, b or a)
        return list(range(lo, hi + 1)) if lo is not None and hi is not None and lo <= hi else None

    def render_item(self, problem: SortProblem, index: int, known: dict[int, str]) -> str:
        """`B:3,1,2` (items do not depend on each other, so `known` is not needed)."""
        return f"{item_label(index)}:{_join(problem.items[index - 1])}"

    def learn(self, problem: SortProblem, line: str) -> dict[int, str]:
        """Claims stated in a line (`B=1,2,3 C=0,4`), as claimed (they may be wrong)."""
        out = {}
        for ref, value in _CLAIM.findall(line):
            idx = self.parse_item(problem, ref)
            if idx is not None:
                out[idx] = value
        return out

    def grade(self, problem: SortProblem, item: int, answer: str) -> Grade:
        if not 1 <= item <= problem.num_items:
            return Grade(0.0, "fail", f"no item {item}")
        got, want = "".join(answer.split()), problem.answer(item)
        if got == want:
            return Grade(1.0, "pass", f"{item_label(item)}={want}")
        return Grade(0.0, "fail", f"{item_label(item)}: {got[:40]!r} != {want}")

    def scripts(self) -> None:
        """No scripted demonstrations (so no warm start on this task)."""
        return None
