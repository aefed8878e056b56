"""A run directory: config, metrics, samples, checkpoints and plots (DESIGN.md section 5).

    run_dir/
        config.yaml        the resolved config, written once at create
        metrics.jsonl      one JSON object per step (strict JSON: NaN/inf become null)
        samples/           step_000N.jsonl, one trajectory per line
        checkpoints/       see runs/checkpoint.py
        plots/             see report/plots.py

Metrics are appended with flush + fsync per row, so a crash loses at most the row being
written; readers skip an unterminated last line instead of failing on it. On resume the
trainer calls `truncate_metrics(resume_step)` so rows written after the checkpoint (and
therefore about to be rewritten) are dropped and the file equals a straight run's
(invariant 7).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"


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
    def create(cls, path: Path, config: dict, overwrite: bool = False) -> "RunDir":
        """Start a fresh run at `path`, writing `config.yaml`.

        Refuses a directory that already holds a run (has metrics.jsonl) unless
        `overwrite`; then only the run's own artifacts are removed, never unrelated files
        (a mistyped `--out ~` must not wipe a home directory).
        """
        rd = cls(path)
        if rd.metrics_path.exists() and not overwrite:
            raise FileExistsError(
                f"{rd.path} already contains a run ({METRICS}); use --resume {rd.path} to "
                "continue it, or pass overwrite to start over"
            )
        if overwrite:
            for f in (rd.metrics_path, rd.config_path):
                f.unlink(missing_ok=True)
            for d in (rd.samples_dir, rd.checkpoints_dir, rd.plots_dir):
                if d.is_dir():
                    shutil.rmtree(d)
        rd.path.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(to_jsonable(config), sort_keys=False, allow_unicode=True)
        _atomic_write_text(rd.config_path, text)
        return rd

    @classmethod
    def open_for_resume(cls, path: Path) -> "RunDir":
        rd = cls(path)
        if not rd.config_path.is_file():
            raise FileNotFoundError(f"cannot resume {rd.path}: {rd.config_path} not found")
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

    # ---------------------------------------------------------------- I/O

    def read_config(self) -> dict:
        with open(self.config_path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        return cfg if cfg is not None else {}

    def append_metrics(self, row: dict) -> None:
        line = _dumps(row) + "\n"
        self._path.mkdir(parents=True, exist_ok=True)
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def read_metrics(self) -> list[dict]:
        return read_jsonl(self.metrics_path)

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
