"""final/ marks a finished run whatever the sharing: per-role runs copy their last checkpoint."""

from __future__ import annotations

from pathlib import Path

import torch

from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.rl.loop import DRAFT_CORPUS, load_trained_policy, train
from swarmrl.runs.checkpoint import latest_checkpoint, load_checkpoint

REPO = Path(__file__).resolve().parents[2]
FAST = ["eval.val_interval=0", "sampler.max_new_tokens_per_turn=8", "sampler.max_turns_per_agent=2",
        "rl.problems_per_step=1", "rl.rollouts_per_problem=2", "rl.role_grad_interval=0", "run.threads=1",
        "rl.steps=2", "workflow.name=voting", "policy.sharing=isolated"]


def test_isolated_voting_run_writes_a_loadable_final_dir(tmp_path):
    cfg = load_config(REPO / "configs" / "tiny_test.yaml", FAST)
    init = tmp_path / "init"
    save_policy(build_tiny_policy(cfg.model), init)
    logs = []
    run = train(cfg, tmp_path / "run", init_policy=init, log=logs.append)
    assert logs[-1] == f"final per-role weights (isolated): {run.final_dir}"
    policies, run_cfg = load_trained_policy(run.final_dir)
    # every group but the sampler's draft corpus (policy/speculative.py), which holds no weights
    want = {g: t for g, t in load_checkpoint(latest_checkpoint(run.path)).tensors.items() if g != DRAFT_CORPUS}
    got = policies.state_tensors()
    assert run_cfg["policy"]["sharing"] == "isolated" and set(got) == set(want)
    for slot in want:
        assert all(torch.equal(got[slot][k], want[slot][k]) for k in want[slot]), slot
