"""`swarmrl sweep` end to end on a 2-cell tiny grid: every cell and both controls get a row."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from swarmrl.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_tiny_sweep_writes_rows_for_cells_and_controls(tmp_path, capsys):
    grid = {"base": str(REPO / "configs" / "tiny_workflows.yaml"),
            "axes": {"workflow.name": ["voting"], "policy.sharing": ["shared", "isolated"]},
            "overrides": {"rl.steps": 2, "eval.val_interval": 1, "warmstart.cache_dir": str(tmp_path / "ws")}}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid, sort_keys=False))
    assert main(["sweep", str(path), "--out", str(tmp_path / "sweep")]) == 0
    rows = list(csv.DictReader((tmp_path / "sweep" / "sweep.csv").open()))
    assert [r["cell"] for r in rows] == ["base-h32-l1-s0", "single-h32-l1-s0", "voting-shared", "voting-isolated"]
    assert [r["control"] for r in rows] == ["base", "single", "", ""]
    for r in rows:
        peak, final = float(r["peak_val_acc"]), float(r["final_val_acc"])
        assert 0.0 <= final <= peak <= 1.0
    cell = json.loads((tmp_path / "sweep" / "voting-isolated" / "cell.json").read_text())
    assert len(cell["val_curve"]) == 3  # steps 0 and 1, then the final validation
    assert "| voting-isolated |" in (tmp_path / "sweep" / "sweep.md").read_text()
    # Run again: the finished cells are reused as they are...
    assert main(["sweep", str(path), "--out", str(tmp_path / "sweep")]) == 0
    assert json.loads((tmp_path / "sweep" / "voting-isolated" / "cell.json").read_text()) == cell
    # ... but not under a changed grid: the old cells' numbers would pass for the new budget's
    path.write_text(yaml.safe_dump({**grid, "overrides": {**grid["overrides"], "rl.steps": 3}}, sort_keys=False))
    assert main(["sweep", str(path), "--out", str(tmp_path / "sweep")]) == 2
    assert "holds a finished run of another config (rl.steps differ)" in " ".join(capsys.readouterr().err.split())


def test_parallel_sweep_with_a_variant_axis(tmp_path):
    """--jobs 2 trains in worker processes; a non-table axis becomes the `variant` column."""
    grid = {"base": str(REPO / "configs" / "tiny_workflows.yaml"),
            "axes": {"workflow.name": ["voting"], "policy.sharing": ["isolated"],
                     "rl.multiplicity_normalized": [False, True]},
            "overrides": {"rl.steps": 1, "eval.val_interval": 1, "run.threads": 1,
                          "warmstart.cache_dir": str(tmp_path / "ws")}}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid, sort_keys=False))
    assert main(["sweep", str(path), "--out", str(tmp_path / "sweep"), "--jobs", "2"]) == 0
    rows = list(csv.DictReader((tmp_path / "sweep" / "sweep.csv").open()))
    assert [(r["cell"], r["variant"]) for r in rows] == [
        ("base-h32-l1-s0", ""), ("single-h32-l1-s0", ""),
        ("voting-isolated-mnfalse", "mnfalse"), ("voting-isolated-mntrue", "mntrue")]
    # start = the base model under the row's workflow, before any update: the single-agent
    # control starts where the base control stands, and both voting cells from one base
    assert rows[1]["start_val_acc"] == rows[0]["start_val_acc"] == rows[0]["final_val_acc"]
    assert rows[2]["start_val_acc"] == rows[3]["start_val_acc"] != ""
    for r in rows[1:]:
        cell = json.loads((tmp_path / "sweep" / r["cell"] / "cell.json").read_text())
        assert float(r["final_val_acc"]) == cell["val_curve"][-1]
    assert main(["sweep", str(path), "--out", str(tmp_path / "sweep"), "--jobs", "0"]) == 2  # a clear error


def test_sweep_refuses_zero_jobs(tmp_path):
    from swarmrl.config import ConfigError
    from swarmrl.sweep.run import run_sweep
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"base": str(REPO / "configs" / "tiny_workflows.yaml"),
                                    "axes": {"seed": [0]}}))
    with pytest.raises(ConfigError, match="--jobs must be >= 1"):
        run_sweep(path, tmp_path / "out", jobs=0)


def test_the_single_agent_control_takes_model_and_seed_but_no_other_axis(tmp_path):
    from swarmrl.sweep.run import _control_config
    base = REPO / "configs" / "tiny_workflows.yaml"
    flat = {"rl.steps": 2, "workflow.name": "voting", "policy.sharing": "isolated", "rl.multiplicity_lr_scaled": True,
            "rl.lr": 0.01, "model.hidden_size": 48, "seed": 2}
    axes = {"workflow.name": [], "policy.sharing": [], "rl.multiplicity_lr_scaled": [], "rl.lr": [],
            "model.hidden_size": [], "seed": []}
    cfg = _control_config(base, flat, axes)  # lr scaling under a shared policy would be refused
    assert (cfg.workflow.name, cfg.policy.sharing, cfg.rl.multiplicity_lr_scaled) == ("single", "shared", False)
    assert (cfg.rl.steps, cfg.model.hidden_size, cfg.seed) == (2, 48, 2)
    assert cfg.rl.lr != 0.01  # the base config's, not the cell's


@pytest.mark.parametrize("grid_path", sorted((REPO / "configs" / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_grid_loads_every_cell_and_control(grid_path):
    """Each cell's config and its single-agent control validate (what a sweep checks before training)."""
    from swarmrl.config import load_config
    from swarmrl.config_load import resolve_config
    from swarmrl.sweep.run import _control_config, _overrides
    from swarmrl.sweep.table import expand_grid
    grid = yaml.safe_load(grid_path.read_text())
    base = resolve_config(grid["base"])
    cells = expand_grid(grid)
    assert cells
    for _, flat in cells:
        load_config(base, _overrides(flat))
        if grid.get("controls", ["base", "single"]):
            _control_config(base, flat, grid["axes"])
