"""Training plots from a run's metrics.jsonl.

Figures are built with `matplotlib.figure.Figure` and saved directly (the Agg renderer is
picked for PNG by `savefig`), never through `pyplot`: pyplot keeps a global figure
registry and a process-wide backend, which would leak figures in a long training process
and could open windows or fail on a headless machine.

Missing keys are skipped, not errors: a run without roles has no roles.png, an early run
without some metric simply lacks that line. Nulls (non-finite values written as JSON null)
become NaN, which matplotlib draws as gaps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from swarmrl.runs.rundir import METRICS, read_jsonl

ROLLING_WINDOW = 5
ROLE_PREFIX = "role/"


# --------------------------------------------------------------------------- data


def series(rows: list[dict], key: str) -> np.ndarray:
    """Column `key` as float array [N]; missing, null, or non-numeric entries -> NaN."""
    out = np.full(len(rows), np.nan)
    for i, r in enumerate(rows):
        v = r.get(key)
        if isinstance(v, (int, float)):  # bool is an int: plotted as 0/1
            out[i] = float(v)
    return out


def steps(rows: list[dict]) -> np.ndarray:
    """x axis [N]: the `step` of each row, or the row index where a row has none."""
    s = series(rows, "step")
    idx = np.arange(len(rows), dtype=float)
    return np.where(np.isnan(s), idx, s)


def has_data(rows: list[dict], key: str) -> bool:
    return bool(np.isfinite(series(rows, key)).any())


def rolling_mean(y: np.ndarray, window: int = ROLLING_WINDOW) -> np.ndarray:
    """Trailing mean over a window of `window` rows [N], ignoring NaNs inside the window.

    out[i] = mean of finite y[max(0, i-window+1) : i+1]; NaN if that slice has none.
    """
    finite = np.isfinite(y)
    vals = np.where(finite, y, 0.0)
    csum = np.concatenate([[0.0], np.cumsum(vals)])  # [N+1]
    ccnt = np.concatenate([[0], np.cumsum(finite)])  # [N+1]
    hi = np.arange(1, len(y) + 1)
    lo = np.maximum(0, hi - window)
    total = csum[hi] - csum[lo]
    count = ccnt[hi] - ccnt[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def role_metrics(rows: list[dict]) -> dict[str, dict[str, str]]:
    """metric -> {role: full key} for every `role/<name>/<metric>` key with data.

    The metric is the last path segment, so role names may themselves contain '/'.
    """
    keys = sorted({k for r in rows for k in r if k.startswith(ROLE_PREFIX)})
    out: dict[str, dict[str, str]] = {}
    for k in keys:
        rest = k[len(ROLE_PREFIX):]
        if "/" not in rest or not has_data(rows, k):
            continue
        role, metric = rest.rsplit("/", 1)
        out.setdefault(metric, {})[role] = k
    return out


# --------------------------------------------------------------------------- figures


def _line(ax, x: np.ndarray, y: np.ndarray, label: str, **kw) -> None:
    # A lone finite point between NaNs draws nothing as a line; markers keep it visible.
    ax.plot(x, y, label=label, marker="." if np.isfinite(y).sum() < len(y) else None, **kw)


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def _subplots_figure(
    rows: list[dict], keys: list[str], title: str, path: Path
) -> Path | None:
    """One stacked subplot per key that has data; None if none has."""
    present = [k for k in keys if has_data(rows, k)]
    if not present:
        return None
    x = steps(rows)
    fig = Figure(figsize=(8, 2.4 * len(present) + 0.6))
    axes = fig.subplots(len(present), 1, sharex=True, squeeze=False)[:, 0]
    for ax, key in zip(axes, present):
        _line(ax, x, series(rows, key), key)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[0].set_title(title)
    axes[-1].set_xlabel("step")
    return _save(fig, path)


def _score_figure(rows: list[dict], path: Path) -> Path | None:
    main = [k for k in ("score_mean", "reward_mean") if has_data(rows, k)]
    if not main:
        return None
    x = steps(rows)
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    # Without latency shaping reward_mean equals score_mean: drawn dashed and wider on top, so
    # both curves (and both legend entries) stay visible where they coincide.
    style = {"score_mean": {"linestyle": "-", "linewidth": 1.5}, "reward_mean": {"linestyle": "--", "linewidth": 2.5}}
    for key in main:
        y = series(rows, key)
        line = ax.plot(x, y, alpha=0.35, label=key, **style[key])[0]
        ax.plot(x, rolling_mean(y), color=line.get_color(),
                label=f"{key} (rolling {ROLLING_WINDOW})", **style[key])
    ax.set_xlabel("step")
    ax.set_ylabel("score / reward")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if has_data(rows, "time_limit"):
        # Curriculum tightens the deadline while score should hold: same x, own scale.
        ax2 = ax.twinx()
        lim = ax2.plot(x, series(rows, "time_limit"), color="gray", linestyle="--",
                       label="time_limit")
        ax2.set_ylabel("time_limit")
        handles += lim
        labels += ["time_limit"]
    ax.legend(handles, labels, loc="best", fontsize="small")
    ax.set_title("score")
    return _save(fig, path)


def _panels_figure(rows: list[dict], panels: list[tuple[str, list[tuple[str, str, dict]]]], title: str,
                   path: Path, panel_height: float = 2.4) -> Path:
    """One subplot per panel (y label, [(legend label, metric key, line style)]), stacked on a
    shared step axis, each with its legend."""
    x = steps(rows)
    fig = Figure(figsize=(8, panel_height * len(panels) + 0.6))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (ylabel, lines) in zip(axes, panels):
        for label, key, style in lines:
            _line(ax, x, series(rows, key), label, **style)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    axes[0].set_title(title)
    axes[-1].set_xlabel("step")
    return _save(fig, path)


def _roles_figure(rows: list[dict], path: Path) -> Path | None:
    metrics = role_metrics(rows)
    if not metrics:
        return None
    # One colour per role across all subplots, so "expert" is the same line everywhere.
    roles = sorted({role for by_role in metrics.values() for role in by_role})
    colour = {role: f"C{i % 10}" for i, role in enumerate(roles)}
    panels = [(metric, [(role, key, {"color": colour[role]}) for role, key in sorted(by_role.items())])
              for metric, by_role in sorted(metrics.items())]
    return _panels_figure(rows, panels, "per-role metrics", path)


SPEED_PANELS = (
    ("seconds per step", ("step_s", "rollout_s", "perf/update_s")),
    # MFU against the measured matmul peak (run.mfu); with several ranks, their waiting share
    ("share", ("perf/mfu_update", "perf/mfu_generation", "perf/rollout_rank_idle", "perf/update_rank_idle")),
)


def _speed_figure(rows: list[dict], path: Path) -> Path | None:
    """Where a step's wall time goes: one panel of seconds, one of shares (MFU, rank idle);
    a panel, or a line, without data is left out; None if nothing has data."""
    panels = [(label, [(k, k, {}) for k in keys if has_data(rows, k)]) for label, keys in SPEED_PANELS]
    panels = [(label, lines) for label, lines in panels if lines]
    return _panels_figure(rows, panels, "speed", path, panel_height=3.0) if panels else None


# --------------------------------------------------------------------------- entry points


def plot_metrics_file(metrics_path: Path, out_dir: Path) -> list[Path]:
    """Write the standard PNGs for one metrics.jsonl into `out_dir`; return paths written."""
    rows = read_jsonl(Path(metrics_path))
    out_dir = Path(out_dir)
    if not rows:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [
        _score_figure(rows, out_dir / "score.png"),
        _subplots_figure(
            rows, ["team_size_mean", "messages_per_rollout", "message_tokens_per_rollout"],
            "team and communication", out_dir / "team.png",
        ),
        _subplots_figure(rows, ["useful_work"], "useful work", out_dir / "useful_work.png"),
        _subplots_figure(rows, ["loss", "grad_norm", "entropy"], "optimisation",
                         out_dir / "optim.png"),
        _roles_figure(rows, out_dir / "roles.png"),
        _speed_figure(rows, out_dir / "speed.png"),
    ]
    return [p for p in written if p is not None]


def plot_run(run_dir: Path, require_metrics: bool = False) -> list[Path]:
    """Plot `run_dir/metrics.jsonl` into `run_dir/plots/`.

    `require_metrics` (the `report` command): a missing run directory, a missing
    metrics.jsonl or one with nothing to plot is an error naming the path, not an empty list.
    """
    run_dir = Path(run_dir)
    metrics = run_dir / METRICS
    if require_metrics and not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run directory")
    if require_metrics and not metrics.is_file():
        raise FileNotFoundError(f"{metrics} not found: {run_dir} is not a run directory")
    paths = plot_metrics_file(metrics, run_dir / "plots")
    if require_metrics and not paths:
        raise ValueError(f"{metrics}: no metrics to plot")
    return paths
