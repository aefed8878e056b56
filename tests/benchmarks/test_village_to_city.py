"""benchmarks/village_to_city_table.py on a hand-made result, and benchmarks/warm_start_path.py:
the path alone on standard output, whatever the warm start's ranks print."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("v2c_table", ROOT / "benchmarks" / "village_to_city_table.py")
v2c_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v2c_table)


def row(size: int, limit: float, work: float, team: float, by_experts: float) -> dict:
    return {"team_size": size, "time_limit_s": limit, "useful_work": work, "team_size_mean": team,
            "team_hired_by_experts_per_rollout": by_experts}


def test_the_table_reads_the_team_at_the_longest_limit_and_items_at_each(tmp_path):
    res = tmp_path / "trees.json"
    res.write_text(json.dumps({"run": "runs/x", "overrides": ["workflow.span=8"], "items": 12, "problems": 2,
                               "wall_s": 20.4, "peak_rss_mb": 700.0,
                               "rows": [row(9, 8.0, 11.5, 9.0, 0.0), row(9, 4.0, 6.25, 5.5, 0.0),
                                        row(65, 4.0, 5.0, 3.0, 0.0), row(65, 8.0, 10.0, 16.5, 7.5)]}))
    lines = v2c_table.table(res)
    assert lines[0].startswith("**trees** (`runs/x`, overrides ['workflow.span=8']; 2 problems of 12 items, wall 20 s")
    assert lines[2] == "| team (cap + CEO) | team hired | by experts | items @ 4 s | items @ 8 s |"
    assert lines[4:6] == ["| 9 | 9.0 | 0.0 | 6.25 | 11.50 |", "| 65 | 16.5 | 7.5 | 5.00 | 10.00 |"]
    (tmp_path / "scripted.json").write_text(json.dumps({"levels": {}}))
    assert v2c_table.table(tmp_path / "scripted.json") == []


def test_the_plot_draws_the_files_of_one_problem_size(tmp_path):
    import pytest
    for name, items in (("a", 12), ("b", 12), ("big", 24)):
        (tmp_path / f"{name}.json").write_text(json.dumps({
            "run": name, "items": items, "problems": 1, "wall_s": 1.0, "peak_rss_mb": 1.0,
            "rows": [row(9, 4.5, 6.0, 9.0, 0.0), row(17, 4.5, 7.0, 15.0, 6.0)]}))
    paths = [tmp_path / f"{n}.json" for n in ("a", "b", "big")]
    v2c_table.plot(paths, tmp_path / "v2c.png", limit=4.5)
    assert (tmp_path / "v2c.png").stat().st_size > 10_000
    with pytest.raises(SystemExit, match="no result has a row at 8 s"):
        v2c_table.plot(paths, tmp_path / "none.png", limit=8.0)


def test_gains_compare_the_big_team_with_the_better_team_at_the_cap(tmp_path):
    def write(name: str, rows: list[dict]) -> Path:
        (tmp_path / name).write_text(json.dumps({"run": name, "items": 24, "problems": 1, "rows": rows}))
        return tmp_path / name

    # At 4.5 s the flat team of 9 (8.0) beats the trained tree (at_cap, 6.0); at 5.5 s the tree does (12.0 > 10.0).
    rl = write("rl_x_s0.json", [row(9, 4.5, 8.0, 9.0, 0.0), row(17, 4.5, 10.0, 15.0, 6.0),
                                row(9, 5.5, 10.0, 9.0, 0.0), row(17, 5.5, 15.0, 15.0, 6.0)])
    write("at_cap_x_s0.json", [row(9, 4.5, 6.0, 9.0, 4.0), row(9, 5.5, 12.0, 9.0, 4.0)])
    alone = write("rl_y_s1.json", [row(9, 4.5, 4.0, 9.0, 0.0), row(17, 4.5, 3.0, 12.0, 2.0)])  # no at_cap file
    lines = v2c_table.gains([rl, alone], 17)
    assert lines[0] == "| run | 17 / best 9 @ 4.5 s | 17 / best 9 @ 5.5 s |"
    assert lines[2] == "| rl_x_s0 | 10.0 / 8.0 (+25%) | 15.0 / 12.0 (+25%) |"
    assert lines[3] == "| rl_y_s1 | 3.0 / 4.0 (-25%) | - |"


def test_the_plot_colours_runs_by_the_warm_start_they_name():
    assert [v2c_table._ws_tag(s) for s in ("rl_span4_board_ws3_s1", "warm_start_trees_board_ws3", "rl_span4_board_s0")] \
        == ["_ws3", "_ws3", ""]


def test_the_plot_marks_runs_by_the_rl_seed_they_name():
    stems = ("rl_span4_s1", "labels64_ws2_s0_items64_p2_greedy", "rl_spans_s3", "warm_start_trees", "demo_items64")
    assert [v2c_table._rl_seed(s) for s in stems] == [1, 0, 3, None, None]


def test_warm_start_path_prints_the_path_alone_with_two_ranks(tmp_path):
    env = dict(os.environ, SWARMRL_CACHE_DIR=str(tmp_path / "cache"))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "warm_start_path.py"), "tiny_test", "warmstart.processes=2"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = done.stdout.splitlines()
    assert Path(path).parent == tmp_path / "cache" and (Path(path) / "warmstart.json").exists()
    assert "warm start batch" in done.stderr  # the ranks' progress, kept off standard output
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.stdout == done.stdout  # cached: the same directory
