"""Scripted role policies for `arith`: the demonstrations of the warm start.

They cover every strategy the collective could choose, in comparable amounts, so that RL
*selects* among them: solve alone or hire k = 1..8 experts; brief each expert
with a block of items, or let the experts take items one at a time from the shared board
(`<hire role="expert" item="next"/>`: no brief, so the hiring turn stays short, and the
hire starts on its first item); share results on the channel and wait for
them, poll the archive for them, or take the dependency and recompute it; the CEO works
too or only manages. None of them is "the best" by construction: which one
pays depends on the deadline, and that is what RL must find out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from swarmrl.collective.grading import parse_label
from swarmrl.collective.handlers import BOARD_NEXT
from swarmrl.collective.state import TurnRequest
from swarmrl.policy.sampler import Sample
from swarmrl.tasks.arith_items import ArithProblem, label, work_text

BOARD_TAKE = f'<take item="{BOARD_NEXT}"/>'
BOARD_HIRE = f'<hire role="expert" item="{BOARD_NEXT}"/>'  # a hire that starts on the board's next item


@dataclass(frozen=True)
class Strategy:
    experts: int  # 0 = the CEO solves everything alone
    share: str = "wait"  # wait: post results, wait for others' | poll: read the archive | recompute
    ceo_works: bool = False  # the CEO keeps the last block of items (on the board: takes items too)
    board: bool = False  # experts take items one at a time from the board instead of a brief
    # A hierarchy (workflow.manager_hires > 0; board strategies only): the CEO hires this many
    # managers, each of whom hires a near-equal share of the other experts from the board
    # and then works from the board. 0 = the CEO hires everyone.
    managers: int = 0
    # The CEO takes the problem's longest dependency chain in its first turn and solves it itself,
    # so no link of it waits for a post (board strategies; the warm start draws it only under
    # task.chain_demo_rate > 0).
    chain: bool = False

    def label(self) -> str:
        if self.experts == 0:
            return "solo"
        return (f"team{self.experts}/{'board/' if self.board else ''}{self.share}"
                f"{'/ceo-works' if self.ceo_works else ''}{f'/managers{self.managers}' if self.managers else ''}"
                f"{'/chain' if self.chain else ''}")

    def manager_shares(self) -> list[int]:
        """Experts each manager hires (first managers take more): 20 experts, 4 managers -> 4 4 4 4."""
        if self.experts <= self.managers:
            return []
        return [hi - lo + 1 for lo, hi in blocks(self.experts - self.managers, self.managers)]


def sample_strategy(rng: np.random.Generator, max_experts: int, board_rate: float = 0.0,
                    chain_rate: float = 0.0) -> Strategy:
    """Team size uniform over 0..max_experts; the board with probability `board_rate`, and on
    the board the CEO's chain with probability `chain_rate`; every other knob uniform."""
    k = int(rng.integers(0, max_experts + 1))
    if k == 0:  # alone there is no one to share with
        return Strategy(0, share="recompute")
    share, ceo_works = str(rng.choice(["wait", "poll", "recompute"])), bool(rng.random() < 0.3)
    board = bool(board_rate) and bool(rng.random() < board_rate)  # no draw when off: old streams unchanged
    chain = board and bool(chain_rate) and bool(rng.random() < chain_rate)
    return Strategy(k, share=share, ceo_works=ceo_works and not chain, board=board, chain=chain)


def blocks(num_items: int, workers: int) -> list[tuple[int, int]]:
    """Contiguous, near-equal blocks (first ones larger): 8 items, 3 workers -> A-C, D-F, G-H."""
    workers = min(workers, num_items)
    base, extra = divmod(num_items, workers)
    out, start = [], 1
    for w in range(workers):
        size = base + (1 if w < extra else 0)
        out.append((start, start + size - 1))
        start += size
    return out


def longest_chain(problem: ArithProblem) -> list[int]:
    """The longest run of items each starting from the one before (root first): D:#A, I:#D, J:#I
    -> [A, D, I, J]. Its length bounds how soon anyone can finish the problem."""
    chains: dict[int, list[int]] = {}
    for it in problem.items:  # a dependency always comes earlier
        chains[it.index] = (chains[it.dep] if it.dep is not None else []) + [it.index]
    return max(chains.values(), key=len)


