"""The public Python API of swarmrl: train, resume, evaluate and scale runs, and read them back.

The `swarmrl` command line (cli.py) is a thin layer over these functions: each command parses
its flags, calls one function here and prints the result. Everything heavy (torch,
transformers) is imported inside the functions, so importing this module stays cheap.

    import swarmrl
    run = swarmrl.train("tiny_test", out="runs/tiny", overrides=["rl.steps=2"])
    print(run.score_curve())
    print(swarmrl.evaluate(run.path)["score_mean"])
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from swarmrl.config import Config, ConfigError, apply_overrides, config_from_dict, load_config, resolve_config

__all__ = ["Run", "ScaleResult", "DEFAULT_TEAM_SIZES", "train", "resume", "evaluate", "scale", "load_run",
           "pretrain", "random_model", "check_eval_inputs", "check_out", "config_of"]

Log = Callable[[str], Any]
Overrides = Sequence[str] | Mapping[str, Any] | None

DEFAULT_TEAM_SIZES: tuple[int, ...] = (1, 2, 4, 8)
"""Team sizes (CEO included) that `scale` measures unless told otherwise, with the run's full team."""

_STEP_DIR = re.compile(r"^step_(\d+)$")  # the checkpoint directories of runs/checkpoint.py


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class Run:
    """A run directory read back: where it is, the resolved config it ran with, and its metrics.

    `metrics` holds one dict per training step (metrics.jsonl), oldest first. A `Run` is a
    snapshot: call `load_run(run.path)` again to see steps written since.
    """

    path: Path
    config: Config
    metrics: list[dict] = field(default_factory=list)

    @property
    def final_dir(self) -> Path:
        """The trained policy (`final/`); it exists once the run has finished."""
        return self.path / "final"

    @property
    def model_dir(self) -> Path:
        """The initial policy the run started from (`model/`)."""
        return self.path / "model"

    @property
    def checkpoints(self) -> list[Path]:
        """The checkpoint directories (`checkpoints/step_N`), oldest first."""
        root = self.path / "checkpoints"
        if not root.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and p.is_dir()]
        return [p for _, p in sorted(found)]

    @property
    def steps(self) -> int:
        """How many training steps the run has recorded."""
        return len(self.metrics)

    @property
    def finished(self) -> bool:
        """True once `final/` has been written (the last thing a finished run writes)."""
        return self.final_dir.is_dir()

    def score_curve(self, key: str = "score_mean") -> list[tuple[int, float]]:
        """(step, value) pairs of one metric over training, skipping steps without a value."""
        return [(int(r.get("step", i)), float(r[key])) for i, r in enumerate(self.metrics)
                if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]


def load_run(path: str | Path) -> Run:
    """Read a run directory (written by `train`) back as a `Run`."""
    from swarmrl.runs.rundir import CONFIG, RunDir
    p = Path(path)
    if not (p / CONFIG).is_file():
        raise ConfigError(f"{p}: not a run directory (no {CONFIG})")
    rd = RunDir(p)
    return Run(path=rd.path, config=config_from_dict(rd.read_config()), metrics=rd.read_metrics())


def _as_run(rd) -> Run:
    return load_run(rd.path)


# --------------------------------------------------------------------------- configs


