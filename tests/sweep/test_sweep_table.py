"""Sweep grids and the results table."""

from __future__ import annotations

import csv

import pytest
import yaml

from swarmrl.diagnostics.detectors import Alert
from swarmrl.sweep.table import expand_grid, summarize, write_table

GRID = yaml.safe_load("""
base: configs/rlcr_arith.yaml
axes:
  workflow.name: [voting, eval_opt]
  policy.sharing: [shared, isolated]
  model.hidden_size: [64, 128]
  seed: [0, 1]
overrides: {rl.steps: 6}
""")


def test_expand_grid_is_the_ordered_cartesian_product():
    cells = expand_grid(GRID)
    assert len(cells) == 16
    names = [n for n, _ in cells]
    assert names[:5] == ["voting-shared-h64-s0", "voting-shared-h64-s1", "voting-shared-h128-s0",
                         "voting-shared-h128-s1", "voting-isolated-h64-s0"]
    assert names[-1] == "eval_opt-isolated-h128-s1"
    assert len(set(names)) == 16
    assert cells[0][1] == {"rl.steps": 6, "workflow.name": "voting", "policy.sharing": "shared",
                           "model.hidden_size": 64, "seed": 0}
    assert cells[-1][1]["workflow.name"] == "eval_opt" and cells[-1][1]["seed"] == 1
    assert all("base" not in o for _, o in cells)
    assert expand_grid(GRID) == cells  # deterministic


def test_exclude_drops_exactly_the_matching_cells():
    grid = {"axes": {"workflow.name": ["voting", "eval_opt"], "rl.multiplicity_normalized": [False, True],
                     "seed": [0, 1]},
            "exclude": [{"workflow.name": "eval_opt", "rl.multiplicity_normalized": True}]}
    names = [n for n, _ in expand_grid(grid)]
    assert names == ["voting-mnfalse-s0", "voting-mnfalse-s1", "voting-mntrue-s0", "voting-mntrue-s1",
                     "eval_opt-mnfalse-s0", "eval_opt-mnfalse-s1"]


def test_cell_names_for_other_value_types():
    cells = expand_grid({"axes": {"rl.lr": [0.001, 3e-05], "model.num_layers": [2], "rl.use_kl": [True]}})
    assert [n for n, _ in cells] == ["lr0.001-nl2-uktrue", "lr3e_05-nl2-uktrue"]  # "-" is the separator
    assert cells[1][1] == {"rl.lr": 3e-05, "model.num_layers": 2, "rl.use_kl": True}


@pytest.mark.parametrize("grid, match", [
    ({"axes": {}}, "non-empty mapping 'axes'"),
    ({"base": "x.yaml"}, "non-empty mapping 'axes'"),
    ({"axes": {"seed": []}}, "axis 'seed' is empty"),
    ({"axes": {"seed": 3}}, "axis 'seed' must be a list"),
    ({"axes": {"seed": "0,1"}}, "axis 'seed' must be a list"),
    ({"axes": {"seed": [{"a": 1}]}}, "non-scalar"),
    ({"axes": {"seed": [1, 1]}}, "same cell name"),
    ({"axes": {"seed": [0]}, "overrides": {"seed": 1}}, "both an axis and a fixed override"),
    ({"axes": {"seed": [0]}, "overides": {}}, "unknown sweep grid keys \\['overides'\\]"),
    ({"axes": {"seed": [0]}, "overrides": [1]}, "'overrides' must be a mapping"),
    ([1, 2], "must be a mapping"),
    ({"axes": {"seed": [0]}, "controls": ["base", "baseline"]}, "'controls' must be a list drawn from"),
    ({"axes": {"seed": [0]}, "exclude": {"seed": 0}}, "'exclude' must be a list"),
    ({"axes": {"seed": [0]}, "exclude": [{}]}, "'exclude' must be a list of non-empty"),
    ({"axes": {"seed": [0]}, "exclude": [{"seed": 3}]}, "seed=3 is not a value of an axis"),
    ({"axes": {"seed": [0]}, "exclude": [{"rl.lr": 0.1}]}, "is not a value of an axis"),
])
def test_expand_grid_errors(grid, match):
    with pytest.raises(ValueError, match=match):
        expand_grid(grid)


ROWS = [
    {"cell": "voting-shared-h64-s0", "workflow": "voting", "sharing": "shared", "model": "h64", "seed": 0,
     "start_val_acc": 0.5, "amp_ratio": 1.5, "peak_val_acc": 0.6, "final_val_acc": 0.5, "alerts": []},
    {"cell": "voting-shared-h64-s1", "workflow": "voting", "sharing": "shared", "model": "h64", "seed": 1,
     "start_val_acc": 0.5, "amp_ratio": 2.5, "peak_val_acc": 0.8, "final_val_acc": 0.4,
     "alerts": [Alert("accuracy_cliff", "all", 5, "m", {}), {"name": "role_capture", "role": "aggregator"},
                {"name": "role_capture", "role": "aggregator"}]},
    {"cell": "base", "control": "base", "workflow": "voting", "sharing": "shared", "model": "h64", "seed": 0,
     "peak_val_acc": 0.3, "final_val_acc": 0.3},
    {"cell": "single-s0", "control": "single", "workflow": "single", "sharing": "shared", "model": "h64",
     "seed": 0, "peak_val_acc": 0.7, "final_val_acc": None, "alerts": ["gradient_amplification"]},
]


