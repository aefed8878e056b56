"""Failure detectors: each fires on a constructed failing run and stays quiet on a healthy one."""

from __future__ import annotations

import json
import math

import pytest

from swarmrl.diagnostics.detectors import (ALL_ROLES, Alert, DetectorConfig, Detectors, RoleSignature,
                                           char_histogram, signature_distance)

MULT = {"generator": 3, "aggregator": 1, "judge": 1}


def run(metrics_per_step: list[dict], signatures_per_step: list[dict] | None = None,
        cfg: DetectorConfig | None = None) -> list[Alert]:
    det = Detectors(cfg or DetectorConfig())
    out = []
    for step, m in enumerate(metrics_per_step):
        sigs = signatures_per_step[step] if signatures_per_step else {}
        out += det.update(step, m, sigs, MULT)
    return out


def norms(gen: float, agg: float = 1.0, judge: float = 2.0) -> dict:
    return {"role/generator/grad_norm": gen, "role/aggregator/grad_norm": agg, "role/judge/grad_norm": judge}


# --- gradient amplification ---------------------------------------------------------------------

def test_amplification_fires_after_patience_once_and_again_after_clearing():
    # median of the single roles (1.0, 2.0) = 1.5; threshold 2.0 x 1.5 = 3.0
    steps = [norms(1.0), norms(3.3), norms(4.5), norms(6.0), norms(2.0), norms(3.1), norms(3.2)]
    alerts = run(steps)
    assert [(a.name, a.role, a.step) for a in alerts] == [("gradient_amplification", "generator", 2),
                                                          ("gradient_amplification", "generator", 6)]
    ev = alerts[0].evidence
    assert ev["grad_norm"] == 4.5 and ev["median_single_grad_norm"] == 1.5
    assert ev["ratio"] == pytest.approx(3.0) and ev["multiplicity"] == 3 and ev["steps"] == 2
    assert ev["single_grad_norms"] == {"aggregator": 1.0, "judge": 2.0}


def test_amplification_stays_quiet_on_a_healthy_run_and_on_single_spikes():
    # 2.9 / 1.5 < 2 every step; an isolated spike (one step) does not meet patience 2
    assert run([norms(2.9)] * 6) == []
    assert run([norms(1.0), norms(9.0), norms(1.0), norms(9.0), norms(1.0)]) == []
    # a *single*-multiplicity role far above the others is not amplification
    assert run([norms(1.0, agg=50.0, judge=1.0)] * 4) == []
    # no single-multiplicity baseline, or a zero one: nothing to compare with
    assert run([{"role/generator/grad_norm": 9.0}] * 4) == []
    assert run([norms(9.0, agg=0.0, judge=0.0)] * 4) == []


def test_amplification_patience_one():
    alerts = run([norms(1.0), norms(3.1)], cfg=DetectorConfig(patience=1))
    assert [(a.name, a.step) for a in alerts] == [("gradient_amplification", 1)]


# --- role capture ---------------------------------------------------------------------------------

GEN = RoleSignature(99.0, 1.0, [0.1, 0.7, 0.0, 0.2, 0.0])  # long prose
AGG = RoleSignature(9.0, 1.0, [0.0, 0.2, 0.6, 0.0, 0.2])  # a short tag: the choice


def test_signature_distance_by_hand():
    # |log 100 - log 10| + 0 + TV(0.1+0.5+0.6+0.2+0.2 = 1.6 -> 0.8)
    assert signature_distance(GEN, AGG) == pytest.approx(math.log(10) + 0.8)
    assert signature_distance(GEN, GEN) == 0.0
    assert char_histogram("a1 <b>!") == pytest.approx([1 / 7, 2 / 7, 2 / 7, 1 / 7, 1 / 7])
    assert char_histogram("") == [0.0] * 5
    sig = RoleSignature.from_texts(["ab", "<c>12"], [True, False])
    assert sig.mean_length == 3.5 and sig.compliance == 0.5
    assert sig.char_hist == pytest.approx([2 / 7, 3 / 7, 2 / 7, 0.0, 0.0])


def test_capture_fires_when_the_aggregator_writes_like_the_generator():
    captured = RoleSignature(99.0, 0.5, [0.1, 0.6, 0.1, 0.2, 0.0])
    sigs = [{"generator": GEN, "aggregator": AGG}, {"generator": GEN, "aggregator": captured},
            {"generator": GEN, "aggregator": captured}, {"generator": GEN, "aggregator": AGG},
            {"generator": GEN, "aggregator": captured}]
    alerts = run([{}] * 5, sigs)
    # fires at step 1, not again at 2, clears at 3 (back to its reference), fires again at 4
    assert [(a.name, a.role, a.step) for a in alerts] == [("role_capture", "aggregator", 1),
                                                          ("role_capture", "aggregator", 4)]
    ev = alerts[0].evidence
    # own: |log 100 - log 10| + 0.5 + TV(0.1,0.4,0.5,0.2,0.2 -> 0.7); to generator: 0 + 0.5 + TV(0.2 -> 0.1)
    assert ev["own_distance"] == pytest.approx(math.log(10) + 0.5 + 0.7)
    assert ev["nearest_role"] == "generator"
    assert ev["nearest_distance"] == pytest.approx(0.6)
    assert ev["distances"] == {"generator": pytest.approx(0.6)}


