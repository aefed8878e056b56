import json

import numpy as np

from swarmrl.report.plots import plot_metrics_file, plot_run, rolling_mean, role_metrics


def _write_metrics(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _synthetic_rows(n=20):
    rows = []
    for s in range(n):
        rows.append({
            "step": s,
            "score_mean": 0.1 + 0.04 * s if s != 7 else None,
            "reward_mean": 0.05 * s,
            "time_limit": 20 - s // 4,
            "team_size_mean": 1 + s / 10,
            "messages_per_rollout": 2.0 * s,
            "message_tokens_per_rollout": 30.0 * s if s % 5 else None,
            "useful_work": 0.5 + 0.01 * s,
            "loss": 1.0 / (s + 1),
            "grad_norm": None if s < 3 else 0.3,
            "entropy": 2.0 - 0.05 * s,
            "role/ceo/loss": 0.1 * s,
            "role/expert/loss": 0.2 * s,
            "role/expert/tokens": 100 + s,
            "role/ceo/tokens": None,
            "alerts": "capture: expert" if s == 10 else "",
        })
    return rows


def test_plot_run_writes_expected_files(tmp_path):
    _write_metrics(tmp_path / "metrics.jsonl", _synthetic_rows())
    paths = plot_run(tmp_path)
    names = sorted(p.name for p in paths)
    assert names == ["optim.png", "roles.png", "score.png", "team.png", "useful_work.png"]
    for p in paths:
        assert p.parent == tmp_path / "plots"
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.stat().st_size > 1000


def test_missing_keys_are_skipped(tmp_path):
    rows = [{"step": s, "loss": 1.0 / (s + 1), "grad_norm": None} for s in range(5)]
    _write_metrics(tmp_path / "m.jsonl", rows)
    paths = plot_metrics_file(tmp_path / "m.jsonl", tmp_path / "out")
    assert [p.name for p in paths] == ["optim.png"]
    assert plot_metrics_file(tmp_path / "absent.jsonl", tmp_path / "out2") == []


def test_the_speed_figure_draws_the_panels_that_have_data(tmp_path):
    from swarmrl.report.plots import _speed_figure
    rows = [{"step": s, "step_s": 3.0 + s, "rollout_s": 1.0, "perf/update_s": 2.0 + s} for s in range(4)]
    def height(path):  # the PNG header's image height
        return int.from_bytes(path.read_bytes()[20:24], "big")

    one = height(_speed_figure(rows, tmp_path / "seconds.png"))
    rows = [{**r, "perf/mfu_update": 0.4, "perf/rollout_rank_idle": 0.1} for r in rows]
    assert height(_speed_figure(rows, tmp_path / "both.png")) > 1.5 * one  # a second panel below
    assert _speed_figure([{"step": 0, "loss": 1.0}], tmp_path / "none.png") is None


def test_rolling_mean_matches_hand_computation():
    y = np.array([1.0, 3.0, np.nan, 5.0, np.nan, np.nan, np.nan, np.nan, np.nan, 7.0])
    r = rolling_mean(y, window=3)
    expected = [1.0, 2.0, 2.0, 4.0, 5.0, 5.0, np.nan, np.nan, np.nan, 7.0]
    assert np.allclose(r, expected, equal_nan=True)


def test_role_metrics_grouping():
    rows = [{"role/ceo/loss": 1.0, "role/a/b/loss": 2.0, "role/x/tok": None, "role/bad": 1}]
    assert role_metrics(rows) == {"loss": {"ceo": "role/ceo/loss", "a/b": "role/a/b/loss"}}


def test_plot_run_can_require_metrics(tmp_path):
    import pytest
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'nope'}: no such run directory"):
        plot_run(tmp_path / "nope", require_metrics=True)
    with pytest.raises(FileNotFoundError, match="metrics.jsonl not found"):
        plot_run(tmp_path, require_metrics=True)
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n')  # a row, but no metric to draw
    with pytest.raises(ValueError, match="no metrics to plot"):
        plot_run(tmp_path, require_metrics=True)
    assert plot_run(tmp_path) == []  # the training loop's call stays lenient
