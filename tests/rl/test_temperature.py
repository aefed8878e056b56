"""Temperature: the sampler, the learner, the reference and the entropy all use
softmax(logits / T), so the PPO ratio of freshly sampled tokens is 1 at any T.

The tiny model gets large random weights (as in tests/policy/test_sampler.py) so that its
distributions are far from uniform: at T = 0.7 the learner's log-probs at T = 1 would then
differ from the sampler's by far more than the tolerance (each test checks that too).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from swarmrl.config import ModelConfig, RLConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sampler import HFSampler
from swarmrl.policy.sharing import PolicySet
from swarmrl.rl.batch import TrainSeq, token_logprobs
from swarmrl.rl.losses import get_loss
from swarmrl.rl.update import Updater

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
T = 0.7
TOL = 1e-5  # |log ratio| <= 1e-5, i.e. ratio = 1 +- 1e-5


def make_policy():
    pol = build_tiny_policy(TINY)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in pol.model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    pol.model.eval()
    return pol


@pytest.fixture(scope="module")
def policy():
    return make_policy()


def prompts_of_lengths(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 250, (n,), generator=g).tolist() for n in lengths]


def learner_logp(policy, prompt, gen, temperature):
    """The learner's log-probs of `gen` after `prompt` (one unpadded row).  -> [G]"""
    ids = torch.tensor([prompt + gen])  # [1, P+G]
    with torch.no_grad():
        logp, _ = token_logprobs(policy.model, ids, torch.ones_like(ids), with_entropy=False, temperature=temperature)
    return logp[0, len(prompt):]  # [G]


def assert_on_policy(policy, prompt, gen, stored):
    got = torch.tensor(stored)  # [G]
    assert (learner_logp(policy, prompt, gen, T) - got).abs().max().item() <= TOL
    # the check has teeth: the learner at T = 1 is far off
    assert (learner_logp(policy, prompt, gen, 1.0) - got).abs().max().item() > 1e-2


def test_batch_generate_logprobs_equal_the_learners_at_the_same_temperature(policy):
    prompts = prompts_of_lengths([3, 17, 1, 40, 9])
    out = HFSampler(policy, temperature=T).generate(prompts, 10, seed=7, row_seeds=[11, 12, 13, 14, 15])
    for prompt, s in zip(prompts, out):
        assert_on_policy(policy, prompt, s.ids, s.logprobs)


def test_stream_with_prefix_reuse_logprobs_equal_the_learners(policy):
    """Two turns per agent, sampled; the second runs only its new tokens on the saved KV cache.
    The learner sees each agent's whole context at once, as in training."""
    p1, p2 = prompts_of_lengths([11, 4], seed=9)
    obs = {"a": [7, 8, 9], "b": [10, 11, 12, 13, 14]}
    stream = HFSampler(policy, temperature=T).stream(6)
    stream.add("a1", p1, row_seed=1, key="a")
    stream.add("b1", p2, row_seed=2, key="b")
    first = drain(stream)
    ctx = {"a": p1 + first["a1"].ids + obs["a"], "b": p2 + first["b1"].ids + obs["b"]}
    ran = []
    orig = stream._prefill_part
    stream._prefill_part = lambda part: ran.append([len(x) for _, x, _ in part]) or orig(part)
    stream.add("a2", ctx["a"], row_seed=3, key="a")
    stream.add("b2", ctx["b"], row_seed=4, key="b")
    second = drain(stream)
    assert sorted(n for part in ran for n in part) == [1 + 3, 1 + 5]  # the saved prefixes were used
    for k, prompt in (("a", p1), ("b", p2)):
        full = ctx[k] + second[f"{k}2"].ids
        ids = torch.tensor([full])
        with torch.no_grad():
            logp, _ = token_logprobs(policy.model, ids, torch.ones_like(ids), with_entropy=False, temperature=T)
        n1, n2 = len(first[f"{k}1"].ids), len(second[f"{k}2"].ids)
        got = torch.tensor(first[f"{k}1"].logprobs + second[f"{k}2"].logprobs)
        want = torch.cat([logp[0, len(prompt):len(prompt) + n1], logp[0, len(full) - n2:]])
        assert (want - got).abs().max().item() <= TOL


def test_greedy_stores_the_logprobs_of_the_tempered_policy(policy):
    prompts = prompts_of_lengths([6, 13], seed=2)
    greedy = HFSampler(policy, temperature=T).generate(prompts, 8, seed=0, greedy=True)
    plain = HFSampler(policy, temperature=1.0).generate(prompts, 8, seed=0, greedy=True)
    for prompt, g, p in zip(prompts, greedy, plain):
        assert g.ids == p.ids  # the argmax does not depend on T
        assert_on_policy(policy, prompt, g.ids, g.logprobs)


