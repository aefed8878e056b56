"""Verified contributions per agent: what the `contribution` estimator credits (rl/advantages.py).

Under the flat collective advantage every agent of a rollout gets the rollout's score, so an
expert that solved nothing is reinforced exactly like the one that solved everything. Who did
what is in the rollout's record; this module reads it. An agent's contribution is

    c = (sum of the credit of the items it decided correctly
         + sum of the credit of the items *another* agent decided correctly after having received
           a verified result from it that the item used) / K

counting only items decided at or before the deadline (what `Rollout.score` counts); credit
is `Rollout.item_scores` (1.0 for a plain correct answer) and K the problem's item count.

- **Decided**: `Rollout.solved_by`, the agent whose submission decided the item (grading.py).
- **Verified result**: a (item i, value v) that the task's `learn` reads in a message the agent
  sent, where v is the answer of the correct submission that decided item i. A wrong claim
  earns nothing.
- **Received**: the message was delivered to the solver of item j (`MessageBus.inbox`, so
  channel membership at delivery counts) at or before the start of the turn whose
  submission decided j.
- **Used**: item j's rendering depends on the result of item i: `task.render_item(problem, j,
  {i: v})` differs from `task.render_item(problem, j, {})` (arith: i is j's dependency, filled
  into j's desk line). When the solver of j decided item i itself, nobody is a helper through
  i; each (helper, item j) pair counts once however many messages carried the result.

Without a task (or where `render_item` ignores what is known: math, code) only decided items
count. Messages from the workflow router (sender `wf`, not an agent) never earn credit.

`leave_one_out` is the counterfactual reading of the same record (a difference reward,
D_a = score - score without a): remove agent a's decided items and, transitively, every
decided item that used one of their results (from whoever relayed it, or the solver's own
decision); D_a is the credit removed, / K. It assumes messages are replaceable and work is
not: a relay earns nothing, while the decider of an item earns everything built on it.
"""

from __future__ import annotations

from typing import Any

from swarmrl.collective.state import Rollout


def _turn_start(r: Rollout, agent: str, end: float) -> float:
    """Start of `agent`'s turn that ended at `end` (a submission lands at its turn's end)."""
    starts = [t.start for t in r.turns if t.agent == agent and t.end == end]
    return min(starts) if starts else end


def _uses(task: Any, r: Rollout, item: int, dep: int, value: str) -> bool:
    """Item `item`'s rendering depends on the result of item `dep` (stated as `value`)."""
    return dep != item and task.render_item(r.problem, item, {dep: value}) != task.render_item(r.problem, item, {})


def _verified(r: Rollout) -> dict[int, str]:
    """item -> the answer of the correct submission that decided it."""
    return {s["item"]: str(s["answer"]).strip() for s in r.submissions if s.get("final") and s.get("correct")}


def _used_messages(r: Rollout, task: Any, item: int, solver: str, verified: dict[int, str]) -> list:
    """Messages from other agents that reached the solver before it decided `item` and carried a
    verified result that `item` used."""
    start = _turn_start(r, solver, r.solved[item])
    out = []
    for m in r.bus.inbox(solver, float("-inf"), start):
        if m.sender == solver or m.sender not in r.agents:
            continue
        stated = task.learn(r.problem, m.text)  # {item: value} as claimed
        if any(i in verified and v.strip() == verified[i] and r.solved_by.get(i) != solver
               and _uses(task, r, item, i, verified[i]) for i, v in stated.items()):
            out.append(m)
    return out


def _helpers(r: Rollout, task: Any, item: int, solver: str, verified: dict[int, str]) -> set[str]:
    """Agents (other than the solver) whose verified result reached the solver before it decided
    `item` and which `item` used."""
    return {m.sender for m in _used_messages(r, task, item, solver, verified)}


def agent_contributions(r: Rollout, task: Any = None) -> dict[str, float]:
    """Contribution score of every agent of the rollout (module docstring); 0.0 for an agent that
    contributed nothing. `task`: the run's task (for `learn` and `render_item`), or None for
    decided items only."""
    k = r.problem.num_items
    out = {name: 0.0 for name in r.agents}
    credit = {i: r.item_scores.get(i, 1.0) for i, t in r.solved.items() if t <= r.time_limit}
    for i, c in credit.items():
        if r.solved_by.get(i) in out:
            out[r.solved_by[i]] += c / k
    if task is None:
        return out
    verified = _verified(r)
    for j, c in credit.items():
        for helper in _helpers(r, task, j, r.solved_by.get(j, ""), verified):
            out[helper] += c / k
    return out


