"""Scripted single-agent demonstrations mixed into the RL update (`rl.demo_anchor_coef`).

Why: under a deadline RL trains only what happens before it. At the curriculum's 4.5-5.5 s a
single agent reaches its first two or three items; the later ones are never trained, and the
shared weights drift there: over eight draws, the demo recipe's single agent ends 0.02-0.06
below its warm start at 14-20 s on five RL seeds (benchmarks/small_teams/eval_noise/). A KL
term cannot hold those states, because it is taken on the states the rollouts visit; a complete
demonstration visits them all.

How: each step, `rl.demo_anchor_sequences` of the task's scripted solo demonstrations (the warm
start's `alone` block: cap 0, no deadline, on problems of their own draw) join the trained
sequences with advantage `rl.demo_anchor_coef`, and with the current policy's own log-probs as
their behaviour log-probs. Their PPO ratio is then 1, so their gradient is the coefficient times
the gradient of their log-likelihood: a supervised term, weighted by the update's token
aggregation like every other token (InstructGPT's PPO-ptx mixes pretraining data into PPO the
same way). They carry no KL term, and they are not rollouts: no score, no metric of the
collective counts them.

`rl.demo_anchor_opening_coef` adds, for each demonstration, a copy cut after its first reply at
that advantage: the opening's tokens then train at the sum of both coefficients, the rest at
`demo_anchor_coef` alone. The opening is where a shared policy mixes its roles up (a single agent
that takes one item, as an expert does, and then has nothing left to take).
"""

from __future__ import annotations

import dataclasses

import torch

from swarmrl.config import Config, ConfigError
from swarmrl.policy.device import autocast, model_device
from swarmrl.rl.batch import TrainSeq, pad, token_logprobs
from swarmrl.seeds import rng_for

FIRST_INDEX = 10**9  # the demonstrations' rollout and group indices: above every real rollout's


class DemoAnchor:
    """`sequences(step, model, trains)`: the step's demonstrations, ready to train (none when the
    coefficient is 0). Problems and seeds are functions of (run seed, step) alone, so a resumed
    run draws the same ones."""

    def __init__(self, cfg: Config, runtime, task, policy):
        """`runtime`, `task`: the run's (the demonstrations go through the same runtime, its turn
        cap lifted while they run); `policy`: the base policy (tokenizer and special ids)."""
        self.coef, self.count, self.seed = cfg.rl.demo_anchor_coef, cfg.rl.demo_anchor_sequences, cfg.seed
        self.opening_coef = cfg.rl.demo_anchor_opening_coef
        self.temperature, self.mixed_precision = cfg.sampler.temperature, cfg.model.mixed_precision
        self.runtime, self.task = runtime, task
        self.tokenizer, self.end_id, self.pad_id = policy.tokenizer, policy.end_id, policy.pad_id
        if not self.coef:
            return
        self.scripts = task.scripts()
        if self.scripts is None or not hasattr(self.scripts, "solo_strategy") or not runtime.scenario.hires:
            raise ConfigError(f"rl.demo_anchor_coef needs a task with scripted solo demonstrations and a workflow "
                              f"that hires (org or single); task {cfg.task.name!r} under workflow "
                              f"{cfg.workflow.name!r} has none")
        if cfg.policy.sharing != "shared":
            raise ConfigError("rl.demo_anchor_coef trains the one shared policy (policy.sharing=shared), "
                              f"got policy.sharing={cfg.policy.sharing!r}")

    def sequences(self, step: int, model: torch.nn.Module, trains=lambda role: True) -> list[TrainSeq]:
        """The step's demonstrations whose role `trains` (the policy set's test: a frozen role's
        demonstrations would carry no gradient)."""
        if not self.coef:
            return []
        seqs = [s for s in self.demonstrations(step) if trains(s.role)]
        logps = current_logprobs(model, seqs, self.pad_id, self.temperature, self.mixed_precision)
        out = [dataclasses.replace(s, old_logp=lp, advantage=self.coef, kl_scale=0.0) for s, lp in zip(seqs, logps)]
        if self.opening_coef:  # causal model: the cut copy's log-probs are the full one's, cut
            out += [dataclasses.replace(opening(s), advantage=self.opening_coef) for s in out]
        return out

    def demonstrations(self, step: int) -> list[TrainSeq]:
        """`count` scripted solo rollouts of this step (cap 0, run to completion): one sequence
        each, with rollout and group indices from FIRST_INDEX on."""
        from swarmrl.scenarios.org import NO_DEADLINE
        problems = self.task.sample(rng_for("demo_anchor", self.seed, step), self.count)
        runtime = self.runtime
        saved, runtime.limits = runtime.limits, runtime.limits.for_scripts(problems)
        try:
            rollouts = [runtime.new_rollout(FIRST_INDEX + i, FIRST_INDEX + i, p, NO_DEADLINE, 0)
                        for i, p in enumerate(problems)]
            actor = self.scripts.org_actor(self.tokenizer, self.end_id,
                                           {r.index: self.scripts.solo_strategy() for r in rollouts})
            runtime.run(rollouts, actor, seed=0)  # scripts draw nothing
        finally:
            runtime.limits = saved
        return [TrainSeq(a.ids, a.gen_mask, a.logprobs, 0.0, a.role, r.index, group=r.index)
                for r in rollouts for a in r.agents.values() if any(a.gen_mask)]


def opening(seq: TrainSeq) -> TrainSeq:
    """`seq` cut after its first reply: its tokens up to the end of the first run of generated
    ones (the turn-end token included)."""
    start = seq.gen_mask.index(1)
    end = next((i for i in range(start, len(seq.gen_mask)) if not seq.gen_mask[i]), len(seq.gen_mask))
    return dataclasses.replace(seq, ids=seq.ids[:end], gen_mask=seq.gen_mask[:end], old_logp=seq.old_logp[:end])


@torch.no_grad()
def current_logprobs(model: torch.nn.Module, seqs: list[TrainSeq], pad_id: int, temperature: float,
                     mixed_precision: str) -> list[list[float]]:
    """Each sequence's per-token log-probs under `model` as the update computes them (the same
    temperature and autocast), position 0 included as 0: the behaviour log-probs of an on-policy
    sequence."""
    if not seqs:
        return []
    device = model_device(model)
    t = pad(seqs, pad_id, device=device)
    with autocast(device, mixed_precision):
        logp, _ = token_logprobs(model, t["ids"], t["attn"], with_entropy=False, temperature=temperature)  # [B, T]
    return [logp[i, :len(s.ids)].float().cpu().tolist() for i, s in enumerate(seqs)]
