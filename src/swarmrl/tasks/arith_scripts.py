"""Scripted role policies for `arith`: the demonstrations of the warm start.

They cover every strategy the collective could choose, in comparable amounts, so that RL
*selects* among them (DESIGN.md section 3): solve alone or hire k = 1..8 experts; split
round-robin or keep dependency chains together; share results on the channel and wait for
them, poll the archive for them, or recompute them; submit item by item or all at once;
the CEO works too or only manages. None of them is "the best" by construction: which one
pays depends on the deadline, and that is what RL must find out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from swarmrl.collective.runtime import TurnRequest
from swarmrl.policy.sampler import Sample
from swarmrl.tasks.arith import ArithProblem, label, work_text

ALL = 99


@dataclass(frozen=True)
class Strategy:
    experts: int  # 0 = the CEO solves everything alone
    split: str = "rr"  # rr | chain
    share: str = "wait"  # wait: post results, wait for others' | poll: read the archive | recompute
    items_per_turn: int = ALL  # 1 = submit item by item (partial credit early), ALL = one long turn
    ceo_works: bool = False  # the CEO keeps a share of the items

    def label(self) -> str:
        if self.experts == 0:
            return f"solo/ipt{self.items_per_turn}"
        return (f"team{self.experts}/{self.split}/{self.share}/ipt{self.items_per_turn}"
                f"{'/ceo-works' if self.ceo_works else ''}")


def sample_strategy(rng: np.random.Generator, max_experts: int) -> Strategy:
    """Team size uniform over 0..max_experts; every other knob uniform."""
    k = int(rng.integers(0, max_experts + 1))
    ipt = int(rng.choice([1, 2, ALL]))
    if k == 0:  # alone there is no one to share with
        return Strategy(0, share="recompute", items_per_turn=ipt)
    return Strategy(k, split=str(rng.choice(["rr", "chain"])), share=str(rng.choice(["wait", "wait", "poll", "recompute"])),
                    items_per_turn=ipt, ceo_works=bool(rng.random() < 0.3))


def assign(problem: ArithProblem, workers: list[str], split: str) -> dict[str, list[int]]:
    plan: dict[str, list[int]] = {w: [] for w in workers}
    owner: dict[int, str] = {}
    nxt = 0
    for item in problem.items:
        if split == "chain" and item.dep is not None:
            w = owner[item.dep]
        else:
            w = workers[nxt % len(workers)]
            nxt += 1
        owner[item.index] = w
        plan[w].append(item.index)
    return plan


_RESULT = re.compile(r"([A-Z])=(\d+)")


@dataclass
class _Mind:
    """What one scripted agent remembers between its turns."""

    plan: list[int] = field(default_factory=list)
    known: dict[int, int] = field(default_factory=dict)
    briefed: bool = False


class ScriptedActor:
    """An Actor that writes the strategy's replies as text and tokenizes them."""

    def __init__(self, tokenizer, end_id: int, strategies: dict[int, Strategy]):
        self.tokenizer = tokenizer
        self.end_id = end_id
        self.strategies = strategies  # rollout index -> strategy
        self.minds: dict[tuple[int, str], _Mind] = {}

    def act(self, requests: Sequence[TurnRequest], seed: int) -> list[Sample]:
        out = []
        for req in requests:
            text = self._reply(req)
            ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.end_id]
            out.append(Sample(ids=ids, logprobs=[0.0] * len(ids)))
        return out

    def _reply(self, req: TurnRequest) -> str:
        r, a = req.rollout, req.agent
        strat = self.strategies[r.index]
        mind = self.minds.setdefault((r.index, a.name), _Mind())
        for line in req.observation.splitlines():
            if line.startswith("@ceo: ") and not mind.briefed:
                mind.plan = [ord(x) - ord("A") + 1 for x in line[6:].split()]
                mind.briefed = True
            elif line.startswith("#"):
                mind.known.update({ord(i) - ord("A") + 1: int(v) for i, v in _RESULT.findall(line.split(": ", 1)[-1])})
        if a.role == "ceo" and a.turns == 0:
            return self._ceo_first(r.problem, strat, mind, r.org.max_experts)
        return self._work(r.problem, strat, mind)

    def _ceo_first(self, problem: ArithProblem, strat: Strategy, mind: _Mind, max_experts: int) -> str:
        k = min(strat.experts, max_experts)
        if k == 0:
            mind.plan = [it.index for it in problem.items]
            return self._work(problem, strat, mind)
        experts = [f"expert-{i}" for i in range(1, k + 1)]
        plan = assign(problem, experts + (["ceo"] if strat.ceo_works else []), strat.split)
        mind.plan = plan.get("ceo", [])
        text = '<hire role="expert"/>' * k
        text += "".join(f'<msg to="{e}">{" ".join(label(i) for i in plan[e])}</msg>' for e in experts if plan[e])
        return text if mind.plan else text + "<done/>"

    def _work(self, problem: ArithProblem, strat: Strategy, mind: _Mind) -> str:
        text, fresh = "", {}
        todo = [i for i in mind.plan if i not in mind.known]
        done_now = 0
        for index in todo:
            if done_now >= strat.items_per_turn:
                break
            dep = problem.item(index).dep
            if dep is not None and dep not in mind.known:
                if strat.share == "recompute":
                    text += self._recompute(problem, dep, mind)
                else:  # the dependency is a teammate's: wait for it to be shared
                    text += self._post(strat, fresh)
                    if strat.share == "poll":
                        return text + '<read ch="general" last="8"/>'
                    return text + "<wait/>"
            text += work_text(problem, index, mind.known)
            mind.known[index] = fresh[index] = problem.item(index).answer
            done_now += 1
        text += self._post(strat, fresh)
        remaining = [i for i in mind.plan if i not in mind.known]
        return text if remaining else text + "<done/>"

    def _recompute(self, problem: ArithProblem, index: int, mind: _Mind) -> str:
        """Work out an item without submitting it (and its own dependencies first)."""
        dep = problem.item(index).dep
        text = self._recompute(problem, dep, mind) if dep is not None and dep not in mind.known else ""
        text += work_text(problem, index, mind.known, submit=False)
        mind.known[index] = problem.item(index).answer
        return text

    def _post(self, strat: Strategy, fresh: dict[int, int]) -> str:
        if strat.share == "recompute" or not fresh:
            return ""
        body = " ".join(f"{label(i)}={v}" for i, v in fresh.items())
        fresh.clear()
        return f'<post ch="general">{body}</post>'
