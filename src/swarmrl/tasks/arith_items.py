"""`arith` problems and items, item labels, and the scripted work text of an item (the task
itself, which samples and grades them, is tasks/arith.py; the format is described there)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property

from swarmrl.collective.grading import item_label


@dataclass(frozen=True)
class Item:
    index: int  # 1-based, as agents see it
    terms: tuple[int, ...]  # operands; terms[0] is ignored when dep is set
    dep: int | None  # index of the item whose result replaces the first operand
    answer: int

    def text(self) -> str:
        first = f"#{label(self.dep)}" if self.dep is not None else str(self.terms[0])
        return f"{label(self.index)}:" + "+".join([first] + [str(t) for t in self.terms[1:]])


@dataclass(frozen=True)
class ArithProblem:
    id: str
    items: tuple[Item, ...]
    modulus: int

    @property
    def num_items(self) -> int:
        return len(self.items)

    def text(self) -> str:
        return "\n".join(item.text() for item in self.items)

    @cached_property
    def item_indices(self) -> tuple[int, ...]:
        """The items' indices in label order: 1..K, or K of 1..`task.label_pool` (arith.py)."""
        return tuple(it.index for it in self.items)

    @cached_property
    def _by_index(self) -> dict[int, Item]:
        return {it.index: it for it in self.items}

    def item(self, index: int) -> Item:
        return self._by_index[index]


def stable_id(key: str) -> str:
    return "arith-" + hashlib.sha1(key.encode()).hexdigest()[:10]


RESULT_RE = re.compile(r"\b([A-Z]{1,2})=(\d)\b")


def work_text(problem: ArithProblem, index: int, known: dict[int, str], submit: bool = True) -> str:
    """The scripted solution of the item in hand: partial sums, then the submission.

    `known` holds results the writer has seen; a dependency must be in it.
    """
    item = problem.item(index)
    acc = int(known[item.dep]) if item.dep is not None else item.terms[0]
    parts = [f"[{label(index)}]{acc}"]
    for t in item.terms[1:]:
        acc = (acc + t) % problem.modulus
        parts.append(f"+{t}={acc}")
    text = "".join(parts)
    return text + (f'<submit item="{label(index)}">{acc}</submit>' if submit else "")


def label(index: int) -> str:
    """1 -> "A", 2 -> "B", ..., 27 -> "AA" (the names agents use for items; collective/grading.py)."""
    return item_label(index)