def _override_list(overrides: Overrides) -> list[str]:
    """`["a.b=1"]` as is; `{"a.b": 1}` -> `["a.b=1"]` (non-strings written as JSON, which YAML reads)."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in overrides.items()]
    if isinstance(overrides, str):
        raise TypeError(f"overrides must be a list of key=value strings or a dict, not a string: {overrides!r}")
    return list(overrides)


def config_of(config: str | Path | Config | None, overrides: Overrides = None) -> Config:
    """A `Config` from a preset name (`rlcr_arith`), a YAML path, a `Config`, or None (defaults),
    with `key=value` overrides applied."""
    ov = _override_list(overrides)
    if isinstance(config, Config):
        return config_from_dict(apply_overrides(config.to_dict(), ov)) if ov else config
    return load_config(resolve_config(str(config) if config is not None else None), ov)


# --------------------------------------------------------------------------- training


def pretrain(config: str | Path | Config | None = "rlcr_arith", overrides: Overrides = None, force: bool = False,
             log: Log = print) -> Path:
    """Warm-start the tiny model on scripted demonstrations (cached); returns the model dir."""
    from swarmrl.policy.warmstart import warm_start
    return warm_start(config_of(config, overrides), log=log, force=force)


def random_model(config: str | Path | Config | None, out: str | Path, overrides: Overrides = None,
                 seed: int = 0) -> Path:
    """Save a randomly initialised model of the config's `model` architecture (the tiny default)
    to `out`, as a model directory that `train(init=...)` accepts; returns `out`."""
    from swarmrl.policy.model import build_tiny_policy, save_policy
    cfg = config_of(config, overrides)
    out = Path(out)
    save_policy(build_tiny_policy(cfg.model, seed=seed), out)
    return out


def check_out(out: Path, overwrite: bool) -> None:
    """The checks RunDir.create makes, made early so that a bad output directory costs nothing."""
    from swarmrl.runs.rundir import METRICS
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if (out / METRICS).exists() and not overwrite:
        raise FileExistsError(f"{out} already contains a run ({METRICS}); use --resume {out} to continue it, "
                              "or --overwrite to start over")


def train(config: str | Path | Config | None = "rlcr_arith", out: str | Path | None = None,
          overrides: Overrides = None, init: str | Path | None = None, overwrite: bool = False,
          log: Log = print) -> Run:
    """RL-train a team policy into the run directory `out`; returns the finished `Run`.

    `config`: a preset name, a YAML path, a `Config`, or None for the defaults; `overrides`:
    `key=value` strings or a dict. The initial policy is `init` (a model directory), else
    `model.name_or_path`, else the cached warm start of the tiny default model (trained first
    if not cached). An existing run in `out` is an error unless `overwrite`.
    """
    from swarmrl.build import check_plugins
    from swarmrl.distributed.launch import launch_needed, rank_config
    from swarmrl.distributed.torchrun import check_learner
    from swarmrl.policy.start import policy_init, ranks_warm_start
    from swarmrl.rl.loop import train as train_loop
    if out is None:
        raise ConfigError("train needs --out DIR (or --resume DIR)")
    cfg = config_of(config, overrides)
    check_plugins(cfg)  # a bad plugin name fails before a model is loaded or a warm start runs
    if launch_needed(cfg):  # the ranks this process will start can run here
        rank_config(cfg)
    else:  # learner.strategy against how the processes were launched (torchrun or not)
        check_learner(cfg)
    check_out(Path(out), overwrite)  # before a warm start that may take minutes
    if init is not None and not Path(init).is_dir():
        raise ConfigError(f"--init {init}: no such model directory")
    if init is not None:
        init_dir = Path(init)
    elif ranks_warm_start(cfg):
        log(f"the warm start is not cached: the {cfg.learner.processes} training ranks train it first")
        init_dir = None
    else:
        init_dir = policy_init(cfg, log)
    return _as_run(train_loop(cfg, Path(out), init_policy=init_dir, log=log, overwrite=overwrite))


def resume(run_dir: str | Path, overrides: Overrides = None, log: Log = print) -> Run:
    """Continue the run in `run_dir` from its newest valid checkpoint, with its own config.

    Only the keys of `rl/loop.py` RESUME_OVERRIDABLE may be overridden: `rl.steps` (raise it to
    train further), `run.threads`, `run.progress`, `distributed.*` and `model.device` (a checkpoint
    loads onto any device).
    """
    from swarmrl.rl.loop import train as train_loop
    rd = train_loop(Config(), Path(run_dir), resume=True, log=log, resume_overrides=_override_list(overrides))
    return _as_run(rd)


# --------------------------------------------------------------------------- evaluation


def check_eval_inputs(run_or_model: str | Path, problems: int | None = None, team_size: int | None = None,
                      time_limit: float | None = None) -> None:
    """Inputs of evaluate/scale: a zero or negative count would silently mean 'the config's default'."""
    if not Path(run_or_model).exists():
        raise ConfigError(f"{run_or_model}: no such run, checkpoint or model directory")
    if problems is not None and problems < 1:
        raise ConfigError(f"--problems must be >= 1, got {problems}")
    if team_size is not None and team_size < 1:
        raise ConfigError(f"--team-size must be >= 1 (the CEO counts), got {team_size}")
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise ConfigError(f"--time-limit must be > 0 seconds, got {time_limit:g}")


