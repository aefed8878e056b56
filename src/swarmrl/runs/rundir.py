"""A run directory: config, metrics, samples, checkpoints and plots.

    run_dir/
        config.yaml        the resolved config; written last at create (see below)
        model/             the initial policy (architecture, tokenizer, weights) + manifest
        metrics.jsonl      one JSON object per step (strict JSON: NaN/inf become null)
        samples/           step_000N.jsonl, one trajectory per line
        checkpoints/       see runs/checkpoint.py
        plots/             see report/plots.py
        report.html        `swarmrl report` (report/html.py)
        tensorboard/       event files, with `run.loggers` tensorboard (runs/loggers.py)
        wandb/             the W&B run (offline by default), with `run.loggers` wandb
        final/             the trained policy + manifest; written last, so it marks a finished run

`config.yaml` is the "this is a run" mark: it is written only after model/ is complete, so
whenever it exists the run can be resumed (from step 0 if no checkpoint exists yet). A
directory without it holds at most leftovers of an aborted start, which `create` clears.

Metrics are appended with flush + fsync per row, so a crash loses at most the row being
written; readers skip an unterminated last line instead of failing on it. On resume the
trainer calls `truncate_metrics(resume_step)` so rows written after the checkpoint (and
therefore about to be rewritten) are dropped and the file equals a straight run's.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import yaml

from swarmrl.runs.manifest import POLICY_MANIFEST, remove_stale_temps, temp_owner

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
MODEL = "model"
FINAL = "final"
_SAMPLE = re.compile(r"^step_\d+\.jsonl$")
_STEP_DIR = re.compile(r"^step_\d+$")
_PLOT = re.compile(r"^[^.].*\.png$")
_TB_EVENTS = re.compile(r"^events\.out\.tfevents\.")
REPORT = "report.html"
ENVIRONMENT = "environment.jsonl"  # one line per start or resume: the machine and build (runs/environment.py)


# Metrics measured on the wall clock: two runs of the same seed differ in these and only these
# (resume, sharded and Ray runs are checked equal on every other key).
WALL_CLOCK_KEYS = frozenset({"tokens_per_s", "rollout_s", "step_s", "eval_s"})


def wall_clock(key: str) -> bool:
    """Whether metric `key` is a wall-clock measurement (WALL_CLOCK_KEYS, or any `perf/...` MFU key)."""
    return key in WALL_CLOCK_KEYS or key.startswith("perf/")


def to_jsonable(value: Any) -> Any:
    """Convert numpy/torch scalars and arrays, tuples and paths to strict-JSON values.

    Non-finite floats become None: JSON has no NaN, and a null shows up as a gap in plots
    rather than breaking other tools that parse the file.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    # numpy and torch both expose .tolist() (scalar -> python number, array -> nested list);
    # duck typing keeps torch out of this module's imports.
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return to_jsonable(tolist())
    item = getattr(value, "item", None)
    if callable(item):
        return to_jsonable(item())
    raise TypeError(f"cannot write {type(value).__name__} to JSON: {value!r}")


def _dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), allow_nan=False, ensure_ascii=False)


