"""Evaluation: score a policy on held-out problems at a given deadline and team size."""

from __future__ import annotations

import time

from swarmrl.build import eval_problems, make_runtime, new_rollouts, place_policy
from swarmrl.config import Config, ConfigError
from swarmrl.config_checks import eval_cap
from swarmrl.diagnostics.collective import collective_metrics, team_size_histogram
from swarmrl.diagnostics.outputs import role_output_metrics
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import Policy
from swarmrl.policy.sharing import PolicySet, tokenizer_of
from swarmrl.runs.progress import RolloutProgress


def evaluate(cfg: Config, policy: Policy | PolicySet, time_limit: float | None = None, team_size: int | None = None,
             problems: int | None = None, greedy: bool = False, runtime=None, log=None) -> dict:
    """One rollout per held-out problem (stream seeded by `task.eval_seed`, never used in training).

    team_size caps the team (CEO included) where the scenario lets the policy hire: the CEO may
    hire at most team_size - 1 experts. Scenarios with a fixed team ignore it. `log`: where a
    progress line goes every 30 s of a long evaluation (None: silent, as validation in training is).
    """
    time_limit = time_limit or cfg.eval.time_limit or cfg.time_limit.end
    if time_limit <= 0:
        raise ValueError(f"time limit must be > 0 seconds, got {time_limit}")
    place_policy(cfg, policy, role="eval")  # model.device (a no-op for the trainer's own policies)
    tokenizer = tokenizer_of(policy)
    if runtime is None:
        runtime, _ = make_runtime(cfg, tokenizer)
    scenario = runtime.scenario
    size = team_size or cfg.eval.team_size
    cap = scenario.team_cap(None) if not size else size - 1
    if not 0 <= cap < eval_cap(cfg):
        raise ConfigError(f"team size must be in 1..{eval_cap(cfg)} (eval.max_team_size), got {cap + 1}")
    n = problems or cfg.eval.problems
    rollouts = new_rollouts(runtime, eval_problems(cfg, runtime.task, n), 1, time_limit,
                            caps=[cap] * n if scenario.hires else None)
    actor = LLMActor.from_config(cfg.sampler, policy, greedy=greedy)
    t0 = time.perf_counter()
    progress = RolloutProgress("eval", time_limit, log=log) if log is not None else None
    runtime.run(rollouts, actor, seed=cfg.task.eval_seed, progress=progress)
    m = collective_metrics(rollouts)
    m.update(role_output_metrics(rollouts)[0])
    m.update({"time_limit": time_limit, "team_size_cap": cap + 1, "problems": n,
              "team_size_hist": team_size_histogram(rollouts, max(cap, cfg.workflow.max_experts) + 1),
              "eval_s": time.perf_counter() - t0})
    return m
