"""`learner.processes > 1` / `warmstart.processes > 1`: `train` / the warm start start their own ranks under torch.distributed.run
(distributed/launch.py). The launched run equals one process with the same rollout shards, and
the warm start trained on 2 ranks equals the one-process warm start, both within the
tolerances of tests/conftest.py (the ranks sum their gradients in another order); the errors of
a launch that cannot run here come before anything starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from swarmrl import api
from swarmrl.cli import main
from swarmrl.config import ConfigError
from swarmrl.distributed import launch as launch_module
from swarmrl.diagnostics.mfu import peak_key
from swarmrl.distributed.launch import WARMSTART, launch_needed, rank_config, run_ranks, warm_start_threads
from swarmrl.policy.warmstart import warmstart_key

from dist_helpers import TINY, TINY_LR, tiny_cfg
from test_torchrun import ARGS, rows, weights


def test_the_ranks_share_the_threads_and_a_single_strategy_becomes_ddp():
    ranked = rank_config(tiny_cfg("learner.processes=2", "run.threads=4"))
    assert (ranked.run.threads, ranked.learner.strategy, ranked.learner.processes) == (2, "ddp", 2)
    assert rank_config(tiny_cfg("learner.processes=2", "run.threads=1")).run.threads == 1  # never 0
    assert rank_config(tiny_cfg("learner.processes=2", "learner.strategy=fsdp")).learner.strategy == "fsdp"


def test_a_launch_is_needed_only_outside_a_launched_rank(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert not launch_needed(tiny_cfg())
    assert launch_needed(tiny_cfg("learner.processes=2"))
    assert not launch_needed(tiny_cfg("learner.processes=2"), WARMSTART)
    assert launch_needed(tiny_cfg("warmstart.processes=2"), WARMSTART)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert not launch_needed(tiny_cfg("learner.processes=2"))


def test_a_rank_never_launches_ranks(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="never launches"):
        run_ranks(["train"], 2)


@pytest.mark.parametrize("override, message", [
    ("distributed.backend=ray", "distributed.backend=local"),
    ("sampler.engine=vllm", "HF sampler"),
])
def test_a_launch_that_cannot_run_is_refused_before_it_starts(override, message, monkeypatch):
    monkeypatch.setattr(launch_module, "run_ranks", lambda *a, **k: pytest.fail("a rank was started"))
    with pytest.raises(ConfigError, match=message) as err:
        launch_module.launch(tiny_cfg("learner.processes=2", override), ["train"])
    assert "learner.processes=1" in str(err.value)


def test_more_ranks_than_gpus_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match="one rank on each GPU; this machine has 1"):
        rank_config(tiny_cfg("learner.processes=2", "model.device=cuda"))
    # model.device=auto lands on the GPU where there is one (the demo's config on a 1-GPU machine)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ConfigError, match="this machine has 1: set learner.processes to at most that, or model.device=cpu"):
        rank_config(tiny_cfg("learner.processes=2"))
    # the warm start trains the tiny model on the CPU (gloo), whatever device RL later uses
    assert rank_config(tiny_cfg("warmstart.processes=2", "model.device=cuda"), WARMSTART).warmstart.processes == 2


@pytest.mark.parametrize("key", ["learner.processes", "warmstart.processes"])
@pytest.mark.parametrize("bad", ["0", "65"])
def test_processes_out_of_range_are_refused(key, bad):
    with pytest.raises(ConfigError, match=rf"{key} must be in \[1, 64\]"):
        tiny_cfg(f"{key}={bad}")


def test_the_warm_start_key_follows_the_threads_each_process_computes_with_not_the_ranks():
    """The ranks compute what one process computes (policy/warmstart.py `ranked_backward`) at the
    same threads, so ranks of one thread each fill a one-thread process's cache entry; one process
    with 2 threads rounds otherwise on some CPUs and fills its own."""
    assert warm_start_threads(tiny_cfg("run.threads=2")) == 2
    assert warm_start_threads(tiny_cfg("run.threads=2", "warmstart.processes=2")) == 1
    assert warm_start_threads(tiny_cfg("run.threads=4", "warmstart.processes=2")) == 2
    assert warm_start_threads(tiny_cfg("run.threads=2", "warmstart.processes=3")) == 1  # never 0
    assert warm_start_threads(tiny_cfg("run.threads=2", "warmstart.threads=1")) == 1
    one_thread = warmstart_key(tiny_cfg("run.threads=1"))
    assert one_thread == warmstart_key(tiny_cfg("run.threads=2", "warmstart.processes=2"))
    assert one_thread == warmstart_key(tiny_cfg("run.threads=2", "warmstart.threads=1"))
    assert one_thread == warmstart_key(tiny_cfg("run.threads=3", "warmstart.processes=3"))
    two_threads = warmstart_key(tiny_cfg("run.threads=2"))
    assert two_threads != one_thread
    assert two_threads == warmstart_key(tiny_cfg("run.threads=2", "learner.processes=2"))  # training's ranks
    assert two_threads == warmstart_key(tiny_cfg("run.threads=4", "warmstart.processes=2"))


@pytest.mark.parametrize("key", [WARMSTART, "learner.processes"])
@pytest.mark.parametrize("threads", [2, 4])
def test_a_rank_names_the_warm_start_by_the_callers_key(key, threads):
    """A rank's run.threads is its share; the warm start's threads travel pinned, so the ranks
    look up (or fill) the entry the caller checked."""
    cfg = tiny_cfg(f"run.threads={threads}", "warmstart.processes=2", "learner.processes=2")
    ranked = rank_config(cfg, key)
    assert ranked.run.threads == threads // 2
    assert ranked.warmstart.threads == threads // 2
    assert warmstart_key(ranked) == warmstart_key(cfg)
    alone = tiny_cfg(f"run.threads={threads}", "learner.processes=2")  # a one-process warm start
    assert rank_config(alone).warmstart.threads == threads
    assert warmstart_key(rank_config(alone)) == warmstart_key(alone)


def test_warm_start_ranks_skip_the_training_checks():
    ranked = rank_config(tiny_cfg("warmstart.processes=2", "distributed.backend=ray"), WARMSTART)
    assert (ranked.run.threads, ranked.learner.strategy) == (1, "single")


def test_a_launched_run_equals_one_process(straight, init, tmp_path, run_match):
    """The command a user types, with learner.processes=2: this process starts the 2 ranks and
    waits; the run directory is the one a single process with the same 2 rollout shards writes."""
    run = tmp_path / "launched"
    # A stored peak above any measurement is what every rank uses (diagnostics/mfu.py), so the
    # run's peak is exactly the ranks' sum: the MFU of a step both ranks shared.
    cache = tmp_path / "cache"
    cache.mkdir()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # each rank's: run.threads=1 split over 2 ranks keeps 1
    key = peak_key(torch.device("cpu"), torch.float32, 2048)
    torch.set_num_threads(threads)
    (cache / "peak_flops.json").write_text(json.dumps({key: 1e15}))
    assert main(["train", *ARGS, "learner.processes=2", f"warmstart.cache_dir={cache}", "--out", str(run),
                 "--init", str(init)]) == 0
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in straight.iterdir())
    assert [r["perf/peak_tflops"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())] \
        == [2 * 1e3] * 2
    run_match.metrics(rows(run), rows(straight))
    run_match.weights(weights(run, 2), weights(straight, 2), TINY_LR, steps=2)
    recorded = api.load_run(run).config  # the caller's config: a resume derives the ranks' from it
    assert (recorded.learner.strategy, recorded.learner.processes) == ("single", 2)


def test_a_launched_run_resumes_on_its_ranks(straight, init, tmp_path, run_match):
    """`train --resume` of a run recorded with learner.processes=2 starts the ranks again."""
    run = tmp_path / "resumed"
    assert main(["train", *ARGS, "rl.steps=1", "learner.processes=2", "--out", str(run), "--init", str(init)]) == 0
    assert main(["train", "--resume", str(run), "rl.steps=2"]) == 0
    run_match.metrics(rows(run), rows(straight))
    run_match.weights(weights(run, 2), weights(straight, 2), TINY_LR, steps=2)


def test_a_launched_run_resumes_in_one_process(straight, init, tmp_path, run_match):
    run = tmp_path / "resumed_alone"
    assert main(["train", *ARGS, "rl.steps=1", "learner.processes=2", "--out", str(run), "--init", str(init)]) == 0
    assert main(["train", "--resume", str(run), "rl.steps=2", "learner.processes=1"]) == 0
    run_match.metrics(rows(run), rows(straight))
    run_match.weights(weights(run, 2), weights(straight, 2), TINY_LR, steps=2)


def test_the_warm_start_on_two_ranks_is_one_process_bit_for_bit(tmp_path, monkeypatch):
    """Each rank runs one thread, as the one-process reference does: the same kernels on the same
    micro-batches, the gradients added in the same order, so the weights are the same bits."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # the launcher's temporary files
    overrides = ["run.progress=false", "run.threads=1"]
    single = api.pretrain(str(TINY), [*overrides, f"warmstart.cache_dir={tmp_path / 'one'}"])
    launched = api.pretrain(str(TINY), [*overrides, "run.threads=2", "warmstart.processes=2",
                                        f"warmstart.cache_dir={tmp_path / 'two'}"])
    assert launched.name == single.name and (launched / "warmstart.json").is_file()
    stats = [json.loads((p / "warmstart.json").read_text()) for p in (single, launched)]
    assert (stats[0]["processes"], stats[1]["processes"]) == (1, 2)
    assert 0.0 <= stats[1]["perf/warmstart_rank_idle"] < 1.0 and "perf/warmstart_rank_idle" not in stats[0]
    assert stats[0]["final_loss"] == stats[1]["final_loss"]
    a, b = (load_file(p / "model.safetensors") for p in (launched, single))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not list((tmp_path / "tmp").iterdir())  # torchrun's logs went with the launch


