"""One graded submission per item: the first to land decides it; guessing cannot pay."""

from __future__ import annotations

import numpy as np
import pytest

from swarmrl.collective.grading import settle
from tests.collective.runtime_helpers import (
    NO_DEADLINE, ScriptActor, encode, make_runtime, problems, transcript, turns_of)


class Guesser:
    """Turn i submits 0, 1, ..., 9 for item i+1 (every possible arith answer), then stops."""

    def __init__(self, k: int):
        self.k = k

    def act(self, requests, seed):
        out = []
        for q in requests:
            i = q.agent.turns
            if i < self.k:
                label = chr(ord("A") + i)
                out.append(encode("".join(f'<submit item="{label}">{g}</submit>' for g in range(10))))
            else:
                out.append(encode("<done/>"))
        return out


def run_guesser(n: int, k: int = 4):
    rt = make_runtime(k=k, dep=0.0)
    ps = problems(rt, n, seed=7)
    rs = [rt.new_rollout(i, 0, p, NO_DEADLINE, 0) for i, p in enumerate(ps)]
    rt.run(rs, Guesser(k), seed=0)
    return rs


def test_guessing_every_answer_scores_only_the_first_guess():
    rs = run_guesser(n=20)
    for r in rs:
        answers = [it.answer for it in r.problem.items]
        # Each item is decided by the guess "0": right exactly when the answer is 0.
        assert r.score == sum(a == 0 for a in answers) / 4
        assert r.counters["wrong_submits"] == sum(a != 0 for a in answers)
        assert r.counters["duplicate_submits"] == 9 * 4  # every guess after the first
        assert set(r.solved) == {i + 1 for i, a in enumerate(answers) if a == 0}
    zeros = sum(it.answer == 0 for r in rs for it in r.problem.items)
    mean = float(np.mean([r.score for r in rs]))
    assert mean == zeros / 80 and mean < 0.25  # answers are uniform on 0..9: about 1/10 expected


def test_a_correct_agent_beats_the_guesser():
    rt = make_runtime(k=4, dep=0.0)
    (p,) = problems(rt, 1, seed=7)
    reply = "".join(f'<submit item="{chr(65 + i)}">{it.answer}</submit>' for i, it in enumerate(p.items))
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 0)
    rt.run([r], ScriptActor({("ceo", 0): reply}), seed=0)
    assert r.score == 1.0 and r.counters["wrong_submits"] == 0 and r.counters["duplicate_submits"] == 0
    assert run_guesser(n=1)[0].score < r.score


def test_wrong_and_duplicate_submissions_are_told_after_a_message_latency():
    rt = make_runtime(k=4, dep=0.0)
    (p,) = problems(rt, 1)
    a, b = p.items[0].answer, p.items[1].answer
    wrong = (a + 1) % 10
    script = {("ceo", 0): f'<submit item="A">{wrong}</submit><submit item="A">{a}</submit>'
                          f'<submit item="B">{b}</submit>',
              ("ceo", 1): "thinking", ("ceo", 2): "<done/>"}
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 0)
    rt.run([r], ScriptActor(script), seed=0)
    t0, t1, t2 = turns_of(r, "ceo")
    # Turn 1 starts when turn 0 lands, before the verdicts (one message latency, 0.1 s) are due.
    assert t1.start == t0.end and t1.observation == ">>"
    assert t2.observation == "error: item A: wrong answer\nerror: item A was already submitted\n>>"
    assert r.counters["wrong_submits"] == 1 and r.counters["duplicate_submits"] == 1
    assert r.score == 1 / 4 and r.solved == {2: t0.end}  # A was decided by the wrong answer
    assert [s["status"] for s in r.submissions] == ["fail", "not_graded", "pass"]
    assert [s["final"] for s in r.submissions] == [True, False, True]


def _race(batching: bool, first_right: bool):
    """The CEO starts a long turn submitting A; expert-1 starts later, lands first, submits A."""
    rt = make_runtime(k=4, dep=0.0, batching=batching)
    (p,) = problems(rt, 1)
    right, wrong = str(p.items[0].answer), str((p.items[0].answer + 1) % 10)
    expert, ceo = (right, wrong) if first_right else (wrong, right)
    script = {("ceo", 0): '<hire role="expert">go</hire>',
              ("ceo", 1): "x" * 60 + f'<submit item="A">{ceo}</submit>', ("ceo", 2): "<wait/>",
              ("expert-1", 0): f'<submit item="A">{expert}</submit>', ("expert-1", 1): "<wait/>"}
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 3)
    rt.run([r], ScriptActor(script), seed=0)
    return r


@pytest.mark.parametrize("first_right", [True, False])
def test_the_earliest_landing_decides_not_the_earliest_start(first_right):
    r = _race(True, first_right)
    c1, e0 = turns_of(r, "ceo")[1], turns_of(r, "expert-1")[0]
    assert c1.start < e0.start and e0.end < c1.end  # started later, landed first
    assert r.score == (0.25 if first_right else 0.0)
    assert r.counters["duplicate_submits"] == 1
    assert r.counters["wrong_submits"] == (0 if first_right else 1)
    # The CEO's answer was not graded, right or wrong: it is told it came too late, one
    # message latency after it landed; the verdict wakes it from its <wait/>.
    c2, c3 = turns_of(r, "ceo")[2:]
    assert c2.start == c1.end and c2.observation == ">>"
    assert c1.end + 0.1 < c2.end == c3.start and c3.observation == "error: item A was already submitted\n>>"
    assert transcript(r) == transcript(_race(False, first_right))


def test_settle_orders_by_landing_time_then_agent_then_reply_order():
    subs = [{"t": 2.0, "agent": "ceo", "seq": 0, "item": 1, "correct": True, "status": "pass"},
            {"t": 1.0, "agent": "expert-2", "seq": 0, "item": 1, "correct": False, "status": "fail"},
            {"t": 1.0, "agent": "expert-1", "seq": 1, "item": 1, "correct": True, "status": "pass"},
            {"t": 1.0, "agent": "expert-1", "seq": 0, "item": 2, "correct": False, "status": "infra_error"},
            {"t": 3.0, "agent": "ceo", "seq": 1, "item": 2, "correct": False, "status": "fail"}]
    st = settle(subs)
    assert st.first == {1: subs[2], 2: subs[4]}  # the infra error decides nothing
    assert st.wrong == 1 and st.duplicates == 2

