"""`swarmrl sweep GRID.yaml --out DIR`: train every cell of a grid and tabulate it.

For each cell (workflow x sharing x model size x seed, each with the grid's small step
budget) the cell is trained from the warm start of its model size; its validation accuracy
is read from `metrics.jsonl` (every `eval.val_interval` steps) plus one final validation,
giving the peak, the final value and the cliff between them, and its alerts. Beside the
cells, the controls of Zeng et al. (2026): `base` (the warm start without RL, as a single
agent) and `single` (single-agent RL with the same budget), per model size and seed.

A cell whose run directory already holds `cell.json` is not trained again, so an
interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from swarmrl.config import Config, ConfigError, load_config
from swarmrl.config_load import resolve_config
from swarmrl.sweep.table import expand_grid, write_table


def _model_label(cfg: Config) -> str:
    m = cfg.model
    return m.name_or_path or f"h{m.hidden_size}-l{m.num_layers}"


def _overrides(flat: dict) -> list[str]:
    return [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in flat.items()]


def _validate(cfg: Config, policy) -> float:
    from swarmrl.rl.evaluate import evaluate
    return evaluate(cfg, policy, problems=cfg.eval.val_problems, greedy=True)["score_mean"]


def _train_cell(cfg: Config, out: Path, init: Path, log) -> dict:
    """Train one cell (or reuse a finished one); -> its row of the table."""
    done = out / "cell.json"
    if done.exists():
        return json.loads(done.read_text())
    from swarmrl.rl.loop import load_trained_policy, train
    t0 = time.perf_counter()
    run = train(cfg, out, init_policy=init, log=log, overwrite=True)
    rows = run.read_metrics()
    final = _validate(cfg, load_trained_policy(run.path)[0])
    vals = [r["val_accuracy"] for r in rows if "val_accuracy" in r] + [final]
    row = {"peak_val_acc": max(vals), "final_val_acc": final, "val_curve": vals,
           "alerts": [a for r in rows for a in r.get("alerts", [])], "train_s": time.perf_counter() - t0}
    done.write_text(json.dumps(row, indent=2))
    return row


def run_sweep(grid_path: Path, out: Path, log=print) -> tuple[Path, Path]:
    grid = yaml.safe_load(Path(grid_path).read_text()) or {}
    if "base" not in grid:
        raise ConfigError(f"{grid_path}: a sweep grid needs `base: <config>`")
    from swarmrl.policy.model import load_policy
    from swarmrl.policy.warmstart import warm_start
    base = resolve_config(grid["base"])
    cells = expand_grid(grid)
    # Validate every cell's config before anything trains (an unknown key fails here).
    cfgs = {name: load_config(base, _overrides(flat)) for name, flat in cells}
    out.mkdir(parents=True, exist_ok=True)
    log(f"sweep: {len(cells)} cells + controls -> {out}")
    table: list[dict] = []
    controls_done: set[tuple[str, int]] = set()
    for i, (name, _) in enumerate(cells):
        cfg = cfgs[name]
        init = warm_start(cfg, log=log)
        model, seed = _model_label(cfg), cfg.seed
        if (model, seed) not in controls_done:  # the controls of this model size and seed
            controls_done.add((model, seed))
            single = load_config(base, _overrides({**dict(cells[i][1]), "workflow.name": "single",
                                                   "policy.sharing": "shared"}))
            base_acc = _validate(single, load_policy(init))
            table.append({"cell": f"base-{model}-s{seed}", "control": "base", "workflow": "single", "sharing": "-",
                          "model": model, "seed": seed, "peak_val_acc": base_acc, "final_val_acc": base_acc})
            log(f"control: base {model} seed {seed}: val accuracy {base_acc:.3f}")
            row = _train_cell(single, out / f"single-{model}-s{seed}", init, log)
            table.append({"cell": f"single-{model}-s{seed}", "control": "single", "workflow": "single",
                          "sharing": "shared", "model": model, "seed": seed, **row})
            log(f"control: single-agent RL {model} seed {seed}: peak {row['peak_val_acc']:.3f} "
                f"final {row['final_val_acc']:.3f}")
        log(f"[{i + 1}/{len(cells)}] {name}")
        row = _train_cell(cfg, out / name, init, log)
        table.append({"cell": name, "workflow": cfg.workflow.name, "sharing": cfg.policy.sharing,
                      "model": model, "seed": seed, **row})
        log(f"[{i + 1}/{len(cells)}] {name}: peak {row['peak_val_acc']:.3f} final {row['final_val_acc']:.3f} "
            f"alerts {len(row['alerts'])}")
        (out / "sweep_rows.json").write_text(json.dumps(table, indent=2))
    return write_table(table, out)
