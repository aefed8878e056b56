"""Collective inference-time scaling: score versus latency budget, one curve per team size.

The collective analogue of the reasoning models' test-time scaling plot: for a fixed policy,
how much of the task does a team of k agents get done within L seconds, and at what latency
does a team first match the best a single agent ever does (time-to-single-agent-score)?

Each team size runs once, at the largest limit of the grid, on the held-out problems; the
score at every smaller limit L is read off the same timeline (`diagnostics.collective.at_limit`).
This is exact, not an approximation: agents are never told the deadline, and a turn that
would start after it never runs, so everything before L is what a rollout cut at L would
have done (tested against real cut runs). It also makes each curve monotone in L and the
cells of one team size paired, so differences between limits are not sampling noise.

Team size is fixed per cell in one of two ways (`prestaffed`): the CEO may hire up to k - 1
experts (the policy still chooses, and the table reports the size it chose), or the org
starts with k - 1 experts already hired.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from swarmrl.config import Config, ConfigError
from swarmrl.config_checks import eval_cap
from swarmrl.diagnostics.collective import at_limit, score_steps, snapshot_metrics, token_counter
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import Policy
from swarmrl.policy.sharing import PolicySet, tokenizer_of
from swarmrl.build import eval_problems, make_runtime, place_policy
from swarmrl.runs.progress import RolloutProgress
from swarmrl.scenarios import make_scenario

# Columns of the CSV, in order (the JSON rows hold every metric).
CSV_COLUMNS = ("team_size", "time_limit_s", "score_mean", "score_se", "useful_work", "useful_work_per_min",
               "team_size_mean", "expert_work_share", "messages_per_rollout", "critical_path_s",
               "total_tokens_per_rollout", "generated_tokens_per_rollout")


@dataclass
class ScaleSpec:
    team_sizes: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    """Team sizes to evaluate, CEO included (1 = a single agent)."""
    time_limits_s: list[float] = field(default_factory=lambda: [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24])
    """Latency budgets (simulated seconds); the runs go to the largest, the rest are free."""
    problems: int = 32
    """Held-out problems per team size (one rollout each)."""
    prestaffed: bool = False
    """False: the CEO may hire up to team_size - 1 experts. True: they are hired at t = 0."""
    greedy: bool = False
    """True: every agent decodes its most likely token (as validation does, rl/trainer.py);
    False: it samples at sampler.temperature, as in training. Greedy compares a policy with the
    perfect scripted single agent on equal terms: neither pays for sampling noise."""
    seed: int | None = None
    """The seed of the rollouts' draws; None: task.eval_seed. The problems stay the held-out set
    whatever it is (build.eval_problems), so two seeds of one policy differ only in what it
    sampled: the evaluation's own noise (benchmarks/eval_noise.py). No effect under greedy."""


def check_spec(cfg: Config, spec: ScaleSpec) -> ScaleSpec:
    """Clear errors for bad input, before any model runs."""
    if not spec.team_sizes or not spec.time_limits_s:
        raise ConfigError("scale needs at least one team size and one time limit")
    bad = [L for L in spec.time_limits_s if not (isinstance(L, (int, float)) and math.isfinite(L) and L > 0)]
    if bad:
        raise ConfigError(f"time limits must be > 0 seconds, got {bad}")
    scenario = make_scenario(cfg)
    top = eval_cap(cfg) if scenario.hires else 1  # a fixed team is scored as it is: "size 1"
    bad = [k for k in spec.team_sizes if not 1 <= k <= top]
    if bad:
        raise ConfigError(f"team sizes must be in 1..{top} (eval.max_team_size "
                          f"for workflow {cfg.workflow.name!r}), got {bad}")
    if spec.problems < 1:
        raise ConfigError(f"problems must be >= 1, got {spec.problems}")
    if spec.seed is not None and not (isinstance(spec.seed, int) and spec.seed >= 0):
        raise ConfigError(f"the sampling seed must be an integer >= 0 (numpy's seeds are), got {spec.seed!r}")
    return dataclasses.replace(spec, team_sizes=sorted(set(spec.team_sizes)),
                               time_limits_s=sorted(set(float(x) for x in spec.time_limits_s)))


def check_same_task(trained: dict | None, cfg: Config, ignore: tuple[str, ...] = ()) -> None:
    """A checkpoint trained on another task (or another shape of it) cannot be scored on this one;
    `ignore`: task keys the caller changes on purpose (`--items`)."""
    if not trained or "task" not in trained:
        return
    want = {k: v for k, v in cfg.task.__dict__.items() if k != "eval_seed" and k not in ignore}
    # A key the run's config lacks was added to the schema later, with a default that keeps the
    # behaviour the run was trained under.
    default = type(cfg.task)().__dict__
    got = {k: trained["task"].get(k, default[k]) for k in want}
    if got != want:
        diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        raise ConfigError(f"checkpoint is from another task: trained on {diff} (trained, asked); "
                          "score it with its own task config")