def test_the_demo_from_nothing_cached_starts_its_ranks_once_and_evaluates_the_warm_start_after(tmp_path, capsys):
    """learner.processes and warmstart.processes both 2, nothing cached: the ranks start once;
    they warm-start together (one process's weights, bit for bit), then train; the warm start is
    evaluated after them."""
    out = tmp_path / "demo"
    assert main(["demo", "--config", str(TINY), "--out", str(out), "learner.processes=2", "warmstart.processes=2",
                 "run.threads=2", "rl.steps=1", f"warmstart.cache_dir={tmp_path / 'cache'}"]) == 0
    text = capsys.readouterr().out
    assert text.count("starting 2 processes") == 1
    assert text.index("2/4 RLCR training") < text.index("3/4 evaluate the warm-started policy") < text.index("4/4")
    summary = json.loads((out / "demo_summary.json").read_text())
    (cached,) = (tmp_path / "cache").glob("warmstart-*")
    # the warm start's phase is the ranks' own seconds; training holds the rest of the launch
    assert summary["phases_s"]["warm_start"] == round(json.loads((cached / "warmstart.json").read_text())["seconds"], 2)
    assert 0 < summary["phases_s"]["rl_steps"] <= summary["phases_s"]["train"]
    again = api.evaluate(cached, ["run.threads=2"], config=str(TINY), time_limit=summary["time_limit"])
    assert summary["eval_before"]["latency_mean"] == again["latency_mean"]  # the warm start it evaluated
    single = api.pretrain(str(TINY), ["run.progress=false", "run.threads=1", f"warmstart.cache_dir={tmp_path / 'one'}"])
    assert single.name == cached.name and json.loads((cached / "warmstart.json").read_text())["processes"] == 2
    a, b = (load_file(p / "model.safetensors") for p in (cached, single))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def init(tmp_path_factory) -> Path:
    return api.random_model(str(TINY), tmp_path_factory.mktemp("init") / "model")


