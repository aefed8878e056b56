"""Scenarios: who takes part in a rollout and what each role may do (scenarios/base.py).

`workflow.name` selects one: a built-in below, or a user's class by `module:Name` spec.
"""

from swarmrl.registry import Registry
from swarmrl.scenarios.base import SCENARIO_METHODS, Scenario
from swarmrl.scenarios.graph import GraphScenario
from swarmrl.scenarios.org import OrgScenario, SingleScenario

SCENARIOS: Registry = Registry("scenario", required=SCENARIO_METHODS)
SCENARIOS.add("org", OrgScenario)
SCENARIOS.add("single", SingleScenario)
for _name in ("voting", "eval_opt", "orch_workers"):  # the workflow study's presets (workflows/graph.py)
    SCENARIOS.add(_name, GraphScenario)


def make_scenario(cfg) -> Scenario:
    """The scenario `cfg.workflow.name` names, built from the run's config."""
    scenario = SCENARIOS.get(cfg.workflow.name).from_config(cfg)
    scenario.groups = cfg.workflow.groups
    return scenario


__all__ = ["SCENARIOS", "GraphScenario", "OrgScenario", "Scenario", "SingleScenario", "make_scenario"]
