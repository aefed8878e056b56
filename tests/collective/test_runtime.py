"""The runtime's scheduling invariants (docs/ARCHITECTURE.md, "Invariants"): causality (1), deadline (2),
and the tie-breaking rules that keep batched and one-turn-at-a-time schedules identical."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import (LAT, NO_DEADLINE, latencies, make_runtime, problems, property_settings,
                             run_script, simulate, transcript, turns_of)

from swarmrl.collective.runtime import render_message

# ---------------------------------------------------------------- invariant 1: causality

@property_settings
@given(salt=st.integers(0, 10_000), n=st.integers(1, 6), k=st.integers(1, 4), latency=latencies,
       time_limit=st.sampled_from([2.0, 5.0, 12.0, NO_DEADLINE]))
def test_causal_batching_reproduces_one_turn_at_a_time(salt, n, k, latency, time_limit):
    batched = simulate(salt, n, k, latency, time_limit, batching=True)
    reference = simulate(salt, n, k, latency, time_limit, batching=False)
    for a, b in zip(batched, reference):
        assert transcript(a) == transcript(b)


def _live_lines(observation: str) -> list[str]:
    """Message lines delivered by the bus (not errors, archive reads, the desk line or the prompt cue)."""
    lines = observation.split("\n")[:-1]  # the last piece is the ">>" cue
    return [x for x in lines if not x.startswith("error:") and not x.split(" ", 1)[0].endswith("~")
            and not _DESK.match(x)]


_DESK = re.compile(r"[A-Z]+:|\(no items left\)$")  # the item in hand ("C:#A+1"), from a hire onto the board


def check_causality(r) -> int:
    """Each turn sees exactly the messages delivered in (its previous turn's start, its start]."""
    checked = 0
    for name, agent in r.agents.items():
        prev = agent.created_at
        for t in sorted(turns_of(r, name), key=lambda t: t.start):
            assert t.observation.endswith(">>")
            expected = r.bus.inbox(name, prev, t.start)  # computed after the fact: all messages exist
            assert all(prev < m.deliver_at <= t.start for m in expected)
            assert _live_lines(t.observation) == [render_message(m) for m in expected]
            # independent of bus.inbox for direct messages: all of them, none from the future
            directs = [m for m in r.bus.messages
                       if m.kind == "direct" and m.to == name and prev < m.deliver_at <= t.start]
            assert sorted(render_message(m) for m in directs) == sorted(
                x for x in _live_lines(t.observation) if x.startswith("@"))
            for line in t.observation.split("\n")[:-1]:
                if line.split(" ", 1)[0].endswith("~") and not line.endswith("(empty)"):
                    ch, rest = line.split(" ", 1)
                    sender, text = rest.split(": ", 1)
                    assert any(m.channel == ch[1:-1] and m.sender == sender and m.text == text
                               and m.deliver_at <= t.start for m in r.bus.messages), line
            checked += len(expected)
            prev = t.start
    return checked


@property_settings
@given(salt=st.integers(0, 10_000), n=st.integers(1, 6), k=st.integers(1, 4), latency=latencies,
       batching=st.booleans(), time_limit=st.sampled_from([2.0, 5.0, 12.0, NO_DEADLINE]))
def test_turn_sees_exactly_the_messages_delivered_since_its_last_turn(salt, n, k, latency, batching, time_limit):
    for r in simulate(salt, n, k, latency, time_limit, batching=batching):
        check_causality(r)


@property_settings
@given(salt=st.integers(0, 10_000), n=st.integers(1, 6), k=st.integers(1, 4), latency=latencies,
       batching=st.booleans())
def test_an_agent_never_runs_two_turns_at_once(salt, n, k, latency, batching):
    for r in simulate(salt, n, k, latency, NO_DEADLINE, batching=batching):
        for name in r.agents:
            ts = sorted(turns_of(r, name), key=lambda t: t.start)
            assert all(a.end <= b.start for a, b in zip(ts, ts[1:])), name


def test_causality_check_has_teeth():
    """The random actor really exchanges messages, and the check catches a wrong observation."""
    rollouts = simulate(0, 6, 3, LAT, NO_DEADLINE, batching=True)
    assert sum(check_causality(r) for r in rollouts) > 10
    r = next(r for r in rollouts if any(_live_lines(t.observation) for t in r.turns))
    t = next(t for t in r.turns if _live_lines(t.observation))
    t.observation = t.observation.split("\n", 1)[1]  # drop a delivered message
    with pytest.raises(AssertionError):
        check_causality(r)


def test_message_delivered_after_turn_start_waits_for_the_next_turn():
    # ceo: hire expert-1 with a brief, keep working (a long turn), then read its inbox.
    think = "x" * 40  # 40 tokens = 2 s of decoding
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert">go</hire>',
        ("ceo", 1): think + "<wait/>",
        ("expert-1", 0): '<msg to="ceo">hello</msg><done/>',
    })
    ceo = turns_of(r, "ceo")
    e1 = turns_of(r, "expert-1")
    assert e1[0].start == pytest.approx(ceo[0].end + 0.1)  # brief delivered after message latency
    assert e1[0].observation == "@ceo: go\n>>"
    sent = e1[0].end
    assert ceo[1].start < sent + 0.1 < ceo[1].end  # delivered while the ceo's long turn ran
    assert "hello" not in ceo[1].observation
    assert ceo[2].observation == "@expert-1: hello\n>>"  # the next turn shows it


