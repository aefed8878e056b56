"""`policy.frozen_roles`: orchestrator-only training is a policy assignment (build.py, trainer step).

A frozen role's tokens carry no gradient and its weights stay exactly as they started; the
other roles train as usual. Voting is used because every role is staffed at t = 0, so even an
untrained model gives every role tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from swarmrl.build import check_plugins
from swarmrl.config import ConfigError, load_config
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.rl.trainer import Trainer

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"
VOTING = ["workflow.name=voting", "workflow.generators=2", "rl.problems_per_step=1", "rl.rollouts_per_problem=2",
          "sampler.max_turns_per_agent=2", "rl.role_grad_interval=0", "eval.val_interval=0",
          "time_limit.schedule=constant", "time_limit.end=1000", "sampler.max_new_tokens_per_turn=16"]


def slot_weights(trainer, slot):
    return {n: p.detach().clone() for n, p in zip(range(10**6), trainer.policies.parameters(slot))}


@pytest.mark.parametrize("sharing", ["isolated", "isolated_full"])
def test_a_frozen_role_keeps_its_weights_and_the_others_train(sharing):
    cfg = load_config(TINY, VOTING + [f"policy.sharing={sharing}", "policy.frozen_roles=generator", "rl.lr=1e-2"])
    trainer = Trainer(cfg, build_tiny_policy(cfg.model))
    # An untrained model scores 0 everywhere (advantage 0, no gradient at all): give every token
    # advantage 1 so that a role that trains certainly moves.
    trainer.advantage_fn = lambda rewards, *_: torch.ones_like(rewards)
    before = {s: slot_weights(trainer, s) for s in ("generator", "aggregator")}
    _, rollouts = trainer.step()
    roles = {a.role for r in rollouts for a in r.agents.values() if any(a.gen_mask)}
    assert roles == {"generator", "aggregator"}  # both generated tokens
    after = {s: slot_weights(trainer, s) for s in ("generator", "aggregator")}
    assert all(torch.equal(before["generator"][k], after["generator"][k]) for k in before["generator"])
    assert any(not torch.equal(before["aggregator"][k], after["aggregator"][k]) for k in before["aggregator"])
    assert not trainer.policies.trains("generator") and trainer.policies.trains("aggregator")


def test_frozen_init_gives_the_frozen_roles_another_model(tmp_path):
    cfg = load_config(TINY, VOTING)
    other = build_tiny_policy(cfg.model, seed=7)
    save_policy(other, tmp_path / "other")
    cfg = load_config(TINY, VOTING + ["policy.sharing=isolated_full", "policy.frozen_roles=generator",
                                      f"policy.frozen_init={tmp_path / 'other'}"])
    trainer = Trainer(cfg, build_tiny_policy(cfg.model, seed=0))
    trainer.step()
    got = trainer.policies.policies["generator"].model.state_dict()
    assert all(torch.equal(got[k], v) for k, v in other.model.state_dict().items())


@pytest.mark.parametrize("overrides, message", [
    (["policy.frozen_roles=expert", "workflow.name=voting", "policy.sharing=isolated"], "voting has no role 'expert'"),
    (["policy.frozen_roles=ceo,expert", "policy.sharing=isolated"], "every role would be frozen"),
    (["policy.frozen_roles=expert"], "needs a policy per role type"),
    (["policy.frozen_roles=expert", "policy.sharing=isolated", "policy.frozen_init=x"], "needs policy.sharing=isolated_full"),
    (["policy.frozen_init=x", "policy.sharing=isolated_full"], "policy.frozen_roles is empty"),
])
def test_bad_frozen_roles_are_refused_before_training(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_plugins(load_config(TINY, overrides))


def test_orchestrator_only_rlcr_config_is_accepted():
    check_plugins(load_config(TINY, ["policy.frozen_roles=expert", "policy.sharing=isolated"]))
