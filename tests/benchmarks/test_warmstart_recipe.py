"""benchmarks/warmstart_recipe.py on the tiny config: one row per recipe, each from its own
warm start, and the JSON it writes (timings are never asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "warmstart_recipe.py"
TINY = Path(__file__).resolve().parents[2] / "src" / "swarmrl" / "configs" / "tiny_test.yaml"


def test_two_recipes_two_warm_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SWARMRL_CACHE_DIR", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("warmstart_recipe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "recipes.json"
    assert module.main(["--config", str(TINY), "--problems", "2", "--time-limit", "4",
                        "warmstart.batch_sequences=16", "warmstart.batch_sequences=8", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert [r["overrides"] for r in rows] == [["warmstart.batch_sequences=16"], ["warmstart.batch_sequences=8"]]
    assert rows[0]["warm_start"] != rows[1]["warm_start"]  # the batch size is part of the cache key
    assert all(0.0 <= r["score"] <= 1.0 and r["train_seconds"] > 0 for r in rows)
    assert data["time_limit"] == 4.0 and data["problems"] == 2
    assert capsys.readouterr().out.count("item accuracy") == 2
