"""`swarmrl report RUN`: one self-contained report.html per run.

The page needs no network: the styles and scripts (report/assets/) and Plotly's JavaScript
(from the `plotly` pip package) are inlined, and the data is embedded as JSON. It holds:

- interactive metric plots from metrics.jsonl (score, team and communication, useful work,
  latency, optimisation, errors, speed, one plot per per-role metric), with alert steps marked;
- the alert table;
- the swarm timeline (assets/timeline.js) of every rollout in samples/: each step's rows are
  a separate JSON block, parsed only when that step is picked.

Bad input never stops the page: a corrupt metrics or samples line is skipped and named in
the page's warnings (and returned to the caller), and a run without samples gets a page
without a timeline.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from swarmrl.report.samples import read_samples, sample_files
from swarmrl.runs.environment import MACHINE_KEYS, differences
from swarmrl.runs.rundir import CONFIG, METRICS, REPORT, RunDir, to_jsonable

_ASSETS = "assets"


@dataclass
class ReportResult:
    path: Path
    bytes: int
    seconds: float
    warnings: list[str] = field(default_factory=list)


def _asset(name: str) -> str:
    return resources.files("swarmrl.report").joinpath(_ASSETS, name).read_text(encoding="utf-8")


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as e:  # a core dependency; a broken install should say what is missing
        raise ValueError("swarmrl report needs the plotly package (pip install plotly)") from e
    return get_plotlyjs()


def _script_json(value) -> str:
    """JSON safe inside <script>: `</` would end the block, `<!--` would open a comment."""
    text = json.dumps(to_jsonable(value), ensure_ascii=False, allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def read_metrics_lenient(path: Path, warnings: list[str]) -> list[dict]:
    """metrics.jsonl rows; a line that is not a JSON object is skipped and named in `warnings`."""
    if not path.is_file():
        warnings.append(f"{path} not found: no metric plots")
        return []
    return read_samples(path, warnings)


def _summary(run_dir: Path, rows: list[dict]) -> dict:
    import yaml  # the run's config is YAML (runs/rundir.py)
    out: dict = {"run": run_dir.name}
    try:
        cfg = yaml.safe_load((run_dir / CONFIG).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        cfg = {}
    for section, key in (("workflow", "name"), ("task", "name"), ("model", "name_or_path"), ("rl", "advantage"),
                         ("rl", "steps")):
        value = (cfg.get(section) or {}).get(key)
        if value not in (None, ""):
            out[f"{section}.{key}"] = value
    out["steps logged"] = len(rows)
    return out | _ran_on(run_dir)


def _ran_on(run_dir: Path) -> dict:
    """Where the run trained (environment.jsonl's first start): runs on another machine are
    another draw, so a reader comparing two reports should see it."""
    try:
        envs = RunDir(run_dir).read_environment()
    except (OSError, ValueError):
        return {}
    if not envs:
        return {}
    e, out = envs[0], {}
    gpus = ", ".join(e.get("gpus") or []) or f"{e.get('cpu')} (CPU)"
    out["ran on"] = (f"{gpus}, torch {(e.get('versions') or {}).get('torch')}, "
                     f"{e.get('processes')} process(es) x {e.get('torch_threads')} thread(s)")
    if src := e.get("source"):
        out["commit"] = src["commit"][:12] + (" with uncommitted changes" if src.get("uncommitted_changes") else "")
    if len(envs) > 1:
        moved = any(differences(e, later, MACHINE_KEYS) for later in envs[1:])
        out["starts and resumes"] = f"{len(envs)}" + (", not all on this machine and build" if moved else "")
    return out


def _alerts(rows: list[dict]) -> list[dict]:
    out = []
    for i, r in enumerate(rows):
        alerts = r.get("alerts")
        if isinstance(alerts, str):
            alerts = [alerts] if alerts else []
        if alerts:
            out.append({"step": r.get("step", i), "text": [str(a) for a in alerts]})
    return out


def _samples_blocks(run_dir: Path, warnings: list[str]) -> tuple[list[int], str]:
    steps, blocks = [], []
    for step, path in sample_files(run_dir / "samples").items():
        rows = read_samples(path, warnings)
        if not rows:
            continue
        steps.append(step)
        blocks.append(f'<script id="samples-{step}" class="samples" type="application/json">'
                      f"{_script_json(rows)}</script>")
    if not steps:
        warnings.append(f"{run_dir / 'samples'}: no samples, so no swarm timeline")
    return steps, "\n".join(blocks)


def render_report(run_dir: Path) -> tuple[str, list[str]]:
    """The page's HTML and the warnings about what it left out."""
    warnings: list[str] = []
    rows = read_metrics_lenient(run_dir / METRICS, warnings)
    steps, samples_html = _samples_blocks(run_dir, warnings)
    data = {"summary": _summary(run_dir, rows), "metrics": rows, "alerts": _alerts(rows),
            "sample_steps": steps, "warnings": warnings}
    parts = {
        "TITLE": run_dir.name.replace("<", "&lt;"), "CSS": _asset("report.css"), "PLOTLY": _plotly_js(),
        "DATA": _script_json(data), "SAMPLES": samples_html,
        "JS": _asset("metrics.js") + "\n" + _asset("timeline.js"),
    }
    page = _asset("report.html")
    for key, value in parts.items():  # one pass per marker; values are never scanned again
        head, sep, tail = page.partition(f"<!--SWARMRL:{key}-->")
        page = head + value + tail if sep else page
    return page, warnings


def read_samples_rows_exist(run_dir: Path) -> bool:
    """Whether the run has anything to show: a metrics row or a samples file."""
    metrics = run_dir / METRICS
    has_rows = metrics.is_file() and any(line.strip() for line in metrics.read_text(errors="replace").splitlines())
    return has_rows or bool(sample_files(run_dir / "samples"))


def write_report(run_dir: Path, out: Path | None = None) -> ReportResult:
    """Write `run_dir/report.html` (or `out`). A missing run directory is a FileNotFoundError."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run directory")
    if not (run_dir / METRICS).is_file() and not (run_dir / "samples").is_dir():
        raise FileNotFoundError(f"{run_dir / METRICS} not found: {run_dir} is not a run directory")
    if not read_samples_rows_exist(run_dir):
        raise ValueError(f"{run_dir / METRICS}: no metrics to plot and no samples to show")
    t0 = time.perf_counter()
    page, warnings = render_report(run_dir)
    path = Path(out) if out is not None else run_dir / REPORT
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return ReportResult(path=path, bytes=path.stat().st_size, seconds=time.perf_counter() - t0, warnings=warnings)