def drain(stream):
    out = {}
    while stream.busy():
        out.update(stream.step())
    return out


def sampled_seqs(policy, n_gen=8):
    """Training sequences of sampled turns, behaviour log-probs from the sampler at T."""
    prompts = prompts_of_lengths([5, 9, 14, 3], seed=4)
    out = HFSampler(policy, temperature=T).generate(prompts, n_gen, seed=3, row_seeds=[1, 2, 3, 4])
    return [TrainSeq(ids=p + s.ids, gen_mask=[0] * len(p) + [1] * len(s.ids), old_logp=[0.0] * len(p) + s.logprobs,
                     advantage=a, role=r, rollout=0)
            for p, s, a, r in zip(prompts, out, [1.0, -1.0, 0.5, -0.5], ["gen", "gen", "agg", "agg"])]


def run_update(policy, seqs, temperature, **rl):
    cfg = dataclasses.replace(RLConfig(), loss="ppo_clip", lr=0.0, weight_decay=0.0, **rl)
    ps = PolicySet(policy, "shared", ["gen", "agg"], temperature=T)
    return Updater(cfg, ps, get_loss("ppo_clip"), policy.pad_id, seed=0, temperature=temperature).update(
        seqs, step=0, measure_roles=False)


def test_updater_ratio_is_one_on_freshly_sampled_tokens():
    policy = make_policy()
    seqs = sampled_seqs(policy)
    out = run_update(policy, seqs, T)
    assert out["ratio_mean"] == pytest.approx(1.0, abs=TOL)
    assert out["clip_frac"] == 0.0 and out["approx_kl"] == pytest.approx(0.0, abs=TOL)
    for role in ("gen", "agg"):
        assert out[f"role/{role}/ratio_mean"] == pytest.approx(1.0, abs=TOL)
    wrong = run_update(policy, seqs, 1.0)  # the learner at T = 1 against behaviour at T = 0.7
    assert abs(wrong["ratio_mean"] - 1.0) > 1e-2


def test_entropy_metric_is_the_entropy_of_the_sampled_distribution():
    policy = make_policy()
    seqs = sampled_seqs(policy)
    want_sum, n = 0.0, 0
    for s in seqs:
        ids = torch.tensor([s.ids])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits[0, :-1].float() / T  # [L-1, V]
        p = torch.softmax(logits, -1)
        ent = -(p * torch.log(p)).sum(-1)  # [L-1] entropy of the distribution of token t+1
        gen = torch.tensor(s.gen_mask[1:], dtype=torch.bool)
        want_sum, n = want_sum + float(ent[gen].sum()), n + int(gen.sum())
    out = run_update(policy, seqs, T)
    assert out["entropy"] == pytest.approx(want_sum / n, rel=1e-5)
    assert abs(run_update(policy, seqs, 1.0)["entropy"] - want_sum / n) > 1e-2


def test_reference_logprobs_use_the_same_temperature():
    """With lr 0 the reference (the initial weights) is the policy itself, so the k3 KL term is 0
    and adding it leaves the loss unchanged; a reference at T = 1 would add a positive KL."""
    policy = make_policy()
    seqs = sampled_seqs(policy)
    plain = run_update(policy, seqs, T)["loss"]
    with_kl = run_update(policy, seqs, T, kl_coef=1.0)["loss"]
    assert with_kl == pytest.approx(plain, abs=1e-6)


def test_token_logprobs_by_hand():
    """log_softmax(logits / T) picked at the next token, on a model that returns fixed logits."""
    class Fixed(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            logits = torch.tensor([[[2.0, 0.0, -1.0], [0.0, 1.0, 0.0], [9.0, 9.0, 9.0]]])  # [1, 3, V=3]
            return type("Out", (), {"logits": logits})()

    ids = torch.tensor([[0, 0, 1]])
    logp, ent = token_logprobs(Fixed(), ids, torch.ones_like(ids), temperature=0.5)
    # position 1: token 0 after logits (2, 0, -1) / 0.5 = (4, 0, -2)
    z1 = math.log(math.exp(4) + 1 + math.exp(-2))
    # position 2: token 1 after (0, 2, 0)
    z2 = math.log(2 + math.exp(2))
    assert logp[0].tolist() == pytest.approx([0.0, 4 - z1, 2 - z2], abs=1e-6)
    p1 = [math.exp(4 - z1), math.exp(-z1), math.exp(-2 - z1)]
    assert ent[0, 1].item() == pytest.approx(-sum(q * math.log(q) for q in p1), abs=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(Fixed(), ids, torch.ones_like(ids), temperature=0.0)
