"""Live training progress: a rich bar plus a one-line metrics table.

On a terminal the display redraws in place. When stdout is not a terminal (CI, `| tee`,
pytest) or the display is disabled, it prints one plain line every `every` steps instead:
a redrawing display written to a log file is unreadable.
"""

from __future__ import annotations

import math
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.progress import TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

# (metrics key, column header). Order is the display order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("score_mean", "score"),
    ("time_limit", "time limit"),
    ("team_size_mean", "team"),
    ("messages_per_rollout", "msgs"),
    ("tokens_per_s", "tok/s"),
    ("loss", "loss"),
)


def format_value(v: Any) -> str:
    """Short human form: 4 significant digits for floats, '-' for missing/null/NaN."""
    if v is None or isinstance(v, bool):
        return "-" if v is None else str(v)
    if isinstance(v, int):
        return str(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return "-"
    if f == int(f) and abs(f) < 1e6:
        return str(int(f))
    return f"{f:.4g}"


def _fmt_seconds(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "-:--:--"
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class TrainProgress:
    """Context manager showing training progress.

    Args:
        total_steps: the step count the run ends at.
        enabled: False forces plain lines even on a terminal.
        console: a rich Console (default: a new one on stdout).
        every: in plain mode, print a line every `every` steps (and always the last one).
        start_step: first step of this process (non-zero on resume), so the bar starts
            there and the ETA uses only this process's rate.
    """

    def __init__(
        self,
        total_steps: int,
        enabled: bool = True,
        console: Console | None = None,
        every: int = 1,
        start_step: int = 0,
    ):
        self.total_steps = int(total_steps)
        self.console = console if console is not None else Console()
        self.every = max(1, int(every))
        self.start_step = int(start_step)
        self.live_mode = bool(enabled) and self.console.is_terminal
        self._t0 = time.monotonic()
        self._last_metrics: dict = {}
        self._live: Live | None = None
        self._progress: Progress | None = None
        self._task = None

    # ---------------------------------------------------------------- context manager

    def __enter__(self) -> "TrainProgress":
        self._t0 = time.monotonic()
        if self.live_mode:
            self._progress = Progress(
                TextColumn("[bold]step"),
                MofNCompleteColumn(),
                BarColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._task = self._progress.add_task(
                "train", total=self.total_steps, completed=self.start_step
            )
            # One Live renders both the bar and the table; Progress's own Live is not started.
            self._live = Live(self._renderable(), console=self.console, refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)
            self._live.__exit__(*exc)
            self._live = None

    # ---------------------------------------------------------------- API

    def update(self, step: int, metrics: dict) -> None:
        """Record that `step` finished (1-based count of completed steps) with `metrics`."""
        self._last_metrics = dict(metrics)
        if self._live is not None and self._progress is not None:
            self._progress.update(self._task, completed=step)
            self._live.update(self._renderable())
            return
        if step % self.every == 0 or step >= self.total_steps:
            self.console.print(self.plain_line(step, metrics), markup=False, highlight=False,
                               soft_wrap=True)

    def log(self, msg: str) -> None:
        """Print a message; with a live display it appears above the live area."""
        self.console.print(msg, markup=False, highlight=False, soft_wrap=True)

    # ---------------------------------------------------------------- rendering

    def eta_seconds(self, step: int) -> float | None:
        done = step - self.start_step
        if done <= 0:
            return None
        rate = (time.monotonic() - self._t0) / done
        return rate * max(0, self.total_steps - step)

    def plain_line(self, step: int, metrics: dict) -> str:
        elapsed = time.monotonic() - self._t0
        parts = [
            f"step {step}/{self.total_steps}",
            f"elapsed {_fmt_seconds(elapsed)} eta {_fmt_seconds(self.eta_seconds(step))}",
        ]
        parts += [f"{head} {format_value(metrics.get(key))}" for key, head in COLUMNS]
        alerts = metrics.get("alerts")
        if alerts:
            parts.append(f"alerts: {alerts}")
        return " | ".join(parts)

    def _table(self) -> Table:
        m = self._last_metrics
        table = Table(box=None, padding=(0, 2), show_edge=False)
        for _, head in COLUMNS:
            table.add_column(head, justify="right")
        table.add_row(*(format_value(m.get(key)) for key, _ in COLUMNS))
        return table

    def _renderable(self) -> Group:
        assert self._progress is not None
        items: list = [self._progress.get_renderable(), self._table()]
        alerts = self._last_metrics.get("alerts")
        if alerts:
            # Text, not a markup string: alert text may contain "[" from role names etc.
            items.append(Text.assemble(("alerts: ", "bold red"), str(alerts)))
        return Group(*items)


class RolloutProgress:
    """A plain line every `every_s` seconds while rollouts run (`Runtime.run(progress=...)`):
    rollouts finished, the mean simulated clock the rollouts reached against the horizon
    (`clock`), tokens generated, wall time. Long evaluations (`swarmrl scale` with 64 agents)
    otherwise run for minutes in silence. Called after every applied wave; it costs a clock read
    unless a line is due."""

    def __init__(self, label: str, horizon_s: float, every_s: float = 30.0, log=print, clock=time.monotonic):
        self.label, self.horizon_s, self.every_s, self.log, self.clock = label, horizon_s, every_s, log, clock
        self._t0 = self._last = clock()

    def __call__(self, rollouts: list) -> None:
        now = self.clock()
        if now - self._last < self.every_s:
            return
        self._last = now
        self.log(self.line(rollouts, now - self._t0))

    def line(self, rollouts: list, elapsed_s: float) -> str:
        done = sum(r.done for r in rollouts)
        # A finished rollout counts as having reached the horizon: nothing of it is left to run.
        reached = [self.horizon_s if r.done else max((t.end for t in r.turns), default=0.0) for r in rollouts]
        clock = sum(reached) / max(1, len(reached))
        tokens = sum(sum(a.gen_mask) for r in rollouts for a in r.agents.values())
        return (f"  {self.label}: {done}/{len(rollouts)} rollouts done, clock {clock:.1f}/{self.horizon_s:g} s, "
                f"{tokens:,} tokens, {_fmt_seconds(elapsed_s)}")
