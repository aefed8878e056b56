"""Length bucketing of the learner's micro-batches (rl.length_buckets): less padding, the same
gradient up to float summation order; `learner/pad_fraction` reports the waste."""

from __future__ import annotations

import pytest
import torch

from swarmrl.build import make_policy_set
from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.rl.batch import TrainSeq, micro_batches, pad_fraction
from swarmrl.rl.losses import get_loss
from swarmrl.rl.update import Updater, pool_metrics

TINY = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1",
        "model.intermediate_size=64", "workflow.name=voting"]
LENGTHS = [5, 30, 7, 22, 3, 31, 12, 9, 26, 4]  # mixed: a 96-token budget holds 3 rows of ~30 or many short ones


def _seq(n: int) -> TrainSeq:
    return TrainSeq(ids=list(range(n)), gen_mask=[1] * n, old_logp=[0.0] * n, advantage=0.0, role="r", rollout=0)


def test_pad_fraction_drops_with_bucketing_by_hand():
    seqs = [_seq(n) for n in (2, 8, 2, 8)]
    # in the given order, 16 padded tokens a micro-batch: [2, 8] (2 rows x 8) | [2, 8]:
    # 32 cells for 20 tokens -> 12 / 32 = 0.375 wasted
    given = micro_batches(seqs, 16, sort=False)
    assert [[len(s.ids) for s in b] for b in given] == [[2, 8], [2, 8]]
    assert pad_fraction(given) == 12 / 32
    # by length: [2, 2] (4 cells) | [8, 8] (16 cells): 20 cells for 20 tokens -> no waste
    bucketed = micro_batches(seqs, 16, sort=True)
    assert [[len(s.ids) for s in b] for b in bucketed] == [[2, 2], [8, 8]]
    assert pad_fraction(bucketed) == 0.0
    assert pad_fraction([]) == 0.0


def test_unsorted_micro_batches_respect_the_budget_of_their_longest_row():
    seqs = [_seq(n) for n in (8, 2, 2, 2, 9)]
    batches = micro_batches(seqs, 18, sort=False)
    # [8, 2] = 2 x 8 = 16; a third row makes 3 x 8 = 24 > 18 | [2, 2] | then 9 makes 3 x 9 > 18 | [9]
    assert [[len(s.ids) for s in b] for b in batches] == [[8, 2], [2, 2], [9]]
    assert all(len(b) * max(len(s.ids) for s in b) <= 18 for b in batches)


def _updater(sharing: str, buckets: bool, max_pad: float = 1.0) -> tuple[Updater, list[TrainSeq]]:
    cfg = load_config(None, TINY + ["rl.micro_batch_tokens=96", f"rl.length_buckets={str(buckets).lower()}",
                                    f"policy.sharing={sharing}", f"rl.max_pad_fraction={max_pad}"])
    policy = build_tiny_policy(cfg.model, seed=0)
    up = Updater(cfg.rl, make_policy_set(cfg, policy), get_loss("ppo_clip"), policy.pad_id, 0)
    g = torch.Generator().manual_seed(0)
    vocab = len(policy.tokenizer)
    roles = ["generator", "aggregator"]
    seqs = [TrainSeq(torch.randint(0, vocab, (n,), generator=g).tolist(), [0] * (n // 2) + [1] * (n - n // 2),
                     (-torch.rand(n, generator=g)).tolist(), float(torch.randn(1, generator=g)), roles[i % 2], i)
            for i, n in enumerate(LENGTHS)]
    return up, seqs


def _grads(up: Updater, seqs: list[TrainSeq]) -> tuple[dict, dict]:
    up._zero()
    sums = up.backward(seqs, up.weights(seqs))
    grads = {(slot, j): p.grad.detach().clone() for slot in up.policies.slots
             for j, p in enumerate(up.policies.parameters(slot)) if p.grad is not None}
    return grads, sums


@pytest.mark.parametrize("max_pad", [1.0, 0.1])
@pytest.mark.parametrize("sharing", ["shared", "isolated", "isolated_full"])
def test_bucketing_changes_the_gradient_only_in_the_last_bits(sharing, max_pad):
    a, sums_a = _grads(*_updater(sharing, True, max_pad))
    b, sums_b = _grads(*_updater(sharing, False))
    assert a.keys() == b.keys() and a
    # float32 summation order: measured at most 8.6e-7 relative (1.2e-6 on a parameter whose
    # gradient norm is 2.5e-5, where 3e-11 is the rounding of larger terms: the absolute floor);
    # 1e-5 leaves room for other machines' kernels and still catches a real change of the math
    for k in a:
        assert float((a[k] - b[k]).norm()) <= 1e-5 * float(a[k].norm()) + 1e-10, k
    assert sums_a["loss"] == pytest.approx(sums_b["loss"], rel=1e-6)
    assert sums_a["pad_real"] == sums_b["pad_real"] == sum(LENGTHS)


def test_pad_fraction_is_a_step_metric():
    up, seqs = _updater("shared", True)
    _, sums = _grads(up, seqs)
    # sorted 3,4,5,7,9,12 (6 x 12 = 72) | 22,26,30 (3 x 30 = 90) | 31: 72 + 90 + 31 = 193 cells
    assert sums["pad_cells"] == 193
    metrics = pool_metrics(sums, 1)
    assert metrics["learner/pad_fraction"] == pytest.approx(1 - sum(LENGTHS) / 193)
    assert "pad_cells" not in metrics and "pad_real" not in metrics


def test_max_pad_closes_a_micro_batch_before_the_budget_does():
    seqs = [_seq(n) for n in (10, 10, 11, 20, 21)]
    # budget 1000 holds all five (5 x 21 = 105 cells). max_pad 0.1, sorted:
    # [10, 10, 11]: 31 of 33 cells real (6% pad); + 20 -> 51 of 80 (36%): close | [20, 21]: 41 of 42
    got = micro_batches(seqs, 1000, sort=True, max_pad=0.1)
    assert [[len(s.ids) for s in b] for b in got] == [[10, 10, 11], [20, 21]]
    assert pad_fraction(got) == pytest.approx(1 - 72 / 75)
    # 1.0: only the budget closes one -> a single micro-batch padded to 21
    assert [[len(s.ids) for s in b] for b in micro_batches(seqs, 1000, sort=True)] == [[10, 10, 11, 20, 21]]
    assert [[len(s.ids) for s in b] for b in micro_batches(seqs, 1000, sort=True, max_pad=0.0)] == [
        [10, 10], [11], [20], [21]]
