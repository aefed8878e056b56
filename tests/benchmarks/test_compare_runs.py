"""benchmarks/compare_runs.py on hand-made runs: equal values pass, a changed value fails, and
runs started on other machines are named as such before any value is compared."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "benchmarks" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def _run(path: Path, rows: list[dict], env: dict | None) -> str:
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if env is not None:
        (path / "environment.jsonl").write_text(json.dumps(env) + "\n")
    return str(path)


def _main(monkeypatch, a: str, b: str) -> int:
    monkeypatch.setattr(sys, "argv", ["compare_runs.py", a, b])
    return compare_runs.main()


def test_values_compared_and_machines_named(tmp_path, monkeypatch, capsys):
    env = {"versions": {"torch": "2.13.0"}, "cpu": "cpu A", "torch_threads": 1, "processes": 1, "step": 0}
    rows = [{"step": 0, "score_mean": 0.5, "step_s": 1.0}]
    a = _run(tmp_path / "a", rows, env)
    same = _run(tmp_path / "b", [{**rows[0], "step_s": 9.0}], {**env, "utc": "later"})  # timing only
    assert _main(monkeypatch, a, same) == 0
    assert "other machines" not in capsys.readouterr().out
    moved = _run(tmp_path / "c", [{**rows[0], "score_mean": 0.51}], {**env, "cpu": "cpu B"})
    assert _main(monkeypatch, a, moved) == 1
    out = capsys.readouterr().out
    assert "other machines or builds (cpu differ)" in out and "score_mean 0.5 -> 0.51" in out
    old = _run(tmp_path / "d", rows, None)  # a run older than environment.jsonl: no claim either way
    assert _main(monkeypatch, a, old) == 0 and "other machines" not in capsys.readouterr().out