def run_scaling(cfg: Config, policy: Policy | PolicySet, spec: ScaleSpec, log=print) -> list[dict]:
    """One row per (team size, time limit), sorted by team size then limit. `policy`: one model,
    or a run's per-role policies (policy.sharing isolated / isolated_full)."""
    spec = check_spec(cfg, spec)
    by_size = scale_rollouts(cfg, policy, spec, log)
    count = token_counter(tokenizer_of(policy))
    rows = []
    for k, mine in by_size.items():
        rows += _grid_rows(mine, spec, count, {"team_size": k, "prestaffed": spec.prestaffed, "greedy": spec.greedy})
    return rows


def scale_rollouts(cfg: Config, policy: Policy | PolicySet, spec: ScaleSpec, log=print) -> dict[int, list]:
    """The finished rollouts of a checked spec, by team size, run to its largest limit. Every team
    size runs in one batch: rollouts are independent, and bigger batches are cheaper per turn. A
    turn's seed includes its rollout's index in that batch, so any reader of these rollouts
    (benchmarks/team_losses.py) sees exactly the draws the grid was read from."""
    horizon = max(spec.time_limits_s)
    runtime, task = make_runtime(cfg, tokenizer_of(policy))
    probs = eval_problems(cfg, task, spec.problems)
    rollouts, sizes = [], []
    for k in spec.team_sizes:
        for p in probs:
            i = len(rollouts)
            rollouts.append(runtime.new_rollout(i, i, p, horizon, k - 1, prestaffed_experts=(k - 1) * spec.prestaffed))
            sizes.append(k)
    place_policy(cfg, policy, role="eval")  # model.device
    actor = LLMActor.from_config(cfg.sampler, policy, greedy=spec.greedy)
    t0 = time.perf_counter()
    runtime.run(rollouts, actor, seed=draw_seed(cfg, spec), progress=RolloutProgress("scaling", horizon, log=log))
    log(f"  scaling: {len(rollouts)} rollouts (team sizes {spec.team_sizes}, {spec.problems} problems, "
        f"up to {horizon:g} s) in {time.perf_counter() - t0:.0f}s")
    return {k: [r for r, s in zip(rollouts, sizes) if s == k] for k in spec.team_sizes}


def _grid_rows(rollouts: list, spec: ScaleSpec, count, head: dict) -> list[dict]:
    """One row per limit of the grid for one team's rollouts. The row at the horizon also holds
    the exact score-versus-limit steps up to it (`score_steps`, read by `time_to_score`): the grid
    only brackets a crossing, and a coarse grid reads it late."""
    rows = []
    for L in spec.time_limits_s:
        snaps = [at_limit(r, L, count) for r in rollouts]
        rows.append({**head, "time_limit_s": L, "problems": len(rollouts), **snapshot_metrics(snaps),
                     "score_se": standard_error([s.score for s in snaps])})
    rows[-1]["score_steps"] = [[t, s] for t, s in score_steps(rollouts, spec.time_limits_s[-1])]
    return rows


def draw_seed(cfg: Config, spec: ScaleSpec) -> int:
    """The seed the grid's rollouts sample with: `spec.seed`, else `task.eval_seed`."""
    return cfg.task.eval_seed if spec.seed is None else spec.seed


def standard_error(xs: list[float]) -> float | None:
    """The standard error of the mean of xs (sample standard deviation over sqrt(n)); None for
    fewer than two values. Over a grid cell's rollouts it is the spread of the held-out problems
    and of the draws together; two grids on the same problems differ by less (benchmarks/eval_noise.py)."""
    return statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) >= 2 else None


def scripted_solo_rows(cfg: Config, policy: Policy | PolicySet, spec: ScaleSpec) -> list[dict]:
    """A perfect single agent on the same problems, limits and latency model: the task's scripted
    solo demonstrator (never wrong, fewest tokens), run through the same runtime.

    Why: a policy's own team-size-1 play can be weak or degenerate (a checkpoint that hires when
    its header says `alone` scores 0), which would make any team look good. The best
    a single agent of this action format could do is the comparison that cannot be gamed.

    Only time bounds it: the per-agent turn cap (sampler.max_turns_per_agent) is a loop guard
    for policies, and a script does not loop, so it gets turns for every item. Under the cap a
    single agent that spends a turn per item cannot finish a problem with as many items as turns
    (the default: 12 of each), and its "best score" would be the cap's, not the clock's.
    """
    spec = check_spec(cfg, spec)
    base = policy.base if isinstance(policy, PolicySet) else policy  # per-role policies share the base's tokens
    tokenizer = base.tokenizer
    runtime, task = make_runtime(cfg, tokenizer)
    scripts = task.scripts()
    if scripts is None:
        raise ConfigError(f"task {cfg.task.name!r} has no scripted demonstrations: no scripted single agent to compare with")
    probs = eval_problems(cfg, task, spec.problems)
    runtime.limits = runtime.limits.for_scripts(probs)
    rollouts = [runtime.new_rollout(i, i, p, max(spec.time_limits_s), 0) for i, p in enumerate(probs)]
    actor = scripts.org_actor(tokenizer, base.end_id, {i: scripts.solo_strategy() for i in range(len(probs))})
    runtime.run(rollouts, actor, seed=0)
    return _grid_rows(rollouts, spec, token_counter(tokenizer), {"team_size": 1, "actor": "scripted_solo"})


