"""Warm-start demonstrations: every team size, caps shown in the header, and a block told `alone`."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from swarmrl.config import ConfigError, load_config
from swarmrl.distributed.sharding import ShardedLearner
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.warmstart import (demonstrations, epoch_batches, learned, lr_factor, micro_loss, micro_owners,
                                     ranked_backward, supervised, warm_start, warmstart_key)
from swarmrl.rl.batch import TrainSeq


def test_demos_respect_the_header_cap_and_include_a_max0_solo_block():
    cfg = load_config("configs/tiny_test.yaml")  # max_experts 3
    policy = build_tiny_policy(cfg.model)
    n = 20
    seqs, stats = demonstrations(cfg, policy, n, seed=0)
    ceo_texts = [policy.tokenizer.decode(s.ids) for s in seqs if s.role == "ceo"]
    assert len(ceo_texts) == n  # one CEO per rollout
    caps = [int(re.search(r"\n(?:max=(\d+)|alone)\n>>", t).group(1) or 0) for t in ceo_texts]
    hires = [t.count('<hire role="expert"/>') for t in ceo_texts]
    assert all(h <= c for h, c in zip(hires, caps))  # no demo hires past its cap
    # n // (max_experts + 2) = 4 rollouts say max=0 on top of any solo demo that drew cap 0.
    cap0 = [h for h, c in zip(hires, caps) if c == 0]
    assert len(cap0) >= n // (cfg.workflow.max_experts + 2) and not any(cap0)
    assert stats["invalid_actions"] == 0  # (scores < 1 here: the tiny config caps turns per agent at 4)
    # Latency is over the rollouts that solved everything, not the cut ones' NO_DEADLINE (1e9 s).
    assert 0 < stats["unsolved_rollouts"] < n and 0 < stats["mean_latency_s"] < 60


@pytest.mark.parametrize("overrides, fragment", [
    (["task.name=math"], "task.name=math: the task has no scripted demonstrations"),
    (["task.name=code"], "task.name=code: the task has no scripted demonstrations"),
    (["model.name_or_path=some/model"], "model.name_or_path is set"),
])
def test_warm_start_refuses_what_it_cannot_demonstrate_before_building_anything(overrides, fragment, tmp_path):
    cfg = load_config("configs/tiny_test.yaml", [f"warmstart.cache_dir={tmp_path / 'cache'}", *overrides])
    with pytest.raises(ConfigError) as e:
        warm_start(cfg, log=lambda *_: None)
    assert fragment in str(e.value)
    if cfg.task.name != "arith":
        assert "model.name_or_path=" in str(e.value) and "--init" in str(e.value)  # what to use instead
    assert not (tmp_path / "cache").exists()


def test_a_single_agent_config_warm_starts_on_the_orgs_demonstrations_under_the_orgs_key():
    # workflow.name=single shares the org's cache entry, so it must train on the same sequences;
    # played under the single scenario, the team demos' hires were refused and only the CEO's
    # trajectory was left (one sequence per rollout).
    org, single = (load_config("configs/tiny_test.yaml", ov) for ov in ([], ["workflow.name=single"]))
    assert warmstart_key(single) == warmstart_key(org)
    policy = build_tiny_policy(org.model)
    (a, stats_a), (b, stats_b) = (demonstrations(c, policy, 10, seed=0) for c in (org, single))
    assert stats_a["sequences"] == stats_b["sequences"] > 10  # experts' trajectories too
    assert [(s.ids, s.gen_mask, s.role) for s in a] == [(s.ids, s.gen_mask, s.role) for s in b]


def test_the_cache_key_follows_what_changes_the_demonstrations_only():
    base = load_config("configs/tiny_test.yaml")
    key = warmstart_key(base)
    # how much the sampler computes changes no demonstration: the cached warm start stays valid
    for compute_only in ("sampler.share_prompts=false", "sampler.batched_adapters=false"):
        assert warmstart_key(load_config("configs/tiny_test.yaml", [compute_only])) == key
    # nor does the RL learner's precision or placement: the warm start trains in float32 on the CPU
    for learner_only in ("model.mixed_precision=bf16", "model.gradient_checkpointing=true", "model.device=cpu"):
        assert warmstart_key(load_config("configs/tiny_test.yaml", [learner_only])) == key
    assert warmstart_key(load_config("configs/tiny_test.yaml", ["warmstart.epochs=2"])) != key
    assert warmstart_key(load_config("configs/tiny_test.yaml", ["sampler.max_new_tokens_per_turn=32"])) != key
    assert warmstart_key(load_config("configs/tiny_test.yaml", ["warmstart.length_group_batches=4"])) != key
    # the micro-batch split orders the gradients' sums: other weights in their last bits
    for split in ("rl.micro_batch_tokens=256", "rl.max_pad_fraction=0.5"):
        assert warmstart_key(load_config("configs/tiny_test.yaml", [split])) != key


def test_a_plugin_tasks_own_source_is_part_of_the_key(tmp_path):
    # a scripted task from a file (`path.py:Name`): editing its scripts must not serve the warm
    # start of the old ones from the cache
    plugin = tmp_path / "my_arith.py"
    plugin.write_text("from swarmrl.tasks.arith import ArithTask\n\nclass MyArith(ArithTask):\n    pass\n")
    cfg = load_config("configs/tiny_test.yaml", [f"task.name={plugin}:MyArith"])
    key = warmstart_key(cfg)
    assert key != warmstart_key(load_config("configs/tiny_test.yaml"))
    plugin.write_text(plugin.read_text() + "    # the scripts changed\n")
    assert warmstart_key(cfg) != key


def test_a_plugins_helper_modules_are_part_of_the_key(tmp_path, monkeypatch):
    # The plugin file imports its scripts from a module beside it; a package plugin from its package.
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "v2c_helpers.py").write_text("RATE = 0.5\n")
    plugin = tmp_path / "v2c_task.py"
    plugin.write_text("import v2c_helpers\nfrom swarmrl.tasks.arith import ArithTask\n\nclass T(ArithTask):\n    pass\n")
    pkg = tmp_path / "v2c_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "scripts.py").write_text("RATE = 0.5\n")
    (pkg / "task.py").write_text("from v2c_pkg import scripts\nfrom swarmrl.tasks.arith import ArithTask\n\n"
                                 "class T(ArithTask):\n    pass\n")
    for spec, helper in ((f"{plugin}:T", tmp_path / "v2c_helpers.py"), ("v2c_pkg.task:T", pkg / "scripts.py")):
        cfg = load_config("configs/tiny_test.yaml", [f"task.name={spec}"])
        key = warmstart_key(cfg)
        assert warmstart_key(cfg) == key  # stable
        helper.write_text("RATE = 0.25\n")  # the helper's source changed, the plugin's did not
        assert warmstart_key(cfg) != key, spec


def test_a_warm_start_finished_first_by_another_process_is_kept(tmp_path):
    # Two runs started at once on an empty cache both train the warm start: each writes its own
    # temp directory, and the later one keeps the cache the earlier one wrote (a run may be
    # loading it) instead of replacing it. A killed attempt's temp is cleared first.
    import json
    import subprocess
    import sys

    from swarmrl.policy.warmstart import _train_warm_start
    cfg = load_config("configs/tiny_test.yaml", [f"warmstart.cache_dir={tmp_path}"])
    out = tmp_path / f"warmstart-{warmstart_key(cfg)}"
    out.mkdir()
    (out / "warmstart.json").write_text(json.dumps({"key": "theirs"}))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".{out.name}.tmp_{int(dead.stdout)}"
    stale.mkdir()
    said = []
    _train_warm_start(cfg, out, None, said.append)
    assert json.loads((out / "warmstart.json").read_text()) == {"key": "theirs"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temp of ours, nor the stale one
    assert "another process cached it first" in said[-1]
    # `pretrain --force` replaces it, and leaves no temp or old copy behind
    _train_warm_start(cfg, out, None, said.append, force=True)
    meta = json.loads((out / "warmstart.json").read_text())
    assert meta["key"] == warmstart_key(cfg)
    assert meta["environment"]["versions"]["torch"] == torch.__version__  # which machine trained these weights
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_random_batches_are_slices_of_one_permutation():
    lengths = [5, 1, 4, 2, 3, 9, 7]
    batches = epoch_batches(lengths, 3, 0, np.random.default_rng(7))
    order = list(np.random.default_rng(7).permutation(7))
    assert batches == [order[0:3], order[3:6], order[6:7]]


def test_length_groups_sort_each_run_and_keep_every_sequence_once():
    lengths = [30, 10, 20, 60, 50, 40, 80, 70, 90, 15]  # distinct, so sorted runs are unambiguous
    batches = epoch_batches(lengths, 2, 2, np.random.default_rng(3))  # runs of 4 sequences, 2 batches each
    assert sorted(i for b in batches for i in b) == list(range(10))
    assert [len(b) for b in sorted(batches, key=len)] == [2, 2, 2, 2, 2]
    # hand computation: the shuffled order, cut into runs of 4, each run sorted by length and halved
    order = list(np.random.default_rng(3).permutation(10))
    expected = []
    for start in (0, 4, 8):
        run = sorted(order[start:start + 4], key=lambda i: lengths[i])
        expected += [run[:2], run[2:]] if len(run) > 2 else [run]
    assert sorted(map(tuple, batches)) == sorted(map(tuple, expected))
    for b in batches:  # a batch's lengths are sorted: it came from one sorted run
        assert [lengths[i] for i in b] == sorted(lengths[i] for i in b)


def _seq(n: int) -> TrainSeq:
    return TrainSeq(list(range(3, 3 + n)), [0] + [1] * (n - 1), [0.0] * n, 0.0, "ceo", 0)


def test_micro_owners_give_the_largest_first_to_the_least_loaded_rank():
    micros = [[_seq(4)], [_seq(5), _seq(5)], [_seq(9)], [_seq(2), _seq(3), _seq(3)]]  # cells 4, 10, 9, 9
    # hand: 10 -> rank 0; 9 (micro 2, first of the ties) -> rank 1; 9 (micro 3) -> rank 1 (9 < 10);
    # 4 -> rank 0 (10 < 18)
    assert micro_owners(micros, 2) == [0, 0, 1, 1]
    assert micro_owners(micros, 1) == [0, 0, 0, 0]
    assert sorted(micro_owners(micros, 5)) == [0, 1, 2, 3]  # more ranks than micro-batches: one each, some idle


class _OneRank:
    """A world of one: the exchange hands back this rank's rows."""
    rank, world = 0, 1

    def __init__(self):
        self.busy_s, self.busy_spans = 0.0, []

    waits = ShardedLearner.waits

    def gather_ordered(self, rows, owner, size):
        assert len(rows) == len(owner) and all(r.shape == (size,) for r in rows)
        return rows


