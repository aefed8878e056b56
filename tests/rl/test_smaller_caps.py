"""`rl.smaller_caps_fraction`: some problems' CEOs are told a smaller cap during RL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swarmrl.build import check_plugins
from swarmrl.config import ConfigError, load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.build import cap_time_limits, step_caps
from swarmrl.rl.trainer import Trainer

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"  # max_experts 3


def test_caps_per_problem_are_seeded_and_only_the_last_groups_are_capped():
    cfg = load_config(TINY, ["rl.problems_per_step=4", "rl.smaller_caps_fraction=0.5"])
    caps = step_caps(cfg, step=7)
    want = np.random.default_rng([cfg.seed, 7, 3]).integers(0, 3, size=2).tolist()  # round(0.5 x 4) = 2 groups
    assert caps == [3, 3] + want and caps == step_caps(cfg, step=7)
    assert all(step_caps(cfg, s)[2] < 3 and step_caps(cfg, s)[3] < 3 for s in range(20))
    assert step_caps(load_config(TINY, ["rl.problems_per_step=4"]), 7) == [3, 3, 3, 3]  # default: RLCR as published


def test_a_step_runs_capped_groups_and_keeps_them_out_of_the_collective_metrics():
    cfg = load_config(TINY, ["rl.problems_per_step=2", "rl.smaller_caps_fraction=0.5"])
    m, rollouts = Trainer(cfg, build_tiny_policy(cfg.model)).step()
    caps = {r.group: r.org.max_experts for r in rollouts}
    assert caps[0] == 3 and caps[1] == step_caps(cfg, 0)[1] < 3
    assert m["capped/cap_mean"] == caps[1]
    assert m["capped/score_mean"] == pytest.approx(np.mean([r.score for r in rollouts if r.group == 1]))
    assert m["score_mean"] == pytest.approx(np.mean([r.score for r in rollouts if r.group == 0]))


def test_equal_time_gives_each_capped_group_the_full_teams_agent_seconds():
    # max_experts 3: a full team of 4. Cap 0 (one agent) gets 4x the deadline, cap 1 2x, cap 3 1x.
    on = load_config(TINY, ["rl.smaller_caps_fraction=0.5", "rl.smaller_caps_time_exponent=1"])
    assert cap_time_limits(on, [3, 0, 1], 2.0) == [2.0, 8.0, 4.0]
    # exponent 0.5: the square root of the agent-seconds ratio (4 -> 2x, 2 -> sqrt 2 x)
    half = load_config(TINY, ["rl.smaller_caps_fraction=0.5", "rl.smaller_caps_time_exponent=0.5"])
    assert cap_time_limits(half, [3, 0, 1], 2.0) == pytest.approx([2.0, 4.0, 2.0 * 2 ** 0.5], rel=1e-12)
    off = load_config(TINY, ["rl.smaller_caps_fraction=0.5"])
    assert cap_time_limits(off, [3, 0, 1], 2.0) == [2.0, 2.0, 2.0]
    inert = load_config(TINY, ["rl.smaller_caps_time_exponent=1"])  # fraction 0: every group full
    assert cap_time_limits(inert, [3, 3], 2.0) == [2.0, 2.0]
    # The step's rollouts carry their group's deadline.
    cfg = load_config(TINY, ["rl.problems_per_step=2", "rl.smaller_caps_fraction=0.5",
                             "rl.smaller_caps_time_exponent=1", "rl.smaller_caps=0,0"])
    trainer = Trainer(cfg, build_tiny_policy(cfg.model))
    rollouts, _ = trainer.step_rollouts(0)
    limits = {r.group: r.time_limit for r in rollouts}
    assert limits[1] == pytest.approx(4 * limits[0]) and limits[0] == trainer.deadline(0)


def test_bad_fraction_is_a_clear_error():
    with pytest.raises(ConfigError, match="smaller_caps_fraction must be in"):
        load_config(TINY, ["rl.smaller_caps_fraction=1.5"])
    with pytest.raises(ConfigError, match=r"smaller_caps_time_exponent must be in \[0, 1\]"):
        load_config(TINY, ["rl.smaller_caps_time_exponent=2"])
    # A scenario without hiring has no cap to make smaller: refused before anything is built.
    with pytest.raises(ConfigError, match=r"needs a scenario that hires \(workflow.name=org\)"):
        check_plugins(load_config(TINY, ["rl.smaller_caps_fraction=0.5", "workflow.name=voting"]))


def test_smaller_caps_draws_only_the_named_caps():
    cfg = load_config(TINY, ["rl.problems_per_step=4", "rl.smaller_caps_fraction=0.5", "rl.smaller_caps=0,2"])
    idx = np.random.default_rng([cfg.seed, 7, 3]).integers(0, 2, size=2).tolist()  # an index into [0, 2]
    assert step_caps(cfg, step=7) == [3, 3] + [[0, 2][i] for i in idx]
    assert {c for s in range(30) for c in step_caps(cfg, s)[2:]} == {0, 2}


def test_fraction_zero_turns_the_caps_off_whatever_smaller_caps_says():
    # The demo preset sets both keys; `rl.smaller_caps_fraction=0` alone must turn them off.
    cfg = load_config(TINY, ["rl.problems_per_step=4", "rl.smaller_caps=0,1"])
    check_plugins(cfg)
    assert step_caps(cfg, step=3) == [3, 3, 3, 3]


@pytest.mark.parametrize("override, match", [
    (["rl.smaller_caps_fraction=0.5", "rl.smaller_caps=0,3"], r"\[3\] out of range: each cap must be in 0..2"),
    (["rl.smaller_caps_fraction=0.5", "rl.smaller_caps=one"], "comma-separated integers"),
])
def test_bad_smaller_caps_fail_before_anything_is_built(override, match):
    with pytest.raises(ConfigError, match=match):
        check_plugins(load_config(TINY, override))


def test_kl_scale_multiplies_the_kl_term_of_the_capped_groups_sequences():
    import dataclasses
    import torch
    from swarmrl.config import ModelConfig, RLConfig
    from swarmrl.policy.sharing import PolicySet
    from swarmrl.rl.batch import TrainSeq
    from swarmrl.rl.losses import get_loss
    from swarmrl.rl.update import Updater
    torch.manual_seed(0)
    policy = build_tiny_policy(ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                                           intermediate_size=64))
    ps = PolicySet(policy, "shared", ["x"])
    with ps.reference("shared"):  # the KL reference: the weights before the nudge below
        pass
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    g = torch.Generator().manual_seed(1)

    def seqs(scale):
        out = []
        for i in range(4):
            ids = torch.randint(0, 250, (12,), generator=g).tolist()
            out.append(TrainSeq(ids, [0] * 6 + [1] * 6, [-5.0] * 12, 1.0 - i / 2, "x", i, kl_scale=scale))
        return out

    losses = {}
    for coef, scale in ((0.0, 1.0), (0.5, 1.0), (0.5, 3.0)):
        g.manual_seed(1)  # the same sequences each time
        cfg = dataclasses.replace(RLConfig(), loss="ppo_clip", kl_coef=coef, lr=0.0, share_prefixes=False)
        losses[coef, scale] = Updater(cfg, ps, get_loss("ppo_clip"), policy.pad_id, seed=0).update(
            seqs(scale), step=0, measure_roles=False)["loss"]
    kl = losses[0.5, 1.0] - losses[0.0, 1.0]  # kl_coef x the weighted KL: positive once the weights moved
    assert kl > 1e-4
    assert losses[0.5, 3.0] - losses[0.0, 1.0] == pytest.approx(3 * kl, rel=1e-4)


def test_the_trainer_gives_capped_groups_the_kl_scale():
    cfg = load_config(TINY, ["rl.problems_per_step=2", "rl.smaller_caps_fraction=0.5", "rl.smaller_caps_kl_scale=4"])
    trainer = Trainer(cfg, build_tiny_policy(cfg.model))
    trained = []
    update = trainer.updater.update
    trainer.updater.update = lambda seqs, *a, **k: trained.extend(seqs) or update(seqs, *a, **k)
    _, rollouts = trainer.step()
    capped = {r.index for r in rollouts if r.org.max_experts < 3}
    scales = {(s.rollout in capped, s.kl_scale) for s in trained}
    assert scales == {(True, 4.0), (False, 1.0)}  # both kinds trained, each with its scale
