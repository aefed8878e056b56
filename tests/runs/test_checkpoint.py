import json
import os
import random

import numpy as np
import pytest
import torch

from swarmrl.runs.checkpoint import (
    CheckpointError,
    capture_rng,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    restore_rng,
    save_checkpoint,
)
from swarmrl.runs.manifest import sha256


def _model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss = model(torch.randn(3, 4)).pow(2).sum()
    loss.backward()
    opt.step()
    return model, opt


def _assert_nested_equal(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_nested_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_nested_equal(x, y)
    else:
        assert a == b


def _save_simple(run_dir, step, model=None, opt=None):
    model, opt = (model, opt) if model is not None else _model_and_opt()
    return save_checkpoint(
        run_dir, step, {"policy": model.state_dict()}, {"policy": opt.state_dict()},
        {"data_position": step * 10},
    )


def test_round_trip_model_optimizer_and_rng(tmp_path):
    model, opt = _model_and_opt()
    rng = capture_rng()
    json.dumps(rng)  # must be JSON-safe
    path = save_checkpoint(
        tmp_path, 3, {"policy": model.state_dict()}, {"policy": opt.state_dict()},
        {"rng": rng, "data_position": 17},
    )
    assert path == tmp_path / "checkpoints" / "step_3"
    assert sorted(p.name for p in path.iterdir()) == [
        "manifest.json", "optim_policy.pt", "policy.safetensors", "state.json"
    ]
    expected = (torch.rand(5), random.random(), np.random.rand(3))

    ck = load_checkpoint(path)
    assert ck.step == 3 and ck.path == path
    assert ck.state["data_position"] == 17 and ck.state["step"] == 3
    _assert_nested_equal(model.state_dict(), ck.tensors["policy"])
    _assert_nested_equal(opt.state_dict(), ck.optimizers["policy"])

    # The loaded state drives a fresh model/optimizer to identical next steps.
    model2 = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
    model2.load_state_dict(ck.tensors["policy"])
    opt2.load_state_dict(ck.optimizers["policy"])
    x = torch.randn(3, 4)
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    _assert_nested_equal(model.state_dict(), model2.state_dict())

    restore_rng(ck.state["rng"])
    again = (torch.rand(5), random.random(), np.random.rand(3))
    assert torch.equal(expected[0], again[0])
    assert expected[1] == again[1]
    assert np.array_equal(expected[2], again[2])


def test_tied_weights_save_and_load(tmp_path):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.head.weight = self.emb.weight

    m = Tied()
    sd = m.state_dict()
    assert sd["emb.weight"].data_ptr() == sd["head.weight"].data_ptr()
    path = save_checkpoint(tmp_path, 1, {"policy": sd}, {}, {})
    ck = load_checkpoint(path)
    assert torch.equal(ck.tensors["policy"]["emb.weight"], sd["emb.weight"])
    assert torch.equal(ck.tensors["policy"]["head.weight"], sd["head.weight"])
    m2 = Tied()
    m2.load_state_dict(ck.tensors["policy"])
    assert m2.head.weight is m2.emb.weight
    assert torch.equal(m2.emb.weight, m.emb.weight)


def test_non_contiguous_tensor_saved(tmp_path):
    t = torch.arange(12.0).reshape(3, 4).t()
    assert not t.is_contiguous()
    ck = load_checkpoint(save_checkpoint(tmp_path, 0, {"g": {"t": t}}, {}, {}))
    assert torch.equal(ck.tensors["g"]["t"], t)


def test_partial_checkpoint_refused(tmp_path):
    path = _save_simple(tmp_path, 2)
    (path / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="partial checkpoint: .*manifest.json missing"):
        load_checkpoint(path)


def test_corrupted_safetensors_byte_refused(tmp_path):
    path = _save_simple(tmp_path, 2)
    f = path / "policy.safetensors"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0xFF  # flip a byte inside the tensor payload, same size
    f.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="policy.safetensors: sha256 mismatch") as e:
        load_checkpoint(path)
    assert str(f) in str(e.value)


def test_truncated_state_json_refused(tmp_path):
    path = _save_simple(tmp_path, 2)
    f = path / "state.json"
    f.write_bytes(f.read_bytes()[:-5])
    with pytest.raises(CheckpointError, match="state.json") as e:
        load_checkpoint(path)
    assert str(f) in str(e.value)


