"""Metric sinks beside metrics.jsonl: TensorBoard and Weights & Biases (`run.loggers`).

metrics.jsonl (runs/rundir.py) is always written and stays the source of truth; a sink gets
the same row. Each sink logs:

- every numeric value under its metrics.jsonl name (`role/<role>/<metric>` keys keep their
  name; TensorBoard also gets a custom-scalars layout that draws every role of a metric in
  one chart, W&B groups them by the `role/` prefix by itself);
- the step's alerts (the `alerts` list) as text, so an alert is found at its step;
- the step's sample transcripts, as text (TensorBoard) or a table (W&B).

Both libraries are optional imports: asking for a sink whose package is missing is an error
that names the package, raised before the first step. W&B runs `offline` unless configured
(`run.wandb_mode`; a `WANDB_MODE` environment variable wins), writing under the run dir's
wandb/, so nothing leaves the machine unless the user runs `wandb sync`.
"""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path
from typing import Any, Protocol

KNOWN = ("jsonl", "tensorboard", "wandb")
TB_DIR = "tensorboard"
WANDB_DIR = "wandb"
WANDB_ID_FILE = "wandb_run_id"  # the W&B run id, kept so a resumed run logs into the same W&B run


def parse_loggers(spec: str) -> list[str]:
    """`"jsonl,tensorboard"` -> the sinks beside jsonl, in order; unknown names are an error."""
    names = [n.strip() for n in str(spec).split(",") if n.strip()]
    bad = [n for n in names if n not in KNOWN]
    if bad:
        raise ValueError(f"run.loggers: unknown logger {', '.join(bad)} (known: {', '.join(KNOWN)})")
    return [n for n in dict.fromkeys(names) if n != "jsonl"]


def scalars(row: dict) -> dict[str, float]:
    """The numeric values of a metrics row (bools as 0/1; nulls, lists and text left out)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, (int, float)) and not (isinstance(v, float) and not math.isfinite(v)):
            out[k] = float(v)
    return out


def transcript(row: dict, max_chars: int = 4000) -> str:
    """One sample rollout as plain text: each turn's agent, times, observation and reply."""
    head = f"rollout {row.get('index')} score={row.get('score')} end={row.get('end_reason')}\n"
    lines = [f"[{t['start']:.2f}-{t['end']:.2f}] {t['agent']}\n  obs: {t['observation']!r}\n  reply: {t['reply']!r}"
             for t in row.get("turns", [])]
    text = head + "\n".join(lines)
    return text if len(text) <= max_chars else text[:max_chars] + "\n..."


class Sink(Protocol):
    def log(self, step: int, row: dict, samples: list[dict]) -> None: ...
    def close(self) -> None: ...


class TensorBoardSink:
    """Event files under run_dir/tensorboard/ (torch's SummaryWriter; needs `tensorboard`)."""

    def __init__(self, run_dir: Path, start_step: int = 0):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ValueError("run.loggers=tensorboard needs the tensorboard package: pip install tensorboard") from e
        # purge_step: a resumed run drops the events after its checkpoint, as metrics.jsonl does.
        self.writer = SummaryWriter(str(Path(run_dir) / TB_DIR), purge_step=start_step or None)
        self._layout_done = False

    def _layout(self, keys: list[str]) -> None:
        by_metric: dict[str, list[str]] = {}
        for k in keys:
            if k.startswith("role/") and k.count("/") >= 2:
                by_metric.setdefault(k.rsplit("/", 1)[1], []).append(k)
        if by_metric:
            self.writer.add_custom_scalars({"per role": {m: ["Multiline", ks] for m, ks in sorted(by_metric.items())}})
        self._layout_done = True

    def log(self, step: int, row: dict, samples: list[dict]) -> None:
        values = scalars(row)
        if not self._layout_done:
            self._layout(list(values))
        for k, v in values.items():
            self.writer.add_scalar(k, v, global_step=step)
        if row.get("alerts"):
            self.writer.add_text("alerts", "\n\n".join(map(str, row["alerts"])), global_step=step)
        for s in samples:
            self.writer.add_text(f"samples/rollout_{s.get('index')}", "```\n" + transcript(s) + "\n```", global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A W&B run, offline by default, under run_dir/wandb/ (needs `wandb`)."""

    def __init__(self, run_dir: Path, config: dict, project: str, mode: str):
        try:
            import wandb
        except ImportError as e:
            raise ValueError("run.loggers=wandb needs the wandb package: pip install wandb") from e
        self.wandb = wandb
        run_dir = Path(run_dir)
        (run_dir / WANDB_DIR).mkdir(parents=True, exist_ok=True)
        id_file = run_dir / WANDB_DIR / WANDB_ID_FILE
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:12]
        id_file.write_text(run_id)
        self.run = wandb.init(project=project, dir=str(run_dir), name=run_dir.name, id=run_id,
                              resume="allow", config=config, mode=os.environ.get("WANDB_MODE") or mode,
                              settings=wandb.Settings(silent=True, console="off"))

    def log(self, step: int, row: dict, samples: list[dict]) -> None:
        data: dict[str, Any] = dict(scalars(row))
        if row.get("alerts"):
            data["alerts"] = self.wandb.Html("<br>".join(map(str, row["alerts"])))
        if samples:
            table = self.wandb.Table(columns=["rollout", "agent", "start", "end", "observation", "reply", "errors"])
            for s in samples:
                for t in s.get("turns", []):
                    table.add_data(s.get("index"), t["agent"], t["start"], t["end"], t["observation"],
                                   t["reply"], "; ".join(t.get("errors", [])))
            data["samples"] = table
        self.run.log(data, step=step)

    def close(self) -> None:
        self.run.finish()


class Loggers:
    """The run's sinks beside metrics.jsonl; `log` fans a step out to each."""

    def __init__(self, sinks: list[Sink]):
        self.sinks = sinks

    @classmethod
    def open(cls, spec: str, run_dir: Path, config: dict, start_step: int = 0,
             wandb_project: str = "swarmrl", wandb_mode: str = "offline") -> "Loggers":
        sinks: list[Sink] = []
        try:
            for name in parse_loggers(spec):
                if name == "tensorboard":
                    sinks.append(TensorBoardSink(run_dir, start_step))
                else:
                    sinks.append(WandbSink(run_dir, config, wandb_project, wandb_mode))
        except BaseException:
            for s in sinks:
                s.close()
            raise
        return cls(sinks)

    def log(self, step: int, row: dict, samples: list[dict]) -> None:
        for s in self.sinks:
            s.log(step, row, samples)

    def close(self) -> None:
        for s in self.sinks:
            s.close()

    def __enter__(self) -> "Loggers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