def test_message_that_arrived_during_a_turn_wakes_the_agent_when_it_is_free():
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert">go</hire>',
        ("ceo", 1): "x" * 40 + "<wait/>",
        ("expert-1", 0): '<msg to="ceo">hello</msg><done/>',
    })
    ceo = turns_of(r, "ceo")
    assert turns_of(r, "expert-1")[0].end + 0.1 < ceo[1].end  # delivered during the ceo's turn
    assert ceo[2].start == pytest.approx(ceo[1].end)


# ---------------------------------------------------------------- invariant 2: deadline

def _deadline_script(k_answers):
    a, b = k_answers
    return {
        ("ceo", 0): f'<submit item="A">{a}</submit>',
        ("ceo", 1): "y" * 30 + f'<submit item="B">{b}</submit>',
        ("ceo", 2): "<done/>",
    }


def test_deadline_counts_only_reward_earned_before_it():
    rt = make_runtime()
    (p,) = problems(rt, 1)
    script = _deadline_script((p.item(1).answer, p.item(2).answer))
    free, _ = run_script(script)  # no deadline: both items count
    e0, e1 = free.turns[0].end, free.turns[1].end
    assert free.score == pytest.approx(2 / 4)
    assert free.solved == {1: e0, 2: e1}

    limit = (e0 + e1) / 2  # item A lands before the deadline, item B after it
    r, _ = run_script(script, time_limit=limit)
    assert r.score == pytest.approx(1 / 4)
    assert r.solved == {1: e0}
    assert [s["item"] for s in r.submissions] == [1]  # the late turn has no effect at all
    assert [t.after_deadline for t in r.turns] == [False, True]
    assert all(t.start < limit for t in r.turns)
    assert len(r.turns) == 2  # the ceo's third turn would start after the deadline
    assert r.finished_at == limit
    assert r.agents["ceo"].status == "cut"
    # the late turn's tokens stay in the trajectory (they were generated)
    assert sum(r.agents["ceo"].gen_mask) == free.turns[0].generated_tokens + free.turns[1].generated_tokens


def test_rollout_cut_by_a_turn_crossing_the_deadline_ends_with_reason_deadline():
    rt = make_runtime()
    (p,) = problems(rt, 1)
    script = _deadline_script((p.item(1).answer, p.item(2).answer))
    free, _ = run_script(script)
    r, _ = run_script(script, time_limit=(free.turns[0].end + free.turns[1].end) / 2)
    assert r.end_reason == "deadline"


def test_turn_that_would_start_after_the_deadline_never_happens():
    # The ceo messages expert-1 at the end of a turn; delivery (end + 0.1) falls after the deadline.
    script = {
        ("ceo", 0): '<hire role="expert"/>',
        ("ceo", 1): "z" * 10 + '<msg to="expert-1">go</msg><wait/>',
    }
    free, _ = run_script(script)
    sent = turns_of(free, "ceo")[1].end
    assert turns_of(free, "expert-1")[0].start == pytest.approx(sent + 0.1)  # control: it runs without a deadline

    r, _ = run_script(script, time_limit=sent + 0.05)
    assert turns_of(r, "expert-1") == []
    assert r.end_reason == "deadline"
    assert r.finished_at == sent + 0.05
    assert r.agents["expert-1"].status == "cut"
    assert r.agents["expert-1"].turns == 0


def test_batched_turn_starting_after_the_deadline_never_happens():
    # expert-1 starts shortly before the deadline; the ceo is woken by a message shortly after it.
    # Both fall within d_min (0.65 s) of each other, so they share a wave.
    script = {
        ("ceo", 0): '<hire role="expert">go</hire><wait/>',
        ("expert-1", 0): "w" * 20 + '<msg to="ceo">ping</msg>',  # ceo woken at its end + 0.1
        ("expert-1", 1): "w" * 20 + "<done/>",
        ("ceo", 1): "<done/>",
    }
    free, _ = run_script(script)
    wake = turns_of(free, "ceo")[1].start
    e1_second = turns_of(free, "expert-1")[1].start
    assert wake == pytest.approx(e1_second + 0.1)
    r, _ = run_script(script, time_limit=e1_second + 0.05)  # between the two starts
    assert all(t.start < r.time_limit for t in r.turns), [(t.agent, t.start) for t in r.turns]


