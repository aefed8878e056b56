"""`PipelineScenario`: a custom role graph (workflow) in one file, as a swarmrl plugin.

    solver x N  ->  checker  ->  reviewer (submits)
    solver x N  ------------------>  reviewer

N solvers (`workflow.generators`) each solve every item; a checker gives a yes / no verdict
on each solver's candidates; a reviewer sees the solvers' candidates and the checker's
verdicts and submits one candidate per item (`expects="choice"`): only the reviewer's
submissions are graded. Not a preset: voting has no checker, eval_opt has one generator and
a reviser that solves again.

Every role of a fixed graph is staffed at t = 0 and the graph is checked when it is built
(workflows/graph.py `Workflow.validate`): a role whose output never reaches the reviewer is
a `WorkflowError` before training starts. Run it (from the repository root) on arith; the
warm start inherited from GraphScenario demonstrates the presets (voting, eval_opt,
orch_workers) and a solo agent, not this graph, and is shared with them through its cache:

    swarmrl train configs/tiny_test.yaml --out runs/pipeline \
        workflow.name=examples/pipeline_workflow.py:PipelineScenario workflow.generators=2 rl.steps=2

or from a model directory with `--init DIR` (needed with a task that has no demonstrations).
"""

from __future__ import annotations

from swarmrl.scenarios.graph import GraphScenario
from swarmrl.workflows.graph import RoleSpec, Workflow


def pipeline(solvers: int = 2) -> Workflow:
    return Workflow("pipeline", (
        RoleSpec("solver", solvers),
        RoleSpec("checker", inputs=("solver",), expects="verdict"),
        RoleSpec("reviewer", inputs=("solver", "checker"), submits=True, expects="choice"),
    )).validate()


class PipelineScenario(GraphScenario):
    """GraphScenario on the `pipeline` graph; `workflow.generators` solvers (2 by default here)."""

    @classmethod
    def from_config(cls, cfg) -> "PipelineScenario":
        w = cfg.workflow
        return cls(pipeline(w.generators), w.generators, w.workers, w.max_experts)