@pytest.fixture(scope="module")
def straight(init, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("single") / "run"
    assert main(["train", *ARGS, "--out", str(run), "--init", str(init)]) == 0
    return run


def _processes_writing(run: Path) -> list[int]:
    """Live processes whose command line names `run` (the launcher and its ranks)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(run).encode() in cmdline.read_bytes() and b"zombie" not in cmdline.parent.joinpath("status").read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:  # gone meanwhile
            pass
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_a_terminated_launch_takes_its_ranks_with_it(init, tmp_path):
    """SIGTERM to the command a user typed (`kill`, a scheduler, `timeout`) stops the ranks too,
    instead of leaving them training with nobody waiting for them."""
    run = tmp_path / "terminated"
    cmd = [sys.executable, "-m", "swarmrl.cli", "train", *ARGS, "rl.steps=500", "learner.processes=2",
           "--out", str(run), "--init", str(init)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not ((run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "the launched run did not start training"
            time.sleep(0.5)
        assert len(set(_processes_writing(run)) - {proc.pid}) == 3  # the launcher and its 2 ranks
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _processes_writing(run) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _processes_writing(run) == []
        assert status == 128 + signal.SIGTERM  # as SIGTERM's default action would end it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _processes_writing(run):
            os.kill(pid, signal.SIGKILL)