def read_jsonl(path: Path) -> list[dict]:
    """Read a JSON-lines file. An unterminated last line (a crash mid-write) is skipped;
    a bad line anywhere else is an error naming the file and line."""
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:  # no trailing newline: the write never finished
                break
            raise ValueError(f"{path}:{i + 1}: invalid JSON line: {e}") from e
    return rows


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp_{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunDir:
    """Paths and I/O for one run. Holds no open files, so it is safe to pickle/recreate."""

    def __init__(self, path: Path):
        self._path = Path(path)

    # ---------------------------------------------------------------- construction

    @classmethod
    def create(cls, path: Path, config: dict, overwrite: bool = False,
               before_config: Callable[["RunDir"], None] | None = None) -> "RunDir":
        """Start a fresh run at `path`: clear leftovers, `before_config(rd)` (writes model/),
        then write `config.yaml` last.

        Refuses a directory that already holds a run (has config.yaml) unless `overwrite`.
        Only swarmrl's own artifacts are ever removed, never unrelated files (a mistyped
        `--out ~` must not wipe a home directory).
        """
        rd = cls(path)
        if rd.config_path.exists():
            if not overwrite:
                raise FileExistsError(
                    f"{rd.path} already contains a run ({CONFIG}); use --resume {rd.path} to "
                    "continue it, or pass overwrite to start over")
            # First, so an overwrite cut short leaves leftovers, not a run claiming to be whole.
            rd.config_path.unlink()
            rd._remove_artifacts(own_run=True)
        else:
            rd._remove_artifacts(own_run=False)
        rd.path.mkdir(parents=True, exist_ok=True)
        if before_config is not None:
            before_config(rd)
        rd.write_config(config)
        return rd

    def _remove_artifacts(self, own_run: bool) -> None:
        """Remove what a run writes. model/ and final/ of a directory that is not known to be
        a run (`own_run` False) go only if they carry swarmrl's manifest."""
        if not self.path.is_dir():
            return
        remove_stale_temps(self.path)
        self.metrics_path.unlink(missing_ok=True)
        (self.path / ENVIRONMENT).unlink(missing_ok=True)
        for d in (self.model_dir, self.final_dir):
            if not d.exists():
                continue
            if not own_run and not (d / POLICY_MANIFEST).is_file():
                raise FileExistsError(f"{d} exists and was not written by swarmrl; move it away or "
                                      "choose another run directory")
            shutil.rmtree(d)
        if own_run:  # a report.html elsewhere may be the user's own
            (self.path / REPORT).unlink(missing_ok=True)
        wandb_dir = self.path / "wandb"
        if (wandb_dir / "wandb_run_id").is_file():  # written by runs/loggers.py: a run's own W&B dir
            shutil.rmtree(wandb_dir)
        for d, pattern in ((self.samples_dir, _SAMPLE), (self.checkpoints_dir, _STEP_DIR),
                           (self.plots_dir, _PLOT), (self.path / "tensorboard", _TB_EVENTS)):
            if not d.is_dir():
                continue
            for p in d.iterdir():
                if pattern.match(p.name) or temp_owner(p.name) is not None:
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            if not any(d.iterdir()):
                d.rmdir()

    @classmethod
    def open_for_resume(cls, path: Path) -> "RunDir":
        """An existing run; temp files of killed writers in it are removed."""
        rd = cls(path)
        if not rd.config_path.is_file():
            raise FileNotFoundError(
                f"cannot resume {rd.path}: {rd.config_path} not found (a run stopped before "
                f"writing it has nothing to resume; start it again with train --out {rd.path})")
        for d in (rd.path, rd.checkpoints_dir, rd.samples_dir):
            remove_stale_temps(d)
        return rd

    # ---------------------------------------------------------------- paths

    @property
    def path(self) -> Path:
        return self._path

    @property
    def config_path(self) -> Path:
        return self._path / CONFIG

    @property
    def metrics_path(self) -> Path:
        return self._path / METRICS

    @property
    def samples_dir(self) -> Path:
        return self._path / "samples"

    @property
    def checkpoints_dir(self) -> Path:
        return self._path / "checkpoints"

    @property
    def plots_dir(self) -> Path:
        return self._path / "plots"

    @property
    def model_dir(self) -> Path:
        return self._path / MODEL

    @property
    def final_dir(self) -> Path:
        return self._path / FINAL

    # ---------------------------------------------------------------- I/O

    def read_config(self) -> dict:
        with open(self.config_path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        return cfg if cfg is not None else {}

    def write_config(self, config: dict) -> None:
        text = yaml.safe_dump(to_jsonable(config), sort_keys=False, allow_unicode=True)
        _atomic_write_text(self.config_path, text)

    def append_metrics(self, row: dict) -> None:
        self._append(self.metrics_path, row)

    def read_metrics(self) -> list[dict]:
        return read_jsonl(self.metrics_path)

    def append_environment(self, record: dict) -> None:
        """Log the machine and build of one start or resume (`record` from runs/environment.py)."""
        self._append(self.path / ENVIRONMENT, record)

    def read_environment(self) -> list[dict]:
        """Every start's and resume's record, oldest first (empty for runs older than the file)."""
        return read_jsonl(self.path / ENVIRONMENT)

    def _append(self, path: Path, row: dict) -> None:
        self._path.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(_dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate_metrics(self, before_step: int) -> None:
        """Keep only rows with `step < before_step` (rows without a step are kept)."""
        if not self.metrics_path.exists():
            return
        rows = [r for r in self.read_metrics() if r.get("step") is None or r["step"] < before_step]
        _atomic_write_text(self.metrics_path, "".join(_dumps(r) + "\n" for r in rows))

    def write_samples(self, step: int, samples: list[dict]) -> Path:
        """Write `samples/step_000N.jsonl` atomically (a resumed run overwrites it cleanly)."""
        self.samples_dir.mkdir(parents=True, exist_ok=True)
        out = self.samples_dir / f"step_{int(step):04d}.jsonl"
        _atomic_write_text(out, "".join(_dumps(s) + "\n" for s in samples))
        return out

    def __repr__(self) -> str:
        return f"RunDir({str(self._path)!r})"