def test_capture_stays_quiet_on_drift_that_is_small_or_not_towards_another_role():
    wobble = RoleSignature(10.0, 0.9, [0.0, 0.25, 0.55, 0.0, 0.2])  # own distance log(11/10)+0.1+0.05 = 0.245
    assert signature_distance(wobble, AGG) == pytest.approx(math.log(1.1) + 0.15)
    longer = RoleSignature(30.0, 1.0, AGG.char_hist)  # own log(3.1) = 1.13 > 0.3, but to GEN 1.17 + 0.8
    assert signature_distance(longer, GEN) > signature_distance(longer, AGG) > 0.3
    sigs = [{"generator": GEN, "aggregator": AGG}, {"generator": GEN, "aggregator": wobble},
            {"generator": GEN, "aggregator": longer}, {"generator": GEN, "aggregator": longer}]
    assert run([{}] * 4, sigs) == []
    # a single role can never be captured
    assert run([{}] * 2, [{"generator": GEN}, {"generator": AGG}]) == []


# --- accuracy cliff -------------------------------------------------------------------------------

def test_cliff_fires_once_with_peak_evidence_and_again_after_recovery():
    accs = [0.3, 0.5, 0.6, None, 0.5, 0.4, 0.35, 0.5, 0.4]
    alerts = run([{} if a is None else {"val_accuracy": a} for a in accs])
    assert [(a.name, a.role, a.step) for a in alerts] == [("accuracy_cliff", ALL_ROLES, 5),
                                                          ("accuracy_cliff", ALL_ROLES, 8)]
    ev = alerts[0].evidence
    assert ev["peak"] == 0.6 and ev["peak_step"] == 2 and ev["current"] == 0.4
    assert ev["drop"] == pytest.approx(0.2)


def test_cliff_stays_quiet_on_a_healthy_run():
    accs = [0.2, 0.3, 0.25, 0.4, 0.3, 0.45, 0.5, 0.4, float("nan")]  # dips of at most 0.1
    assert run([{"val_accuracy": a} for a in accs]) == []


# --- state ----------------------------------------------------------------------------------------

def test_state_dict_is_json_and_resuming_gives_the_same_alerts():
    captured = RoleSignature(99.0, 0.5, [0.1, 0.6, 0.1, 0.2, 0.0])
    metrics = [{**norms(1.0), "val_accuracy": 0.5}, {**norms(3.3), "val_accuracy": 0.7},
               {**norms(4.0)}, {**norms(4.0), "val_accuracy": 0.5}, {**norms(5.0), "val_accuracy": 0.4}]
    sigs = [{"generator": GEN, "aggregator": AGG}] * 2 + [{"generator": GEN, "aggregator": captured}] * 3
    straight = Detectors(DetectorConfig())
    want = [straight.update(i, m, sigs[i], MULT) for i, m in enumerate(metrics)]
    assert sum(map(len, want)) == 3  # amplification @2, capture @2, cliff @3

    first = Detectors(DetectorConfig())
    got = [first.update(i, m, sigs[i], MULT) for i, m in enumerate(metrics[:2])]
    state = json.loads(json.dumps(first.state_dict()))
    resumed = Detectors(DetectorConfig())
    resumed.load_state_dict(state)
    got += [resumed.update(i, metrics[i], sigs[i], MULT) for i in range(2, 5)]
    assert got == want
    assert resumed.state_dict() == straight.state_dict()
    assert [h["name"] for h in straight.state_dict()["history"]] == [
        "gradient_amplification", "role_capture", "accuracy_cliff"]
    json.dumps(straight.state_dict())


def test_amplification_for_org_experts_with_the_observed_team():
    # The org fixes no multiplicity: the trainer passes the step's mean team (experts 4.5 agents
    # per rollout, the CEO 1). CEO norm 1.0 -> threshold 2.0; experts 2.5 then 3.0 for two steps.
    det = Detectors(DetectorConfig())
    steps = [{"role/ceo/grad_norm": 1.0, "role/expert/grad_norm": g} for g in (1.5, 2.5, 3.0)]
    alerts = [a for i, m in enumerate(steps) for a in det.update(i, m, {}, {"ceo": 1.0, "expert": 4.5})]
    assert [(a.name, a.role, a.step) for a in alerts] == [("gradient_amplification", "expert", 2)]
    assert "multiplicity 4.5" in alerts[0].message and alerts[0].evidence["multiplicity"] == 4.5


def test_role_grad_ratios_and_mean_amplification_by_hand():
    from swarmrl.diagnostics.detectors import mean_amplification, role_grad_ratios
    m = {"role/gen/grad_norm": 0.9, "role/agg/grad_norm": 0.2, "role/rev/grad_norm": 0.4}
    ratios, singles = role_grad_ratios(m, {"gen": 3, "agg": 1, "rev": 1})
    assert ratios == pytest.approx({"gen": 0.9 / 0.3})  # median of 0.2 and 0.4
    assert singles == {"agg": 0.2, "rev": 0.4}
    assert role_grad_ratios(m, {"gen": 3, "agg": 3, "rev": 3}) == ({}, {})  # no single-agent baseline
    rows = [{"role/gen/grad_norm": 0.6, "role/agg/grad_norm": 0.2, "role/gen/multiplicity": 3,
             "role/agg/multiplicity": 1},                                    # ratio 3.0
            {"step": 1},                                                     # no grad norms this step
            {"role/gen/grad_norm": 0.2, "role/agg/grad_norm": 0.2, "role/gen/multiplicity": 3,
             "role/agg/multiplicity": 1}]                                    # ratio 1.0
    assert mean_amplification(rows) == pytest.approx(2.0)
    assert mean_amplification([{"step": 0}]) is None
