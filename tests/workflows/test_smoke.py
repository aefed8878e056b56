"""Every workflow preset x policy sharing mode trains 2 steps on a tiny model, writes the
per-role diagnostics, and (isolated) resumes exactly from its per-adapter checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from swarmrl.cli import main
from swarmrl.runs.checkpoint import CheckpointError
from swarmrl.runs.rundir import wall_clock

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "configs" / "tiny_workflows.yaml")


def rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def init(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("wf-warmstart")
    assert main(["pretrain", TINY, f"warmstart.cache_dir={d}"]) == 0
    (ws,) = d.glob("warmstart-*")
    return str(ws)


@pytest.mark.parametrize("sharing", ["shared", "isolated", "isolated_full"])
@pytest.mark.parametrize("workflow", ["voting", "eval_opt", "orch_workers", "single", "org"])
def test_preset_x_sharing_trains_two_steps(workflow, sharing, init, tmp_path):
    out = tmp_path / "run"
    extra = ["workflow.max_experts=2"] if workflow == "org" else []
    assert main(["train", TINY, "--out", str(out), "--init", init, f"workflow.name={workflow}",
                 f"policy.sharing={sharing}", *extra]) == 0
    ms = rows(out)
    assert [m["step"] for m in ms] == [0, 1]
    roles = {k.split("/")[1] for k in ms[0] if k.startswith("role/") and k.endswith("/grad_norm")}
    assert roles  # per-role gradient norms every diagnostic step
    for m in ms:
        assert "val_accuracy" in m and "alerts" in m
        for role in roles:
            for key in ("perplexity", "entropy", "ratio_mean", "clip_frac", "output_length", "compliance"):
                assert f"role/{role}/{key}" in m, (role, key)


def test_isolated_run_resumes_exactly_and_refuses_a_checkpoint_missing_an_adapter(init, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    common = [TINY, "--init", init, "policy.sharing=isolated", "rl.advantage=_test_spread"]
    from tests.test_cli import SPREAD  # noqa: F401  (registers the always-nonzero test estimator)
    assert main(["train", *common, "--out", str(a), "rl.steps=2"]) == 0
    assert main(["train", *common, "--out", str(b), "rl.steps=4"]) == 0
    cfg = yaml.safe_load((a / "config.yaml").read_text())
    cfg["rl"]["steps"] = 4
    (a / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert main(["train", "--resume", str(a)]) == 0
    timeless = lambda rs: [{k: v for k, v in r.items() if not wall_clock(k)} for r in rs]  # noqa: E731
    assert timeless(rows(a)) == timeless(rows(b))
    ck = a / "checkpoints" / "step_4"
    assert (ck / "adapter_generator.safetensors").exists() and (ck / "adapter_aggregator.safetensors").exists()
    # an adapter missing from a checkpoint is refused with the file named
    from swarmrl.rl.loop import load_trained_policy
    (ck / "adapter_aggregator.safetensors").unlink()
    with pytest.raises(CheckpointError, match="adapter_aggregator"):
        load_trained_policy(ck)
