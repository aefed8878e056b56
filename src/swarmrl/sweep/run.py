"""`swarmrl sweep GRID.yaml --out DIR`: train every cell of a grid and tabulate it.

For each cell (workflow x sharing x model size x seed, each with the grid's small step
budget) the cell is trained from the warm start of its model size; its validation accuracy
is read from `metrics.jsonl` (every `eval.val_interval` steps) plus one final validation,
giving the peak, the final value and the cliff between them, and its alerts. Beside the
cells, the controls of Zeng et al. (2026): `base` (the warm start without RL, as a single
agent) and `single` (single-agent RL with the same budget), per model size and seed.

A cell whose run directory already holds `cell.json` is not trained again, so an
interrupted sweep resumes where it stopped. `--jobs N` trains N runs at once, each in its own
process; axes beyond workflow, sharing, model and seed (e.g. `rl.multiplicity_normalized`)
become the table's `variant` column.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from swarmrl.config import Config, ConfigError, load_config
from swarmrl.config_load import resolve_config
from swarmrl.diagnostics.detectors import mean_amplification
from swarmrl.runs.rundir import read_jsonl
from swarmrl.sweep.table import expand_grid, write_table


def _model_label(cfg: Config) -> str:
    m = cfg.model
    return m.name_or_path or f"h{m.hidden_size}-l{m.num_layers}"


def _overrides(flat: dict) -> list[str]:
    return [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in flat.items()]


def _validate(cfg: Config, policy) -> float:
    from swarmrl.rl.evaluate import evaluate
    return evaluate(cfg, policy, problems=cfg.eval.val_problems, greedy=True)["score_mean"]


def _train_cell(cfg: Config, out: Path, init: Path, log=None) -> dict:
    """Train one cell (or reuse a finished one); -> its row of the table."""
    from swarmrl.rl.loop import load_trained_policy, train
    from swarmrl.rl.reuse import check_same_run
    done = out / "cell.json"
    if done.exists():  # a finished cell counts only if it trained this cell (same config and start)
        check_same_run(out, cfg, init, log)
        return json.loads(done.read_text())
    t0 = time.perf_counter()
    run = train(cfg, out, init_policy=init, log=log or (lambda *a, **k: None), overwrite=True)
    rows = run.read_metrics()
    final = _validate(cfg, load_trained_policy(run.path)[0])
    vals = [r["val_accuracy"] for r in rows if "val_accuracy" in r] + [final]
    row = {"peak_val_acc": max(vals), "final_val_acc": final, "val_curve": vals,
           "alerts": [a for r in rows for a in r.get("alerts", [])], "train_s": time.perf_counter() - t0}
    done.write_text(json.dumps(row, indent=2))
    return row


def _base_model_config(cfg: Config, base: Path, flat: dict) -> Config:
    """The config whose warm start a cell trains from. A single-agent cell starts from the same
    base model as the workflow cells (the base config's workflow: its demonstrations show every
    workflow and a solo agent), not from a warm start on solo demonstrations alone."""
    if cfg.workflow.name != "single":
        return cfg
    return load_config(base, _overrides({k: v for k, v in flat.items() if k != "workflow.name"}))


def _control_config(base: Path, flat: dict, axes: dict) -> Config:
    """Single-agent RL for one model size and seed: the grid's fixed overrides and the cell's
    model and seed, but none of its other axis values (a learning rate or a mitigation under
    study is the cells' business, and some only apply to a team)."""
    keep = {k: v for k, v in flat.items() if k not in axes or k == "seed" or k.startswith("model.")}
    return load_config(base, _overrides({**keep, "workflow.name": "single", "policy.sharing": "shared"}))


def _variant(flat: dict, axes: dict) -> str:
    """The cell's values on the axes the table has no column for (e.g. `mn=true`), or ''."""
    from swarmrl.sweep.table import _name_part
    own = ("workflow.name", "policy.sharing", "model.hidden_size", "model.name_or_path", "seed")
    return "-".join(_name_part(k, flat[k]) for k in axes if k not in own)


def _run_jobs(jobs: list[tuple[dict, Config, Path, Path]], workers: int, log) -> None:
    """Train every (row, cfg, out, init) job, `workers` at a time in separate processes (one
    worker: in this process, with its log); each row is updated in place with its results."""
    def done(row: dict, result: dict) -> None:
        row.update(result)
        log(f"{row['cell']}: start {_fmt(row['start_val_acc'])} peak {row['peak_val_acc']:.3f} "
            f"final {row['final_val_acc']:.3f} alerts {len(row['alerts'])} ({row['train_s']:.0f} s)")
    if workers <= 1:
        for row, cfg, out, init in jobs:
            log(f"training {row['cell']}")
            done(row, _train_cell(cfg, out, init, log))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_train_cell, cfg, out, init): row for row, cfg, out, init in jobs}
        log(f"training {len(jobs)} runs, {workers} at a time")
        for fut in as_completed(futures):
            done(futures[fut], fut.result())