def evaluate(run_or_model: str | Path, overrides: Overrides = None, time_limit: float | None = None,
             team_size: int | None = None, problems: int | None = None, greedy: bool = False,
             config: str | Path | Config | None = None, log: Log = print) -> dict:
    """Score a run (its latest checkpoint), a checkpoint or a model directory on held-out problems.

    The config is the run's own (with `overrides`), or `config` when given (needed for a bare
    model directory that is not the default setting). Returns the metrics `swarmrl eval`
    prints: score_mean, team_size_mean, latency_mean, messages_per_rollout, ... `log`: a
    progress line every 30 s while the rollouts run (None: silent).
    """
    import torch
    from swarmrl.rl.evaluate import evaluate as evaluate_policy
    from swarmrl.rl.loop import load_trained_policy
    check_eval_inputs(run_or_model, problems, team_size, time_limit)
    ov = _override_list(overrides)
    policy, run_cfg = load_trained_policy(Path(run_or_model))
    if config is not None:
        cfg = config_of(config, ov)
    else:
        cfg = config_from_dict(run_cfg) if run_cfg else load_config(None, [])
        if ov:
            cfg = config_from_dict(apply_overrides(cfg.to_dict(), ov))
    torch.set_num_threads(cfg.run.threads)
    return evaluate_policy(cfg, policy, time_limit=time_limit, team_size=team_size, problems=problems, greedy=greedy,
                           log=log)


@dataclass(frozen=True)
class ScaleResult:
    """What `scale` measured: one row per (team size, time limit), the summary (time for each
    team size to reach the single agent's best score), and the files written (none without `out`)."""

    rows: list[dict]
    summary: dict
    paths: list[Path] = field(default_factory=list)
    reference: list[dict] = field(default_factory=list)
    """The perfect scripted single agent's rows on the same problems and limits (empty where the
    task has no scripts or the workflow does not hire); the summary's `reference_...` keys."""


def _run_config(path: Path) -> dict | None:
    """The resolved config of a run dir or of a checkpoint inside one (None for a bare model dir)."""
    for cand in (path / "config.yaml", path.parent.parent / "config.yaml"):
        if cand.exists() and (cand.parent / "model").exists():
            return yaml.safe_load(cand.read_text())
    return None