def test_ranked_backward_adds_the_gradients_as_one_process_accumulates_them():
    policy = build_tiny_policy(load_config("configs/tiny_test.yaml").model, seed=0)
    model = policy.model
    micros = [[_seq(7), _seq(9)], [_seq(12)], [_seq(5), _seq(5), _seq(6)]]
    model.zero_grad(set_to_none=True)
    total = 0.0
    for micro in micros:  # the one-process path of `supervised`
        loss = micro_loss(model, micro, policy.pad_id, 30)
        loss.backward()
        total += float(loss.detach())
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    rank = _OneRank()
    assert ranked_backward(model, micros, policy.pad_id, 30, rank) == total
    # its own backward seconds, closed as one span before the exchange (perf/warmstart_rank_idle)
    assert len(rank.busy_spans) == 1 and rank.busy_spans[0] > 0 and rank.busy_s == 0.0
    for n, p in model.named_parameters():
        assert torch.equal(p.grad, expected[n]), n


def test_the_learning_rate_warms_up_decays_and_restarts_for_each_added_pass():
    # 2 scheduled passes of 50 batches: warm-up over 20, one cosine over 100; an added pass
    # warms up again and decays over its own 50 (hand: 0.5 * (1 + cos(pi * k / n))).
    assert lr_factor(0, 100, 50) == pytest.approx(1 / 20)
    assert lr_factor(19, 100, 50) == pytest.approx(0.5 * (1 + np.cos(np.pi * 0.19)))
    assert lr_factor(50, 100, 50) == pytest.approx(0.5)
    assert lr_factor(99, 100, 50) == pytest.approx(0.5 * (1 + np.cos(np.pi * 0.99)))
    assert lr_factor(100, 100, 50) == pytest.approx(1 / 20)  # the first batch of an added pass
    assert lr_factor(125, 100, 50) == pytest.approx(0.5 * (1 + np.cos(np.pi * 0.5)))
    assert lr_factor(150, 100, 50) == pytest.approx(1 / 20)  # and of the next one


