"""Shared prompt prefixes in the learner: which sequences share what, how they are batched, and
that the log-probs, entropies, gradients and a whole update equal the plain forward's up to
float rounding."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from swarmrl.config import ModelConfig, RLConfig
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import PolicySet
from swarmrl.rl.batch import TrainSeq, micro_batches, pad, token_logprobs
from swarmrl.rl.losses import get_loss
from swarmrl.rl.prefix import SharedPrefixes, can_share, prefix_clusters, prefix_lengths, shared_logprobs
from swarmrl.rl.update import Updater

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64)


def seq(prompt: list[int], gen: list[int], tail: list[int] = (), role: str = "x", adv: float = 1.0) -> TrainSeq:
    ids = list(prompt) + list(gen) + list(tail)
    return TrainSeq(ids, [0] * len(prompt) + [1] * len(gen) + [0] * len(tail), [0.0] * len(ids), adv, role, 0)


def test_prefix_lengths_cluster_on_the_longest_common_prompt_and_stop_before_the_first_generated_token():
    a = list(range(10, 40))  # 30 prompt tokens
    seqs = [seq(a + [1, 2], [3, 4]),  # limit 31: one before the token whose logit predicts 3
            seq(a + [1, 5], [6]),
            seq(a, [7, 8]),  # limit 29: its own prompt is only 30 long
            seq(list(range(50, 90)), [1]),  # shares nothing
            seq([10, 11, 12], [4])]  # shares 3 tokens with the first three: under the minimum
    assert prefix_lengths(seqs, min_len=16) == [29, 29, 29, 0, 0]
    assert prefix_lengths(seqs[:2], min_len=16) == [31, 31]  # a + [1]
    assert prefix_lengths(seqs[:2], min_len=32) == [0, 0]


def test_prefix_clusters_label_who_shares_with_whom():
    a, b = list(range(10, 40)), list(range(100, 130))
    seqs = [seq(a + [1], [2]), seq(b + [1], [2]), seq(a + [3], [4]), seq([7, 8], [9]), seq(b + [5], [6])]
    labels, shared = prefix_clusters(seqs, min_len=16)
    assert labels[0] == labels[2] and labels[1] == labels[4]  # a-prompts together, b-prompts together
    assert len({labels[0], labels[1], labels[3]}) == 3  # the short one alone
    assert shared == [30, 30, 30, 0, 30] == prefix_lengths(seqs, min_len=16)


def test_micro_batches_pack_by_what_a_shared_prefix_leaves():
    a = list(range(10, 30))
    seqs = [seq(a + [1], [2] * n) for n in (30, 3, 9)] + [seq([7, 8], [1] * 12)]
    cut = prefix_lengths(seqs)
    assert cut == [20, 20, 20, 0]
    left = [len(s.ids) - c for s, c in zip(seqs, cut)]  # 32, 5, 11, 14
    mbs = micro_batches(seqs, micro_batch_tokens=40, lengths=left)
    # by what is left: 5, 11, 14 (3 rows x 14 = 42 cells > 40, so the third starts a new one), 32
    assert [[seqs.index(s) for s in mb] for mb in mbs] == [[1, 2], [3], [0]]
def _batch(n: int = 12, seed: int = 0) -> list[TrainSeq]:
    rng = random.Random(seed)
    problems = [[rng.randrange(10, 200) for _ in range(rng.randrange(20, 40))] for _ in range(3)]
    out = []
    for k in range(n):
        prompt = problems[k % 3] + [rng.randrange(10, 200) for _ in range(rng.randrange(1, 5))]
        gen = [rng.randrange(10, 200) for _ in range(rng.randrange(2, 12))]
        tail = [rng.randrange(10, 200) for _ in range(rng.randrange(0, 6))]
        more = [rng.randrange(10, 200) for _ in range(rng.randrange(0, 5))]  # a second turn
        s = seq(prompt, gen, tail, role="ceo" if k % 4 == 0 else "expert", adv=rng.uniform(-1, 1))
        s.ids += more
        s.gen_mask += [1] * len(more)
        s.old_logp += [-1.0] * len(more)
        out.append(s)
    return out + [seq([3, 4, 5], [6, 7])]  # a row with no shared prefix in the same micro-batch


@pytest.mark.parametrize("chunk", [0, 5])
def test_shared_logprobs_equal_the_plain_forward_on_every_generated_token(chunk):
    torch.manual_seed(0)
    policy = build_tiny_policy(TINY)
    model, seqs = policy.model, _batch()
    cut = prefix_lengths(seqs)
    assert can_share(model) and sum(c > 0 for c in cut) == len(seqs) - 1
    t = pad(seqs, policy.pad_id)
    w = torch.randn(t["mask"].shape) * t["mask"]  # [B, T] a loss that reads generated tokens only
    ref, ref_ent = token_logprobs(model, t["ids"], t["attn"], with_entropy=True)
    (ref * w).sum().backward()
    g_ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    prefixes = SharedPrefixes(model, seqs, cut, policy.pad_id, "cpu", chunk_cells=64)  # 3 prefixes, 1 per chunk
    logp, ent, cells = shared_logprobs(model, seqs, cut, prefixes, policy.pad_id, "cpu", True, chunk_tokens=chunk)
    (logp * w).sum().backward()
    assert all(p.grad is not None for p in prefixes.leaves[0])  # the prefix part waits on the leaves
    prefixes.backward()
    on = t["mask"].bool()
    torch.testing.assert_close(logp[on], ref[on], rtol=0, atol=2e-6)
    torch.testing.assert_close(ent[on], ref_ent[on], rtol=0, atol=2e-5)
    for p, g in zip(model.parameters(), g_ref):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)
    # Three problems' prefixes run once each: far fewer tokens than the whole sequences.
    distinct = {tuple(s.ids[:c]) for s, c in zip(seqs, cut) if c}
    assert len(distinct) == 3 and prefixes.cells["real"] == sum(map(len, distinct))
    assert prefixes.cells["real"] + cells["real"] < 0.6 * sum(len(s.ids) for s in seqs)


def test_an_update_with_shared_prefixes_equals_the_plain_update():
    seqs = _batch(16, seed=1)
    out, params = {}, {}
    for share in (False, True):
        torch.manual_seed(0)
        policy = build_tiny_policy(TINY)
        ps = PolicySet(policy, "shared", ["ceo", "expert"])
        cfg = dataclasses.replace(RLConfig(), loss="ppo_clip", kl_coef=0.1, share_prefixes=share, lr=1e-2)
        upd = Updater(cfg, ps, get_loss("ppo_clip"), policy.pad_id, seed=0)
        out[share] = upd.update(seqs, step=0, measure_roles=True)
        params[share] = [p.detach().clone() for p in policy.model.parameters()]
    for k in ("loss", "ratio_mean", "clip_frac", "entropy", "role/ceo/grad_norm", "role/expert/grad_norm"):
        assert out[True][k] == pytest.approx(out[False][k], rel=1e-4, abs=1e-6), k
    # AdamW's first step is g / (|g| + eps) per weight, so a weight whose gradient is ~eps moves
    # by a rounding-sized fraction of lr differently; bound the gap at 1e-3 lr.
    for a, b in zip(params[True], params[False]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    assert out[True]["learner/pad_fraction"] != out[False]["learner/pad_fraction"]  # other cells were computed
    # Without sharing every token of every sequence runs once; with it the prefixes run once each.
    assert out[False]["learner/tokens_run_fraction"] == 1.0
    assert out[True]["learner/tokens_run_fraction"] < 0.6


def test_gradient_checkpointing_runs_whole_sequences_and_updates_as_without_it():
    # transformers fills no key/value cache under gradient checkpointing in training, so sharing
    # is off there (found on a chat model's recipe, which turns checkpointing on).
    from swarmrl.policy.device import enable_gradient_checkpointing
    seqs = _batch(8, seed=2)
    out, params = {}, {}
    for ckpt in (False, True):
        torch.manual_seed(0)
        policy = build_tiny_policy(TINY)
        if ckpt:
            enable_gradient_checkpointing(policy.model)
        assert can_share(policy.model) is not ckpt
        ps = PolicySet(policy, "shared", ["ceo", "expert"])
        cfg = dataclasses.replace(RLConfig(), loss="ppo_clip", share_prefixes=True, lr=1e-2)
        out[ckpt] = Updater(cfg, ps, get_loss("ppo_clip"), policy.pad_id, seed=0).update(seqs, step=0, measure_roles=True)
        params[ckpt] = [p.detach().clone() for p in policy.model.parameters()]
    assert out[True]["learner/tokens_run_fraction"] == 1.0 and out[False]["learner/tokens_run_fraction"] < 1.0
    assert out[True]["loss"] == pytest.approx(out[False]["loss"], rel=1e-4, abs=1e-6)
    for a, b in zip(params[True], params[False]):  # as in the test above: Adam's first step, 1e-3 lr
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_a_body_that_takes_past_key_values_reads_the_shared_prefixes():
    # transformers before 5.24 names the cache `past_key_values` and swallows an unknown `cache=`
    # into **kwargs: the remainders would then attend to themselves alone, silently.
    from transformers.models.qwen3.modeling_qwen3 import Qwen3Model

    from swarmrl.policy.kvcache import cache_keyword

    class OlderBody(Qwen3Model):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                    use_cache=None, **kwargs):
            kwargs.pop("cache", None)
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                   use_cache=use_cache, **{installed: past_key_values}, **kwargs)

    torch.manual_seed(0)
    policy = build_tiny_policy(TINY)
    model, seqs = policy.model, _batch()
    installed = cache_keyword(model.model)  # this machine's transformers, whichever name it takes
    model.model.__class__ = OlderBody
    assert cache_keyword(model.model) == "past_key_values"
    cut = prefix_lengths(seqs)
    t = pad(seqs, policy.pad_id)
    with torch.no_grad():
        ref, _ = token_logprobs(model, t["ids"], t["attn"], with_entropy=False)
        prefixes = SharedPrefixes(model, seqs, cut, policy.pad_id, "cpu", chunk_cells=64)
        logp, _, _ = shared_logprobs(model, seqs, cut, prefixes, policy.pad_id, "cpu", False)
    on = t["mask"].bool()
    torch.testing.assert_close(logp[on], ref[on], rtol=0, atol=2e-6)


def test_keep_limits_the_remainders_head_to_the_loss_positions():
    torch.manual_seed(0)
    policy = build_tiny_policy(TINY)
    model, seqs = policy.model, _batch()
    cut = prefix_lengths(seqs)
    t = pad(seqs, policy.pad_id)
    w = torch.randn(t["mask"].shape) * t["mask"]  # [B, T]
    out = {}
    for keep in (None, t["mask"]):
        model.zero_grad(set_to_none=True)
        prefixes = SharedPrefixes(model, seqs, cut, policy.pad_id, "cpu", chunk_cells=64)
        logp, ent, _ = shared_logprobs(model, seqs, cut, prefixes, policy.pad_id, "cpu", True, chunk_tokens=5, keep=keep)
        (logp * w).sum().backward()
        prefixes.backward()
        out[keep is None] = (logp.detach(), ent, [p.grad.clone() for p in model.parameters()])
    on = t["mask"].bool()
    (lp, ent, grads), (ref, ref_ent, ref_grads) = out[False], out[True]
    torch.testing.assert_close(lp[on], ref[on], rtol=0, atol=2e-6)
    torch.testing.assert_close(ent[on], ref_ent[on], rtol=0, atol=2e-5)
    assert lp[~on].abs().sum() == 0 and ent[~on].abs().sum() == 0
    assert ref[~on].abs().sum() > 0  # without keep the prompt's remainder positions were computed
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)