# --------------------------------------------------------------------------- the table


def curve(rows: list[dict], team_size: int, key: str = "score_mean") -> tuple[list[float], list[float]]:
    """(limits, values) of one team size, sorted by limit."""
    got = sorted((r["time_limit_s"], r[key]) for r in rows if r["team_size"] == team_size)
    return [L for L, _ in got], [v for _, v in got]


def steps_of(rows: list[dict], team_size: int) -> list[list[float]] | None:
    """The exact [time, mean score] steps of one team size, up to its horizon (None: rows without them)."""
    return next((r["score_steps"] for r in rows if r["team_size"] == team_size and "score_steps" in r), None)


def time_to_score(rows: list[dict], team_size: int, target: float, tol: float = 1e-9,
                  grid: bool = False) -> float | None:
    """The smallest limit at which `team_size` scores >= target; None if it never does (up to the
    horizon). Exact when its rows carry `score_steps` (run_scaling's do): the time of the solve
    that brings the mean score to the target. Otherwise, or with `grid`, the smallest grid limit."""
    steps = steps_of(rows, team_size)
    return first_reach(list(zip(*curve(rows, team_size))) if grid or steps is None else steps, target, tol)


def first_reach(points, target: float, tol: float = 1e-9) -> float | None:
    """The first limit of [(limit, score)] (in increasing limits) whose score reaches `target`."""
    return next((L for L, s in points if s >= target - tol), None)


def summarize(rows: list[dict], reference: list[dict] | None = None) -> dict:
    """Single-agent best score, and per team size its time-to-single-agent-score (exact, and the
    grid limit that first meets it) and the tokens spent by that grid limit.

    The single agent is team size 1 from the same policy; its "best score" is its maximum over
    the grid, and it too has a time to reach it (the baseline the teams are compared with).
    With `reference` (team-size-1 rows of another single agent, e.g. `scripted_solo_rows`),
    the same is reported against that agent's best score (`..._reference_...` keys).
    """
    sizes = sorted({r["team_size"] for r in rows})
    out: dict = {"team_sizes": sizes, "limits_s": sorted({r["time_limit_s"] for r in rows}), "by_team_size": {}}
    best = max(curve(rows, 1)[1]) if 1 in sizes else None
    ref_best = max(curve(reference, 1)[1]) if reference else None
    out["single_agent_best_score"] = best
    if reference:
        out["reference_single_best_score"] = ref_best
        out["reference_time_to_its_best_s"] = time_to_score(reference, 1, ref_best)
    for k in sizes:
        limits, scores = curve(rows, k)
        entry: dict = {"best_score": max(scores), "best_score_limit_s": limits[int(np.argmax(scores))]}
        for tag, target in (("single_agent", best), ("reference", ref_best)):
            if target is None:
                continue
            # Tokens are read at the first grid limit where the target is met (the row there).
            on_grid = time_to_score(rows, k, target, grid=True)
            row = next((r for r in rows if r["team_size"] == k and r["time_limit_s"] == on_grid), None)
            entry[f"time_to_{tag}_score_s"] = time_to_score(rows, k, target)
            entry[f"grid_time_to_{tag}_score_s"] = on_grid
            entry[f"tokens_at_{tag}_score"] = row["total_tokens_per_rollout"] if row else None
            if tag == "single_agent":  # kept for the plain single-agent comparison under short names
                entry["tokens_at_that_limit"] = entry["tokens_at_single_agent_score"]
                entry["generated_tokens_at_that_limit"] = row["generated_tokens_per_rollout"] if row else None
        out["by_team_size"][str(k)] = entry
    return out


def score_at(rows: list[dict], team_size: int, limit_s: float, key: str = "score_mean") -> float | None:
    """The value at the largest grid limit <= limit_s (None if the grid starts above it)."""
    got = [(L, v) for L, v in zip(*curve(rows, team_size, key)) if L <= limit_s + 1e-9]
    return got[-1][1] if got else None


def write_table(rows: list[dict], summary: dict, out_dir: Path, name: str = "scaling",
                source: dict | None = None) -> list[Path]:
    """`name`.json (`source`: what was scored and how, the rows, the summary) and `name`.csv."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / f"{name}.json"
    js.write_text(json.dumps({"source": source or {}, "rows": rows, "summary": summary}, indent=2))
    cs = out_dir / f"{name}.csv"
    with cs.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in rows:
            w.writerow([_csv_cell(r.get(c)) for c in CSV_COLUMNS])
    return [js, cs]


def _csv_cell(v) -> str:
    """A float to 6 significant digits; a missing value (a cell no rollout defines) empty."""
    return f"{v:.6g}" if isinstance(v, float) else "" if v is None else str(v)
