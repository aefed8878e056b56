"""`arith`: K modular-arithmetic items per problem, some depending on earlier items.

An item is a chain `a+b+c` (mod m), a in 0..m-1 and the later operands in 1..max_step. A dependent item starts from an earlier item's
result, written `#j`: `#2+5+1`. Dependencies are what make the work not perfectly
parallel: whoever solves a dependent item needs item j's result, so it must wait for a
teammate to share it, compute it again, or the CEO must give both to the same expert.
Each item is graded on its own (partial credit); the runtime adds an item's 1/K to the
score only if it was submitted correctly before the deadline.

Items are labelled A, B, C, ... (under `task.label_pool`, K labels drawn from a bigger pool and
kept in order: `H T V X AG ...`, so a policy trained on 12 items has seen the labels of 64). Agents `<take item="C-E"/>` a range of items onto their
desk; the item in hand is shown at the end of each observation, with a dependency filled
in if the agent has seen its result (`E:7+3+1`), or left open if not (`E:#B+3+1`: wait for
a teammate to share it, poll the channel archive, or take B and compute it too).
Why a desk: a tiny model trained for minutes cannot learn to look up "item E" by label in a
long context (measured: no progress in 1,500 steps), but copies from a fixed offset at once.
The work format for the item in hand `E:7+3+1`:
`[E]7+3=0+1=1<submit item="E">1</submit>` — every partial sum is written out, so solving
costs tokens (and therefore simulated time) in proportion to the item's length.
"""

from __future__ import annotations

import numpy as np

from swarmrl.collective.grading import parse_label
from swarmrl.config import TaskConfig
from swarmrl.tasks.arith_items import RESULT_RE, ArithProblem, Item, label, stable_id, work_text
from swarmrl.tasks.arith_roles import WorkflowScriptedActor
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy, sample_strategy
from swarmrl.tasks.base import Grade
from swarmrl.tasks.variants import arith_variant

__all__ = ["ArithProblem", "ArithScripts", "ArithTask", "Item", "label", "work_text"]


