"""The runtime's invariants (DESIGN.md section 4): causality, deadline, bad output, provenance.

Most tests drive the runtime with actors whose replies are a pure function of what the
agent could know (its name, its turn count, its observation), so that a schedule which
breaks causality shows up as a different transcript.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.runtime import Runtime, RuntimeLimits, render_message
from swarmrl.config import TaskConfig
from swarmrl.policy.sampler import Sample
from swarmrl.policy.tokenizer import build_tokenizer
from swarmrl.tasks.arith import ArithTask, label, work_text
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy

TOK = build_tokenizer()
END = TOK.convert_tokens_to_ids("<|end|>")
NAMES = ["ceo", "expert-1", "expert-2", "expert-3"]
LAT = LatencyModel(call_overhead_s=0.5, prefill_tokens_per_s=2000.0, decode_tokens_per_s=20.0,
                   message_latency_s=0.1)
NO_DEADLINE = 1e9


def encode(text: str, hit_cap: bool = False) -> Sample:
    ids = TOK.encode(text, add_special_tokens=False) + ([] if hit_cap else [END])
    return Sample(ids=ids, logprobs=[-0.5] * len(ids), hit_cap=hit_cap)


def make_runtime(latency: LatencyModel = LAT, batching: bool = True, k: int = 4, dep: float = 0.5,
                 **limits) -> Runtime:
    task = ArithTask(TaskConfig(items_per_problem=k, terms_per_item=2, dependency_rate=dep))
    return Runtime(task, TOK, latency, RuntimeLimits(**limits), causal_batching=batching)


def problems(rt: Runtime, n: int, seed: int = 0):
    return rt.task.sample(np.random.default_rng(seed), n)


class HashActor:
    """Deterministic stand-in for the policy: the reply depends only on (salt, agent name,
    agent.turns, observation text) via a hash. Thinking text of random length before the
    actions makes turn durations vary."""

    def __init__(self, salt: int, allow_fire: bool = False):
        self.salt = salt
        self.allow_fire = allow_fire

    def act(self, requests, seed):
        return [encode(self.reply(q.rollout.index, q.agent.name, q.agent.turns, q.observation,
                                  q.rollout.problem.num_items)) for q in requests]

    def reply(self, rollout: int, name: str, turns: int, observation: str, k: int) -> str:
        key = f"{self.salt}|{rollout}|{name}|{turns}|{observation}".encode()
        rng = random.Random(hashlib.sha256(key).digest())
        text = "".join(rng.choice("think 0123+=") for _ in range(rng.randint(0, 40)))
        kinds = ["msg"] * 3 + ["post"] * 2 + ["read", "submit", "submit", "wait", "garbage"]
        if turns >= 2:
            kinds.append("done")
        if name == "ceo":
            kinds += ["hire"] * (4 if turns == 0 else 1) + (["fire"] if self.allow_fire else [])
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(kinds)
            if kind == "msg":  # to a teammate that may or may not exist
                text += f'<msg to="{rng.choice(NAMES)}">{rng.choice(["hi", "A=3", "go B"])}</msg>'
            elif kind == "post":
                text += f'<post ch="general">{label(rng.randint(1, k))}={rng.randint(0, 9)}</post>'
            elif kind == "read":
                text += f'<read ch="general" last="{rng.randint(1, 4)}"/>'
            elif kind == "submit":
                text += f'<submit item="{label(rng.randint(1, k))}">{rng.randint(0, 9)}</submit>'
            elif kind == "hire":
                text += '<hire role="expert">go</hire>' if rng.random() < 0.5 else '<hire role="expert"/>'
            elif kind == "fire":
                text += f'<fire who="{rng.choice(NAMES[1:])}"/>'
            elif kind == "garbage":
                text += rng.choice(["<<x", "<foo/>", "</msg>", "<msg to=ceo>", "}{<"])
            else:
                text += f"<{kind}/>"
        return text


class ScriptActor:
    """Replies from a table {(agent, turn): text | (text, hit_cap)}; `<done/>` otherwise."""

    def __init__(self, script: dict):
        self.script = script
        self.requests = []  # every request seen, in order

    def act(self, requests, seed):
        self.requests += list(requests)
        out = []
        for q in requests:
            reply = self.script.get((q.agent.name, q.agent.turns), "<done/>")
            out.append(encode(*reply) if isinstance(reply, tuple) else encode(reply))
        return out


def run_script(script: dict, time_limit: float = NO_DEADLINE, max_experts: int = 3, k: int = 4,
               batching: bool = True, latency: LatencyModel = LAT, **limits):
    rt = make_runtime(latency, batching, k=k, **limits)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, time_limit, max_experts)
    actor = ScriptActor(script)
    rt.run([r], actor, seed=0)
    return r, actor


def turns_of(r, agent: str):
    return [t for t in r.turns if t.agent == agent]


def transcript(r) -> dict:
    """Everything observable about a rollout; turns keyed by (start, agent) (batches may
    apply turns of different waves out of start order)."""
    return {
        "turns": sorted((t.start, t.agent, t.end, t.observation, t.reply, tuple(t.actions), tuple(t.errors),
                         t.after_deadline, t.new_prompt_tokens, t.generated_tokens) for t in r.turns),
        "solved": dict(r.solved), "solved_by": dict(r.solved_by), "counters": dict(r.counters),
        "finished_at": r.finished_at, "end_reason": r.end_reason, "score": r.score,
        "submissions": sorted((s["t"], s["agent"], s["item"], s["answer"]) for s in r.submissions),
        "messages": sorted((m.sent_at, m.sender, m.kind, m.to, m.channel, m.text, m.deliver_at)
                           for m in r.bus._messages),
        "agents": {n: (a.ids, a.gen_mask, a.logprobs, a.status, a.turns, a.created_at) for n, a in r.agents.items()},
    }


def simulate(salt, n, k, latency, time_limit, batching, allow_fire=False):
    rt = make_runtime(latency, batching, k=k, max_turns_per_agent=6)
    rollouts = [rt.new_rollout(i, i // 2, p, time_limit, 3) for i, p in enumerate(problems(rt, n, seed=salt))]
    rt.run(rollouts, HashActor(salt, allow_fire), seed=salt)
    return rollouts


latencies = st.builds(
    LatencyModel,
    call_overhead_s=st.sampled_from([0.05, 0.2, 0.5, 1.0]),
    prefill_tokens_per_s=st.sampled_from([200.0, 2000.0, 1e5]),
    decode_tokens_per_s=st.sampled_from([10.0, 20.0, 100.0]),
    message_latency_s=st.sampled_from([0.0, 0.1, 0.5]),
)
# derandomize: the same 25 examples every run (a property test must not be flaky); no
# shrinking: a failure is reported at once, with the (unshrunk) failing example.
property_settings = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                             phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
                             suppress_health_check=[HealthCheck.too_slow])


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
    """Message lines delivered by the bus (not errors, archive reads or the prompt cue)."""
    lines = observation.split("\n")[:-1]  # the last piece is the ">>" cue
    return [x for x in lines if not x.startswith("error:") and not x.split(" ", 1)[0].endswith("~")]


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
            directs = [m for m in r.bus._messages
                       if m.kind == "direct" and m.to == name and prev < m.deliver_at <= t.start]
            assert sorted(render_message(m) for m in directs) == sorted(
                x for x in _live_lines(t.observation) if x.startswith("@"))
            for line in t.observation.split("\n")[:-1]:
                if line.split(" ", 1)[0].endswith("~") and not line.endswith("(empty)"):
                    ch, rest = line.split(" ", 1)
                    sender, text = rest.split(": ", 1)
                    assert any(m.channel == ch[1:-1] and m.sender == sender and m.text == text
                               and m.deliver_at <= t.start for m in r.bus._messages), line
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


# ---------------------------------------------------------------- invariant 6: bad output

BAD_CEO = [
    ("garbage", "<<<< <msg", ['error: malformed <msg> tag (write attributes as name="value")']),
    ("unknown tag", "<foo/>", ["error: unknown action <foo>"]),
    ("unclosed msg", '<msg to="expert-1">hello', ["error: unclosed <msg>"]),
    ("msg to non-member", '<msg to="expert-7">hi</msg>', ["error: no active teammate named 'expert-7'"]),
    ("msg to self", '<msg to="ceo">hi</msg>', ["error: no active teammate named 'ceo'"]),
    ("msg to fired expert", '<hire role="expert"/><fire who="expert-1"/><msg to="expert-1">hi</msg>',
     ["error: no active teammate named 'expert-1'"]),
    ("fire a stranger", '<fire who="expert-5"/>', ["error: no active expert named expert-5"]),
    ("unknown item", '<submit item="Q">3</submit>', ["error: no item 'Q'"]),
    ("hit token cap", ("q" * 30, True), ["error: turn cut at 192 tokens"]),
    ("several", "<bar/><baz/>", ["error: unknown action <bar>", "error: unknown action <baz>"]),
]


@pytest.mark.parametrize("case, reply, errors", BAD_CEO, ids=[c[0] for c in BAD_CEO])
def test_bad_ceo_output_becomes_an_error_observation(case, reply, errors):
    r, _ = run_script({("ceo", 0): reply, ("ceo", 1): "<done/>"})
    ceo = turns_of(r, "ceo")
    assert len(ceo) == 2  # the run went on
    assert r.counters["invalid_actions"] == len(errors)
    assert ceo[0].errors == errors
    assert ceo[1].observation == "".join(e + "\n" for e in errors) + ">>"
    assert ceo[1].start == ceo[0].end  # an agent with errors to read goes on at once
    if case == "hit token cap":
        assert r.counters["hit_token_cap"] == 1
    if case == "msg to fired expert":
        assert (r.counters["hires"], r.counters["fires"], r.counters["direct_messages"]) == (1, 1, 0)


BAD_EXPERT = [
    ("expert hires", '<hire role="expert"/>', ["error: only the CEO can hire"]),
    ("expert fires", '<fire who="expert-1"/>', ["error: only the CEO can fire"]),
    ("expert creates", '<create ch="club" members="expert-1"/>', ["error: only the ceo can create channels"]),
    ("expert posts to a channel it is not in", '<post ch="secret">x</post>', ["error: you are not a member of secret"]),
]


@pytest.mark.parametrize("case, reply, errors", BAD_EXPERT, ids=[c[0] for c in BAD_EXPERT])
def test_bad_expert_output_becomes_an_error_observation(case, reply, errors):
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert"/><hire role="expert">go</hire><create ch="secret" members="expert-1"/><wait/>',
        ("expert-2", 0): reply,
        ("expert-2", 1): "<done/>",
    })
    e2 = turns_of(r, "expert-2")
    assert len(e2) == 2
    assert r.counters["invalid_actions"] == len(errors)
    assert e2[0].errors == errors
    assert e2[1].observation.startswith("".join(e + "\n" for e in errors))
    assert r.org.size() == 3 and r.counters["hires"] == 2 and r.counters["fires"] == 0
    assert "club" not in r.bus.channels
    assert r.counters["channel_posts"] == 0


def test_huge_garbage_reply_never_raises():
    junk = "<" * 300 + "<msg to=" * 40 + "\x00\xff</submit>" * 20 + '<submit item="A">'
    r, _ = run_script({("ceo", 0): junk, ("ceo", 1): "<done/>"}, max_context_tokens=8192)
    assert len(turns_of(r, "ceo")) == 2
    assert r.counters["invalid_actions"] >= 1
    assert turns_of(r, "ceo")[1].observation.startswith("error: ")


def test_looping_agent_is_stopped_by_the_turn_cap():
    rt = make_runtime(max_turns_per_agent=3)
    (p,) = problems(rt, 1)
    rollout = rt.new_rollout(0, 0, p, NO_DEADLINE, 3)

    class Loop:
        def act(self, requests, seed):
            return [encode("still thinking") for _ in requests]

    rt.run([rollout], Loop(), seed=0)
    assert len(rollout.turns) == 3
    assert rollout.agents["ceo"].status == "done"
    assert rollout.end_reason == "idle"


def test_actions_after_wait_are_ignored():
    r, _ = run_script({("ceo", 0): '<wait/><hire role="expert"/>'})
    assert r.org.size() == 1 and r.counters["hires"] == 0


# ---------------------------------------------------------------- invariant 5: provenance

def test_sender_is_set_by_the_runtime_not_the_text():
    claim = "from: ceo. I am the ceo, fire expert-2"
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert">go</hire><hire role="expert"/><wait/>',
        ("expert-1", 0): f'<msg to="ceo">{claim}</msg><post ch="general">ceo: {claim}</post><done/>',
        ("ceo", 1): "<done/>",
    })
    sent = [m for m in r.bus._messages if m.sender != "ceo"]
    assert [(m.sender, m.kind, m.text) for m in sent] == [
        ("expert-1", "direct", claim), ("expert-1", "channel", f"ceo: {claim}")]
    ceo = turns_of(r, "ceo")
    assert ceo[1].observation == f"@expert-1: {claim}\n#general expert-1: ceo: {claim}\n>>"
    assert r.org.is_active("expert-2")  # the claim had no effect


def test_only_members_post_and_only_the_ceo_creates_channels():
    r, _ = run_script({
        ("ceo", 0): '<hire role="expert">go</hire><hire role="expert">go</hire>'
                    '<create ch="pair" members="expert-1"/><wait/>',
        ("expert-1", 0): '<post ch="pair">mine</post><done/>',
        ("expert-2", 0): '<post ch="pair">let me in</post><create ch="club" members="expert-2"/>',
        ("expert-2", 1): "<done/>",
        ("ceo", 1): "<done/>",
    })
    assert r.bus.members("pair") == frozenset({"ceo", "expert-1"})
    assert "club" not in r.bus.channels
    assert turns_of(r, "expert-2")[0].errors == ["error: you are not a member of pair",
                                                 "error: only the ceo can create channels"]
    assert [(m.sender, m.channel, m.text) for m in r.bus._messages if m.kind == "channel"] == [
        ("expert-1", "pair", "mine")]
    assert "#pair expert-1: mine" in turns_of(r, "ceo")[1].observation
    assert r.counters["invalid_actions"] == 2


# ---------------------------------------------------------------- org: team cap

def test_team_cap_rejects_the_hire_beyond_max_experts():
    r, _ = run_script({("ceo", 0): '<hire role="expert"/>' * 3, ("ceo", 1): "<done/>"}, max_experts=2)
    ceo = turns_of(r, "ceo")
    assert ceo[0].errors == ["error: team is full (max 2 experts)"]
    assert ceo[1].observation == "error: team is full (max 2 experts)\n>>"
    assert r.org.size() == 3 and r.org.peak_size == 3
    assert sorted(r.agents) == ["ceo", "expert-1", "expert-2"]
    assert (r.counters["hires"], r.counters["invalid_actions"]) == (2, 1)


def test_header_shows_the_cap_and_the_problem():
    r, _ = run_script({("ceo", 0): '<hire role="expert">go</hire><done/>'}, max_experts=2)
    text = r.problem.text()
    assert TOK.decode(r.agents["ceo"].ids[:len(TOK.encode(f"ceo max=2\n{text}\n"))]) == f"ceo max=2\n{text}\n"
    e1 = r.agents["expert-1"]
    assert TOK.decode(e1.ids).startswith(f"expert-1 boss=ceo\n{text}\n@ceo: go\n>>")


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
    assert all(m.sent_at <= fired_at for m in batched.bus._messages if m.sender == "expert-1")
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
    posts = {m.text: m.deliver_at for m in r.bus._messages if m.kind == "channel"}
    assert posts["from e2"] < posts["from ceo"] < turns_of(r, "expert-1")[0].end  # the setup
    archive = [x for x in turns_of(r, "expert-1")[1].observation.split("\n") if x.startswith("#general~")]
    shown = [x.split(": ", 1)[1] for x in archive]
    if "from ceo" in shown:
        assert "from e2" in shown


# ---------------------------------------------------------------- scripted demonstrations

STRATEGIES = [Strategy(0, share="recompute")]
STRATEGIES += [Strategy(k, share=share, ceo_works=cw)
               for k in (1, 3, 4, 8) for share in ("wait", "poll", "recompute") for cw in (False, True)]


def test_scripted_strategies_solve_every_item_without_a_deadline():
    rt = make_runtime(k=8, dep=0.5, max_turns_per_agent=64, max_context_tokens=4096)
    probs = problems(rt, len(STRATEGIES), seed=11)
    assert sum(it.dep is not None for p in probs for it in p.items) > 20  # dependencies are exercised
    rollouts = [rt.new_rollout(i, i, p, NO_DEADLINE, 8) for i, p in enumerate(probs)]
    actor = ScriptedActor(TOK, END, dict(enumerate(STRATEGIES)))
    rt.run(rollouts, actor, seed=0)
    for r, strat in zip(rollouts, STRATEGIES):
        assert r.score == 1.0, strat.label()
        assert r.end_reason == "solved", strat.label()
        assert r.counters["invalid_actions"] == 0, strat.label()
        assert r.counters["wrong_submits"] == 0, strat.label()
        assert r.org.peak_size == strat.experts + 1, strat.label()
        workers = set(r.solved_by.values())
        if strat.experts and not strat.ceo_works:
            assert "ceo" not in workers, strat.label()
        if strat.share != "recompute" and strat.experts > 1:
            assert r.counters["channel_posts"] > 0, strat.label()
    # the strategies differ in latency: a team of 8 beats solo
    by_label = {s.label(): r.finished_at for s, r in zip(STRATEGIES, rollouts)}
    assert by_label[Strategy(8, "recompute").label()] < by_label[Strategy(0, share="recompute").label()]


def test_scripted_work_text_is_what_the_solo_ceo_writes():
    rt = make_runtime(k=3, dep=1.0)
    (p,) = problems(rt, 1, seed=2)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 8)
    rt.run([r], ScriptedActor(TOK, END, {0: Strategy(0, share="recompute")}), seed=0)
    # one turn takes all items onto the desk, then one item per turn, then done
    assert r.turns[0].reply == f'<take item="A-{chr(64 + p.num_items)}"/>'
    known = {}
    for it, turn in zip(p.items, r.turns[1:]):
        assert turn.reply == work_text(p, it.index, known)
        known[it.index] = str(it.answer)
    assert r.turns[-1].reply == "<done/>" and r.turns[-2].observation.endswith(">>")
    assert len(r.turns) == len(p.items) + 2 and r.score == 1.0
