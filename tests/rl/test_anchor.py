"""rl/anchor.py: scripted solo demonstrations in the update (rl.demo_anchor_coef)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from swarmrl.config import ConfigError, load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.rl.anchor import FIRST_INDEX, current_logprobs, opening
from swarmrl.rl.batch import TrainSeq
from swarmrl.rl.losses import ppo_clip_loss
from swarmrl.rl.trainer import Trainer

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"


def _trainer(*overrides: str) -> Trainer:
    cfg = load_config(TINY, ["rl.demo_anchor_coef=0.5", "rl.demo_anchor_sequences=3", *overrides])
    return Trainer(cfg, build_tiny_policy(cfg.model))


def test_the_demonstrations_are_complete_solo_runs_of_their_step():
    tr = _trainer()
    try:
        cap = tr.runtime.limits.max_turns_per_agent
        seqs = tr.anchor.demonstrations(5)
        assert tr.runtime.limits.max_turns_per_agent == cap  # the lifted turn cap is put back
        assert len(seqs) == 3 and {s.role for s in seqs} == {"ceo"}  # one agent each: alone
        assert [s.rollout for s in seqs] == [FIRST_INDEX, FIRST_INDEX + 1, FIRST_INDEX + 2]
        text = tr.policy.tokenizer.decode(seqs[0].ids)
        items = tr.cfg.task.items_per_problem
        assert "alone" in text and text.count("<submit") == items  # every item, though the cap is 4 turns
        again, other = tr.anchor.demonstrations(5), tr.anchor.demonstrations(6)
        assert [s.ids for s in again] == [s.ids for s in seqs]  # a function of (seed, step)
        assert [s.ids for s in other] != [s.ids for s in seqs]
    finally:
        tr.close()


def test_their_behaviour_logprobs_are_the_policy_s_own():
    tr = _trainer()
    try:
        got = tr.anchor.sequences(0, tr.policy.model, tr.policies.trains)
        assert all(s.advantage == 0.5 and s.kl_scale == 0.0 for s in got)
        model = tr.policy.model
        for s in got:  # by hand: log_softmax of the logits, the next token gathered
            ids = torch.tensor([s.ids])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, :-1].float()  # [T-1, V]
            want = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]  # [T-1]
            assert s.old_logp[0] == 0.0
            assert torch.allclose(torch.tensor(s.old_logp[1:]), want, atol=1e-5)
        assert tr.anchor.sequences(0, model, lambda role: False) == []  # a frozen role's demos are left out
    finally:
        tr.close()


def test_at_ratio_one_the_loss_is_the_coefficient_times_the_log_likelihood():
    # The claim the module rests on: with old = logp (detached) and A = c, the PPO gradient is
    # c times the gradient of sum(w * logp), a supervised term.
    torch.manual_seed(0)
    logp = torch.randn(2, 5, requires_grad=True)
    w = torch.rand(2, 5)
    c = 0.7
    loss, m = ppo_clip_loss(logp, logp.detach(), torch.full((2, 5), c), w)
    (g,) = torch.autograd.grad(loss, logp)
    assert torch.allclose(g, -c * w)  # d/dlogp of -c * sum(w * logp)
    assert float(m["clip_frac"]) == 0.0


@pytest.mark.parametrize("extra", [[], ["rl.demo_anchor_opening_coef=2"]])
def test_a_step_trains_on_them_and_the_ratio_stays_one(extra):
    tr = _trainer(*extra)
    try:
        before = [p.detach().clone() for p in tr.policy.model.parameters()]
        metrics, _ = tr.step()
        assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-5) and metrics["clip_frac"] == 0.0
        assert any(not torch.equal(a, p) for a, p in zip(before, tr.policy.model.parameters()))
    finally:
        tr.close()


def test_opening_cuts_after_the_first_run_of_generated_tokens():
    seq = TrainSeq([1, 2, 3, 4, 5, 6, 7], [0, 0, 1, 1, 0, 1, 1], [0.0, -1, -2, -3, -4, -5, -6], 0.5, "ceo", 9)
    cut = opening(seq)
    assert (cut.ids, cut.gen_mask, cut.old_logp) == ([1, 2, 3, 4], [0, 0, 1, 1], [0.0, -1, -2, -3])
    assert (cut.role, cut.rollout, cut.advantage) == ("ceo", 9, 0.5)
    whole = TrainSeq([1, 2, 3], [0, 1, 1], [0.0, -1, -2], 0.5, "ceo", 9)  # one reply: the whole sequence
    assert opening(whole).ids == [1, 2, 3]


def test_the_opening_copies_train_the_first_reply_at_their_own_coefficient():
    tr = _trainer("rl.demo_anchor_opening_coef=1.5")
    try:
        got = tr.anchor.sequences(0, tr.policy.model, tr.policies.trains)
        full, cut = got[:3], got[3:]
        assert [s.advantage for s in got] == [0.5] * 3 + [1.5] * 3
        for f, c in zip(full, cut):
            n = len(c.ids)
            first_obs = f.gen_mask.index(0, f.gen_mask.index(1))  # the first prompt token after the reply
            assert n == first_obs and c.ids == f.ids[:n] and c.old_logp == f.old_logp[:n] and c.kl_scale == 0.0
            assert tr.policy.tokenizer.decode(c.ids[-1:]) == tr.policy.tokenizer.decode([tr.policy.end_id])
        # log-probs of the cut copy, computed afresh on the cut ids, are the full one's (causal model)
        again = current_logprobs(tr.policy.model, cut, tr.policy.pad_id, 1.0, "no")
        assert all(torch.allclose(torch.tensor(a), torch.tensor(c.old_logp), atol=1e-5) for a, c in zip(again, cut))
        plain = _trainer()
        try:
            assert len(plain.anchor.sequences(0, plain.policy.model, plain.policies.trains)) == 3  # off by default
        finally:
            plain.close()
    finally:
        tr.close()


def test_off_by_default_and_nothing_is_drawn():
    cfg = load_config(TINY, [])
    tr = Trainer(cfg, build_tiny_policy(cfg.model))
    try:
        assert cfg.rl.demo_anchor_coef == 0.0 and tr.anchor.sequences(0, tr.policy.model) == []
    finally:
        tr.close()


def test_current_logprobs_of_nothing():
    assert current_logprobs(torch.nn.Identity(), [], 0, 1.0, "no") == []


@pytest.mark.parametrize("overrides, msg", [
    (["rl.demo_anchor_coef=-1"], "rl.demo_anchor_coef must be >= 0"),
    (["rl.demo_anchor_coef=1", "rl.demo_anchor_sequences=0"], "rl.demo_anchor_sequences must be >= 1"),
    (["rl.demo_anchor_opening_coef=-0.5"], "rl.demo_anchor_opening_coef must be >= 0"),
])
def test_bad_settings_are_refused_when_the_config_loads(overrides, msg):
    with pytest.raises(ConfigError, match=msg):
        load_config(TINY, overrides)


@pytest.mark.parametrize("overrides, msg", [
    (["workflow.name=voting"], "needs a task with scripted solo demonstrations and a workflow that hires"),
    (["policy.sharing=isolated"], "trains the one shared policy"),
])
def test_workflows_without_a_solo_agent_are_refused_before_training(overrides, msg):
    cfg = load_config(TINY, ["rl.demo_anchor_coef=1", *overrides])
    with pytest.raises(ConfigError, match=msg):
        Trainer(cfg, build_tiny_policy(cfg.model))
