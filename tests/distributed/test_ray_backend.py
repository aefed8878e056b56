"""The Ray backend on a local 2-CPU cluster (one per module): the local backend's rollouts and,
within tolerance, its numbers (workers sample with 1 thread, this process with
SWARMRL_TEST_THREADS / torch's default; tests/conftest.py), a worker killed mid-step, resume
across backends, too many workers, async staleness."""

from __future__ import annotations

import json

import pytest
import yaml

from swarmrl.distributed import DistributedError
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.rl.loop import train
from swarmrl.rl.trainer import Trainer

from dist_helpers import TINY_LR, timeless, tiny_cfg

ray = pytest.importorskip("ray")
RAY = ("distributed.backend=ray", "distributed.rollout_workers=2")


@pytest.fixture(scope="module")
def cluster():
    from swarmrl.distributed.ray_backend import init_ray
    started = init_ray("", num_cpus=2)  # shared by every test here: Ray start-up takes seconds
    yield
    if started:
        ray.shutdown()


def run_steps(cfg, n: int, kill_worker: int | None = None):
    trainer = Trainer(cfg, build_tiny_policy(cfg.model))
    try:
        if kill_worker is not None:
            trainer.backend.inject_failure(kill_worker)
        out = [trainer.step() for _ in range(n)]
        return [m for m, _ in out], [r for _, r in out], {k: v.clone() for g in trainer.policies.state_tensors().values()
                                                          for k, v in g.items()}
    finally:
        trainer.close()


def test_ray_workers_give_the_local_backends_numbers(cluster, run_match):
    """2 steps, 2 rollout workers: the local backend's rollouts; its metrics and weights within tolerance."""
    local_m, local_r, local_w = run_steps(tiny_cfg("distributed.rollout_workers=2"), 2)
    ray_m, ray_r, ray_w = run_steps(tiny_cfg(*RAY), 2)
    run_match.metrics([timeless(m) for m in ray_m], [timeless(m) for m in local_m])
    assert any(m["grad_norm"] > 0 for m in ray_m)  # the second step ran on published (changed) weights
    for a, b in zip(local_r, ray_r):
        run_match.rollouts(a, b)
    run_match.weights(local_w, ray_w, TINY_LR, steps=2)
    assert [m["distributed/staleness_max"] for m in ray_m] == [0, 0]


def test_a_worker_killed_mid_step_is_replaced_and_its_rollouts_rerun(cluster, run_match):
    cfg = tiny_cfg(*RAY)
    (m,), (rollouts,), _ = run_steps(cfg, 1, kill_worker=1)
    assert m["distributed/worker_restarts"] == 1
    assert len(rollouts) == cfg.rl.problems_per_step * cfg.rl.rollouts_per_problem
    assert [r.index for r in rollouts] == list(range(len(rollouts)))
    (ref,), (ref_rollouts,), _ = run_steps(tiny_cfg("distributed.rollout_workers=2"), 1)
    run_match.rollouts(rollouts, ref_rollouts)  # the re-run is the same run
    run_match.metrics(timeless(m, ("distributed/",)), timeless(ref, ("distributed/",)))


def test_more_workers_than_cpus_is_refused_before_training(cluster):
    cfg = tiny_cfg("distributed.backend=ray", "distributed.rollout_workers=3", "rl.problems_per_step=3")
    with pytest.raises(DistributedError, match="needs 3 CPUs; the Ray cluster has 2"):
        Trainer(cfg, build_tiny_policy(cfg.model))


def _rows(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def _raise_steps(run, steps: int):
    p = run / "config.yaml"
    cfg = yaml.safe_load(p.read_text())
    cfg["rl"]["steps"] = steps
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))


@pytest.mark.slow
@pytest.mark.parametrize("first,then", [("ray", "local"), ("local", "ray")])
def test_resume_across_backends_equals_a_straight_local_run(cluster, tmp_path, first, then, run_match):
    init = tmp_path / "init"
    cfg = tiny_cfg("distributed.rollout_workers=2")
    save_policy(build_tiny_policy(cfg.model), init)
    straight = train(tiny_cfg("distributed.rollout_workers=2", "rl.steps=4"), tmp_path / "straight", init, log=lambda *_: None)
    run = train(tiny_cfg("distributed.rollout_workers=2", f"distributed.backend={first}"), tmp_path / "run", init,
                log=lambda *_: None)
    _raise_steps(run.path, 4)
    train(cfg, run.path, resume=True, resume_overrides=[f"distributed.backend={then}"], log=lambda *_: None)
    run_match.metrics([timeless(m) for m in _rows(run.path)], [timeless(m) for m in _rows(straight.path)])
    from safetensors.torch import load_file
    a = load_file(str(run.path / "checkpoints/step_4/policy.safetensors"))
    b = load_file(str(straight.path / "checkpoints/step_4/policy.safetensors"))
    run_match.weights(a, b, TINY_LR, steps=4)


@pytest.mark.slow
def test_async_rollouts_are_bounded_stale_and_logged(cluster):
    cfg = tiny_cfg(*RAY, "distributed.max_staleness=1", "rl.steps=3")
    ms, rs, _ = run_steps(cfg, 3)
    assert [m["distributed/staleness_max"] for m in ms] == [0, 1, 1]
    assert all(len(r) == 4 for r in rs)
    assert all(m["loss"] == m["loss"] for m in ms)  # finite (the PPO ratio corrects stale rollouts)


def test_isolated_lora_policy_publishes_adapters_only(cluster, run_match):
    """Isolated LoRA adapters sampled on Ray workers: the local backend's metrics, and its adapters
    within tolerance (Adam's noise on LoRA B included, tests/conftest.py)."""
    cfg = tiny_cfg(*RAY, "workflow.name=voting", "policy.sharing=isolated", "workflow.generators=2")
    local = run_steps(tiny_cfg("distributed.rollout_workers=2", "workflow.name=voting", "policy.sharing=isolated",
                               "workflow.generators=2"), 2)
    dist = run_steps(cfg, 2)
    run_match.metrics([timeless(m) for m in dist[0]], [timeless(m) for m in local[0]])
    run_match.weights(local[2], dist[2], TINY_LR, steps=2)
