"""Draft tokens (policy/speculative.py, sampler.draft_tokens): the table's guesses by hand; the
verify call's inputs, masks and holes by hand; the draw that keeps a row's drafts only while it
samples them; and a multi-turn stream that samples the same tokens with drafts as without,
while making fewer decode calls."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from swarmrl.config import ConfigError, load_config
from swarmrl.policy import fast_decode
from swarmrl.policy.sampler import HFSampler
from swarmrl.policy.speculative import (MAX_CONTEXT, NgramDrafter, block_mask, corpus_from_tensors, corpus_tensors,
                                        draft_corpus, emit, hide_rejected, row_context, verify_inputs)
from test_architectures import one_thread, prompts_of_lengths, tiny, tokenizer  # noqa: F401  (fixtures)


def test_the_table_follows_the_most_frequent_continuation_of_the_longest_known_context():
    d = NgramDrafter(max_context=3)
    d.observe([1, 2, 3, 9])
    d.observe([1, 2, 3, 9])
    d.observe([5, 2, 3, 7])
    # after (2, 3): 9 twice, 7 once; after (5, 2, 3) only 7 was seen, and the longer context wins
    assert d.draft([0, 2, 3], 1) == [9]
    assert d.draft([5, 2, 3], 1) == [7]
    # a draft continues from its own guesses: (1, 2) -> 3, then (1, 2, 3) -> 9, then (2, 3, 9) -> nothing
    assert d.draft([1, 2], 5) == [3, 9]
    assert d.draft([4], 3) == []  # never seen
    assert d.draft([1, 2], 1) == [3]  # at most k


def test_the_table_starts_afresh_past_its_size():
    d = NgramDrafter(max_context=2, max_entries=3)
    d.observe([1, 2, 3])  # contexts (1,), (2,), (1, 2): 3 entries
    d.observe([4, 5])  # (4,): 4 entries, over the limit at the next observation
    d.observe([6, 7])
    assert d.draft([1], 1) == [] and d.draft([6], 1) == [7]


def test_a_corpus_weighs_like_repeated_observations():
    once, weighed = NgramDrafter(max_context=2), NgramDrafter.from_corpus([([1, 2, 3], 1), ([1, 2, 4], 2)])
    for seq in ([1, 2, 3], [1, 2, 4], [1, 2, 4]):
        once.observe(seq)
    assert weighed.draft([1, 2], 1) == once.draft([1, 2], 1) == [4]


def _agent(ids, gen_mask):
    return SimpleNamespace(ids=ids, gen_mask=gen_mask)


def test_the_corpus_is_every_generated_span_with_the_tokens_before_it_in_rollout_order():
    pre = list(range(100, 100 + MAX_CONTEXT + 2))  # a header longer than the context
    a = _agent(pre + [1, 2] + [50, 51] + [3], [0] * len(pre) + [1, 1, 0, 0, 1])
    b = _agent([7, 1, 2], [0, 1, 1])
    r1 = SimpleNamespace(index=1, agents={"ceo": b})
    r0 = SimpleNamespace(index=0, agents={"ceo": a, "expert-1": b})
    corpus = draft_corpus([r1, r0])  # sorted by rollout index; identical spans merged, first place kept
    ctx = (pre + [1, 2, 50, 51])[-MAX_CONTEXT:]
    assert corpus == [(pre[-MAX_CONTEXT:] + [1, 2], 1), (ctx + [3], 1), ([7, 1, 2], 2)]
    back = corpus_from_tensors(corpus_tensors(corpus))
    assert back == corpus


def test_row_context_is_the_last_tokens_of_prompt_and_reply():
    assert row_context([1, 2, 3, 4], [5, 6], n=3) == [4, 5, 6]
    assert row_context([1, 2], [], n=3) == [1, 2]
    assert row_context([1, 2, 3], [4, 5, 6, 7], n=3) == [5, 6, 7]


def test_verify_inputs_masks_and_holes_by_hand():
    ids, fed = verify_inputs(torch.tensor([10, 20, 30]), [[11, 12], [], [31]], pad_id=0)
    assert ids.tolist() == [[10, 11, 12], [20, 0, 0], [30, 31, 0]]
    assert fed.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    attn = torch.cat([torch.tensor([[1, 1], [0, 1], [1, 1]]), fed], dim=1)  # [3, 2 + 3]
    m = block_mask(attn, 3)  # [3, 1, 3, 5]
    assert m.shape == (3, 1, 3, 5)
    assert m[0, 0].int().tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert m[1, 0].int().tolist() == [[0, 1, 1, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 0, 0]]
    # row 0 emitted 2 tokens (kept draft 11, drew something else after it): draft 12's column is a hole;
    # row 1 fed one column; row 2 kept its draft (2 tokens)
    kept = hide_rejected(attn, 3, [[11, 12], [], [31]], [2, 1, 2])
    assert kept.tolist() == [[1, 1, 1, 1, 0], [0, 1, 1, 0, 0], [1, 1, 1, 1, 0]]


class _Row:
    def __init__(self):
        self.toks, self.lps, self.generator = [], [], None


def _logits(rows):  # [A, Q, V]: a one-hot-ish distribution per position, greedy picks the hot token
    out = torch.full((len(rows), max(len(r) for r in rows), 6), -30.0)
    for a, toks in enumerate(rows):
        for j, t in enumerate(toks):
            out[a, j, t] = 0.0
    return out


def test_a_row_keeps_its_drafts_only_while_it_draws_them():
    rows = [_Row() for _ in range(4)]
    logits = _logits([[1, 2, 3], [1, 4, 3], [5, 2, 3], [1, 2, 3]])
    drafts = [[1, 2], [1, 2], [1, 2], [1, 2]]
    emitted = emit(logits, drafts, rows, None, 1.0, True, end_id=5, max_new_tokens=2)
    # row 0: draws 1 (= draft), 2 (= draft)... but the cap of 2 tokens stops it after 2;
    # row 1: draws 1 (= draft), 4 (not the draft 2): stops with 2 tokens;
    # row 2: draws the end token 5 first: stops; row 3: like row 0
    assert emitted == [2, 2, 1, 2]
    assert [r.toks for r in rows] == [[1, 2], [1, 4], [5], [1, 2]]
    rows = [_Row()]
    assert emit(logits[:1], [[1, 2]], rows, None, 1.0, True, end_id=5, max_new_tokens=9) == [3]
    assert rows[0].toks == [1, 2, 3]  # both drafts kept, then the token after them
    assert rows[0].lps == pytest.approx([0.0, 0.0, 0.0], abs=1e-6)


def multi_turn(policy, draft_tokens: int, corpus=None, turns: int = 3):
    """Four agents with saved prefixes over three turns, rows joining and leaving, sampled with row
    seeds (test_fast_decode.py's stream). -> ({agent: [(ids, logprobs)]}, stream)"""
    prompts = dict(zip("abcd", prompts_of_lengths([5, 12, 3, 20], seed=11)))
    stream = HFSampler(policy, temperature=0.8).stream(12, draft_tokens=draft_tokens, draft_corpus=corpus)
    out, calls = {k: [] for k in prompts}, 0
    for turn in range(turns):
        for i, (k, prompt) in enumerate(prompts.items()):
            stream.add((k, turn), prompt, row_seed=100 * turn + i, key=k)
        while stream.busy():
            calls += 1
            for (k, _), s in stream.step():
                out[k].append((s.ids, s.logprobs))
                prompts[k] = prompts[k] + s.ids + [40 + turn, 41]
    stream.calls = calls
    return out, stream


def _primed(turns: dict, corrupt_every: int) -> list:
    """A corpus of the turns, every `corrupt_every`-th token changed: its drafts are right for a few
    tokens, then wrong (rejections and holes)."""
    return [([t if i % corrupt_every else (t + 1) % 200 for i, t in enumerate(ids)], 1)
            for seqs in turns.values() for ids, _ in seqs]


@pytest.mark.parametrize("name", ["qwen3", "llama"])
def test_drafts_change_the_calls_not_the_tokens(tokenizer, name, monkeypatch):  # noqa: F811
    # float64: the verify call rounds differently from a one-column call (~1e-16 relative here),
    # so a draw could only flip on a tie that close; in float32 that happens, rarely (the docstring
    # of policy/speculative.py).
    monkeypatch.setattr(fast_decode, "_VERDICTS", {})
    policy = tiny(tokenizer, name)
    policy.model.double()
    plain, plain_stream = multi_turn(policy, 0)
    drafted, stream = multi_turn(policy, 4, _primed(plain, corrupt_every=5))
    assert stream.drafted > 50 and 0 < stream.accepted < stream.drafted  # kept some, rejected some
    assert stream.calls < plain_stream.calls
    assert [ids for k in plain for ids, _ in plain[k]] == [ids for k in drafted for ids, _ in drafted[k]]
    for k in plain:
        for (_, lp0), (_, lp1) in zip(plain[k], drafted[k]):
            assert lp1 == pytest.approx(lp0, abs=1e-9)
    # the verify calls ran through the fast step (key: ..., several columns, ...)
    assert [v for key, v in fast_decode._VERDICTS.items() if key[5]] == [True]


def test_float32_drafts_sample_the_same_tokens_to_rounding(tokenizer):  # noqa: F811
    policy = tiny(tokenizer, "qwen3")
    plain, _ = multi_turn(policy, 0)
    drafted, stream = multi_turn(policy, 4, _primed(plain, corrupt_every=7))
    assert stream.accepted > 20
    same = [a == b for k in plain for (a, _), (b, _) in zip(plain[k], drafted[k])]
    assert sum(same) >= len(same) - 1  # a flip on a near tie is possible, not expected
    for k in plain:
        for (ids0, lp0), (ids1, lp1) in zip(plain[k], drafted[k]):
            if ids0 == ids1:
                assert lp1 == pytest.approx(lp0, abs=1e-4)


def test_no_drafts_under_a_sliding_window(tokenizer):  # noqa: F811
    policy = tiny(tokenizer, "mistral-sliding")
    stream = HFSampler(policy).stream(8, draft_tokens=4)
    assert stream.drafter is None


def test_draft_tokens_out_of_range_is_refused():
    with pytest.raises(ConfigError, match="sampler.draft_tokens must be in"):
        load_config(None, ["sampler.draft_tokens=17"])
