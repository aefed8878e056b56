"""benchmarks/scale_checks.py on hand-made grids: every check against hand computation, and the
committed seed grids read without error."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("scale_checks", ROOT / "benchmarks" / "scale_checks.py")
scale_checks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scale_checks)


def _grid(path: Path, cells: dict, solo: dict | None = None) -> Path:
    """cells: (team, limit) -> (items, score); solo: limit -> (items, score)."""
    path.mkdir()
    rows = [{"team_size": n, "time_limit_s": t, "useful_work": w, "score_mean": s} for (n, t), (w, s) in cells.items()]
    (path / "scaling.json").write_text(json.dumps({"rows": rows}))
    if solo:
        srows = [{"team_size": 1, "time_limit_s": t, "useful_work": w, "score_mean": s} for t, (w, s) in solo.items()]
        (path / "scripted_solo.json").write_text(json.dumps({"rows": srows}))
    return path


def test_checks_by_hand(tmp_path):
    solo = {4.5: (2.0, 0.2), 9.0: (6.0, 0.5), 18.0: (11.0, 0.9)}  # the agent needs 18 s for 0.9
    run = _grid(tmp_path / "run", {
        (1, 4.5): (1.6, 0.15), (1, 9.0): (5.0, 0.45), (1, 18.0): (10.0, 0.85),
        (2, 4.5): (3.0, 0.30), (2, 9.0): (7.0, 0.92), (2, 18.0): (11.0, 0.95),
        (8, 4.5): (6.4, 0.55), (8, 9.0): (12.0, 1.00), (8, 18.0): (12.0, 1.00)}, solo)
    ws = _grid(tmp_path / "ws", {
        (1, 4.5): (1.6, 0.17), (1, 9.0): (5.0, 0.45), (1, 18.0): (10.0, 0.80),
        (2, 4.5): (3.0, 0.20), (2, 9.0): (7.0, 0.90), (2, 18.0): (11.0, 0.99),
        (8, 4.5): (3.0, 0.30), (8, 9.0): (9.0, 0.80), (8, 18.0): (12.0, 1.00)})
    c = scale_checks.checks(run, ws)
    assert c["best_team"] == 8 and c["items"] == 6.4
    assert c["x_perfect"] == pytest.approx(6.4 / 2.0) and c["x_own"] == pytest.approx(6.4 / 1.6)
    # teams of 2 and 8 both reach 0.9 at 9 s, the single agent at 18 s
    assert c["team_reaches_at_s"] == 9.0 and c["reach_ratio"] == pytest.approx(0.5)
    # the team crossed in (4.5, 9], the agent in (9, 18]: anywhere from 4.5 / 18 to 9 / 9
    assert c["reach_ratio_bounds"] == [pytest.approx(0.25), pytest.approx(1.0)]
    # team 1: -0.02 at 4.5 s is its worst (+0.05 at 18 s); team 2: -0.04 at 18 s
    assert c["worst_minus_warm_start"] == {1: pytest.approx(-0.02), 2: pytest.approx(-0.04)}
    # team 8, not a small team: +0.25 at 4.5 s, +0.20 at 9 s, 0 at 18 s
    assert c["larger_teams_minus_warm_start"] == {8: pytest.approx(0.0)}


def test_an_exact_reach_ratio_from_the_score_steps(tmp_path):
    solo = {4.5: (2.0, 0.2), 18.0: (11.0, 0.9)}
    cells = {(1, 4.5): (1.6, 0.15), (1, 18.0): (10.0, 0.85), (8, 4.5): (6.4, 0.55), (8, 18.0): (12.0, 1.0)}
    run = _grid(tmp_path / "run", cells, solo)
    ws = _grid(tmp_path / "ws", cells)
    for name, steps in (("scaling.json", [[0.0, 0.0], [6.3, 0.9], [7.0, 1.0]]),  # team 8 reaches 0.9 at 6.3 s
                        ("scripted_solo.json", [[0.0, 0.0], [9.0, 0.5], [16.2, 0.9]])):  # the agent at 16.2 s
        data = json.loads((run / name).read_text())
        data["rows"][-1]["score_steps"] = steps
        (run / name).write_text(json.dumps(data))
    c = scale_checks.checks(run, ws)
    assert c["reach_exact"] and c["reach_ratio_bounds"] is None
    assert c["team_reaches_at_s"] == 6.3 and c["perfect_single_reaches_at_s"] == 16.2
    assert c["reach_ratio"] == pytest.approx(6.3 / 16.2)
    assert "(0.389x, exact)" in scale_checks._line("run", c)
    # the agent reaches 0.25 and 0.5 at 9 s, 0.75 and its best 0.9 at 16.2 s; the team all at 6.3 s
    assert c["reach_ratio_by_score"] == {"0.25": pytest.approx(0.7), "0.5": pytest.approx(0.7),
                                         "0.75": pytest.approx(6.3 / 16.2), "0.9": pytest.approx(6.3 / 16.2)}


def test_a_missing_grid_cell_is_an_error(tmp_path):
    solo = {4.5: (2.0, 0.2)}
    run = _grid(tmp_path / "run", {(1, 4.5): (1.0, 0.1), (8, 4.5): (5.0, 0.4)}, solo)
    ws = _grid(tmp_path / "ws", {(8, 4.5): (3.0, 0.3)})
    with pytest.raises(SystemExit, match="no row for team 1 at 4.5 s"):
        scale_checks.checks(run, ws)


def test_the_committed_seed_grids(tmp_path, capsys):
    grids = ROOT / "benchmarks" / "small_teams" / "kl_seeds_p48"
    runs = sorted(str(p) for p in grids.glob("kl*_greedy"))
    assert len(runs) == 6
    assert scale_checks.main(["--warm-start", str(grids / "warm_start_greedy"), *runs,
                              "--json", str(tmp_path / "c.json")]) == 0
    out = json.loads((tmp_path / "c.json").read_text())
    assert all(c["perfect_single_items"] == 2.0 and 1.0 < c["x_perfect"] < 10 for c in out.values())
    assert len(capsys.readouterr().out.splitlines()) == 6