def test_unparseable_file_with_matching_hash_still_refused(tmp_path):
    # A file replaced *and* the manifest updated (not a bit flip): parsing must still fail
    # with the file's name rather than some deep library error.
    path = _save_simple(tmp_path, 2)
    f = path / "policy.safetensors"
    f.write_bytes(b"not a safetensors file")
    manifest = json.loads((path / "manifest.json").read_text())
    for e in manifest["files"]:
        if e["name"] == f.name:
            e["size"] = f.stat().st_size
            e["sha256"] = sha256(f)
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="corrupt checkpoint file .*policy.safetensors"):
        load_checkpoint(path)


def test_latest_checkpoint_skips_partial_and_tmp(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    model, opt = _model_and_opt()
    _save_simple(tmp_path, 2, model, opt)
    p5 = _save_simple(tmp_path, 5, model, opt)
    p9 = _save_simple(tmp_path, 9, model, opt)
    (p9 / "manifest.json").unlink()  # partial
    (tmp_path / "checkpoints" / ".tmp_step_12_999").mkdir()
    (tmp_path / "checkpoints" / ".tmp_step_12_999" / "manifest.json").write_text("{}")
    (tmp_path / "checkpoints" / "step_10").mkdir()  # empty, partial
    assert latest_checkpoint(tmp_path) == p5
    # Numeric, not lexicographic, ordering.
    p11 = _save_simple(tmp_path, 11, model, opt)
    assert latest_checkpoint(tmp_path) == p11


def test_crash_during_rename_leaves_no_step_dir(tmp_path, monkeypatch):
    model, opt = _model_and_opt()
    good = _save_simple(tmp_path, 1, model, opt)

    def boom(*a, **k):
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "rename", boom)
    with pytest.raises(OSError, match="simulated crash"):
        _save_simple(tmp_path, 2, model, opt)
    monkeypatch.undo()

    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["step_1"]
    assert latest_checkpoint(tmp_path) == good
    assert load_checkpoint(good).step == 1


def test_crash_while_replacing_existing_step_keeps_old(tmp_path, monkeypatch):
    model, opt = _model_and_opt()
    path = _save_simple(tmp_path, 4, model, opt)
    real_rename = os.rename

    def fail_second(src, dst):
        if str(src).endswith(f".tmp_step_4_{os.getpid()}"):
            raise OSError("simulated crash")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", fail_second)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path, 4, {"policy": {"w": torch.zeros(2)}}, {}, {})
    monkeypatch.undo()
    ck = load_checkpoint(path)  # the original, intact
    assert "0.weight" in ck.tensors["policy"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_4"]

    # Without a crash, re-saving a step replaces it.
    save_checkpoint(tmp_path, 4, {"policy": {"w": torch.zeros(2)}}, {}, {"x": 1})
    ck = load_checkpoint(path)
    assert list(ck.tensors["policy"]) == ["w"] and ck.state["x"] == 1


def test_prune_keeps_last(tmp_path):
    model, opt = _model_and_opt()
    for s in (1, 2, 3, 4):
        _save_simple(tmp_path, s, model, opt)
    (tmp_path / "checkpoints" / "step_0").mkdir()  # stale partial
    assert prune_checkpoints(tmp_path, None) == []
    removed = prune_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in removed) == ["step_0", "step_1", "step_2"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_3", "step_4"]
    with pytest.raises(ValueError):
        prune_checkpoints(tmp_path, 0)


def test_bad_group_name_rejected(tmp_path):
    with pytest.raises(ValueError, match="group name"):
        save_checkpoint(tmp_path, 0, {"../evil": {}}, {}, {})


def test_weights_digest_names_the_weights_not_the_path(tmp_path):
    from swarmrl.runs.manifest import weights_digest
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / "sub").mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"weights")
        (d / "sub" / "adapter.safetensors").write_bytes(b"lora")
        (d / "config.json").write_text("{}")
    assert weights_digest([a]) == weights_digest([b])  # same files elsewhere: same weights
    (b / "config.json").write_text('{"x": 1}')
    assert weights_digest([a]) == weights_digest([b])  # only weight files count
    (b / "sub" / "adapter.safetensors").write_bytes(b"lorA")  # one byte of one tensor file
    assert weights_digest([a]) != weights_digest([b])
    (b / "sub" / "adapter.safetensors").rename(b / "adapter2.safetensors")
    (b / "adapter2.safetensors").write_bytes(b"lora")
    assert weights_digest([a]) != weights_digest([b])  # a file moved is another model layout
