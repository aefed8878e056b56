"""Whether a finished run in a directory is the run a caller would train there.

Experiments and sweeps skip work whose run directory is already finished, so that an interrupted
invocation continues where it stopped. That is only sound if the finished run is the one this
invocation would train: the same config (how it ran aside: threads, ranks, loggers) from the same
initial weights. Otherwise a changed budget or warm start would put an old run's numbers in a new
table, so `check_same_run` refuses it, naming what differs.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from swarmrl.config import Config, ConfigError
from swarmrl.rl.loop import RESUME_OVERRIDABLE
from swarmrl.runs.environment import MACHINE_KEYS, differences, environment
from swarmrl.runs.manifest import sha256
from swarmrl.runs.rundir import RunDir, to_jsonable

# How a run executes, not what it trains (the keys a resume may change, less its step budget).
HOW_IT_RUNS = tuple(k for k in RESUME_OVERRIDABLE if k != "rl.steps")


def _flat(config: dict) -> dict:
    """{section: {key: value}} -> {"section.key": value} (top-level values as they are)."""
    out = {k: v for k, v in config.items() if not isinstance(v, dict)}
    for section, keys in config.items():
        if isinstance(keys, dict):
            out |= {f"{section}.{k}": v for k, v in keys.items()}
    return out


def run_differences(run_dir: Path, cfg: Config, init: Path | None) -> list[str]:
    """The config keys in which the run in `run_dir` differs from `cfg` (how it ran aside), and
    "the initial weights" when its starting weights are not `init`'s."""
    saved = _flat(RunDir(run_dir).read_config())
    want = _flat(yaml.safe_load(yaml.safe_dump(to_jsonable(cfg.to_dict()))))  # as train writes it
    diff = sorted(k for k in saved.keys() | want.keys()
                  if saved.get(k) != want.get(k) and not k.startswith(HOW_IT_RUNS))
    start = Path(run_dir) / "model" / "model.safetensors"
    weights = Path(init) / "model.safetensors" if init is not None else None
    if weights is not None and start.exists() and weights.exists() and sha256(start) != sha256(weights):
        diff.append("the initial weights")
    return diff


def check_same_run(run_dir: Path, cfg: Config, init: Path | None, log=None) -> None:
    """Refuse a finished run in `run_dir` that is not the one `cfg` from `init` would train. One
    trained on another machine or build is this run, but another draw of it: `log` says so."""
    if diff := run_differences(run_dir, cfg, init):
        raise ConfigError(f"{run_dir} holds a finished run of another config ({', '.join(diff[:6])} differ): "
                          "use another --out, or remove that directory to train it there")
    trained = RunDir(run_dir).read_environment()
    if log is not None and trained and (apart := differences(trained[0], environment(), MACHINE_KEYS)):
        log(f"note: reusing {run_dir}, trained on another machine or build ({', '.join(apart)} differ): "
            "its numbers are another draw of this run, not the one this machine would give")
