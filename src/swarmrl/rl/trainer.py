"""The trainer. `Trainer.step` reads top to bottom:

rollout -> reward -> advantage -> loss -> update -> metrics.

RLCR: one shared policy plays every agent; the collective score of a rollout (reward
earned before the deadline) is normalised within its problem group, and that one number
is the advantage of every token every agent generated (the `collective` estimator).
The workflow study: fixed role graphs, shared or per-role (LoRA) policies, GRPO-style
estimators, and per-role diagnostics. Infrastructure (run directory, checkpoints,
progress) lives in rl/loop.py; per-role bookkeeping of the update in rl/update.py; where the
rollouts run (in-process or on Ray workers) in distributed/.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from swarmrl.build import RunParts, build_run, cap_time_limits, new_rollouts, step_caps, step_spans
from swarmrl.collective.state import Rollout
from swarmrl.config import Config
from swarmrl.diagnostics.collective import collective_metrics, team_size_histogram, token_counter
from swarmrl.diagnostics.mfu import (generation_flops, head_params, matmul_params, measure_peak_flops, mfu_metrics,
                                    model_shape, update_flops)
from swarmrl.diagnostics.outputs import role_output_metrics
from swarmrl.diagnostics.roles import observed_multiplicity
from swarmrl.paths import cache_dir
from swarmrl.policy.device import autocast_dtype, model_device, peak_memory_metrics
from swarmrl.policy.model import Policy
from swarmrl.policy.speculative import draft_corpus
from swarmrl.rl.advantages import compute_advantages
from swarmrl.rl.batch import TrainSeq, collect_sequences
from swarmrl.rl.credit import credit_metrics
from swarmrl.rl.curriculum import time_limit_at
from swarmrl.rl.evaluate import evaluate
from swarmrl.rl.shaping import deadline_s, staged_scores
from swarmrl.sandbox import check_infra_errors
from swarmrl.seeds import rng_for, seed_for


class Trainer:
    def __init__(self, cfg: Config, policy: Policy):
        self.cfg = cfg
        # Every part comes from the composition root (build.py), which also owns closing them.
        self.parts: RunParts = build_run(cfg, policy)
        p = self.parts
        self.policy, self.runtime, self.task, self.backend = p.policy, p.runtime, p.task, p.backend
        self.policies, self.actor, self.updater, self.detectors = p.policies, p.actor, p.updater, p.detectors
        self.advantage_fn, self.role_ids, self.anchor = p.advantage_fn, p.role_ids, p.anchor
        self.scenario = p.runtime.scenario
        self.full_cap = self.scenario.team_cap(None)  # the cap of rollouts not given a smaller one
        self.step_idx = 0  # next step to run
        self.draft_corpus: list = []  # the last step's turns: where the samplers' draft tables start
        model, device = self.policy.model, model_device(self.policy.model)
        dtype = autocast_dtype(device, cfg.model.mixed_precision) or next(model.parameters()).dtype
        # Ranks (learner.processes, torchrun) generate and update their shares side by side and the
        # FLOPs count the whole step, so the peak is the sum of theirs: one rank's, times the ranks.
        ranks = p.learner.world if p.learner is not None else 1
        self.peak_flops = (ranks * measure_peak_flops(device, dtype, cache_dir(cfg.warmstart.cache_dir))
                           if cfg.run.mfu else None)
        self.shape = (matmul_params(model), *model_shape(model), head_params(model))  # (N, layers, hidden, N_h)

    def step(self) -> tuple[dict, list[Rollout]]:
        cfg, step = self.cfg, self.step_idx
        t0 = time.perf_counter()

        # 1. Rollouts: every problem `rollouts_per_problem` times, under this step's deadline.
        #    The backend runs them here or on Ray workers with the current weights.
        rollouts, distributed_metrics = self.backend.run(step, self.step_rollouts)
        rollout_s = time.perf_counter() - t0
        self.set_draft_corpus(draft_corpus(rollouts) if cfg.sampler.draft_tokens else [])  # next step's guesses

        # 2. Reward: the collective score (reward earned before the deadline; latency-shaped
        #    under `shaping.mode`), the same for every agent of a rollout. A rollout whose
        #    grader failed (infra_error) is not a zero: it is left out of the loss and counted.
        keep, infra_rate = check_infra_errors(rollouts, cfg.sandbox.max_infra_error_rate)  # raises past the threshold
        usable = [r for r, k in zip(rollouts, keep) if k]
        # 3. Advantage: one scalar per sequence (flat over its tokens; `collective` makes it
        #    the same for every agent of a rollout). Both steps in `credit`.
        seqs, score_of, credit_metrics = self.credit(step, usable)

        # 4-5. Loss and update (per-role gradient norms on diagnostic steps). Frozen roles'
        #      tokens (policy.frozen_roles: orchestrator-only training) carry no gradient; scripted
        #      solo demonstrations join under rl.demo_anchor_coef (rl/anchor.py; rlcr_arith sets 0.5).
        trained = [s for s in seqs if self.policies.trains(s.role)]
        trained += self.anchor.sequences(step, self.policy.model, self.policies.trains)
        t_update = time.perf_counter()
        update_metrics = self.updater.update(trained, step, measure_roles=self.measures_roles(step))
        update_s = time.perf_counter() - t_update

        # 6. Metrics, per-role diagnostics and detectors.
        #    Collective metrics over the full-cap rollouts: with `smaller_caps_fraction` the
        #    capped groups would otherwise mix the cap's effect into team size, share, messages.
        generated = sum(t.generated_tokens for r in rollouts for t in r.turns)
        full = [r for r in rollouts if r.org.max_experts == self.full_cap]
        capped = [r for r in rollouts if r.org.max_experts != self.full_cap]
        metrics = {"step": step, "time_limit": self.deadline(step), **collective_metrics(
            full, ref_limit_s=cfg.time_limit.start, count_tokens=token_counter(self.policy.tokenizer))}
        if capped:
            metrics["capped/score_mean"] = float(np.mean([r.score for r in capped]))
            metrics["capped/cap_mean"] = float(np.mean([r.org.max_experts for r in capped]))
        metrics["reward_mean"] = float(np.mean(list(score_of.values()))) if score_of else 0.0
        metrics["infra_error_rate"] = infra_rate
        metrics["team_size_hist"] = team_size_histogram(rollouts, cfg.workflow.max_experts + 1)
        metrics.update(update_metrics)
        metrics.update(credit_metrics)
        metrics.update(distributed_metrics)
        outputs, signatures = role_output_metrics(rollouts)
        metrics.update(outputs)
        if cfg.eval.val_interval and step % cfg.eval.val_interval == 0:  # a function of the step alone: resume-exact
            metrics["val_accuracy"] = self.validate()
        # Org experts are one role whose multiplicity is the team the CEO chose: the step's mean.
        multiplicity = self.scenario.multiplicity() or observed_multiplicity(usable)
        metrics.update({f"role/{r}/multiplicity": float(k) for r, k in multiplicity.items()})
        alerts = self.detectors.update(step, metrics, signatures, multiplicity)
        metrics["alerts"] = [f"{a.name}:{a.role}: {a.message}" for a in alerts]
        metrics.update(tokens_per_s=generated / max(rollout_s, 1e-9), rollout_s=rollout_s,
                       step_s=time.perf_counter() - t0)
        metrics.update(peak_memory_metrics(model_device(self.policy.model)))  # gpu/peak_mem_gb on CUDA
        metrics.update(self.perf(trained, rollouts, rollout_s, update_s))
        self.step_idx += 1
        return metrics, rollouts

    def perf(self, trained: list[TrainSeq], rollouts: list[Rollout], rollout_s: float, update_s: float) -> dict:
        """`perf/...`: MFU of the step's generation and update (diagnostics/mfu.py); {} with run.mfu off."""
        if not self.peak_flops:
            return {}
        turns = [(t.context_tokens, t.new_prompt_tokens, t.generated_tokens) for r in rollouts for t in r.turns]
        n, layers, hidden, head = self.shape
        update_fl = update_flops([len(s.ids) for s in trained], n, layers, hidden, head,
                                 loss_tokens=[sum(s.gen_mask) for s in trained])
        return mfu_metrics(update_fl, update_s, generation_flops(turns, n, layers, hidden, head), rollout_s,
                           self.peak_flops)

    def credit(self, step: int, usable: list[Rollout]) -> tuple[list[TrainSeq], dict[int, float], dict[str, float]]:
        """Steps 2-3 of `step`: the sequences to train on with their advantages set, each rollout's
        score, and the metrics of the PARL staged terms (rl/shaping.py) and of the groups
        `rl.drop_zero_spread_groups` left out (rl/advantages.py `compute_advantages`)."""
        seqs = collect_sequences(usable, task=self.task)  # with each agent's verified contribution
        scores, shaping_metrics = staged_scores(self.cfg.shaping, usable, step)  # [N]
        score_of = dict(zip([r.index for r in usable], scores.tolist()))
        rewards = torch.tensor([score_of[s.rollout] for s in seqs])  # [S]
        groups = torch.tensor([s.group for s in seqs])  # [S]
        rollout_ids = torch.tensor([s.rollout for s in seqs])  # [S]
        roles = torch.tensor([self.role_ids[s.role] for s in seqs])  # [S]
        per_seq = {k: torch.tensor([getattr(s, k) for s in seqs]) for k in ("contribution", "leave_one_out")}  # [S]
        advantages, kept, adv_metrics = compute_advantages(self.advantage_fn, self.cfg.rl, rewards, groups,
                                                           rollout_ids, roles, per_seq)  # [S], [S]
        capped = {r.index for r in usable if r.org.max_experts != self.full_cap}
        for s, a in zip(seqs, advantages.tolist()):
            s.advantage = a
            s.kl_scale = self.cfg.rl.smaller_caps_kl_scale if s.rollout in capped else 1.0
        diagnostics = credit_metrics(usable, seqs, self.task)  # every agent's sequence, dropped groups too
        return ([s for s, k in zip(seqs, kept.tolist()) if k], score_of,
                {**shaping_metrics, **adv_metrics, **diagnostics})

    def measures_roles(self, step: int) -> bool:
        """Whether step `step` measures per-role gradient norms (rl.role_grad_interval)."""
        return self.cfg.rl.role_grad_interval > 0 and step % self.cfg.rl.role_grad_interval == 0

    def deadline(self, step: int) -> float:
        """Step `step`'s deadline: the curriculum's under RLCR shaping, the safety cap under penalty / none."""
        return deadline_s(self.cfg.shaping, time_limit_at(self.cfg.time_limit, step))

    def set_draft_corpus(self, corpus: list) -> None:
        """Where every sampler's draft table starts from the next step on (a checkpoint holds it)."""
        self.draft_corpus = corpus
        self.backend.set_draft_corpus(corpus)

    def step_rollouts(self, step: int) -> tuple[list[Rollout], int]:
        """Step `step`'s rollouts (not yet run) and their sampling seed: a function of (seed, step)
        alone, so a backend may build them ahead of the step or again after a worker died."""
        cfg = self.cfg
        problems = self.task.sample(rng_for("problems", cfg.seed, step), cfg.rl.problems_per_step)
        caps = step_caps(cfg, step) if self.scenario.hires else None
        limits = self.deadline(step)
        if caps is not None:  # smaller teams may get more time (rl.smaller_caps_time_exponent)
            curriculum = time_limit_at(cfg.time_limit, step)
            limits = [deadline_s(cfg.shaping, t) for t in cap_time_limits(cfg, caps, curriculum)]
        spans = step_spans(cfg, step)  # None unless rl.spans: no draw, so other configs' streams stay as they are
        return (new_rollouts(self.runtime, problems, cfg.rl.rollouts_per_problem, limits, caps, spans),
                seed_for("step_sampling", cfg.seed, step))

    def close(self) -> None:
        """Release what the run holds (build.py `RunParts.close`); idempotent."""
        parts = getattr(self, "parts", None)
        if parts is not None:
            parts.close()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def validate(self) -> float:
        """Mean score on held-out problems (greedy, at the final deadline): validation accuracy."""
        return evaluate(self.cfg, self.policies, problems=self.cfg.eval.val_problems, greedy=True,
                        runtime=self.runtime)["score_mean"]