def _inputs(r: Rollout, task: Any, item: int, verified: dict[int, str]) -> set[int]:
    """Decided items whose verified result `item` used: received by its solver before the turn
    that decided `item` started (from any agent), or decided by the solver itself by then."""
    solver = r.solved_by.get(item, "")
    start = _turn_start(r, solver, r.solved[item])
    had = {i for i, t in r.solved.items() if r.solved_by.get(i) == solver and t <= r.solved[item]}
    for m in r.bus.inbox(solver, float("-inf"), start):
        had |= {i for i, v in task.learn(r.problem, m.text).items() if verified.get(i) == v.strip()}
    return {i for i in had if i in verified and _uses(task, r, item, i, verified[i])}


def leave_one_out(r: Rollout, task: Any = None) -> dict[str, float]:
    """Difference reward of every agent (module docstring): the credit of the items that would
    be gone without it, / K. `task` None: its decided items only (no item is known to use another)."""
    k = r.problem.num_items
    credit = {i: r.item_scores.get(i, 1.0) for i, t in r.solved.items() if t <= r.time_limit}
    verified = _verified(r)
    inputs = {j: _inputs(r, task, j, verified) if task is not None else set() for j in credit}
    out = {}
    for name in r.agents:
        gone = {j for j in credit if r.solved_by.get(j) == name}
        more = {j for j in credit if j not in gone and inputs[j] & gone}
        while more:  # an item built on a removed result is removed too, down the chain
            gone |= more
            more = {j for j in credit if j not in gone and inputs[j] & gone}
        out[name] = sum(credit[j] for j in gone) / k
    return out


def message_usefulness(r: Rollout, task: Any = None) -> dict[str, int]:
    """How many of the agents' messages sent by the deadline were useful, two ways:

    - `followed`: a reader (the recipient, or a channel member at delivery) decided an item
      correctly by the deadline in a turn that started after the message arrived (a brief
      or a hint that was followed by work; necessary for usefulness, not proof of it);
    - `used`: it carried a verified result that an item its reader decided used (the
      contribution estimator's "results it posted that others used"; needs `task`).
    Returns {"sent", "followed", "used"}."""
    sent = [m for m in r.bus.messages if m.sender in r.agents and m.sent_at <= r.time_limit]
    decided = [(r.solved_by.get(i, ""), _turn_start(r, r.solved_by.get(i, ""), t))
               for i, t in r.solved.items() if t <= r.time_limit]
    followed = sum(1 for m in sent if any(start >= m.deliver_at and r.bus.reads(who, m) for who, start in decided))
    used: set[int] = set()
    if task is not None:
        verified = _verified(r)
        for j, t in r.solved.items():
            if t <= r.time_limit:
                used |= {m.id for m in _used_messages(r, task, j, r.solved_by.get(j, ""), verified)}
    return {"sent": len(sent), "followed": followed, "used": len({m.id for m in sent} & used)}


def credit_metrics(rollouts: list[Rollout], seqs: list, task: Any = None) -> dict[str, float]:
    """Per-step credit diagnostics over `rollouts` and their sequences (`rl/batch.py` TrainSeq:
    one per agent that generated anything, with its `contribution`): per role, the share of
    those agents that contributed nothing (`role/<role>/idle_share`; org experts that solved
    nothing and passed on nothing used), and the share of messages followed by work / whose
    result was used."""
    idle: dict[str, list[int]] = {}
    for s in seqs:
        idle.setdefault(s.role, []).append(int(s.contribution <= 0.0))
    sent = followed = used = 0
    for r in rollouts:
        u = message_usefulness(r, task)
        sent, followed, used = sent + u["sent"], followed + u["followed"], used + u["used"]
    out = {f"role/{role}/idle_share": sum(v) / len(v) for role, v in sorted(idle.items())}
    if sent:
        out["messages_followed_share"] = followed / sent
        out["messages_used_share"] = used / sent
    return out
