"""Chunked learner log-probs (rl.logprob_chunk_tokens) equal the full-logits ones.

`token_logprobs(..., chunk_tokens=c)` runs the model body once and the output head, log-softmax,
gather and entropy over c (row, position) pairs at a time under activation checkpointing; the
log-probs, entropies and gradients must match the unchunked path up to float rounding, with
padding, under temperature, and through a PEFT LoRA wrapper (policy.sharing = isolated).
"""

from __future__ import annotations

import pytest
import torch

from swarmrl.config import ModelConfig, RLConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import PolicySet
from swarmrl.rl.batch import TrainSeq, pad, token_logprobs

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
RTOL = 1e-6
LENGTHS = [13, 9, 5]  # pad() right-pads to T = 13, so B (T-1) = 36 positions


def make_policy():
    pol = build_tiny_policy(TINY)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in pol.model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)  # spread-out logits: the entropy and gradients are not trivial
    return pol


def batch(policy, left: bool = False):
    """ids, attn, mask [B, T]: pad()'s right padding, or the same rows padded on the left."""
    gen = torch.Generator().manual_seed(1)
    vocab = policy.model.config.vocab_size
    seqs = []
    for n in LENGTHS:
        ids = torch.randint(0, vocab, (n,), generator=gen).tolist()
        seqs.append(TrainSeq(ids, [0, 0] + [1] * (n - 2), [0.0] * n, 1.0, "expert", 0))
    t = pad(seqs, policy.pad_id)
    ids, attn, mask = t["ids"], t["attn"], t["mask"]
    if left:
        for row, n in enumerate(LENGTHS):
            ids[row] = torch.roll(ids[row], ids.shape[1] - n)
            attn[row] = torch.roll(attn[row], ids.shape[1] - n)
            mask[row] = torch.roll(mask[row], ids.shape[1] - n)
    return ids, attn, mask


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative difference in norm (elementwise relative is meaningless where b ~ 0)."""
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def run(model, params, ids, attn, mask, chunk, temperature=1.0):
    """(log-probs, entropy, gradients of -(logp * mask).sum() w.r.t. params)."""
    for p in params:
        p.grad = None
    logp, ent = token_logprobs(model, ids, attn, temperature=temperature, chunk_tokens=chunk)
    (-(logp * mask).sum()).backward()
    return logp.detach(), ent, [p.grad.clone() for p in params]


def assert_same(model, params, ids, attn, mask, chunks, temperature=1.0):
    want_lp, want_ent, want_g = run(model, params, ids, attn, mask, 0, temperature)
    assert want_ent is not None and all(g.abs().sum() > 0 for g in want_g)
    for chunk in chunks:
        lp, ent, grads = run(model, params, ids, attn, mask, chunk, temperature)
        assert lp.shape == want_lp.shape and ent.shape == want_ent.shape
        assert rel(lp, want_lp) <= RTOL, chunk
        assert torch.allclose(lp, want_lp, rtol=RTOL, atol=1e-6), chunk
        assert rel(ent, want_ent) <= RTOL, chunk
        assert lp[:, 0].abs().sum() == 0 and ent[:, 0].abs().sum() == 0
        for g, w in zip(grads, want_g):
            assert rel(g, w) <= RTOL, chunk


# 36 positions: chunks that divide it (4, 12, 36), that do not (5, 7, 100), and of one pair
CHUNKS = [1, 4, 5, 7, 12, 36, 100]


@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_chunked_equals_full_logits(left):
    policy = make_policy()
    model = policy.model.train()
    ids, attn, mask = batch(policy, left)
    assert_same(model, list(model.parameters()), ids, attn, mask, CHUNKS)


def test_chunked_equals_full_logits_under_temperature():
    policy = make_policy()
    model = policy.model.train()
    ids, attn, mask = batch(policy)
    assert_same(model, list(model.parameters()), ids, attn, mask, [5, 12], temperature=0.7)


def test_chunked_equals_full_logits_under_lora():
    """Isolated sharing: the active adapter trains, and the reference (adapters disabled) agrees."""
    policy = make_policy()
    ps = PolicySet(policy, "isolated", ["ceo", "expert"])
    torch.manual_seed(2)
    with torch.no_grad():
        for n, p in ps.policies["ceo"].model.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.3)  # B starts at zero: make each adapter change the logits
    ids, attn, mask = batch(policy)
    for slot in ps.slots:
        with ps.model_for(slot) as model:
            model.train()
            assert_same(model, ps.parameters(slot), ids, attn, mask, [5, 12])
            on = token_logprobs(model, ids, attn, with_entropy=False, chunk_tokens=5)[0].detach()
        with torch.no_grad(), ps.reference(slot) as ref_model:
            full, _ = token_logprobs(ref_model, ids, attn, with_entropy=False)
            chunked, _ = token_logprobs(ref_model, ids, attn, with_entropy=False, chunk_tokens=5)
        assert rel(chunked, full) <= RTOL
        assert rel(on, full) > 1e-3  # the adapter is on in model_for and off in reference


def test_no_full_logits_are_kept_for_the_backward():
    """Autograd keeps the hidden states, never a [B, T-1, V] tensor, in the chunked path."""
    policy = make_policy()
    model = policy.model.train()
    ids, attn, _ = batch(policy)
    vocab = model.config.vocab_size
    saved = []

    def pack(x):
        saved.append(tuple(x.shape))
        return x

    for chunk, expect_full in [(0, True), (5, False)]:
        saved.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            token_logprobs(model, ids, attn, chunk_tokens=chunk)
        big = [s for s in saved if s and s[-1] == vocab and len(s) >= 2 and s[-2] > 5]
        assert bool(big) == expect_full, (chunk, big)


def test_setting_defaults_to_off_and_rejects_negative():
    assert RLConfig().logprob_chunk_tokens == 0
    policy = make_policy()
    ids, attn, _ = batch(policy)
    with pytest.raises(ValueError, match="chunk_tokens"):
        token_logprobs(policy.model, ids, attn, chunk_tokens=-1)


@pytest.mark.parametrize("left", [False, True], ids=["right_pad", "left_pad"])
def test_keep_runs_the_head_on_the_kept_positions_only(left, monkeypatch):
    """`keep` = the loss's mask: the kept positions equal the full path, the others are 0, the
    gradient is the same, and the head sees only the kept rows."""
    policy = make_policy()
    model = policy.model.train()
    params = list(model.parameters())
    ids, attn, mask = batch(policy, left)
    want_lp, want_ent, want_g = run(model, params, ids, attn, mask, 0)
    head = model.get_output_embeddings()
    seen = []
    head.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[0]))
    for p in params:
        p.grad = None
    lp, ent = token_logprobs(model, ids, attn, chunk_tokens=5, keep=mask)
    (-(lp * mask).sum()).backward()
    on = mask.bool()
    torch.testing.assert_close(lp[on], want_lp[on], rtol=RTOL, atol=1e-6)
    torch.testing.assert_close(ent[on], want_ent[on], rtol=RTOL, atol=1e-6)
    assert lp[~on].abs().sum() == 0 and ent[~on].abs().sum() == 0
    for p, w in zip(params, want_g):
        assert rel(p.grad, w) <= RTOL
    # forward chunks and their recomputation in the backward: each kept row twice, nothing else
    assert sum(seen) == 2 * int(mask[:, 1:].sum()) < 2 * mask[:, 1:].numel()


def test_a_real_vocabulary_with_full_logits_gets_a_hint():
    from swarmrl.rl.batch import chunking_hint
    hint = chunking_hint(151936, 0)
    assert "rl.logprob_chunk_tokens=1024" in hint and "151,936-token" in hint and "0.6 GB per 1,024 tokens" in hint
    assert chunking_hint(151936, 1024) is None and chunking_hint(284, 0) is None


def test_keep_with_nothing_kept_gives_zeros_that_backpropagate():
    policy = make_policy()
    model = policy.model.train()
    ids, attn, mask = batch(policy)
    lp, ent = token_logprobs(model, ids, attn, chunk_tokens=5, keep=torch.zeros_like(mask))
    assert lp.abs().sum() == 0 and ent.abs().sum() == 0 and lp.requires_grad
    (lp * mask).sum().backward()  # a loss over nothing: zero gradient, no error
