"""MFU accounting (diagnostics/mfu.py): the FLOPs formulas by hand, the parameter count on real
tied and untied architectures, the measured and cached peak, and the step's metrics."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from swarmrl.diagnostics import mfu
from swarmrl.diagnostics.mfu import (generation_flops, head_params, matmul_params, measure_peak_flops, mfu_metrics,
                                     model_shape, update_flops)


def tiny_qwen3(tied: bool) -> Qwen3ForCausalLM:
    return Qwen3ForCausalLM(Qwen3Config(vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                        tie_word_embeddings=tied))


@pytest.mark.parametrize("tied", [True, False])
def test_matmul_params_leave_out_the_embedding_lookup_only(tied):
    model = tiny_qwen3(tied)
    total = sum(p.numel() for p in model.parameters())
    # tied: the one table is the LM head's matmul; untied: the input table (100 x 16) is a lookup
    assert matmul_params(model) == (total if tied else total - 100 * 16)
    assert model_shape(model) == (2, 16)


@pytest.mark.parametrize("tied", [True, False])
def test_head_params_are_the_output_head_whether_tied_or_not(tied):
    assert head_params(tiny_qwen3(tied)) == 100 * 16  # vocabulary x hidden


def test_flops_by_hand():
    # N = 10, L = 1, d = 4. Update, T = 2 and 3: 6*10*2 + 12*4*4 + 6*10*3 + 12*4*9 = 924
    assert update_flops([2, 3], 10, 1, 4) == 924.0
    # generation, one turn with context 5, 2 new prompt tokens, 3 generated: (2*10 + 4*4*5) * 5 = 500
    assert generation_flops([(5, 2, 3)], 10, 1, 4) == 500.0
    assert generation_flops([], 10, 1, 4) == 0.0
    # A head of N_h = 4 counts only where a token is predicted. Update, the loss reads 1 and 2 of
    # the tokens: 6*6*2 + 6*4*1 + 192 + 6*6*3 + 6*4*2 + 432 = 876; generation: (2*6 + 80)*5 + 2*4*3 = 484
    assert update_flops([2, 3], 10, 1, 4, head_params=4, loss_tokens=[1, 2]) == 876.0
    assert generation_flops([(5, 2, 3)], 10, 1, 4, head_params=4) == 484.0
    m = mfu_metrics(update_fl=2e12, update_s=2.0, gen_fl=1e12, gen_s=4.0, peak=4e12)
    assert m == {"perf/peak_tflops": 4.0, "perf/update_s": 2.0, "perf/update_tflops": 1.0, "perf/mfu_update": 0.25,
                 "perf/generation_tflops": 0.25, "perf/mfu_generation": 0.0625}
    assert "perf/mfu_update" not in mfu_metrics(1.0, 0.0, 1.0, 0.0, 1.0)  # nothing timed: no ratio


def test_peak_is_measured_once_per_process_and_the_disk_keeps_the_best(tmp_path, monkeypatch):
    monkeypatch.setattr(mfu, "_PEAKS", {})
    calls = []
    real_mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b: calls.append(1) or real_mm(a, b))
    peak = measure_peak_flops(torch.device("cpu"), torch.float32, tmp_path, size=64, reps=2)
    assert peak > 0 and len(calls) == 3  # one warm-up + 2 timed
    assert measure_peak_flops(torch.device("cpu"), torch.float32, tmp_path, size=64, reps=2) == peak
    assert len(calls) == 3  # the same process: not measured again
    stored = json.loads((tmp_path / "peak_flops.json").read_text())
    assert list(stored.values()) == [peak] and "threads=" in next(iter(stored))
    key = next(iter(stored))
    # A stored peak above anything this process can measure (as after a contended first
    # measurement was beaten): a new process measures again but keeps the stored best.
    (tmp_path / "peak_flops.json").write_text(json.dumps({key: 1e18}))
    monkeypatch.setattr(mfu, "_PEAKS", {})
    assert measure_peak_flops(torch.device("cpu"), torch.float32, tmp_path, size=64, reps=2) == 1e18
    assert len(calls) == 6
    # A stored peak below the measurement (a contended first run): replaced on disk.
    (tmp_path / "peak_flops.json").write_text(json.dumps({key: 1.0}))
    monkeypatch.setattr(mfu, "_PEAKS", {})
    fresh = measure_peak_flops(torch.device("cpu"), torch.float32, tmp_path, size=64, reps=2)
    assert fresh > 1.0 and json.loads((tmp_path / "peak_flops.json").read_text()) == {key: fresh}
    (tmp_path / "peak_flops.json").write_text("{torn")  # a torn file is measured again, not an error
    monkeypatch.setattr(mfu, "_PEAKS", {})
    assert measure_peak_flops(torch.device("cpu"), torch.float32, tmp_path, size=64, reps=2) > 0


def test_machines_sharing_a_cache_directory_keep_their_own_peaks(tmp_path, monkeypatch):
    # A home directory shared by a fast and a slow machine: the slow one must not take the fast
    # one's best as its peak (it would understate its MFU).
    monkeypatch.setattr(mfu, "_PEAKS", {})
    monkeypatch.setattr(mfu, "_cpu_name", lambda: "fast CPU x64")
    fast_key = mfu.peak_key(torch.device("cpu"), torch.float32, 64)
    (tmp_path / "peak_flops.json").write_text(json.dumps({fast_key: 1e18}))
    monkeypatch.setattr(mfu, "_cpu_name", lambda: "slow CPU x2")
    peak = measure_peak_flops(torch.device("cpu"), torch.float32, tmp_path, size=64, reps=2)
    assert peak < 1e18
    stored = json.loads((tmp_path / "peak_flops.json").read_text())
    assert stored[fast_key] == 1e18 and len(stored) == 2


def test_the_cpu_is_named_by_its_model_and_usable_cores():
    name = mfu._cpu_name()
    model, cores = name.rsplit(" x", 1)
    assert model and int(cores) >= 1
    assert name in mfu.peak_key(torch.device("cpu"), torch.float32, 64)
