"""The voting workflow trains 2 steps on the real-data tasks (math graded by math-verify, code
run in the sandbox) with a tiny untrained model: the plumbing, not learning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swarmrl.cli import main
from swarmrl.config import ModelConfig
from swarmrl.policy.model import build_tiny_policy, save_policy

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "configs" / "tiny_workflows.yaml")
MODEL = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                    max_context_tokens=2048)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("tiny-model")
    save_policy(build_tiny_policy(MODEL), d)
    return str(d)


@pytest.mark.parametrize("task, dataset", [("math", "champ"), ("code", "humaneval")])
def test_voting_trains_two_steps_on_a_real_task(task, dataset, tiny_model, tmp_path):
    if task == "code":
        from swarmrl.config import SandboxConfig
        from swarmrl.sandbox import SandboxUnavailable, make_pool
        try:
            make_pool(SandboxConfig()).close()
        except SandboxUnavailable as e:  # setup installs bubblewrap; say why if it is still missing
            pytest.fail(f"sandbox unavailable: {e}")
    out = tmp_path / "run"
    assert main(["train", TINY, "--out", str(out), "--init", tiny_model, f"task.name={task}",
                 f"task.dataset={dataset}", "model.max_context_tokens=2048", "policy.sharing=isolated",
                 "sampler.max_new_tokens_per_turn=16", "eval.val_interval=0"]) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert all(r["infra_error_rate"] == 0.0 for r in rows)
    sample = json.loads((out / "samples" / "step_0000.jsonl").read_text().splitlines()[0])
    assert sample["workflow"] == "voting" and {t["role"] for t in sample["turns"]} >= {"generator"}
