"""run.loggers: TensorBoard event files and an offline W&B run hold what metrics.jsonl holds."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.rl.loop import train
from swarmrl.runs.loggers import parse_loggers, scalars

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny_test.yaml"
FAST = ["eval.val_interval=0", "sampler.max_new_tokens_per_turn=8", "sampler.max_turns_per_agent=2",
        "rl.problems_per_step=1", "rl.rollouts_per_problem=2", "rl.role_grad_interval=0", "run.threads=1",
        "rl.steps=2", "run.samples_keep_all=true"]


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory, monkeypatch_module) -> Path:
    monkeypatch_module.delenv("WANDB_MODE", raising=False)  # the config's default, offline, applies
    cfg = load_config(TINY, [*FAST, "run.loggers=jsonl,tensorboard,wandb"])
    init = tmp_path_factory.mktemp("init") / "policy"
    save_policy(build_tiny_policy(cfg.model), init)
    run = tmp_path_factory.mktemp("logged") / "run"
    train(cfg, run, init_policy=init, log=lambda m: None)
    return run


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def test_parse_loggers_names_unknown_sinks():
    assert parse_loggers("jsonl") == []
    assert parse_loggers(" tensorboard, jsonl,wandb,tensorboard") == ["tensorboard", "wandb"]
    with pytest.raises(ValueError, match="unknown logger tensorbord"):
        parse_loggers("jsonl,tensorbord")


def test_scalars_keep_numbers_only():
    assert scalars({"a": 1, "b": 0.5, "c": None, "d": [1], "e": "x", "f": True, "g": math.nan}) == \
        {"a": 1.0, "b": 0.5, "f": 1.0}


def test_tensorboard_events_hold_the_metrics_scalars(logged_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(logged_run / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    rows = metrics(logged_run)
    want = scalars(rows[0])
    assert set(want) <= set(acc.Tags()["scalars"])
    for key, value in want.items():
        events = acc.Scalars(key)
        assert [e.step for e in events] == [r["step"] for r in rows]
        assert events[0].value == pytest.approx(value, rel=1e-6, abs=1e-6), key
    assert any(t.startswith("samples/rollout_") for t in acc.Tags()["tensors"])  # transcripts as text


def _wandb_records(path: Path):
    """Records of a W&B .wandb file: a 7-byte header, then LevelDB-log blocks of 32 KiB whose
    records are (crc32, length, type) + data; types 1 full, 2 first, 3 middle, 4 last."""
    data, block, pos, buf = path.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 1:
            yield chunk
        elif kind in (2, 3):
            buf = chunk if kind == 2 else buf + chunk
        elif kind == 4:
            yield buf + chunk


def test_wandb_offline_run_holds_the_history(logged_run):
    from wandb.proto import wandb_internal_pb2 as pb
    (runfile,) = (logged_run / "wandb").glob("offline-run-*/run-*.wandb")
    history = []
    for raw in _wandb_records(runfile):
        rec = pb.Record()
        rec.ParseFromString(raw)
        if rec.WhichOneof("record_type") == "history":
            history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
    rows = metrics(logged_run)
    assert [h["_step"] for h in history] == [r["step"] for r in rows]
    for h, r in zip(history, rows):
        for key, value in scalars(r).items():
            assert h[key] == pytest.approx(value, rel=1e-6, abs=1e-6), key


def test_a_bad_logger_name_fails_before_the_run_dir_exists(tmp_path):
    cfg = load_config(TINY, [*FAST, "run.loggers=jsonl,nope"])
    with pytest.raises(ValueError, match="unknown logger nope"):
        train(cfg, tmp_path / "run", init_policy=tmp_path / "unused", log=lambda m: None)
    assert not (tmp_path / "run").exists()


def test_samples_keep_all_writes_every_rollout_with_first_contexts(logged_run):
    rows = [json.loads(x) for x in (logged_run / "samples" / "step_0000.jsonl").read_text().splitlines()]
    assert len(rows) == 2  # rl.problems_per_step=1 x rl.rollouts_per_problem=2
    for r in rows:
        ceo = r["agents"][0]
        assert ceo["name"] == "ceo" and ceo["first_context"].startswith("ceo\n") and "\nmax=3\n" in ceo["first_context"]
        assert ceo["first_context"].endswith(r["turns"][0]["observation"])
        assert r["item_labels"] == {"1": "A", "2": "B", "3": "C", "4": "D"}


def test_a_resume_may_add_sinks_and_keep_every_sample():
    from swarmrl.rl.loop import resume_config
    cfg = resume_config(load_config(TINY).to_dict(), ["run.loggers=jsonl,tensorboard", "run.samples_keep_all=true",
                                                      "run.wandb_mode=disabled"])
    assert cfg.run.loggers == "jsonl,tensorboard" and cfg.run.samples_keep_all and cfg.run.wandb_mode == "disabled"