def _start(starts: dict, cfg: Config, init: Path, log) -> float:
    """The base model's greedy validation accuracy under cfg's workflow, before any update
    (the step-0 validation of a run comes after its first update); once per workflow and model."""
    from swarmrl.policy.model import load_policy
    key = (cfg.workflow.name, _model_label(cfg), str(init))
    if key not in starts:
        starts[key] = _validate(cfg, load_policy(init))
        log(f"base {key[1]} under {key[0]}: val accuracy {starts[key]:.3f}")
    return starts[key]


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def run_sweep(grid_path: Path, out: Path, log=print, jobs: int = 1) -> tuple[Path, Path]:
    """Warm-start and validate the bases, then train every control and cell (`jobs` at a time:
    give each `run.threads` so that jobs x threads fits the cores)."""
    grid = yaml.safe_load(Path(grid_path).read_text()) or {}
    if "base" not in grid:
        raise ConfigError(f"{grid_path}: a sweep grid needs `base: <config>`")
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    from swarmrl.policy.warmstart import warm_start
    base = resolve_config(grid["base"])
    cells = expand_grid(grid)
    # Validate every cell's config before anything trains (an unknown key fails here).
    cfgs = {name: load_config(base, _overrides(flat)) for name, flat in cells}
    out.mkdir(parents=True, exist_ok=True)
    log(f"sweep: {len(cells)} cells + controls -> {out}")
    table: list[dict] = []
    work: list[tuple[dict, Config, Path, Path]] = []
    controls_done: set[tuple[str, int]] = set()
    controls = grid.get("controls", ["base", "single"])
    starts: dict[tuple, float] = {}  # (workflow, model, init) -> the base's accuracy under that workflow
    for name, flat in cells:
        cfg = cfgs[name]
        init = warm_start(_base_model_config(cfg, base, flat), log=log)
        model, seed = _model_label(cfg), cfg.seed
        if (model, seed) not in controls_done:  # the controls of this model size and seed
            controls_done.add((model, seed))
            single = _control_config(base, flat, grid["axes"]) if controls else None
            if "base" in controls:
                base_acc = _start(starts, single, init, log)
                table.append({"cell": f"base-{model}-s{seed}", "control": "base", "workflow": "single",
                              "sharing": "-", "model": model, "seed": seed, "start_val_acc": base_acc,
                              "peak_val_acc": base_acc, "final_val_acc": base_acc})
                log(f"control: base {model} seed {seed}: val accuracy {base_acc:.3f}")
            if "single" in controls:
                row = {"cell": f"single-{model}-s{seed}", "control": "single", "workflow": "single",
                       "sharing": "shared", "model": model, "seed": seed,
                       "start_val_acc": _start(starts, single, init, log)}
                table.append(row)
                work.append((row, single, out / row["cell"], init))
        row = {"cell": name, "workflow": cfg.workflow.name, "sharing": cfg.policy.sharing,
               "variant": _variant(flat, grid["axes"]), "model": model, "seed": seed,
               "start_val_acc": _start(starts, cfg, init, log)}
        table.append(row)
        work.append((row, cfg, out / name, init))
    _run_jobs(work, jobs, log)
    for row, _, run_dir, _ in work:  # read from the run, so a resumed sweep's older cells get it too
        row["amp_ratio"] = mean_amplification(read_jsonl(run_dir / "metrics.jsonl"))
    (out / "sweep_rows.json").write_text(json.dumps(table, indent=2))
    return write_table(table, out)
