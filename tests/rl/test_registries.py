"""Registries of the RL math: built-ins resolve by name, `file.py:fn` and `package.module:fn`
specs load a user's function, and the loaded functions give hand-computed numbers."""

from __future__ import annotations

import textwrap

import pytest
import torch

from swarmrl.config import load_config
from swarmrl.registry import PluginError
from swarmrl.rl.advantages import ADVANTAGES, collective_advantage, get_advantage, register_advantage
from swarmrl.rl.aggregation import AGGREGATIONS, role_balanced, seq_mean, sequence_weights, token_mean
from swarmrl.rl.losses import LOSSES, get_loss, pg_loss, ppo_clip_loss, register_loss

PLUGIN = '''
import torch


def batch_baseline(rewards, groups, rollouts, roles):
    """Each sequence's reward minus the batch mean."""
    return rewards - rewards.mean()


def neg_logp(logp, old_logp, adv, weights, *, clip_eps=0.2):
    """-adv * logp, weighted; no metrics."""
    return (-adv * logp * weights).sum(), {}


neg_logp.clips = False


def double_tokens(n, has, roles):
    """Denominator 2 * n_s: every sequence equal, half the mass of seq_mean with one sequence."""
    return 2.0 * torch.where(has, n, torch.ones_like(n))
'''

# Three sequences, three rollouts of one problem, one role each.
REWARDS = torch.tensor([1.0, 0.0, 0.5])
GROUPS = torch.tensor([0, 0, 0])
ROLLOUTS = torch.tensor([0, 1, 2])
ROLES = torch.tensor([0, 1, 2])


@pytest.fixture
def plugin(tmp_path) -> str:
    path = tmp_path / "my_rl.py"
    path.write_text(textwrap.dedent(PLUGIN))
    return str(path)


def test_builtins_resolve_by_name():
    assert get_advantage("collective") is collective_advantage
    assert get_loss("ppo_clip") is ppo_clip_loss and get_loss("pg") is pg_loss
    assert AGGREGATIONS.get("token_mean") is token_mean
    assert AGGREGATIONS.get("seq_mean") is seq_mean
    assert AGGREGATIONS.get("role_balanced") is role_balanced


def test_module_specs_resolve():
    assert get_advantage("swarmrl.rl.advantages:collective_advantage") is collective_advantage
    assert get_loss("swarmrl.rl.losses:pg_loss") is pg_loss
    assert AGGREGATIONS.get("swarmrl.rl.aggregation:seq_mean") is seq_mean


def test_file_specs_resolve_and_match_hand_numbers(plugin):
    adv_fn = get_advantage(f"{plugin}:batch_baseline")
    assert adv_fn is get_advantage(f"{plugin}:batch_baseline")  # the file is imported once
    adv = adv_fn(REWARDS, GROUPS, ROLLOUTS, ROLES)  # mean 0.5
    assert adv.tolist() == pytest.approx([0.5, -0.5, 0.0])

    loss_fn = get_loss(f"{plugin}:neg_logp")
    assert loss_fn.clips is False  # the attribute update.py reads
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -1.5], [-3.0, -4.0]])  # [3, 2]
    weights = torch.tensor([[0.25, 0.25], [0.25, 0.0], [0.25, 0.0]])  # [3, 2]
    loss, metrics = loss_fn(logp, logp.detach(), adv[:, None].expand(3, 2), weights)
    # 0.5 * (1 + 2) * 0.25 + (-0.5) * 0.5 * 0.25 + 0 = 0.375 - 0.0625
    assert float(loss) == pytest.approx(0.3125) and metrics == {}

    w = sequence_weights(torch.tensor([2, 4, 0]), ROLES, f"{plugin}:double_tokens")
    assert w.tolist() == pytest.approx([1 / 4, 1 / 8, 0.0])


def test_a_spec_in_the_config_reaches_the_registry(plugin):
    cfg = load_config(None, [f"rl.advantage={plugin}:batch_baseline", f"rl.loss={plugin}:neg_logp",
                             f"rl.aggregation={plugin}:double_tokens"])
    assert get_advantage(cfg.rl.advantage)(REWARDS, GROUPS, ROLLOUTS, ROLES).tolist() == pytest.approx(
        [0.5, -0.5, 0.0])
    assert get_loss(cfg.rl.loss).__name__ == "neg_logp"
    assert sequence_weights(torch.tensor([1, 1, 1]), ROLES, cfg.rl.aggregation).tolist() == pytest.approx([0.5] * 3)


def test_builtin_loaded_by_spec_matches_hand_numbers():
    """collective on one group of three rollouts: mean 0.5, Bessel std 0.5."""
    adv = get_advantage("swarmrl.rl.advantages:collective_advantage")(REWARDS, GROUPS, ROLLOUTS, ROLES)
    e = 1e-6
    assert adv.tolist() == pytest.approx([0.5 / (0.5 + e), -0.5 / (0.5 + e), 0.0], abs=1e-7)
    loss, m = get_loss("swarmrl.rl.losses:pg_loss")(torch.tensor([[-1.0], [-2.0], [-4.0]]), torch.zeros(3, 1),
                                                  adv[:, None], torch.full((3, 1), 1 / 3))
    # -(1 * -1 + -1 * -2 + 0) / 3 = -1/3 (up to the 1e-6 in the std)
    assert float(loss) == pytest.approx(-1 / 3, abs=1e-5)
    assert float(m["clip_frac"]) == 0.0


@pytest.mark.parametrize("registry, builtins", [
    (ADVANTAGES, ["collective", "grpo", "per_role", "rloo"]),
    (LOSSES, ["pg", "ppo_clip"]),
    (AGGREGATIONS, ["role_balanced", "seq_mean", "token_mean"]),
])
def test_unknown_name_lists_the_registered_ones(registry, builtins):
    with pytest.raises(PluginError) as e:
        registry.get("nope")
    msg = str(e.value)
    assert f"unknown {registry.kind} 'nope'" in msg
    assert all(name in msg for name in builtins)
    assert "package.module:Name" in msg


def test_unknown_aggregation_through_sequence_weights():
    with pytest.raises(PluginError, match="unknown loss aggregation 'nope'.*role_balanced"):
        sequence_weights(torch.tensor([1]), torch.tensor([0]), "nope")


def test_a_duplicate_name_is_an_error_and_keeps_the_first():
    def other(*args, **kwargs):
        raise AssertionError("never called")

    with pytest.raises(PluginError, match="two advantage estimators registered as 'collective'"):
        register_advantage("collective")(other)
    with pytest.raises(PluginError, match="registered as 'pg'"):
        register_loss("pg")(other)
    with pytest.raises(PluginError, match="registered as 'seq_mean'"):
        AGGREGATIONS.register("seq_mean")(other)
    assert get_advantage("collective") is collective_advantage and get_loss("pg") is pg_loss
    assert AGGREGATIONS.get("seq_mean") is seq_mean


def test_a_spec_naming_a_missing_function_is_a_plugin_error(plugin):
    with pytest.raises(PluginError, match="has no 'nothing_here'"):
        get_loss(f"{plugin}:nothing_here")