def range_text(lo: int, hi: int) -> str:
    return label(lo) if lo == hi else f"{label(lo)}-{label(hi)}"


def block_refs(problem: ArithProblem, workers: int) -> list[str]:
    """`blocks` of the problem's items as `take` references (the items may be labelled sparsely)."""
    ix = problem.item_indices
    return [range_text(ix[lo - 1], ix[hi - 1]) for lo, hi in blocks(problem.num_items, workers)]


class ScriptedActor:
    """An Actor that writes the strategy's replies as text and tokenizes them."""

    def __init__(self, tokenizer, end_id: int, strategies: dict[int, Strategy], post_items: bool = False):
        self.tokenizer = tokenizer
        self.end_id = end_id
        self.strategies = strategies  # rollout index -> strategy
        self.post_items = post_items  # share a result by naming its item: the runtime writes the value

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
        lines = req.observation.splitlines()[:-1]  # drop the turn cue
        if a.role == "ceo" and a.turns == 0:
            return self._ceo_first(r.problem, strat, r.org.max_experts)
        if strat.board and strat.managers and a.turns == 0 and r.org.boss_of(a.name) == "ceo":
            return self._manager_first(strat, int(a.name.rsplit("-", 1)[1]) - 1) + self._work(
                r.problem, strat, lines[-1] if lines else "")
        if not a.took:  # a new briefed expert's first turn: its brief is the last line
            brief = next(line for line in reversed(lines) if line.startswith("@ceo: "))
            return f'<take item="{brief[6:].strip()}"/>'
        return self._work(r.problem, strat, lines[-1] if lines else "")

    def _ceo_first(self, problem: ArithProblem, strat: Strategy, max_experts: int) -> str:
        k = min(strat.experts, max_experts)
        if k == 0:
            return f'<take item="{range_text(problem.item_indices[0], problem.item_indices[-1])}"/>'
        if strat.board and strat.chain:  # taken items go to the front: take the chain from its end
            takes = "".join(f'<take item="{label(i)}"/>' for i in reversed(longest_chain(problem)))
            return takes + BOARD_HIRE * k
        if strat.board:  # each hire starts with the board's next item on its desk: no brief, no kickoff
            hires = min(strat.managers, k) if strat.managers else k
            return BOARD_HIRE * hires + (BOARD_TAKE if strat.ceo_works else "<done/>")
        parts = block_refs(problem, k + (1 if strat.ceo_works else 0))
        text = '<hire role="expert"/>' * len(parts[:k])
        text += "".join(f'<msg to="expert-{i + 1}">{b}</msg>' for i, b in enumerate(parts[:k]))
        if strat.ceo_works and len(parts) > k:
            return text + f'<take item="{parts[k]}"/>'
        return text + "<done/>"

    @staticmethod
    def _manager_first(strat: Strategy, index: int) -> str:
        """Manager `index` (0-based, in the CEO's hire order): its share of hires, each from the board
        (the manager then works the item on its own desk)."""
        shares = strat.manager_shares()
        return BOARD_HIRE * (shares[index] if index < len(shares) else 0)

    def _work(self, problem: ArithProblem, strat: Strategy, desk: str) -> str:
        """One item per turn: the item in hand is the observation's last line."""
        if desk == "(no items left)" or ":" not in desk:
            return "<done/>"
        ref, expr = desk.split(":", 1)
        index = parse_label(ref)
        if expr.startswith("#"):  # a dependency this agent has not seen yet
            if strat.share == "wait":
                return "<wait/>"
            if strat.share == "poll":
                return '<read ch="general" last="8"/>'
            return f'<take item="{expr[1:].split("+")[0]}"/>'  # recompute it first
        known = {problem.item(index).dep: expr.split("+")[0]} if problem.item(index).dep else {}
        text = work_text(problem, index, known)
        if strat.experts and strat.share != "recompute":
            text += (f'<post ch="general" item="{ref}"/>' if self.post_items
                     else f'<post ch="general">{ref}={problem.item(index).answer}</post>')
        return text
