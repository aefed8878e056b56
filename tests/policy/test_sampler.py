"""HFSampler: behaviour log-probs are the model's log-probs of the sampled tokens (left padding)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from swarmrl.config import ModelConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sampler import HFSampler
from swarmrl.rl.batch import token_logprobs

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)


@pytest.fixture(scope="module")
def policy():
    pol = build_tiny_policy(TINY)
    # A freshly initialised model is almost uniform, so a log-prob taken at the wrong
    # position would still look right; larger weights make every position distinct.
    torch.manual_seed(0)
    with torch.no_grad():
        for p in pol.model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    pol.model.eval()
    return pol


def prompts_of_lengths(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 250, (n,), generator=g).tolist() for n in lengths]


def recomputed(policy, prompt, gen):
    ids = torch.tensor([prompt + gen])  # [1, P+G]
    with torch.no_grad():
        logp, _ = token_logprobs(policy.model, ids, torch.ones_like(ids), with_entropy=False)
    return logp[0, len(prompt):]  # [G]


def test_behaviour_logprobs_match_recomputation_for_prompts_of_different_lengths(policy):
    prompts = prompts_of_lengths([3, 17, 1, 40, 9])
    out = HFSampler(policy).generate(prompts, max_new_tokens=10, seed=7)
    assert len(out) == len(prompts)
    for prompt, s in zip(prompts, out):
        assert 1 <= len(s.ids) <= 10 and len(s.logprobs) == len(s.ids)
        assert policy.pad_id not in s.ids
        got = torch.tensor(s.logprobs)
        want = recomputed(policy, prompt, s.ids)
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
        assert (got < 0).all()
    # the check has teeth: shifted by one position it fails
    s, prompt = out[1], prompts[1]
    assert not torch.allclose(torch.tensor(s.logprobs[1:]), recomputed(policy, prompt, s.ids)[:-1], atol=1e-2)


def test_sampling_is_reproducible_per_seed_and_order_independent(policy):
    prompts = prompts_of_lengths([5, 12, 2])
    sampler = HFSampler(policy)
    a = sampler.generate(prompts, 8, seed=3)
    b = sampler.generate(prompts, 8, seed=3)
    assert [s.ids for s in a] == [s.ids for s in b]
    assert [s.logprobs for s in a] == [s.logprobs for s in b]
    c = sampler.generate(prompts, 8, seed=4)
    assert [s.ids for s in a] != [s.ids for s in c]


def test_chunking_keeps_log_probs_exact(policy):
    prompts = prompts_of_lengths([4, 30, 11, 2, 19])
    out = HFSampler(policy, max_batch_sequences=2).generate(prompts, 6, seed=1)
    for prompt, s in zip(prompts, out):
        assert torch.allclose(torch.tensor(s.logprobs), recomputed(policy, prompt, s.ids), atol=1e-4)


def test_turn_stops_at_the_end_token_and_hit_cap_otherwise(policy):
    prompts = prompts_of_lengths([6, 13])
    greedy = HFSampler(policy).generate(prompts, 8, seed=0, greedy=True)
    assert all(s.hit_cap and len(s.ids) == 8 for s in greedy)  # the end token never came
    # Pretend a later greedy token of prompt 0 (its first new one) ends a turn: generation
    # must stop right after it.
    ids0 = greedy[0].ids
    j = next(j for j in range(1, len(ids0)) if ids0[j] not in ids0[:j])
    stop = ids0[j]
    pol = dataclasses.replace(policy, stop_id=stop)
    out = HFSampler(pol).generate(prompts, 8, seed=0, greedy=True)
    assert out[0].ids == ids0[:j + 1]
    assert out[0].hit_cap is False
    assert len(out[0].logprobs) == j + 1
    other = greedy[1].ids
    expect = other[:other.index(stop) + 1] if stop in other else other
    assert out[1].ids == expect
    assert out[1].hit_cap == (stop not in other)


def test_greedy_picks_the_argmax(policy):
    (prompt,) = prompts_of_lengths([9])
    (s,) = HFSampler(policy).generate([prompt], 5, seed=0, greedy=True)
    ids = torch.tensor([prompt])
    with torch.no_grad():
        for tok in s.ids:
            nxt = int(policy.model(input_ids=ids).logits[0, -1].argmax())
            assert tok == nxt
            ids = torch.cat([ids, torch.tensor([[tok]])], dim=1)


def test_dropping_finished_rows_keeps_the_others_exact(policy):
    """Rows that end early leave the batch and the KV cache; the rest must decode exactly as
    if each prompt were alone (greedy, so the comparison is token for token)."""
    prompts = prompts_of_lengths([6, 13, 3, 21], seed=5)
    alone = [HFSampler(policy).generate([x], 10, seed=0, greedy=True)[0].ids for x in prompts]
    # End token = the 3rd greedy token of prompt 0, so that row (and any other emitting it) drops out early.
    stop = alone[0][2]
    pol = dataclasses.replace(policy, stop_id=stop)
    batched = HFSampler(pol).generate(prompts, 10, seed=0, greedy=True)
    dropped = 0
    for ids, s in zip(alone, batched):
        want = ids[:ids.index(stop) + 1] if stop in ids else ids
        dropped += stop in ids
        assert s.ids == want
    assert 1 <= dropped < len(prompts)  # the check exercised a partial drop
    for prompt, s in zip(prompts, batched):  # log-probs stay exact after the cache was pruned
        assert torch.allclose(torch.tensor(s.logprobs), recomputed(pol, prompt, s.ids), atol=1e-4)


def test_temperature_must_be_positive(policy):
    with pytest.raises(ValueError, match="temperature"):
        HFSampler(policy, temperature=0.0)
