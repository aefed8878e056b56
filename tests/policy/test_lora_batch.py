"""AdapterBatch (policy/lora_batch.py): mixed-adapter forwards in batched matmuls give PEFT's
logits up to float rounding (adapters of different ranks included), follow weight updates, leave
the model's own forward in place afterwards, and are refused where they would be wrong; the
sampler uses them for isolated policies unless `sampler.batched_adapters=false`."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model

from swarmrl.config import ModelConfig
from swarmrl.policy import fast_decode
from swarmrl.policy.fast_decode import FastDecode
from swarmrl.policy.lora_batch import AdapterBatch
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sharing import make_policy_set

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ROWS = ["p", "q", "s", "p", "s"]


def peft_model(ranks=(4, 2, 8), dropout=0.0):
    torch.manual_seed(0)
    model = build_tiny_policy(TINY).model
    for i, (name, r) in enumerate(zip("pqs", ranks)):
        cfg = LoraConfig(r=r, lora_alpha=2 * r + i, target_modules=TARGETS, lora_dropout=dropout)
        model = get_peft_model(model, cfg, adapter_name=name) if i == 0 else model
        if i:
            model.add_adapter(name, cfg)
    with torch.no_grad():  # LoRA B starts at 0: make every adapter matter, and differ
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.5)
    return model.eval()


def logits(model, ids, batch: AdapterBatch | None):
    with torch.no_grad():
        if batch is None:
            return model(input_ids=ids, adapter_names=ROWS).logits
        with batch.rows(ROWS):
            return model(input_ids=ids).logits


def test_batched_rows_give_peft_logits_up_to_rounding():
    model = peft_model()
    ids = torch.randint(0, 200, (len(ROWS), 7), generator=torch.Generator().manual_seed(1))
    ids[1] = ids[3] = ids[0]  # the same tokens through adapters p, q and p again
    batch = AdapterBatch.for_model(model)
    want, got = logits(model, ids, None), logits(model, ids, batch)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with model.disable_adapter(), torch.no_grad():
        base = model(input_ids=ids).logits
    assert (want - base).abs().max() > 1e-2  # the adapters change the logits: the check has teeth
    assert (got[0] - got[3]).abs().max() < 1e-5 < 1e-2 < (got[0] - got[1]).abs().max()  # each row its own adapter


def test_an_update_between_calls_is_followed():
    model = peft_model()
    ids = torch.randint(0, 200, (len(ROWS), 5), generator=torch.Generator().manual_seed(2))
    batch = AdapterBatch.for_model(model)
    logits(model, ids, batch)
    with torch.no_grad():  # an optimizer step on adapter q: in place, as AdamW does
        for n, p in model.named_parameters():
            if ".q." in n and "lora_A" in n:
                p.mul_(3.0)
    batch.rows_key = None  # a new set of rows: the next call restacks what changed
    torch.testing.assert_close(logits(model, ids, batch), logits(model, ids, None), rtol=1e-5, atol=1e-5)


def test_the_models_forward_is_back_after_the_call_and_after_an_error():
    model = peft_model()
    batch = AdapterBatch.for_model(model)
    layers = batch.layers
    with pytest.raises(ValueError):
        with batch.rows(ROWS):
            assert all("forward" in vars(m) for m in layers)
            raise ValueError("boom")
    assert not any("forward" in vars(m) for m in layers)


def test_inputs_of_another_batch_are_refused():
    model = peft_model()
    with AdapterBatch.for_model(model).rows(ROWS), pytest.raises(ValueError, match=r"expect \[5, T, in\]"):
        model(input_ids=torch.zeros(3, 4, dtype=torch.long))


def test_refused_where_it_would_be_wrong():
    assert AdapterBatch.for_model(build_tiny_policy(TINY).model) is None  # no PEFT
    torch.manual_seed(0)
    dora = get_peft_model(build_tiny_policy(TINY).model, LoraConfig(r=2, target_modules=TARGETS, use_dora=True))
    assert AdapterBatch.for_model(dora) is None  # a LoRA variant
    model = peft_model(dropout=0.5).train()
    with pytest.raises(RuntimeError, match="eval mode"):
        with AdapterBatch.for_model(model).rows(ROWS):
            pass


@pytest.mark.parametrize("batched", [True, False])
def test_isolated_policies_sample_through_it_unless_switched_off(batched, monkeypatch):
    monkeypatch.setattr(fast_decode, "_VERDICTS", {})
    torch.manual_seed(0)
    ps = make_policy_set(build_tiny_policy(TINY), "isolated", ["generator", "aggregator"], lora_rank=4,
                         batched_adapters=batched)
    with torch.no_grad():
        for n, p in ps.policies["generator"].model.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.8)
    stream = ps.stream(6)
    assert (stream.lora is not None) == batched
    assert (stream.fast is not None) == batched  # decode steps skip the module machinery inside the batching
    prompts, roles = [[5, 6, 7], [8, 9, 10, 11, 12], [5, 6, 7]], ["generator", "aggregator", "aggregator"]
    got = ps.generate(prompts, roles, 6, seed=0, greedy=True)
    ps.samplers = {s: type(h)(h.policy, h.temperature, batched_adapters=not batched) for s, h in ps.samplers.items()}
    other = ps.generate(prompts, roles, 6, seed=0, greedy=True)
    for a, b in zip(got, other):
        assert a.ids == b.ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    if batched:  # the fast step was checked against the model's forward (within the batching) and used
        assert [v for k, v in fast_decode._VERDICTS.items() if k[1]] == [True]


def test_the_fast_step_inside_the_batching_samples_what_the_forward_does(monkeypatch):
    monkeypatch.setattr(fast_decode, "_VERDICTS", {})
    torch.manual_seed(0)
    ps = make_policy_set(build_tiny_policy(TINY), "isolated", ["generator", "aggregator"], lora_rank=4)
    with torch.no_grad():
        for n, p in ps.policies["generator"].model.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.8)
    prompts, roles = [[5, 6, 7], [8, 9, 10, 11, 12], [5, 6, 7]], ["generator", "aggregator", "aggregator"]
    got = ps.generate(prompts, roles, 8, seed=0, row_seeds=[1, 2, 3])
    monkeypatch.setattr(FastDecode, "for_model", classmethod(lambda cls, model: None))
    want = ps.generate(prompts, roles, 8, seed=0, row_seeds=[1, 2, 3])
    assert [(s.ids, s.logprobs) for s in got] == [(s.ids, s.logprobs) for s in want]  # to the last bit