def test_learned_reads_the_mean_of_the_last_ten_losses():
    assert learned([5.0] * 3, 0.0)  # no threshold: always learned
    assert not learned([], 0.1)
    assert learned([9.0] + [0.1] * 10, 0.1)  # only the last 10 count
    assert not learned([0.0] * 9 + [0.3] * 4, 0.1)  # (6 * 0 + 4 * 0.3) / 10 = 0.12


def _run_supervised(seqs, epochs, **kw):
    policy = build_tiny_policy(load_config("configs/tiny_test.yaml").model, seed=0)
    said = []
    losses = supervised(policy, seqs, epochs, 1e-3, 2, 4096, 0, log=said.append, **kw)
    return policy, losses, said


def test_passes_are_added_only_while_the_loss_stays_above_learned_loss():
    seqs = [_seq(n) for n in (6, 8, 9, 7, 10)]  # 3 batches of 2 a pass
    base, losses, _ = _run_supervised(seqs, 1)
    assert len(losses) == 3
    # a threshold every loss meets: the scheduled pass alone, the same weights bit for bit
    same, again, said = _run_supervised(seqs, 1, learned_loss=1e9, extra_epochs=2)
    assert again == losses and not any("one more pass" in line for line in said)
    for p, q in zip(base.model.parameters(), same.model.parameters()):
        assert torch.equal(p, q)
    # one no loss meets: both added passes run, each announced, and the model trains on
    _, longer, said = _run_supervised(seqs, 1, learned_loss=1e-9, extra_epochs=2)
    assert len(longer) == 9 and longer[:3] == losses
    assert sum("one more pass" in line for line in said) == 2
    assert any("batch 9/9 (epoch 3)" in line for line in said)