class ArithTask:
    name = "arith"
    scripted = True  # `scripts()` gives the warm start's demonstrators

    def __init__(self, cfg: TaskConfig):
        self.cfg = cfg

    def sample(self, rng: np.random.Generator, n: int) -> list[ArithProblem]:
        return [self._one(rng) for _ in range(n)]

    def _one(self, rng: np.random.Generator) -> ArithProblem:
        m, items, depth = self.cfg.modulus, [], []  # depth[j]: links of the chain ending at item j + 1
        for i in range(1, self.cfg.items_per_problem + 1):
            first = int(rng.integers(0, m))
            steps = rng.integers(1, self.cfg.max_step + 1, size=self.cfg.terms_per_item - 1)
            terms = (first, *(int(x) for x in steps))
            dep = int(rng.integers(1, i)) if i > 1 and rng.random() < self.cfg.dependency_rate else None
            if dep is not None and self.cfg.max_chain and depth[dep - 1] >= self.cfg.max_chain:
                dep = None  # no new draw: problems stay those of the unbounded task up to this cut
            depth.append(1 + (depth[dep - 1] if dep is not None else 0))
            first = items[dep - 1].answer if dep is not None else terms[0]
            items.append(Item(i, terms, dep, (first + sum(terms[1:])) % m))
        if self.cfg.label_pool > len(items):  # drawn after the items: their numbers stay the default's
            items = relabelled(items, rng, self.cfg.label_pool)
        key = ";".join(it.text() for it in items)
        return ArithProblem(id=stable_id(key),
                            items=tuple(items), modulus=m)

    def variant(self, problem: ArithProblem, k: int) -> str:
        """Group k's view of the problem (tasks/variants.py; the items and answers are unchanged)."""
        return arith_variant(problem, k)

    def instructions(self) -> str:
        """The task in words, for the chat protocol's system message."""
        m = self.cfg.modulus
        return (f"Each line such as `C:4+1+#A` is an item labelled by its letter: add its numbers modulo {m}, "
                f"where `#A` stands for item A's result. Every answer is one digit (0-{m - 1}). Submit each "
                "item's answer separately, e.g. <submit item=\"C\">7</submit>; the first submission of an "
                "item is final, and each correct item earns an equal share of the team's score.")

    def parse_item(self, problem: ArithProblem, ref: str) -> int | None:
        """An agent's item reference ("C") -> 1-based index, or None if there is no such item."""
        ref = ref.strip()
        idx = parse_label(ref)
        return idx if idx in problem.item_indices else None

    def take(self, problem: ArithProblem, ref: str) -> list[int] | None:
        """"C" or "C-E" -> [3] or [3, 4, 5] (the problem's items from C to E); None if not a valid
        item or range."""
        a, _, b = ref.strip().partition("-")
        lo, hi = self.parse_item(problem, a), self.parse_item(problem, b or a)
        if lo is None or hi is None or lo > hi:
            return None
        return [i for i in problem.item_indices if lo <= i <= hi]

    def render_item(self, problem: ArithProblem, index: int, known: dict[int, str]) -> str:
        """The item in hand, its dependency filled in when the agent knows the result."""
        item = problem.item(index)
        if item.dep is not None and item.dep in known:
            return f"{label(index)}:" + "+".join([known[item.dep]] + [str(t) for t in item.terms[1:]])
        return item.text()

    def learn(self, problem: ArithProblem, line: str) -> dict[int, str]:
        """Results stated in a line the agent saw ("B=7 C=1"), as claimed (they may be wrong)."""
        out = {}
        for ref, value in RESULT_RE.findall(line):
            idx = self.parse_item(problem, ref)
            if idx is not None:
                out[idx] = value
        return out

    def grade(self, problem: ArithProblem, item: int, answer: str) -> Grade:
        ok = item in problem.item_indices and answer.strip() == str(problem.item(item).answer)
        return Grade(1.0, "pass") if ok else Grade(0.0, "fail")

    def scripts(self) -> "ArithScripts":
        return ArithScripts(self.cfg.board_demo_rate, self.cfg.chain_demo_rate, self.cfg.post_demo == "item")


def relabelled(items: list[Item], rng: np.random.Generator, pool: int) -> list[Item]:
    """`items` (indices 1..K) under K labels drawn from the first `pool` (A..Z, AA, ...), kept in
    order: a model trained on them has seen every label a problem of `pool` items uses."""
    new = [0] + sorted(int(x) + 1 for x in rng.choice(pool, size=len(items), replace=False))
    return [Item(new[it.index], it.terms, new[it.dep] if it.dep is not None else None, it.answer) for it in items]


class ArithScripts:
    """The warm start's scripted demonstrators on arith (tasks/arith_scripts.py: the org's team
    strategies; tasks/arith_roles.py: the fixed workflows' roles)."""

    def __init__(self, board_rate: float = 0.0, chain_rate: float = 0.0, post_items: bool = False):
        self.board_rate = board_rate  # share of team demos that take from the board
        self.chain_rate = chain_rate  # of those, share whose CEO solves the longest chain itself
        self.post_items = post_items  # share results as <post item="A"/>, not retyped

    def solo_strategy(self) -> Strategy:
        return Strategy(0, share="recompute")

    def team_strategy(self, rng: np.random.Generator, max_experts: int) -> Strategy:
        return sample_strategy(rng, max_experts, self.board_rate, self.chain_rate)

    def org_actor(self, tokenizer, end_id: int, strategies: dict[int, Strategy]) -> ScriptedActor:
        """Plays org rollouts, each by its strategy (rollout index -> strategy)."""
        return ScriptedActor(tokenizer, end_id, strategies, self.post_items)

    def role_actor(self, tokenizer, end_id: int, seed: int, fallback=None) -> WorkflowScriptedActor:
        """Plays fixed-workflow rollouts; `fallback` plays the org rollouts among them."""
        return WorkflowScriptedActor(tokenizer, end_id, seed=seed, fallback=fallback)
