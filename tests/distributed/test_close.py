"""One owner releases a run's resources: `Trainer.close` ends the backend (Ray workers, a cluster
it started, a sampling engine) and the task's sandbox pool, idempotently; Ctrl-C during a Ray
run leaves no Ray process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.build import RunParts, rollout_parts
from swarmrl.rl.trainer import Trainer

from dist_helpers import REPO, TINY, tiny_cfg


class FakeEngine:
    def __init__(self):
        self.closed = 0

    def close(self):
        self.closed += 1


def code_trainer() -> Trainer:
    cfg = tiny_cfg("task.name=code", "sandbox.mode=unsafe_local", "sandbox.workers=1")
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        return Trainer(cfg, build_tiny_policy(cfg.model))


def test_close_releases_the_sandbox_pool_and_the_engine_once():
    tr = code_trainer()
    engine = tr.policies.engine = FakeEngine()  # an engine the backend did not start is still the trainer's
    with tr:
        pass
    tr.close()  # idempotent
    assert engine.closed == 1 and tr.policies.engine is None
    with pytest.raises(RuntimeError, match="shutdown"):
        tr.task.pool.map([{"solution": "def f():\n    return 1\n", "entry_point": "f", "tests": []}])


def test_a_failing_part_does_not_keep_the_others_open():
    tr = code_trainer()
    engine = tr.policies.engine = FakeEngine()

    def broken():
        raise OSError("backend gone")
    tr.backend.close = broken
    with pytest.raises(OSError, match="backend gone"):
        tr.close()
    assert engine.closed == 1
    with pytest.raises(RuntimeError, match="shutdown"):
        tr.task.pool.map([{"solution": "", "entry_point": "f", "tests": []}])


def test_close_of_a_trainer_whose_init_stopped_half_way_closes_what_exists():
    tr = code_trainer()
    # build_run built the task, then failed before the backend and the policies
    half = RunParts(cfg=tr.cfg, policy=tr.policy, runtime=tr.runtime, task=tr.task)
    half.close()
    with pytest.raises(RuntimeError, match="shutdown"):
        tr.task.pool.map([{"solution": "", "entry_point": "f", "tests": []}])


def test_a_rollout_worker_closes_its_task_pool_and_engine():
    """What RayBackend.close asks of each idle worker before killing it."""
    from swarmrl.distributed.worker import RolloutWorker
    cfg = tiny_cfg("task.name=code", "sandbox.mode=unsafe_local", "sandbox.workers=1")
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        w = RolloutWorker(cfg.to_dict(), build_tiny_policy(cfg.model), 0, rollout_parts)
    engine = w.policies.engine = FakeEngine()
    w.close()
    w.close()
    assert engine.closed == 1
    with pytest.raises(RuntimeError, match="shutdown"):
        w.task.pool.map([{"solution": "", "entry_point": "f", "tests": []}])


def _marked(mark: str) -> dict[int, str]:
    """pid -> command line of every live process whose environment carries `mark` (Ray's
    raylet, GCS and workers inherit the driver's environment)."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if mark.encode() in (d / "environ").read_bytes():
                found[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours
            continue
    return found


def _wait(cond, timeout_s: float, what: str):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds Ray's processes through /proc")
def test_ctrl_c_during_a_ray_run_leaves_no_ray_process(tmp_path):
    pytest.importorskip("ray")
    init, out, mark = tmp_path / "init", tmp_path / "run", f"swarmrl-close-{uuid.uuid4().hex}"
    save_policy(build_tiny_policy(tiny_cfg().model), init)
    env = {**os.environ, "SWARMRL_TEST_MARK": mark, "PYTHONPATH": str(REPO / "src")}
    log = (tmp_path / "train.log").open("wb")  # a file, not a pipe: a full pipe would stall the run
    proc = subprocess.Popen(
        [sys.executable, "-m", "swarmrl.cli", "train", str(TINY), "--out", str(out), "--init", str(init),
         "distributed.backend=ray", "distributed.rollout_workers=2", "rl.steps=1000", "eval.val_interval=0",
         "run.progress=false", "run.checkpoint_every=0"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
        # Ctrl-C as a terminal delivers it: a test run started in the background (`pytest &` in a
        # script) has SIGINT ignored, and an ignored signal stays ignored across exec.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # Mid-run: the first step is logged and both rollout workers are up.
        _wait(lambda: proc.poll() is not None or ((out / "metrics.jsonl").exists()
                                                  and (out / "metrics.jsonl").read_text().strip()),
              300, "the first step")
        assert proc.poll() is None, (tmp_path / "train.log").read_text(errors="replace")[-3000:]
        workers = [c for c in _marked(mark).values() if c.startswith("ray::RolloutWorker")]
        assert len(workers) == 2, _marked(mark)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        assert proc.returncode != 0  # interrupted, not finished
        end = time.monotonic() + 60  # the raylet reaps its workers after the driver has gone
        while (left := _marked(mark)) and time.monotonic() < end:
            time.sleep(0.5)
        assert not left, f"left behind after Ctrl-C: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        for pid in _marked(mark):  # whatever a failed run left: later tests must not share the machine with it
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_trainer_that_fails_to_build_releases_what_it_already_holds():
    """The task's pool exists before the backend is made: a backend that fails must not leak it."""
    import swarmrl.build as build_module
    made = {}
    real = build_module.make_runtime

    def spy(cfg, tokenizer, task=None):
        made["runtime"], made["task"] = real(cfg, tokenizer, task)
        return made["runtime"], made["task"]

    def no_backend(*args):
        raise OSError("no cluster")
    cfg = tiny_cfg("task.name=code", "sandbox.mode=unsafe_local", "sandbox.workers=1")
    mp = pytest.MonkeyPatch()
    mp.setattr(build_module, "make_runtime", spy)
    mp.setattr(build_module, "make_backend", no_backend)
    try:
        with pytest.warns(RuntimeWarning, match="WITHOUT isolation"), pytest.raises(OSError, match="no cluster"):
            Trainer(cfg, build_tiny_policy(cfg.model))
    finally:
        mp.undo()
    with pytest.raises(RuntimeError, match="shutdown"):
        made["task"].pool.map([{"solution": "", "entry_point": "f", "tests": []}])


def test_an_unknown_estimator_fails_before_the_task_is_built(monkeypatch):
    """check_plugins runs first: no sandbox pool is started for a run that cannot train."""
    import swarmrl.build as build_module
    from swarmrl.registry import PluginError
    monkeypatch.setattr(build_module, "task_from_config", lambda cfg: pytest.fail("the task was built"))
    cfg = tiny_cfg("task.name=code", "sandbox.mode=unsafe_local", "sandbox.workers=1", "rl.advantage=no_such")
    with pytest.raises(PluginError, match="unknown advantage estimator 'no_such'"):
        Trainer(cfg, build_tiny_policy(cfg.model))