def test_a_warm_start_that_never_meets_learned_loss_says_so_and_records_it(tmp_path):
    import json

    from swarmrl.policy.warmstart import _train_warm_start
    cfg = load_config("configs/tiny_test.yaml", [f"warmstart.cache_dir={tmp_path}", "warmstart.learned_loss=1e-9",
                                                "warmstart.extra_epochs=1"])
    out = tmp_path / f"warmstart-{warmstart_key(cfg)}"
    said = []
    _train_warm_start(cfg, out, None, said.append)
    meta = json.loads((out / "warmstart.json").read_text())
    assert meta["learned"] is False and meta["passes"] == cfg.warmstart.epochs + 1
    assert any(line.startswith("warning: the warm start ended at loss") for line in said)
    said.clear()
    assert warm_start(cfg, log=said.append) == out  # cached: the warning again, nothing trained
    assert "likely unlearned" in said[0] and "trained where" not in said[0]  # this machine trained it
    # a cache another machine filled (shared over NFS, say): used, and said
    meta["environment"]["cpu"] = "another CPU"
    (out / "warmstart.json").write_text(json.dumps(meta))
    said.clear()
    assert warm_start(cfg, log=said.append) == out
    assert "(trained where cpu differ from this machine's" in said[0]


def test_the_recorded_key_is_the_one_the_directory_was_named_by(tmp_path, monkeypatch):
    # The key hashes the demonstrations' source: code edited while a warm start trains would make
    # a key computed at the end disagree with the directory named at the start.
    import json

    import swarmrl.policy.warmstart as ws
    cfg = load_config("configs/tiny_test.yaml", [f"warmstart.cache_dir={tmp_path}"])
    out = tmp_path / f"warmstart-{warmstart_key(cfg)}"
    monkeypatch.setattr(ws, "warmstart_key", lambda cfg: "edited0000000000")
    ws._train_warm_start(cfg, out, None, lambda *a, **k: None)
    assert json.loads((out / "warmstart.json").read_text())["key"] == out.name.removeprefix("warmstart-")
