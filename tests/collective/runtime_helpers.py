"""Shared stand-ins for the runtime tests: a deterministic hash actor, tiny runtimes, transcripts."""

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
from swarmrl.policy.tokenizer import build_tokenizer, encode_text
from swarmrl.tasks.arith import ArithTask, label

TOK = build_tokenizer()
END = TOK.convert_tokens_to_ids("<|end|>")
NAMES = ["ceo", "expert-1", "expert-2", "expert-3"]
LAT = LatencyModel(call_overhead_s=0.5, prefill_tokens_per_s=2000.0, decode_tokens_per_s=20.0,
                   message_latency_s=0.1)
NO_DEADLINE = 1e9


def encode(text: str, hit_cap: bool = False) -> Sample:
    # Replies are text: `<|end|>` written in one is characters, as a model's would be.
    ids = encode_text(TOK, text) + ([] if hit_cap else [END])
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
                text += rng.choice(['<hire role="expert">go</hire>', '<hire role="expert"/>',
                                    '<hire role="expert" item="next"/>'])
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
                           for m in r.bus.messages),
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
