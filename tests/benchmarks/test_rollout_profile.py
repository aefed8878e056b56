"""benchmarks/rollout_profile.py end to end on the tiny test config: the forward timer counts
every model call, the model's share of the wall time is a share, and the operator table is a
sorted list of shares of the operators' time."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("rollout_profile", ROOT / "benchmarks" / "rollout_profile.py")
rollout_profile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rollout_profile)


def test_forward_timer_counts_calls_and_keeps_the_model_as_it_is():
    model = torch.nn.Linear(3, 2)
    timer = rollout_profile.ForwardTimer(model)
    for _ in range(4):
        model(torch.ones(1, 3))
    assert timer.calls == 4 and timer.seconds > 0
    assert type(model) is torch.nn.Linear  # the sampler reads the model's type and signature


def test_profile_of_the_tiny_config(tmp_path):
    out = tmp_path / "profile.json"
    summary = rollout_profile.main(["--config", "tiny_test", "--steps", "1", "--top", "5", "--json", str(out),
                                    f"warmstart.cache_dir={tmp_path / 'ws'}"])
    assert summary["forward_calls"] > 0
    assert 0 < summary["model_share_of_wall"] <= 1
    shares = [o["share"] for o in summary["operators"]]
    assert len(shares) == 5 and shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1 + 1e-9
    assert all(o["op"].startswith("aten::") for o in summary["operators"])
    assert json.loads(out.read_text())["settings"]["config"] == "tiny_test"
