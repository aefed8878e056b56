"""Rollout workers on Ray; the trainer's process is the learner.

Each step the learner publishes its trainable weights once through the object store
(`PolicySet.state_tensors()`: the whole model when shared, only the adapters when the policy
is LoRA), tagged with a version (= the number of updates applied = the step). Each worker
runs whole problem groups (distributed/backend.py `shard_groups`) and reports the version
that produced them.

Fault tolerance: a worker that dies is replaced by a new actor and its shard runs again
(sampling is seeded per turn, so the re-run produces the same rollouts); a step never
trains on fewer rollouts than configured — after `max_worker_restarts` deaths in one step it
stops with an error instead.

Asynchronous rollouts (`max_staleness` k > 0): when step s is collected, steps s+1..s+k are
already queued on the workers with weights v=s, so workers sample while the learner updates.
A rollout of step t made with weights v is t - v versions stale (at most k); the PPO ratio
against the behaviour log-probs the workers recorded is the importance correction.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from swarmrl.collective.state import Rollout
from swarmrl.distributed.backend import DistributedError, RolloutFactory, idle_metrics, shard_groups
from swarmrl.distributed.worker import RolloutWorker
from swarmrl.policy.device import cpu_groups

READY_TIMEOUT_S = 300.0  # a worker that cannot be scheduled or built by then is an error, not a hang
WORKER_CLOSE_TIMEOUT_S = 5.0  # for idle workers to close their pools and engines before they are killed


@dataclass
class _Job:
    step: int
    worker: int  # index of the worker slot the shard belongs to
    handle: object  # the actor it was sent to (to tell a dead worker from its replacement)
    rollouts: list[Rollout]  # as sent: un-run, so the shard can be sent again
    seed: int
    version: int
    future: object = None


def init_ray(address: str, num_cpus: int | None = None) -> bool:
    """Connect to (or start) a Ray cluster; True when this call started it (and must shut it down)."""
    import ray
    if ray.is_initialized():  # a cluster the caller manages (tests share one per module)
        return False
    if not address:
        # Ray's worker processes inherit this environment: make sure they import this swarmrl.
        src = str(Path(__file__).resolve().parents[2])
        os.environ["PYTHONPATH"] = os.pathsep.join([src] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, log_to_driver=False)
        return True
    check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except Exception as e:  # Ray raises ConnectionError, RuntimeError, TimeoutError... depending on the mode
        raise DistributedError(f"distributed.address={address!r}: cannot join the Ray cluster ({type(e).__name__}: {e})") from e
    return True


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """`host:port` and `ray://host:port`: fail in seconds with the cause, not after Ray's long retries."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise DistributedError(f"distributed.address={address!r}: expected 'auto', 'host:port' or 'ray://host:port'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise DistributedError(f"distributed.address={address!r}: Ray cluster unreachable ({e})") from e


