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

from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.collective.state import Rollout
from swarmrl.config import Config
from swarmrl.diagnostics.collective import collective_metrics, team_size_histogram, token_counter
from swarmrl.diagnostics.detectors import Detectors
from swarmrl.diagnostics.outputs import role_output_metrics
from swarmrl.distributed import make_backend
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import Policy
from swarmrl.policy.sharing import PolicySet
from swarmrl.rl.advantages import get_advantage
from swarmrl.rl.batch import collect_sequences
from swarmrl.rl.curriculum import time_limit_at
from swarmrl.rl.losses import get_loss
from swarmrl.rl.shaping import deadline_s, shaped_scores
from swarmrl.rl.update import Updater
from swarmrl.sandbox import check_infra_errors
from swarmrl.tasks import make_task
from swarmrl.workflows.graph import Workflow, preset


def make_runtime(cfg: Config, tokenizer) -> tuple[Runtime, object]:
    task = make_task(cfg.task, cfg.sandbox)
    limits = RuntimeLimits(max_new_tokens_per_turn=cfg.sampler.max_new_tokens_per_turn,
                           max_turns_per_agent=cfg.sampler.max_turns_per_agent,
                           max_context_tokens=cfg.model.max_context_tokens,
                           max_hires_per_rollout=cfg.workflow.max_hires_per_rollout)
    return Runtime(task, tokenizer, LatencyModel.from_config(cfg.clock), limits), task


def max_experts_for(cfg: Config) -> int:
    return 0 if cfg.workflow.name != "org" else cfg.workflow.max_experts


def workflow_for(cfg: Config) -> Workflow | None:
    """The fixed role graph, or None for the RLCR org (and `single`, the org without hiring)."""
    if cfg.workflow.name in ("org", "single"):
        return None
    return preset(cfg.workflow.name, generators=cfg.workflow.generators, workers=cfg.workflow.workers)


def role_types(cfg: Config) -> list[str]:
    wf = workflow_for(cfg)
    if wf is not None:
        return [r.name for r in wf.roles]
    return ["ceo"] if cfg.workflow.name == "single" else ["ceo", "expert"]


def make_policy_set(cfg: Config, policy: Policy) -> PolicySet:
    # LoRA A matrices are drawn from torch's global RNG: seed it here (without disturbing the
    # caller's stream) so that the same config gives the same adapters in any process.
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        return _policy_set(cfg, policy)


def _policy_set(cfg: Config, policy: Policy) -> PolicySet:
    return PolicySet(policy, cfg.policy.sharing, role_types(cfg), lora_rank=cfg.policy.lora_rank,
                     lora_alpha=cfg.policy.lora_alpha, lora_targets=cfg.policy.lora_targets,
                     temperature=cfg.sampler.temperature)


def new_rollouts(cfg: Config, runtime: Runtime, problems, per_problem: int, time_limit: float,
                 caps: list[int] | None = None) -> list[Rollout]:
    """`caps`: the CEO's expert cap per problem (default: max_experts_for(cfg) for all)."""
    wf = workflow_for(cfg)
    caps = caps or [max_experts_for(cfg)] * len(problems)
    return [runtime.new_rollout(g * per_problem + j, g, p, time_limit, caps[g], workflow=wf)
            for g, p in enumerate(problems) for j in range(per_problem)]


def step_caps(cfg: Config, step: int) -> list[int]:
    """Each problem's cap at `step`: the last round(fraction x problems) get a smaller one,
    drawn from 0..max_experts-1 (a function of (seed, step) alone, like the problems)."""
    n, top = cfg.rl.problems_per_step, max_experts_for(cfg)
    k = round(cfg.rl.smaller_caps_fraction * n)
    if k == 0:
        return [top] * n
    small = np.random.default_rng([cfg.seed, step, 3]).integers(0, top, size=k)
    return [top] * (n - k) + [int(c) for c in small]


