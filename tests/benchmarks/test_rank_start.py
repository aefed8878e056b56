"""benchmarks/rank_start.py's plumbing: a process's probe writes its rank's seconds, and `timed`
reads every rank's file back in rank order (the torchrun rounds themselves are the benchmark)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("rank_start", ROOT / "benchmarks" / "rank_start.py")
rank_start = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rank_start)


def test_a_probe_alone_writes_its_import_seconds_and_joins_no_group(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK_START_DIR", str(tmp_path))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    rank_start.probe()
    row = json.loads((tmp_path / "rank0.json").read_text())
    assert row["rank"] == 0 and row["import_s"] >= 0 and "group_s" not in row


def test_timed_reads_every_ranks_file_in_rank_order_and_refuses_a_failed_command():
    write = ("import json, os, pathlib; d = pathlib.Path(os.environ['RANK_START_DIR']); "
             "[(d / f'rank{r}.json').write_text(json.dumps({'rank': r, 'import_s': r + 0.5})) for r in (1, 0)]")
    wall, rows = rank_start.timed([sys.executable, "-c", write])
    assert wall > 0 and [r["rank"] for r in rows] == [0, 1] and [r["import_s"] for r in rows] == [0.5, 1.5]
    with pytest.raises(SystemExit, match="failed"):
        rank_start.timed([sys.executable, "-c", "raise SystemExit(3)"])
