"""benchmarks/eval_transcripts.py: a tiny random model's evaluation rollout as text, and the
error for a bare model directory without --config."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from swarmrl.api import random_model

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("eval_transcripts", ROOT / "benchmarks" / "eval_transcripts.py")
eval_transcripts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_transcripts)


def test_a_bare_model_prints_every_turn_of_each_rollout(tmp_path):
    model = random_model("tiny_test", tmp_path / "model")
    out = tmp_path / "t.txt"
    assert eval_transcripts.main([str(model), "--config", "tiny_test", "--team-size", "3", "--problems", "2",
                                  "--items", "4", "--horizon", "3", "--greedy", "--out", str(out)]) == 0
    text = out.read_text()
    heads = re.findall(r"^rollout (\d+) score=", text, re.M)
    assert heads == ["0", "1"]
    turns = re.findall(r"^\[(\d+\.\d\d)-(\d+\.\d\d)\] (\S+)$", text, re.M)
    assert turns and turns[0][:3] == ("0.00", turns[0][1], "ceo")  # the CEO opens every rollout
    assert all(float(a) <= float(b) for a, b, _ in turns)
    assert text.count("  obs: ") == text.count("  reply: ") == len(turns)


def test_a_model_directory_without_a_config_is_refused(tmp_path):
    model = random_model("tiny_test", tmp_path / "model")
    with pytest.raises(SystemExit, match="has no config.yaml: pass --config"):
        eval_transcripts.main([str(model), "--team-size", "2"])
