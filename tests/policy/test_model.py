"""Model factory: the tiny default, and the real loading path on a model saved in the test."""

import pytest
import torch

from swarmrl.config import ModelConfig
from swarmrl.policy.model import (ModelLoadError, build_tiny_policy, load_policy, load_run_policy,
                                  save_policy, save_run_policy, verify_run_policy)
from swarmrl.policy.tokenizer import END, build_tokenizer
from swarmrl.runs.checkpoint import CheckpointError

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)


def test_tokenizer_round_trips_text_and_makes_actions_single_tokens():
    tok = build_tokenizer()
    text = 'ceo max=8\nA:3+1+2\n>>[A]3+1=4+2=6<submit item="A">6</submit><hire role="expert"/> é'
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert len(tok.encode('<hire role="expert"/>', add_special_tokens=False)) == 1
    both = tok.encode('<hire role="expert" item="next"/><hire role="expert"/>', add_special_tokens=False)
    assert len(both) == 2 and both[0] != both[1]  # the board hire is its own token, not a prefix split
    assert tok.convert_tokens_to_ids(END) == tok.eos_token_id


def test_tiny_policy_is_qwen3_with_sizes_from_config():
    p = build_tiny_policy(TINY)
    assert p.model.config.model_type == "qwen3"
    assert p.model.config.hidden_size == 32 and p.model.config.num_hidden_layers == 1
    assert p.model.config.vocab_size == len(p.tokenizer)


def test_saved_model_loads_by_path_through_the_hub_code_path(tmp_path):
    p = build_tiny_policy(TINY, seed=3)
    save_policy(p, tmp_path / "m")
    assert (tmp_path / "m" / "model.safetensors").exists()
    q = load_policy(tmp_path / "m")
    ids = torch.tensor([p.tokenizer.encode("A:1+2+3\n>>", add_special_tokens=False)])
    with torch.no_grad():
        assert torch.allclose(p.model(ids).logits, q.model(ids).logits, atol=1e-6)
    assert q.end_id == p.end_id and q.pad_id == p.pad_id


@pytest.mark.parametrize("small_bytes, bars", [(None, False), (0, True)])
def test_progress_bars_only_for_weights_of_at_least_small_model_bytes(tmp_path, capsys, monkeypatch, small_bytes, bars):
    import swarmrl.policy.model as model_module
    from transformers.utils import logging as hf_logging
    if small_bytes is not None:  # every model counts as large
        monkeypatch.setattr(model_module, "SMALL_MODEL_BYTES", small_bytes)
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()  # as by default, whatever this environment set
    try:
        save_policy(build_tiny_policy(TINY), tmp_path / "m")
        load_policy(tmp_path / "m")
        assert hf_logging.is_progress_bar_enabled()  # the global setting is restored
    finally:
        if not was:
            hf_logging.disable_progress_bar()
    err = capsys.readouterr().err
    assert (("Writing model shards" in err) and ("Loading weights" in err)) == bars


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot load model"):
        load_policy(tmp_path / "nope")


@pytest.mark.parametrize("name, garbage", [("config.json", b"{not json"),
                                           ("model.safetensors", b"\xff" * 16 + b"no header")])
def test_corrupt_model_dir_is_a_clear_error_naming_it(tmp_path, name, garbage):
    d = tmp_path / "m"
    save_policy(build_tiny_policy(TINY), d)
    (d / name).write_bytes(garbage)
    with pytest.raises(ModelLoadError, match=f"cannot load model directory {d}: corrupt or incomplete"):
        load_policy(d)


def test_run_policy_manifest_catches_a_flipped_byte(tmp_path):
    d = save_run_policy(build_tiny_policy(TINY), tmp_path / "final", step=3)
    assert verify_run_policy(d)["step"] == 3
    target = d / "model.safetensors"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"corrupt model file {target}: sha256 mismatch"):
        load_run_policy(d)
    (d / "swarmrl_manifest.json").unlink()
    with pytest.raises(CheckpointError, match="swarmrl_manifest.json missing"):
        load_run_policy(d)


def test_a_tokenizer_bigger_than_the_embedding_is_refused(tmp_path):
    p = build_tiny_policy(TINY)
    p.tokenizer.add_tokens(["<extra-1>", "<extra-2>"])  # two ids past the model's embedding rows
    save_policy(p, tmp_path / "m")
    with pytest.raises(ModelLoadError, match="tokenizer has .* tokens but the model's embedding has .* rows"):
        load_policy(tmp_path / "m")
