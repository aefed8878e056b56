"""Role graphs: presets are valid, and every malformed graph is refused with its cause named."""

from __future__ import annotations

import pytest

from swarmrl.workflows.graph import RoleSpec, Workflow, WorkflowError, preset


def test_presets_have_the_papers_shapes_and_multiplicities_are_knobs():
    v = preset("voting")
    assert [(r.name, r.count, r.inputs, r.submits) for r in v.roles] == [
        ("generator", 3, (), False), ("aggregator", 1, ("generator",), True)]
    assert preset("voting", generators=5).multiplicity() == {"generator": 5, "aggregator": 1}
    e = preset("eval_opt")
    assert e.topological_order() == ["generator", "evaluator", "reviser"]
    assert e.role("reviser").inputs == ("generator", "evaluator")
    o = preset("orch_workers", workers=2)
    assert list(o.agent_roles()) == ["orchestrator", "worker-1", "worker-2", "synthesizer"]
    assert o.role("orchestrator").expects == "plan"


@pytest.mark.parametrize("roles, match", [
    ((RoleSpec("a", inputs=("b",)), RoleSpec("b", inputs=("a",), submits=True)), "cycle"),
    ((RoleSpec("a"), RoleSpec("b", submits=True)), r"unreachable"),
    ((RoleSpec("a", count=0, submits=True),), "multiplicity 0"),
    ((RoleSpec("a", inputs=("ghost",), submits=True),), "unknown input role 'ghost'"),
    ((RoleSpec("a", inputs=("a",), submits=True),), "its own input"),
    ((RoleSpec("a"),), "no role submits"),
    ((RoleSpec("a", submits=True, expects="poem"),), "expects 'poem'"),
    ((RoleSpec("a", submits=True), RoleSpec("a")), "duplicate"),
])
def test_bad_graphs_are_refused(roles, match):
    with pytest.raises(WorkflowError, match=match):
        Workflow("custom", roles).validate()


def test_unknown_workflow_and_role_are_named():
    with pytest.raises(WorkflowError, match="unknown workflow 'debate'"):
        preset("debate")
    with pytest.raises(WorkflowError, match="unknown role 'critic'"):
        preset("voting").role("critic")
