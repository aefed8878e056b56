"""Drive the real org runtime with scripted replies (as tests/collective does), for any task."""

from __future__ import annotations

from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.policy.sampler import Sample
from swarmrl.policy.tokenizer import build_tokenizer

TOK = build_tokenizer()
END = TOK.convert_tokens_to_ids("<|end|>")
LAT = LatencyModel(call_overhead_s=0.5, prefill_tokens_per_s=2000.0, decode_tokens_per_s=20.0,
                   message_latency_s=0.1)


class ScriptActor:
    """Replies from {(agent, turn): text}; `<done/>` otherwise."""

    def __init__(self, script: dict):
        self.script = script

    def act(self, requests, seed):
        out = []
        for q in requests:
            ids = TOK.encode(self.script.get((q.agent.name, q.agent.turns), "<done/>"), add_special_tokens=False) + [END]
            out.append(Sample(ids=ids, logprobs=[-0.5] * len(ids)))
        return out


def run_one(task, problem, script: dict, time_limit: float = 1e9):
    """One rollout of `problem` with the CEO (and any hires) replying from `script`."""
    rt = Runtime(task, TOK, LAT, RuntimeLimits(max_new_tokens_per_turn=2048, max_context_tokens=16384))
    r = rt.new_rollout(0, 0, problem, time_limit, cap=2)
    rt.run([r], ScriptActor(script), seed=0)
    return r