def test_item_solved_at_the_earliest_correct_submission():
    rt = make_runtime()
    (p,) = problems(rt, 1)
    ans = p.item(1).answer
    script = {
        ("ceo", 0): '<hire role="expert">go</hire>',
        ("ceo", 1): "t" * 60 + f'<submit item="A">{ans}</submit><done/>',  # starts first, lands ~3 s later
        ("expert-1", 0): f'<submit item="A">{ans}</submit><done/>',  # starts 0.1 s later, lands first
    }
    free, _ = run_script(script)
    ceo_end = turns_of(free, "ceo")[1].end
    e1_end = turns_of(free, "expert-1")[0].end
    assert e1_end < ceo_end
    assert free.solved[1] == e1_end and free.solved_by[1] == "expert-1"
    r, _ = run_script(script, time_limit=(e1_end + ceo_end) / 2)
    assert r.score == pytest.approx(1 / 4)



# ---------------------------------------------------------------- schedules that disagree

def test_turn_started_before_the_last_solve_runs_in_both_schedules():
    rt = make_runtime(k=1)
    (p,) = problems(rt, 1)
    script = {
        ("ceo", 0): '<hire role="expert">go</hire><hire role="expert">go</hire><wait/>',
        ("expert-1", 0): f'<submit item="A">{p.item(1).answer}</submit><done/>',  # solves at ~0.7 s after start
        ("expert-2", 0): "e" * 20 + "<done/>",  # starts at the same time as expert-1
    }
    batched, _ = run_script(script, k=1, batching=True)
    reference, _ = run_script(script, k=1, batching=False)
    assert batched.end_reason == reference.end_reason == "solved"
    assert transcript(batched) == transcript(reference)


# ---------------------------------------------------------------- fire semantics

def test_fired_expert_has_no_effect_after_the_firing_and_schedules_agree():
    rt = make_runtime()
    (p,) = problems(rt, 1)
    script = {
        ("ceo", 0): '<hire role="expert">go</hire>',
        ("ceo", 1): '<fire who="expert-1"/><wait/>',  # ends ~0.6 s after it starts
        ("expert-1", 0): "s" * 20 + f'<submit item="A">{p.item(1).answer}</submit><msg to="ceo">hi</msg>',
    }
    batched, _ = run_script(script, batching=True)
    reference, _ = run_script(script, batching=False)
    fired_at = turns_of(batched, "ceo")[1].end
    assert all(s["t"] <= fired_at for s in batched.submissions if s["agent"] == "expert-1")
    assert all(m.sent_at <= fired_at for m in batched.bus.messages if m.sender == "expert-1")
    assert transcript(batched) == transcript(reference)


def test_archive_read_is_a_prefix_in_time():
    script = {
        ("ceo", 0): '<hire role="expert">go</hire><hire role="expert">go</hire>',
        ("ceo", 1): "c" * 40 + '<post ch="general">from ceo</post><wait/>',  # delivered ~2.6 s later
        ("expert-1", 0): "r" * 80 + '<read ch="general" last="5"/>',  # reads ~4.6 s later
        ("expert-2", 0): '<post ch="general">from e2</post><done/>',  # delivered ~0.8 s later
        ("expert-1", 1): "<done/>",
    }
    r, _ = run_script(script)
    posts = {m.text: m.deliver_at for m in r.bus.messages if m.kind == "channel"}
    assert posts["from e2"] < posts["from ceo"] < turns_of(r, "expert-1")[0].end  # the setup
    archive = [x for x in turns_of(r, "expert-1")[1].observation.split("\n") if x.startswith("#general~")]
    shown = [x.split(": ", 1)[1] for x in archive]
    if "from ceo" in shown:
        assert "from e2" in shown


def test_limits_for_scripts_lift_only_the_turn_cap():
    from types import SimpleNamespace

    from swarmrl.collective.runtime import RuntimeLimits
    limits = RuntimeLimits(max_turns_per_agent=4, max_new_tokens_per_turn=7)
    problems = [SimpleNamespace(num_items=3), SimpleNamespace(num_items=12)]
    lifted = limits.for_scripts(problems)
    assert lifted.max_turns_per_agent == 2 * 12 + 2 and lifted.max_new_tokens_per_turn == 7
    assert limits.max_turns_per_agent == 4  # a copy: the runtime's own limits are untouched
    assert RuntimeLimits(max_turns_per_agent=40).for_scripts(problems).max_turns_per_agent == 40  # never lowered