def scale(run_or_model: str | Path, team_sizes: Sequence[int] | None = None,
          time_limits_s: Sequence[float] | None = None, problems: int | None = None, prestaffed: bool = False,
          out: str | Path | None = None, config: str | Path | Config | None = None, overrides: Overrides = None,
          items: int | None = None, greedy: bool = False, seed: int | None = None, log: Log = print) -> ScaleResult:
    """Score vs latency budget per team size: the collective test-time scaling table.

    Measures every (team size, time limit) pair on `problems` held-out problems (default
    `eval.problems`). `team_sizes` None: DEFAULT_TEAM_SIZES and the config's full team (the CEO and
    `workflow.max_experts` experts: the team it trained, where the workflow hires). `prestaffed` hires the whole team at t=0 instead of capping the CEO. With
    `out`, writes scaling.json/.csv and two plots there. The config is the run's own unless
    `config` is given (needed for a bare model directory). `items`: items per problem for the
    evaluation (`task.items_per_problem`; a bigger team gets a bigger problem: village to city).
    Team sizes go up to `eval.max_team_size` (65 by default), whatever the training cap.
    `greedy`: decode the most likely token instead of sampling (ScaleSpec.greedy); `seed`: the
    sampling draws' seed, the problems unchanged (ScaleSpec.seed). Where the task
    has scripts and the workflow hires, the perfect scripted single agent runs on the same problems
    and limits too (`ScaleResult.reference`), and the summary gives each team's time to its best score.
    """
    import torch
    from swarmrl.rl.loop import load_trained_policy, trained_weights_dirs
    from swarmrl.runs.manifest import weights_digest
    from swarmrl.scaling.scale import (ScaleSpec, check_same_task, check_spec, draw_seed, run_scaling,
                                      scripted_solo_rows, summarize, write_table)
    check_eval_inputs(run_or_model, problems)
    ov = _override_list(overrides) + ([f"task.items_per_problem={items}"] if items is not None else [])
    if config is not None:
        cfg = config_of(config, ov)
    else:
        run_cfg = _run_config(Path(run_or_model))
        if run_cfg is None:
            raise ConfigError(f"{run_or_model} has no run config: pass --config")
        cfg = config_from_dict(apply_overrides(run_cfg, ov))
    sizes = [int(x) for x in team_sizes] if team_sizes is not None else _default_team_sizes(cfg)
    spec = ScaleSpec(team_sizes=sizes, problems=problems or cfg.eval.problems,
                     prestaffed=prestaffed, greedy=greedy, seed=seed,
                     time_limits_s=list(time_limits_s) if time_limits_s else ScaleSpec().time_limits_s)
    check_spec(cfg, spec)  # bad input fails before the model loads
    policy, run_cfg = load_trained_policy(Path(run_or_model))
    check_same_task(run_cfg, cfg, ignore=("items_per_problem",) if items is not None else ())
    torch.set_num_threads(cfg.run.threads)
    rows = run_scaling(cfg, policy, spec, log=log)
    reference = scripted_solo_rows(cfg, policy, spec) if _has_scripted_single(cfg) else []
    summary = summarize(rows, reference or None)
    paths: list[Path] = []
    if out is not None:
        from swarmrl.report.scaling import plot_score_vs_latency, plot_tokens_vs_latency
        out = Path(out)
        source = {"model": str(Path(run_or_model).resolve()), "greedy": greedy, "problems": spec.problems,
                  "prestaffed": prestaffed, "items_per_problem": cfg.task.items_per_problem,
                  "seed": draw_seed(cfg, spec),
                  "weights_sha256": weights_digest(trained_weights_dirs(Path(run_or_model)))}
        paths = write_table(rows, summary, out, source=source)
        if reference:
            paths += write_table(reference, summarize(reference), out, "scripted_solo", source=source)
        title = f"score vs latency budget ({'greedy' if greedy else f'sampled at T={cfg.sampler.temperature:g}'})"
        paths += [plot_score_vs_latency(rows, out / "score_vs_latency.png", title=title, reference=reference or None,
                                        marks_s={"tight": cfg.time_limit.start, "loose": cfg.time_limit.end}),
                  plot_tokens_vs_latency(rows, out / "tokens_vs_latency.png")]
    return ScaleResult(rows=rows, summary=summary, paths=paths, reference=reference)


def _default_team_sizes(cfg: Config) -> list[int]:
    """DEFAULT_TEAM_SIZES, and the full team where the workflow hires (a fixed team is "size 1")."""
    from swarmrl.scenarios import make_scenario
    scenario = make_scenario(cfg)
    if not scenario.hires:
        return [1]
    return sorted(set(DEFAULT_TEAM_SIZES) | {scenario.team_cap(None) + 1})


def _has_scripted_single(cfg: Config) -> bool:
    """Whether the task's perfect scripted single agent can play this config (scaling.scale)."""
    from swarmrl.scenarios import make_scenario
    from swarmrl.tasks import TASKS
    return bool(getattr(TASKS.get(cfg.task.name), "scripted", False)) and make_scenario(cfg).hires
