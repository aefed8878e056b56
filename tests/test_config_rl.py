"""Value checks of the GRPO-family options and the contribution estimator (config_checks.py)."""

from __future__ import annotations

import pytest

from swarmrl.config import ConfigError, load_config


def test_defaults_leave_the_menu_off():
    rl = load_config(None, []).rl
    assert (rl.clip_eps_high, rl.dual_clip, rl.scale_rewards, rl.drop_zero_spread_groups) == (0.0, 0.0, "group", False)


@pytest.mark.parametrize("override, match", [
    (["rl.clip_eps=0.2", "rl.clip_eps_high=0.1"], "out of order"),
    (["rl.dual_clip=0.5"], "rl.dual_clip must be 0"),
    (["rl.dual_clip=1"], "rl.dual_clip must be 0"),
    (["rl.contribution_coef=1.5"], "rl.contribution_coef must be in"),
    (["rl.max_pad_fraction=1.5"], "rl.max_pad_fraction must be in"),
    (["rl.max_pad_fraction=-0.1"], "rl.max_pad_fraction must be in"),
    (["rl.scale_rewards=batch", "rl.advantage=rloo"], "rl.scale_rewards=batch applies"),
    (["rl.scale_rewards=bogus"], "scale_rewards"),
    (["rl.advantage=contribution", "workflow.name=single"], "per-agent contributions"),
    (["rl.advantage=leave_one_out", "workflow.name=single"], "per-agent contributions"),
    (["rl.multiplicity_lr_scaled=true", "policy.sharing=shared"], "one optimizer for every role"),
])
def test_bad_menu_settings_fail_at_load(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(None, override)


@pytest.mark.parametrize("override", [
    ["rl.clip_eps_high=0.28"], ["rl.dual_clip=3"], ["rl.scale_rewards=none", "rl.advantage=grpo"],
    ["rl.scale_rewards=batch"], ["rl.advantage=contribution", "rl.contribution_coef=1"],
    ["rl.drop_zero_spread_groups=true"], ["rl.scale_rewards=none", "rl.advantage=my.py:fn"],
    ["rl.multiplicity_lr_scaled=true", "policy.sharing=isolated", "workflow.name=voting"],
])
def test_good_menu_settings_load(override):
    load_config(None, override)
