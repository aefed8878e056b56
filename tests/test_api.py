"""The public Python API (`import swarmrl`): train, evaluate, load_run and resume on the tiny config.

Imports only `swarmrl` itself, as a user of the package would.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import swarmrl

TINY = Path(__file__).parents[1] / "configs" / "tiny_test.yaml"
OVERRIDES = ["rl.steps=2", "eval.val_interval=0", "run.threads=1"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> swarmrl.Run:
    """A 2-step training run from a random tiny model (no warm start: fast)."""
    d = tmp_path_factory.mktemp("api")
    init = swarmrl.random_model(TINY, d / "init", overrides=OVERRIDES)
    return swarmrl.train(TINY, d / "run", overrides=OVERRIDES, init=init, log=lambda *a: None)


def test_train_returns_a_run(run):
    assert isinstance(run, swarmrl.Run)
    assert isinstance(run.config, swarmrl.Config)
    assert run.config.rl.steps == 2
    assert [r["step"] for r in run.metrics] == [0, 1]
    assert run.steps == 2 and run.finished and run.final_dir.is_dir()
    assert run.checkpoints and all(p.is_dir() for p in run.checkpoints)
    curve = run.score_curve()
    assert [s for s, _ in curve] == [0, 1] and all(0.0 <= v <= 1.0 for _, v in curve)


def test_evaluate_a_run(run):
    m = swarmrl.evaluate(run.path, problems=2)
    assert 0.0 <= m["score_mean"] <= 1.0
    assert m["problems"] == 2


def test_load_run_reads_it_back(run):
    back = swarmrl.load_run(run.path)
    assert back.path == run.path
    assert back.config == run.config
    assert back.metrics == run.metrics


def test_load_run_of_a_non_run_is_an_error(tmp_path):
    with pytest.raises(swarmrl.ConfigError, match="not a run directory"):
        swarmrl.load_run(tmp_path)


def test_resume_adds_a_step(run, tmp_path):
    import shutil
    copy = tmp_path / "run"
    shutil.copytree(run.path, copy)
    more = swarmrl.resume(copy, overrides={"rl.steps": 3}, log=lambda *a: None)
    assert [r["step"] for r in more.metrics] == [0, 1, 2]
    assert more.metrics[:2] == swarmrl.load_run(run.path).metrics[:2]
    assert more.config.rl.steps == 3


def test_train_needs_an_out_dir():
    with pytest.raises(swarmrl.ConfigError, match="needs --out"):
        swarmrl.train(TINY)


def test_every_public_name_is_documented():
    missing = []
    for name in swarmrl.__all__:
        obj = getattr(swarmrl, name)
        if inspect.isclass(obj) or inspect.isroutine(obj):
            doc = (obj.__doc__ or "").strip()
            if not doc or (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")):
                missing.append(name)
        elif not swarmrl.VALUE_DOCS.get(name):  # values (the version, the registries)
            missing.append(name)
    assert not missing, f"no docstring: {missing}"
    assert swarmrl.__doc__ and all(name in swarmrl.__doc__ for name in swarmrl.__all__)


def test_version():
    assert swarmrl.__version__ == "0.1.0"


def test_import_is_cheap():
    code = ("import sys, swarmrl; heavy = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"`import swarmrl` imported {out}"


@pytest.mark.parametrize("overrides, sizes", [
    ([], [1, 2, 4, 8]),  # the full team (CEO + 3 experts) is already on the default grid
    (["workflow.max_experts=8"], [1, 2, 4, 8, 9]),  # the demo's: 9 agents trained, so 9 is measured
    (["workflow.max_experts=5"], [1, 2, 4, 6, 8]),
    (["workflow.name=eval_opt"], [1]),  # a fixed team is scored as it is
])
def test_scale_measures_the_trained_full_team_by_default(overrides, sizes):
    from swarmrl.api import _default_team_sizes
    from swarmrl.config import load_config
    assert _default_team_sizes(load_config(TINY, overrides)) == sizes