class Trainer:
    def __init__(self, cfg: Config, policy: Policy):
        self.cfg = cfg
        self.runtime, self.task = make_runtime(cfg, policy.tokenizer)
        try:  # the task may hold a sandbox pool and the backend a Ray cluster: release them if a later part fails
            self._build(cfg, policy)
        except BaseException:
            self.close()
            raise
        self.step_idx = 0  # next step to run

    def _build(self, cfg: Config, policy: Policy) -> None:
        # Where rollouts run (distributed/); made before adapters wrap the model: Ray workers copy it.
        self.backend = make_backend(cfg, policy)
        self.policies = make_policy_set(cfg, policy)
        self.policy = policy  # the base policy (tokenizer, ids); trainable weights live in self.policies
        self.actor = LLMActor.from_config(cfg.sampler, self.policies)
        self.backend.attach(self.runtime, self.actor, self.policies)
        self.advantage_fn = get_advantage(cfg.rl.advantage)
        self.updater = Updater(cfg.rl, self.policies, get_loss(cfg.rl.loss), policy.pad_id, cfg.seed,
                               temperature=cfg.sampler.temperature)
        self.detectors = Detectors(cfg.detectors)
        self.role_ids = {r: i for i, r in enumerate(role_types(cfg))}

    def step(self) -> tuple[dict, list[Rollout]]:
        cfg, step = self.cfg, self.step_idx
        t0 = time.perf_counter()

        # 1. Rollouts: every problem `rollouts_per_problem` times, under this step's deadline
        #    (the curriculum's under RLCR shaping, the safety cap under penalty / none).
        #    The backend runs them here or on Ray workers with the current weights.
        time_limit = deadline_s(cfg.shaping, time_limit_at(cfg.time_limit, step))
        rollouts, distributed_metrics = self.backend.run(step, self.step_rollouts)
        rollout_s = time.perf_counter() - t0

        # 2. Reward: the collective score (reward earned before the deadline; latency-shaped
        #    under `shaping.mode`), the same for every agent of a rollout. A rollout whose
        #    grader failed (infra_error) is not a zero: it is left out of the loss and counted.
        keep, infra_rate = check_infra_errors(rollouts, cfg.sandbox.max_infra_error_rate)  # raises past the threshold
        usable = [r for r, k in zip(rollouts, keep) if k]
        seqs = collect_sequences(usable)
        score_of = dict(zip([r.index for r in usable], shaped_scores(cfg.shaping, usable).tolist()))
        rewards = torch.tensor([score_of[s.rollout] for s in seqs])  # [S]
        groups = torch.tensor([s.group for s in seqs])  # [S]
        rollout_ids = torch.tensor([s.rollout for s in seqs])  # [S]
        roles = torch.tensor([self.role_ids[s.role] for s in seqs])  # [S]

        # 3. Advantage: one scalar per sequence (flat over its tokens; `collective` makes it
        #    the same for every agent of a rollout).
        advantages = self.advantage_fn(rewards, groups, rollout_ids, roles)  # [S]
        for s, a in zip(seqs, advantages.tolist()):
            s.advantage = a

        # 4-5. Loss and update (per-role gradient norms on diagnostic steps).
        measure = cfg.rl.role_grad_interval > 0 and step % cfg.rl.role_grad_interval == 0
        update_metrics = self.updater.update(seqs, step, measure_roles=measure)

        # 6. Metrics, per-role diagnostics and detectors.
        #    Collective metrics over the full-cap rollouts: with `smaller_caps_fraction` the
        #    capped groups would otherwise mix the cap's effect into team size, share, messages.
        generated = sum(t.generated_tokens for r in rollouts for t in r.turns)
        full = [r for r in rollouts if r.org.max_experts == max_experts_for(cfg)]
        capped = [r for r in rollouts if r.org.max_experts != max_experts_for(cfg)]
        metrics = {"step": step, "time_limit": time_limit, **collective_metrics(
            full, ref_limit_s=cfg.time_limit.start, count_tokens=token_counter(self.policy.tokenizer))}
        if capped:
            metrics["capped/score_mean"] = float(np.mean([r.score for r in capped]))
            metrics["capped/cap_mean"] = float(np.mean([r.org.max_experts for r in capped]))
        metrics["reward_mean"] = float(np.mean(list(score_of.values()))) if score_of else 0.0
        metrics["infra_error_rate"] = infra_rate
        metrics["team_size_hist"] = team_size_histogram(rollouts, cfg.workflow.max_experts + 1)
        metrics.update(update_metrics)
        metrics.update(distributed_metrics)
        outputs, signatures = role_output_metrics(rollouts)
        metrics.update(outputs)
        if cfg.eval.val_interval and step % cfg.eval.val_interval == 0:  # a function of the step alone: resume-exact
            metrics["val_accuracy"] = self.validate()
        alerts = self.detectors.update(step, metrics, signatures, self.multiplicity())
        metrics["alerts"] = [f"{a.name}:{a.role}: {a.message}" for a in alerts]
        metrics["tokens_per_s"] = generated / max(rollout_s, 1e-9)
        metrics["rollout_s"] = rollout_s
        metrics["step_s"] = time.perf_counter() - t0
        self.step_idx += 1
        return metrics, rollouts

    def step_rollouts(self, step: int) -> tuple[list[Rollout], int]:
        """Step `step`'s rollouts (not yet run) and their sampling seed: a function of (seed, step)
        alone, so a backend may build them ahead of the step or again after a worker died."""
        cfg = self.cfg
        time_limit = deadline_s(cfg.shaping, time_limit_at(cfg.time_limit, step))
        problems = self.task.sample(np.random.default_rng([cfg.seed, step]), cfg.rl.problems_per_step)
        return (new_rollouts(cfg, self.runtime, problems, cfg.rl.rollouts_per_problem, time_limit,
                             step_caps(cfg, step)), cfg.seed * 1_000_003 + step)

    def close(self) -> None:
        """Release what the run holds, on success, error or Ctrl-C: the backend (Ray workers and a
        cluster it started; the vLLM engine it attached), an engine set on the policies directly,
        and the task's sandbox pool. Idempotent. Every part is closed even when one fails; the
        first failure is raised after. Safe on a trainer whose __init__ stopped half way."""
        first: Exception | None = None
        for part in ("backend", "engine", "task"):
            try:
                if part == "engine":  # read after the backend's close, which may have closed it already
                    policies = getattr(self, "policies", None)
                    obj = getattr(policies, "engine", None)
                    if obj is not None:
                        policies.engine = None
                else:
                    obj = getattr(self, part, None)
                close = getattr(obj, "close", None)  # tasks without resources have no close()
                if close is not None:
                    close()
            except Exception as e:  # the other parts still hold processes / memory: close them too
                first = first or e
        if first is not None:
            raise first

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def multiplicity(self) -> dict[str, int]:
        wf = workflow_for(self.cfg)
        return wf.multiplicity() if wf is not None else {}

    def validate(self) -> float:
        """Mean score on held-out problems (greedy, at the final deadline): validation accuracy."""
        from swarmrl.rl.evaluate import evaluate
        return evaluate(self.cfg, self.policies, problems=self.cfg.eval.val_problems, greedy=True,
                        runtime=self.runtime)["score_mean"]

