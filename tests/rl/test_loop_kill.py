"""`kill -9` at random moments of a real `swarmrl train` process, then resume: always exact.

Slow (about a minute per trial on 2 busy cores, mostly interpreter start-up): run with
`pytest -m slow tests/rl/test_loop_kill.py`.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarmrl.cli import main
from swarmrl.policy.model import build_tiny_policy, save_policy
from tests.rl.test_loop_crash import FAST, TINY, assert_same_run, cfg_for

pytestmark = pytest.mark.slow

SEED = 20261201
TRIALS = 20
STEPS = 6
ARGS = [str(TINY), *FAST, f"rl.steps={STEPS}", "run.checkpoint_every=2"]
REPO = Path(__file__).resolve().parents[2]


def launch(args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "w") as f:
        return subprocess.Popen([sys.executable, "-m", "swarmrl.cli", *args], cwd=REPO, stdout=f,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def started(run: Path, log: Path, resume: bool) -> bool:
    """The process has got past interpreter start-up into the run's own work."""
    if resume:
        return log.exists() and "resuming" in log.read_text()
    return run.exists() or any(run.parent.glob(f".{run.name}.model.tmp_*"))


def kill_at(proc: subprocess.Popen, run: Path, log: Path, resume: bool, moment: float) -> float | None:
    """SIGKILL `proc` `moment` s after it started its work (moment < 0: -moment s after launch,
    during start-up). Returns None if the kill landed, else how long the work took."""
    t0 = time.monotonic()
    if moment >= 0:
        while not started(run, log, resume) and proc.poll() is None:
            time.sleep(0.005)
        t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < abs(moment):
        time.sleep(0.005)
    if proc.poll() is not None:
        return time.monotonic() - t0
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return None


def finished(run: Path) -> bool:
    return (run / "final" / "swarmrl_manifest.json").is_file()


def next_args(run: Path, init: Path) -> list[str]:
    if (run / "config.yaml").exists():
        return ["train", "--resume", str(run)]
    return ["train", *ARGS, "--out", str(run), "--init", str(init)]  # never --overwrite


def test_kill_9_at_random_moments_then_resume_is_bit_exact(tmp_path):
    init = tmp_path / "init"
    save_policy(build_tiny_policy(cfg_for(1).model), init)
    ref, ref_log = tmp_path / "ref", tmp_path / "ref.log"
    launched = time.monotonic()
    proc = launch(next_args(ref, init), ref_log)
    while not started(ref, ref_log, False) and proc.poll() is None:
        time.sleep(0.005)
    startup, t0 = time.monotonic() - launched, time.monotonic()
    assert proc.wait() == 0, ref_log.read_text()
    window = time.monotonic() - t0

    rng = random.Random(SEED)
    # The work's duration varies with the machine's load: the window shrinks to the fastest
    # fresh run seen, so that the kills spread over the whole run rather than after its end.
    windows, landed = [window], 0
    for i in range(TRIALS):
        run, log = tmp_path / f"trial{i}", tmp_path / f"trial{i}.log"
        # A second kill, during the resume, in half of the trials.
        for attempt in range(1 + (rng.random() < 0.5)):
            if finished(run):
                break
            resume = (run / "config.yaml").exists()
            moment = rng.uniform(-0.15, 1.0)  # about a seventh of the kills land during start-up
            moment = moment * startup / 0.15 if moment < 0 else moment * min(windows)
            attempt_log = log.with_suffix(f".{attempt}.log")
            took = kill_at(launch(next_args(run, init), attempt_log), run, attempt_log, resume, moment)
            landed += took is None
            if took is not None and not resume and moment >= 0:
                windows.append(took)
        if not finished(run):
            # The kills are what is under test; finishing needs no fresh interpreter.
            assert main(next_args(run, init)) == 0, f"trial {i}"
        assert_same_run(run, ref)
        leftovers = [p for p in run.rglob(".*") if ".tmp_" in p.name or ".old_" in p.name]
        assert leftovers == [], f"trial {i}: {leftovers}"
    assert landed >= TRIALS  # most processes were really killed, not finished on their own
