"""Scripted role policies of the fixed workflows on `arith`: the warm start's demonstrations.

Each role does its job the straightforward way, reading the item in hand from the desk
(the observation's last line, see collective/runtime.py):

    answer   `C:4+1+2`        -> write the partial sums and submit (take a missing dependency
                                 and recompute it first); with candidates `C:4+1+2?7,no` (the
                                 reviser) keep an approved answer, recompute a rejected one
    choice   `C:4+1+2?7,7,6`  -> submit the majority (aggregator, synthesizer)
    verdict  `C:4+1+2?7`      -> write the partial sums, then yes / no
    plan     first turn        -> contiguous blocks of items to the workers

Solvers make a deliberate slip (an off-by-one final sum) with probability `slip_rate`, so
the demonstrations contain the disagreements, rejections and revisions that give the
downstream roles something to do, and so RL has room to improve the solvers.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence


from swarmrl.collective.grading import parse_label
from swarmrl.collective.state import TurnRequest
from swarmrl.seeds import rng_for
from swarmrl.policy.sampler import Sample
from swarmrl.tasks.arith_items import ArithProblem, label, work_text
from swarmrl.tasks.arith_scripts import block_refs


def parse_desk(line: str) -> tuple[int, str, list[str]] | None:
    """`C:4+1+2?7,no` -> (3, "4+1+2", ["7", "no"]); None when there is no item in hand."""
    ref, sep, rest = line.partition(":")
    index = parse_label(ref) if sep else None
    if index is None:
        return None
    expr, _, cands = rest.partition("?")
    return index, expr, [c for c in cands.split(",") if c]


def slipped(problem: ArithProblem, index: int, known: dict[int, str], slip: bool) -> str:
    """The solution text, with the final sum off by one when `slip` (a wrong answer)."""
    text = work_text(problem, index, known, submit=False)
    head, _, last = text.rpartition("=")
    value = int(last)
    if slip:
        value = (value + 1) % problem.modulus
    return f"{head}={value}", str(value)


class WorkflowScriptedActor:
    """Writes the fixed workflows' role replies; `fallback` handles rollouts of scenarios without a role graph."""

    def __init__(self, tokenizer, end_id: int, slip_rate: float = 0.2, seed: int = 0, fallback=None):
        self.tokenizer = tokenizer
        self.end_id = end_id
        self.slip_rate = slip_rate
        self.rng = rng_for("demo_slips", seed)
        self.fallback = fallback

    def act(self, requests: Sequence[TurnRequest], seed: int) -> list[Sample]:
        out: list[Sample | None] = [None] * len(requests)
        org = [i for i, r in enumerate(requests) if getattr(r.rollout.scenario, "workflow", None) is None]
        if org:
            if self.fallback is None:
                raise ValueError("an org rollout reached the workflow script without a fallback actor")
            for i, s in zip(org, self.fallback.act([requests[i] for i in org], seed)):
                out[i] = s
        for i, req in enumerate(requests):
            if out[i] is None:
                ids = self.tokenizer.encode(self.reply(req), add_special_tokens=False) + [self.end_id]
                out[i] = Sample(ids=ids, logprobs=[0.0] * len(ids))
        return out  # type: ignore[return-value]

    def reply(self, req: TurnRequest) -> str:
        r, a = req.rollout, req.agent
        wf = r.scenario.workflow
        spec = wf.role(a.role)
        problem: ArithProblem = r.problem
        if spec.expects == "plan":
            if a.turns > 0:
                return "<done/>"
            workers = [n for d in wf.downstream(a.role) for n in d.agent_names()]
            parts = block_refs(problem, len(workers))
            return "".join(f'<assign who="{w}" item="{b}"/>' for w, b in zip(workers, parts)) + "<done/>"
        lines = req.observation.splitlines()[:-1]
        desk = parse_desk(lines[-1]) if lines else None
        if desk is None:
            return "<done/>"
        index, expr, cands = desk
        ref = label(index)
        if spec.expects == "choice" and cands:
            top = Counter(cands).most_common(1)[0][0]
            return f'<submit item="{ref}">{top}</submit>'
        if expr.startswith("#"):  # a dependency not seen yet: take it and compute it first
            return f'<take item="{expr[1:].split("+")[0]}"/>'
        dep = problem.item(index).dep
        known = {dep: expr.split("+")[0]} if dep else {}
        if spec.expects == "verdict":
            work, value = slipped(problem, index, known, slip=False)
            verdict = "yes" if cands and cands[0] == value else "no"
            return f'{work}<verdict item="{ref}">{verdict}</verdict>'
        if cands and "yes" in cands[1:]:  # reviser: the evaluator approved the draft
            return f'<submit item="{ref}">{cands[0]}</submit>'
        slip = not cands and self.rng.random() < self.slip_rate  # solvers slip; a reviser recomputes carefully
        work, value = slipped(problem, index, known, slip)
        return f'{work}<submit item="{ref}">{value}</submit>'
