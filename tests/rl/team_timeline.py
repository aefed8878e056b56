"""A hand-built org rollout whose contributions, staged terms and critical steps are known by
construction (used by test_credit.py and test_shaping_staged.py).

Problem (arith, modulus 10, K = 4): A = 1+2 = 3, B = #A+4 = 7 (B uses A's result), C = 5+1 = 6,
D = 2+2 = 4. Deadline 5 s. Team: ceo (t = 0), e1, e2, e3 hired at t = 1 (cap 4).

  turn  agent  [start, end]  what it does
  c1    ceo    [0.0, 1.0]    creates #team (all four), direct "go" to e1, e2, e3 (delivered 1.1)
  e1a   e1     [1.5, 2.0]    decides A = 3, posts "A=3" on #team (delivered 2.1)
  e3a   e3     [1.5, 2.0]    takes C, posts the wrong claim "A=5" (delivered 2.1), never submits
  c2    ceo    [2.0, 2.5]    decides C = 6, direct "C=6" to e2 (delivered 2.6)
  e2a   e2     [2.5, 3.0]    decides B = 7: it had "A=3" (2.1 <= 2.5) and B uses A
  e2b   e2     [3.5, 4.0]    decides D = 4 (D uses nothing)
"""

from __future__ import annotations

from swarmrl.collective.bus import MessageBus
from swarmrl.collective.org import Org
from swarmrl.collective.state import Agent, Rollout, Turn
from swarmrl.tasks.arith_items import ArithProblem, Item

PROBLEM = ArithProblem(id="hand", modulus=10, items=(
    Item(1, (1, 2), None, 3), Item(2, (0, 4), 1, 7), Item(3, (5, 1), None, 6), Item(4, (2, 2), None, 4)))


def _agent(name: str, role: str, created: float, took: bool = False, queue: list[int] | None = None) -> Agent:
    return Agent(name=name, role=role, ids=[1, 2], gen_mask=[0, 1], logprobs=[0.0, -1.0], created_at=created,
                 ready_at=None, seen_upto=0.0, took=took, queue=list(queue or []))


def _turn(agent: str, start: float, end: float) -> Turn:
    return Turn(agent=agent, role="ceo" if agent == "ceo" else "expert", start=start, end=end, observation="",
                reply="", context_tokens=0, new_prompt_tokens=0, generated_tokens=1, actions=[], errors=[],
                after_deadline=False)


def _sub(t: float, agent: str, item: int, answer: str, correct: bool) -> dict:
    return {"t": t, "agent": agent, "item": item, "answer": answer, "seq": 0, "correct": correct,
            "score": float(correct), "status": "pass" if correct else "fail", "final": True}


def team_rollout(index: int = 0, group: int = 0) -> Rollout:
    agents = {"ceo": _agent("ceo", "ceo", 0.0), "e1": _agent("e1", "expert", 1.0, took=True),
              "e2": _agent("e2", "expert", 1.0, took=True), "e3": _agent("e3", "expert", 1.0, took=True, queue=[3])}
    bus = MessageBus(latency_s=0.1)
    r = Rollout(index=index, group=group, problem=PROBLEM, time_limit=5.0, agents=agents, org=Org(max_experts=4),
                bus=bus)
    assert bus.create_channel("team", "ceo", ["ceo", "e1", "e2", "e3"], 1.0) is None
    for name in ("e1", "e2", "e3"):
        bus.send_direct("ceo", name, "go", 1.0)
    bus.post("e1", "team", "A=3", 2.0)
    bus.post("e3", "team", "A=5", 2.0)
    bus.send_direct("ceo", "e2", "C=6", 2.5)
    r.turns = [_turn("ceo", 0.0, 1.0), _turn("e1", 1.5, 2.0), _turn("e3", 1.5, 2.0), _turn("ceo", 2.0, 2.5),
               _turn("e2", 2.5, 3.0), _turn("e2", 3.5, 4.0)]
    r.submissions = [_sub(2.0, "e1", 1, "3", True), _sub(2.5, "ceo", 3, "6", True), _sub(3.0, "e2", 2, "7", True),
                     _sub(4.0, "e2", 4, "4", True)]
    r.solved = {1: 2.0, 3: 2.5, 2: 3.0, 4: 4.0}
    r.solved_by = {1: "e1", 3: "ceo", 2: "e2", 4: "e2"}
    r.item_scores = {i: 1.0 for i in r.solved}
    r.finished_at, r.end_reason = 4.0, "solved"
    return r
