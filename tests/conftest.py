"""Suite-wide: the torch thread count, and how two runs are compared.

Threads. `SWARMRL_TEST_THREADS=N` runs every test with N torch intra-op threads (unset: torch's
default, one per core). The count is process-global and `rl.loop.train` sets its own
(`run.threads`), so it is set again before each test: a test that trains cannot change the
threads of the tests after it. Inside `train()` the run's `run.threads` applies, whatever
this variable says; Ray rollout workers always sample with one thread (distributed/worker.py).

Comparing runs (README "Guarantees"). Float kernels on CPU reduce in an order that depends on
the thread count (measured: the single-query attention of a decode step differs by ~6e-8 at 1
vs 2 threads), so a process sampling with another thread count records slightly different
behaviour log-probs, and the loss, gradients and weights that depend on them move in the last
bits. Token streams do not move: a token is the argmax of log-probs plus per-row seeded Gumbel
noise, and a ~1e-6 change reorders it only if two candidates tie that closely (then the rollout
check below fails; not seen). So:

* bit-exact (compare with ==): the same process or the same thread count on one machine
  (seeds, resume, `local` shards);
* across processes, backends, thread counts or machines: rollouts (token ids, texts, simulated
  times, scores, versions) exactly equal; floats within the tolerances below.

Tolerances, from measuring `local` (2 threads) against `ray` (1-thread workers) over 4 steps on
a 2-core machine: metrics differed by at most 2e-7 relative; log-probs by 9.5e-7; weights by
7.5e-9 per element while a step moves them by up to 1.2e-3. The `loss` of an on-policy step is
a sum of O(1) advantage-weighted terms that cancel to ~1e-8, so only an absolute bound fits
it: 1e-6, a few float32 epsilons (1.2e-7) of one term (measured 3.3e-9).

Adam divides each element's step by the root of that element's own squared-gradient average.
Where an element's gradients nearly cancel from one step to the next, a rounding-level change
in them moves the step by a visible fraction of it. LoRA's B matrices start at zero and hold
many such elements: after 2 steps at lr 3e-4, local against ray with isolated adapters, one
element differed by 2.2e-7 (7e-4 of a step) on a weight of 4e-5, beyond WEIGHT_ATOL. A
comparison after `steps` optimizer steps therefore also allows ADAM_NOISE_PER_STEP x lr per
step (1% of a step: 6e-6 after 2 steps at 3e-4); a real bug moves weights by about lr.
"""

from __future__ import annotations

import math
import os

import pytest
import torch

METRIC_RTOL, METRIC_ATOL = 1e-5, 1e-6
LOGPROB_ATOL = 1e-5
WEIGHT_RTOL, WEIGHT_ATOL = 1e-5, 1e-7
ADAM_NOISE_PER_STEP = 1e-2  # of lr, per optimizer step (module doc)


def _test_threads() -> int | None:
    raw = os.environ.get("SWARMRL_TEST_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"SWARMRL_TEST_THREADS must be a positive integer, got {raw!r}")
    return int(raw)


def pytest_configure(config) -> None:
    config._swarmrl_threads = _test_threads() or torch.get_num_threads()
    torch.set_num_threads(config._swarmrl_threads)


def pytest_report_header(config) -> str:
    return f"torch threads: {config._swarmrl_threads} (SWARMRL_TEST_THREADS={os.environ.get('SWARMRL_TEST_THREADS', 'unset')})"


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory):
    """The warm-start cache (paths.py) in a per-session tmp dir, never the user's ~/.cache, unless
    SWARMRL_CACHE_DIR is set already (CI may set it to keep warm starts between runs)."""
    if os.environ.get("SWARMRL_CACHE_DIR", "").strip():
        yield
        return
    mp = pytest.MonkeyPatch()
    mp.setenv("SWARMRL_CACHE_DIR", str(tmp_path_factory.mktemp("swarmrl-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _torch_threads(request):
    torch.set_num_threads(request.config._swarmrl_threads)
    yield


def _close(a, b, where: str) -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), f"{where}: {a!r} vs {b!r}"
        if math.isnan(a) or math.isnan(b):
            assert math.isnan(a) and math.isnan(b), f"{where}: {a!r} vs {b!r}"
            return
        assert a == pytest.approx(b, rel=METRIC_RTOL, abs=METRIC_ATOL), f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: keys differ: {sorted(a.keys() ^ b.keys())}"
        for k in a:
            _close(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)} entries"
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


class RunMatch:
    """Two runs of one config on different processes / backends / thread counts: see the module doc."""

    @staticmethod
    def metrics(a, b) -> None:
        """Metric rows (a dict or a list of them): same keys; counts, strings, alerts exact;
        floats within METRIC_RTOL / METRIC_ATOL. Drop wall-clock keys first."""
        _close(a, b, "metrics")

    @staticmethod
    def rollouts(a, b) -> None:
        """Finished rollouts: everything written to samples/ (texts, times, scores), every agent's
        token ids and mask, and the weights version exactly; behaviour log-probs within LOGPROB_ATOL."""
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert x.to_json() == y.to_json(), f"rollout {x.index}"
            assert x.policy_version == y.policy_version, f"rollout {x.index}"
            assert x.agents.keys() == y.agents.keys(), f"rollout {x.index}"
            for name, p in x.agents.items():
                q = y.agents[name]
                assert (p.ids, p.gen_mask) == (q.ids, q.gen_mask), f"rollout {x.index} agent {name}"
                gap = max((abs(u - v) for u, v in zip(p.logprobs, q.logprobs)), default=0.0)
                assert len(p.logprobs) == len(q.logprobs) and gap <= LOGPROB_ATOL, \
                    f"rollout {x.index} agent {name}: log-probs differ by {gap:.3g}"

    @staticmethod
    def weights(a: dict, b: dict, lr: float = 0.0, steps: int = 0) -> None:
        """name -> tensor: same names, shapes and dtypes; values within WEIGHT_RTOL / WEIGHT_ATOL,
        plus ADAM_NOISE_PER_STEP x lr for each of `steps` Adam steps behind them (module doc)."""
        assert a.keys() == b.keys()
        atol = WEIGHT_ATOL + ADAM_NOISE_PER_STEP * lr * steps
        for k in a:
            assert a[k].shape == b[k].shape and a[k].dtype == b[k].dtype, k
            gap = (a[k].double() - b[k].double()).abs().max().item() if a[k].numel() else 0.0
            assert torch.allclose(a[k], b[k], rtol=WEIGHT_RTOL, atol=atol), f"{k}: max difference {gap:.3g}"


@pytest.fixture
def run_match() -> type[RunMatch]:
    """`run_match.metrics / .rollouts / .weights`: rollouts exactly equal, floats within tolerance."""
    return RunMatch