def test_write_table_csv_by_hand(tmp_path):
    csv_path, md_path = write_table(ROWS, tmp_path / "out")
    assert csv_path.exists() and md_path.exists()
    rows = list(csv.DictReader(csv_path.open()))
    assert list(rows[0]) == ["cell", "control", "workflow", "sharing", "variant", "model", "seed", "start_val_acc",
                             "peak_val_acc", "final_val_acc", "cliff", "amp_ratio", "alerts"]
    # controls first, then the cells in their order
    assert [r["cell"] for r in rows] == ["base", "single-s0", "voting-shared-h64-s0", "voting-shared-h64-s1"]
    assert [r["control"] for r in rows] == ["base", "single", "", ""]
    assert float(rows[2]["cliff"]) == pytest.approx(0.1)
    assert float(rows[3]["cliff"]) == pytest.approx(0.4)
    assert float(rows[0]["cliff"]) == 0.0
    assert rows[1]["cliff"] == "" and rows[1]["final_val_acc"] == ""  # unknown final: no cliff
    assert rows[3]["alerts"] == "3: accuracy_cliff/all, role_capture/aggregator x2"
    assert rows[2]["alerts"] == "0" and rows[1]["alerts"] == "1: gradient_amplification"


def test_write_table_markdown_marks_controls_and_summarises_over_seeds(tmp_path):
    _, md_path = write_table(ROWS, tmp_path)
    md = md_path.read_text()
    assert "| base (control) | base | voting |" in md
    assert "| single-s0 (control) | single | single |" in md
    assert "| voting-shared-h64-s1 |  | voting | shared |  | h64 | 1 | 0.500 | 0.800 | 0.400 | 0.400 | 2.500 | 3: " in md
    summary = md.split("## Summary (mean over seeds)")[1]
    # voting/shared/h64 over seeds 0 and 1: start (0.5+0.5)/2, peak (0.6+0.8)/2 ± 0.1, final (0.5+0.4)/2 ± 0.05,
    # cliff (0.1+0.4)/2 ± 0.15 (two values a, b: standard error |a - b| / 2), amp_ratio (1.5+2.5)/2 ± 0.5;
    # alerts: 0 amplification, 2 capture, 1 cliff, 3 in all
    assert ("|  | voting | shared |  | h64 | 2 | 0.500 | 0.700 ± 0.100 | 0.450 ± 0.050 | 0.250 ± 0.150 "
            "| 2.000 ± 0.500 | 0 | 2 | 1 | 3 |") in summary
    assert "| single | single | shared |  | h64 | 1 | - | 0.700 | - | - | - | 1 | 0 | 0 | 1 |" in summary


def test_summarize_by_hand_and_row_errors():
    s = summarize(ROWS)
    assert [(r["control"], r["workflow"], r["seeds"]) for r in s] == [("", "voting", 2), ("base", "voting", 1),
                                                                        ("single", "single", 1)]
    assert s[0]["cliff"] == pytest.approx(0.25)
    assert s[0]["peak_val_acc_se"] == pytest.approx(0.1)  # std([0.6, 0.8], ddof=1) / sqrt(2)
    assert s[1]["peak_val_acc_se"] == 0.0 and s[2]["final_val_acc_se"] is None  # one seed; no final at all
    three = summarize([{"cell": f"c{i}", "workflow": "w", "peak_val_acc": v, "final_val_acc": v}
                       for i, v in enumerate([0.2, 0.4, 0.9])])
    # mean 0.5; deviations -0.3, -0.1, 0.4; sample variance 0.26 / 2 = 0.13; se = sqrt(0.13 / 3)
    assert three[0]["peak_val_acc"] == pytest.approx(0.5)
    assert three[0]["peak_val_acc_se"] == pytest.approx((0.13 / 3) ** 0.5)
    with pytest.raises(ValueError, match="needs a 'cell'"):
        summarize([{"workflow": "voting"}])
    with pytest.raises(ValueError, match="control must be one of"):
        summarize([{"cell": "x", "control": "baseline"}])


def test_write_table_draws_the_summary(tmp_path):
    from swarmrl.sweep.plot import group_label
    write_table(ROWS, tmp_path)
    png = tmp_path / "sweep.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "](sweep.png)" in (tmp_path / "sweep.md").read_text()
    labels = [group_label(r) for r in summarize(ROWS)]
    assert labels == ["voting SP", "base", "single-agent RL"]
    assert group_label({"control": "", "workflow": "voting", "sharing": "isolated", "variant": "mntrue"}) == \
        "voting IP mntrue"


def test_variance_explained_by_hand():
    from swarmrl.sweep.table import variance_explained
    rows = [{"cell": f"c{i}", "workflow": w, "sharing": sh, "seed": 0, "peak_val_acc": v, "final_val_acc": v}
            for i, (w, sh, v) in enumerate([("voting", "shared", 0.1), ("voting", "isolated", 0.3),
                                            ("eval_opt", "shared", 0.5), ("eval_opt", "isolated", 0.7)])]
    rows.append({"cell": "base", "control": "base", "final_val_acc": 0.9, "peak_val_acc": 0.9})  # left out
    # mean 0.4; total SS 0.09+0.01+0.01+0.09 = 0.20; workflow means 0.2 / 0.6: 2*0.04 + 2*0.04 = 0.16;
    # sharing means 0.3 / 0.5: 2*0.01 + 2*0.01 = 0.04; seed has one level: omitted
    shares = variance_explained(rows)
    assert shares == pytest.approx({"workflow": 0.8, "sharing": 0.2})
    assert variance_explained(rows[:1]) == {}
