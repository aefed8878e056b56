"""critical_steps (diagnostics/collective.py): the longest chain of causally dependent turns, on a
constructed timeline whose chains are known by hand."""

from __future__ import annotations

from swarmrl.collective.bus import MessageBus
from swarmrl.collective.org import Org
from swarmrl.collective.state import Agent, Rollout, Turn
from swarmrl.diagnostics.collective import at_limit, collective_metrics, critical_steps, snapshot_metrics
from swarmrl.tasks.arith_items import ArithProblem, Item

PROBLEM = ArithProblem(id="p", modulus=10, items=(Item(1, (1, 2), None, 3),))


def _turn(agent: str, start: float, end: float) -> Turn:
    return Turn(agent, "ceo" if agent == "ceo" else "expert", start, end, "", "", 0, 0, 1, [], [], False)


def timeline() -> Rollout:
    """ceo c1 [0, 1] sends "go" to e1 and e2 (delivered 1.1); e1 a [1.5, 2] posts on #t
    (delivered 2.1); ceo c2 [2, 2.5] sends "x" to e2 (delivered 2.6); e2 b [2.5, 3]; e2 b' [3.5, 4];
    e1 a' [5, 6] depends only on e1's own turn a.

    chains: c1 = 1; a = 2 (go); c2 = 2 (c1; #t arrives after it started); b = 3 (go, a's post);
    b' = 4 (b, and x from c2 = 2); a' = 3 (a). Longest: 4."""
    agents = {n: Agent(n, "ceo" if n == "ceo" else "expert", [], [], [], 0.0 if n == "ceo" else 1.0, None, 0.0)
              for n in ("ceo", "e1", "e2")}
    bus = MessageBus(latency_s=0.1)
    r = Rollout(index=0, group=0, problem=PROBLEM, time_limit=10.0, agents=agents, org=Org(), bus=bus)
    assert bus.create_channel("t", "ceo", ["ceo", "e1", "e2"], 1.0) is None
    bus.send_direct("ceo", "e1", "go", 1.0)
    bus.send_direct("ceo", "e2", "go", 1.0)
    bus.post("e1", "t", "A=3", 2.0)
    bus.send_direct("ceo", "e2", "x", 2.5)
    r.turns = [_turn("ceo", 0, 1), _turn("e1", 1.5, 2), _turn("ceo", 2, 2.5), _turn("e2", 2.5, 3),
               _turn("e2", 3.5, 4), _turn("e1", 5, 6)]
    r.finished_at, r.end_reason = 6.0, "idle"
    return r


def test_critical_steps_by_hand():
    r = timeline()
    assert critical_steps(r) == 4
    assert critical_steps(r, 3.0) == 3  # turns started before 3 s: c1, a, c2, b
    assert critical_steps(r, 2.2) == 2
    assert critical_steps(r, 0.0) == 0


def test_a_serial_agent_has_as_many_critical_steps_as_turns():
    r = timeline()
    r.turns = [_turn("ceo", float(i), i + 0.5) for i in range(5)]
    assert critical_steps(r) == 5


def test_a_message_sent_after_the_turn_started_is_no_dependency():
    r = timeline()
    r.turns[3].start = 2.05  # b starts before e1's post is delivered (2.1): go only -> b = 2, b' = 3
    assert critical_steps(r) == 3


def test_critical_steps_is_reported_next_to_critical_path():
    r = timeline()
    assert at_limit(r, 3.0).critical_steps == 3
    assert snapshot_metrics([at_limit(r, 10.0), at_limit(r, 3.0)])["critical_steps"] == 3.5
    r.scenario = type("S", (), {"team_size": staticmethod(lambda _r: 3), "role_types": staticmethod(lambda: ["ceo"])})()
    m = collective_metrics([r])
    assert m["critical_steps"] == 4.0 and "critical_path_s" in m
