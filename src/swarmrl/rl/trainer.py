"""The RLCR trainer. `Trainer.step` reads top to bottom:

rollout -> reward -> advantage -> loss -> update -> metrics.

One shared policy plays every agent; the collective score of a rollout (reward earned
before the deadline) is normalised within its problem group, and that one number is the
advantage of every token every agent generated in the rollout (RLCR). Infrastructure
(run directory, checkpoints, progress display) lives in rl/loop.py, not here.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.collective.state import Rollout
from swarmrl.config import Config
from swarmrl.diagnostics.collective import collective_metrics, team_size_histogram, token_counter
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import Policy
from swarmrl.policy.sampler import HFSampler
from swarmrl.rl.advantages import get_advantage
from swarmrl.rl.batch import TrainSeq, collect_sequences, micro_batches, pad, token_logprobs
from swarmrl.rl.curriculum import time_limit_at
from swarmrl.rl.losses import get_loss
from swarmrl.rl.shaping import deadline_s, shaped_scores
from swarmrl.tasks import make_task


def make_runtime(cfg: Config, tokenizer) -> tuple[Runtime, object]:
    task = make_task(cfg.task)
    limits = RuntimeLimits(max_new_tokens_per_turn=cfg.sampler.max_new_tokens_per_turn,
                           max_turns_per_agent=cfg.sampler.max_turns_per_agent,
                           max_context_tokens=cfg.model.max_context_tokens)
    return Runtime(task, tokenizer, LatencyModel.from_config(cfg.clock), limits), task


def max_experts_for(cfg: Config) -> int:
    return 0 if cfg.workflow.name == "single" else cfg.workflow.max_experts


class Trainer:
    def __init__(self, cfg: Config, policy: Policy):
        self.cfg = cfg
        self.policy = policy
        self.runtime, self.task = make_runtime(cfg, policy.tokenizer)
        self.actor = LLMActor(HFSampler(policy, cfg.sampler.temperature), cfg.sampler.max_new_tokens_per_turn)
        self.advantage_fn = get_advantage(cfg.rl.advantage)
        self.loss_fn = get_loss(cfg.rl.loss)
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.rl.lr,
                                           weight_decay=cfg.rl.weight_decay)
        # Optional KL to the initial policy (off by default, as in both sources).
        self.ref_model = copy.deepcopy(policy.model).eval() if cfg.rl.kl_coef > 0 else None
        self.step_idx = 0  # next step to run

    def step(self) -> tuple[dict, list[Rollout]]:
        cfg, step = self.cfg, self.step_idx
        t0 = time.perf_counter()

        # 1. Rollouts: every problem `rollouts_per_problem` times, under this step's deadline
        #    (the curriculum's under RLCR shaping, the safety cap under penalty / none).
        time_limit = deadline_s(cfg.shaping, time_limit_at(cfg.time_limit, step))
        problems = self.task.sample(np.random.default_rng([cfg.seed, step]), cfg.rl.problems_per_step)
        rollouts = [self.runtime.new_rollout(g * cfg.rl.rollouts_per_problem + j, g, p, time_limit, max_experts_for(cfg))
                    for g, p in enumerate(problems) for j in range(cfg.rl.rollouts_per_problem)]
        tokens_before = self.actor.generated_tokens
        self.runtime.run(rollouts, self.actor, seed=cfg.seed * 1_000_003 + step)
        rollout_s = time.perf_counter() - t0

        # 2. Reward: the collective score (reward earned before the deadline), latency-shaped.
        scores = shaped_scores(cfg.shaping, rollouts)  # [N]
        groups = torch.tensor([r.group for r in rollouts])  # [N]

        # 3. Advantage: one scalar per rollout, applied flat to all its agents' tokens.
        advantages = self.advantage_fn(scores, groups)  # [N]
        seqs = collect_sequences(rollouts, advantages)

        # 4-5. Loss and update.
        update_metrics = self.update(seqs, np.random.default_rng([cfg.seed, step, 1]))

        # 6. Metrics.
        generated = self.actor.generated_tokens - tokens_before
        metrics = {"step": step, "time_limit": time_limit, **collective_metrics(
            rollouts, ref_limit_s=cfg.time_limit.start, count_tokens=token_counter(self.policy.tokenizer))}
        metrics["reward_mean"] = float(scores.mean())
        metrics["team_size_hist"] = team_size_histogram(rollouts, cfg.workflow.max_experts + 1)
        metrics.update(update_metrics)
        metrics["tokens_per_s"] = generated / max(rollout_s, 1e-9)
        metrics["rollout_s"] = rollout_s
        metrics["step_s"] = time.perf_counter() - t0
        self.step_idx += 1
        return metrics, rollouts

    def update(self, seqs: list[TrainSeq], rng: np.random.Generator) -> dict[str, float]:
        """`minibatches_per_step` optimizer updates over the step's sequences."""
        model, cfg = self.policy.model, self.cfg.rl
        model.train()
        order = rng.permutation(len(seqs))
        sums: dict[str, float] = {}
        role_ent: dict[str, list[float]] = {}
        for part in np.array_split(order, cfg.minibatches_per_step):
            mb = [seqs[i] for i in part]
            if not mb:
                continue
            num_tokens = sum(sum(s.gen_mask) for s in mb)
            self.optimizer.zero_grad(set_to_none=True)
            for micro in micro_batches(mb, cfg.micro_batch_tokens):
                t = pad(micro, self.policy.pad_id)
                logp, ent = token_logprobs(model, t["ids"], t["attn"])  # [B, T], [B, T]
                loss, m = self.loss_fn(logp, t["old_logp"], t["adv"], t["mask"], num_tokens, clip_eps=cfg.clip_eps)
                if self.ref_model is not None:
                    with torch.no_grad():
                        ref, _ = token_logprobs(self.ref_model, t["ids"], t["attn"], with_entropy=False)
                    kl = torch.exp(ref - logp) - (ref - logp) - 1.0  # [B, T] k3, always >= 0
                    loss = loss + cfg.kl_coef * (kl * t["mask"]).sum() / num_tokens
                loss.backward()
                w = float(t["mask"].sum()) / max(num_tokens, 1)  # token share of this micro-batch
                sums["loss"] = sums.get("loss", 0.0) + float(loss.detach())
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + w * float(v)
                sums["entropy"] = sums.get("entropy", 0.0) + float((ent * t["mask"]).sum()) / max(num_tokens, 1)
                for row, s in enumerate(micro):
                    role_ent.setdefault(s.role, []).append(float((ent[row] * t["mask"][row]).sum()))
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm)
            self.optimizer.step()
        n_mb = max(cfg.minibatches_per_step, 1)
        out = {k: v / n_mb for k, v in sums.items()}
        role_tokens: dict[str, int] = {}
        for s in seqs:
            role_tokens[s.role] = role_tokens.get(s.role, 0) + sum(s.gen_mask)
        for role, ents in role_ent.items():
            out[f"role/{role}/entropy"] = sum(ents) / max(role_tokens[role], 1)
            out[f"role/{role}/generated_tokens"] = role_tokens[role]
        out["adv_abs_mean"] = float(np.mean([abs(s.advantage) for s in seqs])) if seqs else 0.0
        return out