class RayBackend:
    def __init__(self, cfg, policy, build):
        import ray
        self.ray, self.cfg, self.build, d = ray, cfg, build, cfg.distributed
        self.owns_cluster = init_ray(d.address)
        try:
            total = ray.cluster_resources().get("CPU", 0.0)
            need = d.rollout_workers * d.worker_cpus
            if need > total:
                raise DistributedError(
                    f"distributed.rollout_workers={d.rollout_workers} x worker_cpus={d.worker_cpus} needs {need:g} CPUs; "
                    f"the Ray cluster has {total:g} (lower rollout_workers or worker_cpus)")
            self.policy_ref = ray.put(policy)  # the base replica (before adapters wrap it), sent once
            self.cfg_dict = cfg.to_dict()
            self.actor_cls = ray.remote(num_cpus=d.worker_cpus, max_restarts=0)(RolloutWorker)
            self.workers = [self._spawn(i) for i in range(d.rollout_workers)]
            self._wait_ready(self.workers)
        except BaseException:
            self.close()
            raise
        self.policies = None
        self.weights: dict[int, object] = {}  # version -> object refs of the published weights and draft corpus
        self.draft_corpus: list = []  # published with the next weights (policy/speculative.py)
        self.pending: dict[int, list[_Job]] = {}  # step -> its shards in flight
        self.restarts_total = 0
        self._die: set[int] = set()

    # ---------------------------------------------------------------- workers
    def _spawn(self, index: int):
        return self.actor_cls.remote(self.cfg_dict, self.policy_ref, index, self.build)

    def _wait_ready(self, workers) -> None:
        try:
            self.ray.get([w.ready.remote() for w in workers], timeout=READY_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError as e:
            raise DistributedError(f"rollout workers not ready after {READY_TIMEOUT_S:.0f} s: the cluster cannot "
                                   f"schedule {len(workers)} x {self.cfg.distributed.worker_cpus} CPUs") from e

    def inject_failure(self, worker: int) -> None:
        """Test-only: worker `worker` exits (os._exit) at the start of its next call."""
        self._die.add(worker)

    def attach(self, runtime, actor, policies) -> None:
        self.policies = policies  # the learner's weights, published each step

    def set_draft_corpus(self, corpus: list) -> None:
        self.draft_corpus = corpus

    # ---------------------------------------------------------------- a step
    def run(self, step: int, make: RolloutFactory) -> tuple[list[Rollout], dict]:
        if step not in self.weights:
            # on the CPU: a worker (no GPU reserved) unpickles them
            self.weights[step] = [self.ray.put(cpu_groups(self.policies.state_tensors())),  # once per version
                                  self.ray.put(self.draft_corpus)]
        # The current step, then (async) up to max_staleness steps ahead, all with weights v=step.
        last = min(step + self.cfg.distributed.max_staleness, self.cfg.rl.steps - 1)
        for s in range(step, max(last, step) + 1):
            if s not in self.pending:
                self._launch(s, make, version=step)
        rollouts, restarts = self._gather(self.pending.pop(step))
        live = {j.version for jobs in self.pending.values() for j in jobs}
        self.weights = {v: ref for v, ref in self.weights.items() if v in live or v == step}
        stale = [step - r.policy_version for r in rollouts]  # as reported by the workers
        assert max(stale, default=0) <= self.cfg.distributed.max_staleness, stale
        return rollouts, {**idle_metrics(len(self.workers)), "distributed/worker_restarts": restarts,
                          "distributed/staleness_mean": sum(stale) / max(len(stale), 1),
                          "distributed/staleness_max": max(stale, default=0)}

    def _launch(self, step: int, make: RolloutFactory, version: int) -> None:
        rollouts, seed = make(step)
        jobs = [_Job(step, i, None, shard, seed, version) for i, shard in enumerate(shard_groups(rollouts, len(self.workers)))]
        for job in jobs:
            self._submit(job)
        self.pending[step] = jobs

    def _submit(self, job: _Job) -> None:
        job.handle = self.workers[job.worker]
        die = job.worker in self._die
        self._die.discard(job.worker)
        job.future = job.handle.run.remote(job.rollouts, job.seed, job.version, self.weights[job.version], die)

    def _gather(self, jobs: list[_Job]) -> tuple[list[Rollout], int]:
        """Every shard's rollouts; a shard whose worker died runs again on its replacement."""
        done: dict[int, list[Rollout]] = {}
        restarts = 0
        while len(done) < len(jobs):
            for k, job in enumerate(jobs):
                if k in done:
                    continue
                try:
                    done[k], _, _ = self.ray.get(job.future)
                except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError) as e:
                    if self.workers[job.worker] is job.handle:  # not replaced yet (its other jobs fail too)
                        restarts += 1
                        if restarts > self.cfg.distributed.max_worker_restarts:
                            raise DistributedError(
                                f"step {job.step}: {restarts} rollout workers died (limit distributed."
                                f"max_worker_restarts={self.cfg.distributed.max_worker_restarts}); last: {type(e).__name__}") from e
                        self.workers[job.worker] = self._spawn(job.worker)
                        self._wait_ready([self.workers[job.worker]])
                        self.restarts_total += 1
                    self._submit(job)  # the same shard, seeds and weights version: the same rollouts
        rollouts = sorted((r for out in done.values() for r in out), key=lambda r: r.index)
        expected = sum(len(j.rollouts) for j in jobs)
        if len(rollouts) != expected:  # never train silently on fewer rollouts than configured
            raise DistributedError(f"step {jobs[0].step}: {len(rollouts)} rollouts came back, {expected} were sent")
        return rollouts, restarts

    def close(self) -> None:
        """Idempotent; also on error and Ctrl-C. Queued shards are cancelled, each idle worker closes
        its task's sandbox pool and its engine, then every worker is killed (a busy one cannot
        answer: a running actor task is not interruptible) and a cluster this backend started is
        shut down, which ends its raylet and worker processes."""
        workers, self.workers = getattr(self, "workers", []), []
        try:
            for jobs in getattr(self, "pending", {}).values():
                for job in jobs:
                    self.ray.cancel(job.future)
            self.pending = {}
            if workers:
                closing = [w.close.remote() for w in workers]
                self.ray.wait(closing, num_returns=len(closing), timeout=WORKER_CLOSE_TIMEOUT_S)
        except Exception:  # a dead worker or a cluster already gone: nothing left to close gracefully
            pass
        finally:
            for w in workers:
                try:
                    self.ray.kill(w)
                except Exception:  # already dead
                    pass
            if self.owns_cluster and self.ray.is_initialized():
                self.ray.shutdown()
            self.owns_cluster = False
