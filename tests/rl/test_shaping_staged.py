"""PARL-style staged rewards (rl/shaping.py): the terms on a hand-built rollout and the
coefficients' annealing schedules, with hand-computed numbers."""

from __future__ import annotations

import pytest

from swarmrl.config import ConfigError, ShapingConfig, load_config
from swarmrl.rl.shaping import anneal, shaped_scores, staged_scores, staged_terms
from team_timeline import team_rollout


def test_anneal_is_linear_to_zero():
    assert [anneal(0.2, 10, 20, s) for s in (0, 10, 12, 15, 20, 30)] == pytest.approx([0.2, 0.2, 0.16, 0.1, 0.0, 0.0])
    assert [anneal(0.2, 0, 0, s) for s in (0, 100)] == [0.2, 0.2]  # end 0: never annealed
    assert anneal(0.2, 0, 4, 1) == pytest.approx(0.15)


def test_staged_terms_by_hand():
    inst, fin = staged_terms([team_rollout()])
    # e1, e2, e3 hired at t = 1 (after the start, before the 5 s deadline), cap 4: 3 / 4.
    # e1 and e2 took work and submitted all of it; e3 still holds C: 2 / 3 finished.
    assert inst.tolist() == [0.75]
    assert fin.tolist() == pytest.approx([2 / 3])


def test_staged_scores_follow_their_schedules():
    cfg = ShapingConfig(instantiation_coef=0.2, instantiation_anneal_start=10, instantiation_anneal_end=20,
                        finish_coef=0.1)
    r = [team_rollout()]
    assert r[0].score == 1.0
    for step, l1 in ((5, 0.2), (15, 0.1), (25, 0.0)):
        scores, m = staged_scores(cfg, r, step)
        assert scores.tolist() == pytest.approx([1.0 + l1 * 0.75 + 0.1 * 2 / 3])
        assert m["shaping/instantiation_coef"] == pytest.approx(l1) and m["shaping/finish_coef"] == 0.1
        assert m["shaping/instantiation_mean"] == 0.75 and m["shaping/finish_mean"] == pytest.approx(2 / 3)
        assert m["shaping/instantiation_bonus"] == pytest.approx(l1 * 0.75)
        assert m["shaping/finish_bonus"] == pytest.approx(0.1 * 2 / 3)


def test_staged_terms_off_leave_the_scores_and_metrics_alone():
    scores, m = staged_scores(ShapingConfig(), [team_rollout()], 3)
    assert m == {} and scores.tolist() == shaped_scores(ShapingConfig(), [team_rollout()]).tolist()


def test_a_solo_rollout_earns_no_staged_reward():
    r = team_rollout()
    r.agents = {"ceo": r.agents["ceo"]}
    inst, fin = staged_terms([r])
    assert inst.tolist() == [0.0] and fin.tolist() == [0.0]


@pytest.mark.parametrize("override, match", [
    (["shaping.finish_anneal_start=10", "shaping.finish_anneal_end=5"], "ends before it starts"),
    (["shaping.instantiation_anneal_start=3", "shaping.instantiation_anneal_end=3"], "ends before it starts"),
    (["shaping.instantiation_coef=-0.1"], "shaping.instantiation_coef"),
    (["shaping.finish_coef=0.1", "workflow.name=voting"], "spawns none"),
])
def test_bad_staged_settings_fail_at_load(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(None, override)
