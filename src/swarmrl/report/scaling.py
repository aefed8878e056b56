"""Scaling plots and the latency-shaping experiment's Markdown report.

Figures are `matplotlib.figure.Figure`s saved directly, never through pyplot (see
report/plots.py for why). Inputs are the plain tables the scaling evaluation and the runs
write, so a report can be redrawn from disk without a model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from swarmrl.report.plots import rolling_mean, series, steps
from swarmrl.scaling.scale import curve, steps_of

Z95 = 1.96  # a normal 95% interval: mean +- Z95 standard errors


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def plot_score_vs_latency(rows: list[dict], path: Path, title: str = "score vs latency budget",
                          marks_s: dict[str, float] | None = None, key: str = "score_mean",
                          reference: list[dict] | None = None) -> Path:
    """One curve per team size: the collective test-time scaling plot (+ a reference single agent).
    The score is drawn as its exact step curve where the rows carry it (dots: the grid's limits,
    with a 95% interval of the mean over the problems where the rows carry `score_se`)."""
    fig = Figure(figsize=(8.5, 4.5))
    ax = fig.add_subplot()
    if reference:
        _draw(ax, reference, 1, key, color="black", ls="--", lw=1.2, label="perfect scripted single agent")
    for i, k in enumerate(sorted({r["team_size"] for r in rows})):
        _draw(ax, rows, k, key, marker="o", ms=3, color=f"C{i % 10}", label=f"team {k}" if k > 1 else "single agent")
    single = [r[key] for r in rows if r["team_size"] == 1]
    if single:
        ax.axhline(max(single), color="gray", lw=0.8, ls=":", label="single agent's best")
    top = ax.get_ylim()[1]
    for j, (name, x) in enumerate((marks_s or {}).items()):  # staggered: nearby marks (5.5, 6 s) stay legible
        ax.axvline(x, color="black", lw=0.8, ls="--")
        ax.text(x, top * (1 - 0.07 * j), f" {name} {x:g} s", va="top", fontsize="small")
    ax.set_xlabel("latency budget (simulated s)")
    ax.set_ylabel(key + (" (bars: 95% interval over the problems)" if any("score_se" in r for r in rows)
                         and key == "score_mean" else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: curves fill the box
    ax.set_title(title)
    return _save(fig, path)


def _draw(ax, rows: list[dict], team_size: int, key: str, marker: str = "", ms: float = 0, **style) -> None:
    x, y = curve(rows, team_size, key)
    exact = steps_of(rows, team_size) if key == "score_mean" else None
    if exact is None:
        ax.plot(x, y, marker=marker, ms=ms, **style)
        return
    ax.step([t for t, _ in exact] + [x[-1]], [s for _, s in exact] + [y[-1]], where="post", **style)
    if marker:
        se = curve(rows, team_size, "score_se")[1] if all("score_se" in r for r in rows) else [None] * len(x)
        bars = [Z95 * e if e is not None else 0.0 for e in se]  # 95% interval of each dot's mean over problems
        ax.errorbar(x, y, yerr=bars, ls="none", marker=marker, ms=ms, color=style.get("color"), elinewidth=0.8,
                    capsize=2)


def plot_tokens_vs_latency(rows: list[dict], path: Path, title: str = "token budget vs latency") -> Path:
    return plot_score_vs_latency(rows, path, title, key="total_tokens_per_rollout")


def plot_training_compare(runs: dict[str, list[dict]], keys: list[str], path: Path, title: str) -> Path | None:
    """One subplot per metric key, one line per arm (rolling mean over the raw values)."""
    present = [k for k in keys if any(np.isfinite(series(rows, k)).any() for rows in runs.values())]
    if not present:
        return None
    fig = Figure(figsize=(8, 2.4 * len(present) + 0.6))
    axes = fig.subplots(len(present), 1, sharex=True, squeeze=False)[:, 0]
    for ax, key in zip(axes, present):
        for i, (arm, rows) in enumerate(runs.items()):
            y = series(rows, key)
            ax.plot(steps(rows), y, color=f"C{i}", alpha=0.25)
            ax.plot(steps(rows), rolling_mean(y), color=f"C{i}", label=arm)
        ax.set_ylabel(key, fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    axes[0].set_title(title)
    axes[-1].set_xlabel("step")
    return _save(fig, path)


def plot_grouped_bars(values: dict[str, dict[str, float | None]], path: Path, ylabel: str, title: str) -> Path:
    """values[arm][category] -> one group of bars per category, one bar per arm (None = no bar)."""
    cats = list(dict.fromkeys(c for by in values.values() for c in by))
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    width = 0.8 / max(len(values), 1)
    for i, (arm, by) in enumerate(values.items()):
        ys = [by.get(c) for c in cats]
        xs = [j + i * width for j, y in enumerate(ys) if y is not None]
        ax.bar(xs, [y for y in ys if y is not None], width, label=arm, color=f"C{i}")
    ax.set_xticks([j + width * (len(values) - 1) / 2 for j in range(len(cats))], cats)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize="small")
    ax.set_title(title)
    return _save(fig, path)


def fmt(v, none: str = "n/a", nd: int = 3) -> str:
    """A table cell: `none` for None, yes/no for a bool, `nd` significant digits for a float."""
    if v is None:
        return none
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{nd}g}"
    return str(v)


def md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
