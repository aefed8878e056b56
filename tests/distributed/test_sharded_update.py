"""A sharded update (learner.strategy ddp | fsdp, 2 gloo processes) equals the one-process update.

Both compute the weights of every token over the whole minibatch; the ranks backpropagate
disjoint shares and SUM their gradients, so the only difference is the order of float
additions (and the micro-batch shapes each rank forms). Tolerances, for one step of 2
minibatches at the default rl.lr:

- weights: max |a - b| / max |b| over each checkpoint group (the whole model, or one role's
  adapter) <= 1e-6 (measured <= 4e-7, also per tensor of the shared model);
- the AdamW moments (running gradient statistics): max |a - b| / max |b| over each optimizer's
  tensors of one moment (e.g. the CEO adapter's `exp_avg`) <= 1e-5 (measured <= 6.5e-7). Per tensor (printed, not
  asserted) it reaches 2.7e-5: a LoRA A matrix gets no gradient while its B is still zero, then
  a tiny one, whose last-bit differences are large next to it.

Not asserted, printed: the step per tensor, max |dw_a - dw_b| / max |dw_b| (measured up to
~4e-5). Adam divides each gradient element by its own magnitude (plus eps = 1e-8), so an
element whose gradient nearly cancels turns a last-bit difference of the sum into a visible
difference of its step; a single process shows the same when only its micro-batch split
changes. LoRA B matrices start at zero, so for them the step is the weight.

Metrics: tests/conftest.py METRIC_RTOL / METRIC_ATOL. Run with -s to see the numbers.
"""

from __future__ import annotations

import pytest
import torch

from swarmrl.runs.rundir import wall_clock

from sharded_worker import one_update, setup, update_in_processes

CASES = [("ddp", "shared"), ("fsdp", "shared"), ("ddp", "isolated"), ("fsdp", "isolated"), ("ddp", "isolated_full")]
WEIGHT_REL, MOMENT_REL = 1e-6, 1e-5


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> dict:
    return update_in_processes(CASES, tmp_path_factory.mktemp("sharded"))


def rel_gap(a: dict, b: dict, base: dict | None = None) -> tuple[float, str]:
    """The largest per-tensor max|a - b| / max|b - base| over the names of b, and its name
    (base None: relative to b itself)."""
    assert a.keys() == b.keys(), sorted(a.keys() ^ b.keys())
    worst, name = 0.0, ""
    for k in b:
        assert a[k].shape == b[k].shape, k
        scale = (b[k].double() - (base[k].double() if base is not None else 0.0)).abs().max()
        gap = float((a[k].double() - b[k].double()).abs().max() / scale.clamp_min(1e-30))
        if gap > worst:
            worst, name = gap, k
    return worst, name


def group_gap(a: dict, b: dict) -> float:
    """max |a - b| / max |b| over a whole checkpoint group."""
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in b) / max(
        float(b[k].double().abs().max()) for k in b)


def moment_kinds(moms: dict) -> dict[str, list[str]]:
    """Tensor names by (slot, moment): "ceo/exp_avg" -> ["ceo/0/exp_avg", ...]."""
    kinds: dict[str, list[str]] = {}
    for name in moms:
        slot, _, kind = name.split("/")
        kinds.setdefault(f"{slot}/{kind}", []).append(name)
    return kinds


def moments(optims: dict) -> dict:
    return {f"{slot}/{i}/{k}": v for slot, sd in optims.items() for i, st in sd["state"].items()
            for k, v in st.items() if k != "step"}


@pytest.mark.parametrize("strategy,sharing", CASES)
def test_one_sharded_update_equals_the_single_process_update(sharded, strategy, sharing, run_match):
    metrics, upd, policies = one_update(sharing)
    got = sharded[(strategy, sharing)]
    ref = {g: {n: t.detach().clone() for n, t in sd.items()} for g, sd in policies.state_tensors().items()}
    init = setup(sharing)[1].state_tensors()
    assert got["tensors"].keys() == ref.keys()
    for g in ref:  # every slot trains on this batch, in one process and sharded
        for name, w in (("single", ref[g]), (strategy, got["tensors"][g])):
            moved = max(float((w[n] - init[g][n]).abs().max()) for n in w)
            assert moved > 1e-5, f"{name} {g}: the update must really move the weights (moved {moved:.3g})"
    for group in ref:
        gap = group_gap(got["tensors"][group], ref[group])
        step_gap, name = rel_gap(got["tensors"][group], ref[group], init[group])
        print(f"{strategy}/{sharing} {group}: relative weight difference {gap:.3g}, "
              f"relative step difference {step_gap:.3g} ({name})")
        assert gap <= WEIGHT_REL, f"{strategy}/{sharing} {group}: relative weight difference {gap:.3g} > {WEIGHT_REL}"
    a, b = moments(got["optims"]), moments(upd.state_dict())
    worst, name = rel_gap(a, b)
    print(f"{strategy}/{sharing}: relative AdamW moment difference per tensor {worst:.3g} ({name})")
    for kind, names in moment_kinds(b).items():
        gap = group_gap({n: a[n] for n in names}, {n: b[n] for n in names})
        print(f"{strategy}/{sharing}: relative AdamW moment difference {gap:.3g} ({kind})")
        assert gap <= MOMENT_REL, f"{strategy}/{sharing} optimizer {kind}: relative difference {gap:.3g} > {MOMENT_REL}"
    # The padding of the micro-batches each rank formed from its own share, and the prefixes its
    # share has in common: not training quantities; nor the ranks' wall-clock balance (perf/).
    drop = ("learner/pad_fraction", "learner/tokens_run_fraction")
    assert 0.0 <= got["metrics"]["perf/update_rank_idle"] < 1.0
    run_match.metrics({k: v for k, v in got["metrics"].items() if k not in drop and not wall_clock(k)},
                      {k: v for k, v in metrics.items() if k not in drop})
