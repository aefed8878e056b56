"""Verified contributions per agent (rl/credit.py) on the hand-built timeline of team_timeline.py,
and their way into TrainSeq through collect_sequences."""

from __future__ import annotations

import pytest

from swarmrl.config import TaskConfig
from swarmrl.rl.batch import collect_sequences
from swarmrl.collective.bus import MessageBus
from swarmrl.rl.credit import agent_contributions, credit_metrics, leave_one_out, message_usefulness
from swarmrl.tasks.arith import ArithTask
from team_timeline import team_rollout

TASK = ArithTask(TaskConfig(items_per_problem=4))


def test_contributions_by_hand():
    # K = 4, every item worth 1/4.
    # e1: decided A (1/4) + its verified "A=3" reached e2 before e2 decided B, which uses A (1/4)
    # e2: decided B and D; ceo: decided C ("C=6" reached e2 after B's turn started, D uses nothing)
    # e3: its "A=5" is wrong (A's deciding answer is 3): nothing
    assert agent_contributions(team_rollout(), TASK) == {"ceo": 0.25, "e1": 0.5, "e2": 0.5, "e3": 0.0}


def test_without_a_task_only_decided_items_count():
    assert agent_contributions(team_rollout()) == {"ceo": 0.25, "e1": 0.25, "e2": 0.5, "e3": 0.0}


def test_items_after_the_deadline_and_late_messages_count_nothing():
    r = team_rollout()
    r.time_limit = 3.5  # D (decided at 4.0) no longer counts
    assert agent_contributions(r, TASK) == {"ceo": 0.25, "e1": 0.5, "e2": 0.25, "e3": 0.0}
    r = team_rollout()
    r.turns[4].start = 2.05  # e2 decides B in a turn that started before "A=3" arrived (2.1)
    assert agent_contributions(r, TASK)["e1"] == 0.25


def test_partial_credit_scales_both_terms():
    r = team_rollout()
    r.item_scores[2] = 0.5  # B earned half credit: e2 and its helper e1 each get 0.5 / 4 for it
    got = agent_contributions(r, TASK)
    assert got["e1"] == pytest.approx(0.25 + 0.125) and got["e2"] == pytest.approx(0.125 + 0.25)


def test_collect_sequences_fills_the_contribution():
    seqs = collect_sequences([team_rollout()], task=TASK)
    assert [(s.role, s.contribution) for s in seqs] == [("ceo", 0.25), ("expert", 0.5), ("expert", 0.5),
                                                        ("expert", 0.0)]
    assert [s.contribution for s in collect_sequences([team_rollout()])] == [0.25, 0.25, 0.5, 0.0]


def relayed_rollout():
    """team_timeline, except that e1 posts "A=3" where e2 does not hear it (#core: ceo, e1) and
    the ceo relays it to e2 directly at 2.2 (delivered 2.3, before e2's turn at 2.5)."""
    r = team_rollout()
    bus = MessageBus(latency_s=0.1)
    bus.create_channel("core", "ceo", ["ceo", "e1"], 1.0)
    for name in ("e1", "e2", "e3"):
        bus.send_direct("ceo", name, "go", 1.0)
    bus.post("e1", "core", "A=3", 2.0)
    bus.send_direct("ceo", "e2", "A=3", 2.2)
    r.bus = bus
    return r


def test_leave_one_out_by_hand():
    # without e1: A goes, and B (built on A) with it: 2/4. e2: B and D. ceo: C. e3: nothing.
    assert leave_one_out(team_rollout(), TASK) == {"ceo": 0.25, "e1": 0.5, "e2": 0.5, "e3": 0.0}
    assert leave_one_out(team_rollout()) == {"ceo": 0.25, "e1": 0.25, "e2": 0.5, "e3": 0.0}


def test_a_relay_earns_contribution_but_no_difference_reward():
    r = relayed_rollout()
    # contribution: the ceo's relayed "A=3" is the verified result e2 used for B, e1's post never
    # reached e2: ceo C + B = 0.5, e1 A = 0.25
    assert agent_contributions(r, TASK) == {"ceo": 0.5, "e1": 0.25, "e2": 0.5, "e3": 0.0}
    # leave one out: without e1 nobody decides A, so B goes too; without the ceo only C goes
    assert leave_one_out(r, TASK) == {"ceo": 0.25, "e1": 0.5, "e2": 0.5, "e3": 0.0}


def test_leave_one_out_follows_a_chain():
    r = team_rollout()
    # make D use B's result (D = #B + 2) and have e2 decide it after B: without e1, A, B and D go
    from swarmrl.tasks.arith_items import ArithProblem, Item
    r.problem = ArithProblem(id="chain", modulus=10, items=(
        Item(1, (1, 2), None, 3), Item(2, (0, 4), 1, 7), Item(3, (5, 1), None, 6), Item(4, (0, 2), 2, 9)))
    r.submissions[3]["answer"] = "9"
    assert leave_one_out(r, TASK) == {"ceo": 0.25, "e1": 0.75, "e2": 0.5, "e3": 0.0}


def test_collect_sequences_fills_the_difference_reward():
    assert [s.leave_one_out for s in collect_sequences([relayed_rollout()], task=TASK)] == [0.25, 0.5, 0.5, 0.0]


def test_message_usefulness_by_hand():
    # six agent messages: "go" x3 (1.1), e1 "A=3" and e3 "A=5" on #team (2.1), ceo "C=6" to e2 (2.6).
    # followed by a decided item whose turn started after delivery: go->e1 (A at 1.5), go->e2 (B at
    # 2.5), "A=3" and "A=5" (e2 reads #team, B at 2.5), "C=6" (e2's D at 3.5); go->e3: e3 decided nothing.
    # used: only "A=3" (B uses A; "A=5" is not the verified answer, D uses nothing).
    assert message_usefulness(team_rollout(), TASK) == {"sent": 6, "followed": 5, "used": 1}
    assert message_usefulness(team_rollout()) == {"sent": 6, "followed": 5, "used": 0}
    # relayed: e1's post reaches only the ceo, whose C turn (2.0) started before it (2.1): not
    # followed; the ceo's relay to e2 is followed and used
    assert message_usefulness(relayed_rollout(), TASK) == {"sent": 5, "followed": 3, "used": 1}
    r = team_rollout()
    r.time_limit = 2.2  # only A counts (C decided at 2.5); "C=6" (sent 2.5) is past the deadline
    assert message_usefulness(r, TASK) == {"sent": 5, "followed": 1, "used": 0}


def test_credit_metrics_by_hand():
    rollouts = [team_rollout(), relayed_rollout()]
    m = credit_metrics(rollouts, collect_sequences(rollouts, task=TASK), TASK)
    # experts: e3 contributed nothing in both rollouts -> 2 idle of 6; the ceo never idle
    assert m["role/expert/idle_share"] == pytest.approx(2 / 6) and m["role/ceo/idle_share"] == 0.0
    assert m["messages_followed_share"] == pytest.approx((5 + 3) / 11)
    assert m["messages_used_share"] == pytest.approx(2 / 11)
