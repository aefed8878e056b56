"""The scenario protocol: who takes part in a rollout and what each role may do.

The runtime (collective/runtime.py) is one event loop for every multi-agent structure; a
scenario supplies everything that differs between them:

- who exists at t = 0 and who may hire (`staff`, `hires`, `team_cap`, `max_team_size`);
- what each agent is told first (`header`; `describe` and `tool_docs` under the chat protocol);
- which actions each role may take (`actions`), the handlers of actions only this scenario
  has (`handlers`), and the error an agent gets for any other (`refusal`);
- who counts as a teammate for direct messages (`is_teammate`);
- whose submissions are the graded answer (`submits`) and what output each role owes
  (`expects`, for format-compliance diagnostics);
- what happens when an agent finishes (`agent_finished`: e.g. routing outputs downstream);
- roles and multiplicities (`role_types`, `multiplicity`), for policies and the loss;
- the scripted demonstrations of the warm start (`demo_set`, `demonstrations`).

Built-ins: the RLCR org (scenarios/org.py: a CEO who hires), `single` (the org without
hiring), and the fixed role graphs (scenarios/graph.py). A user's scenario subclasses
`Scenario` (or `GraphScenario`) in their own file and is named in the config as
`workflow.name=path/to/file.py:MyScenario` (docs/ARCHITECTURE.md, "Add a scenario").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from swarmrl.collective.actions import Action
    from swarmrl.collective.state import Agent, Rollout

# (runtime, rollout, acting agent, action, simulated time) -> an error line, or None on success
Handler = Callable[[Any, "Rollout", "Agent", "Action", float], "str | None"]

# Actions every scenario's agents may take (their handlers live in the runtime).
CORE_ACTIONS = ("submit", "take", "msg", "post", "read", "wait", "done")

# Methods the registry checks a scenario class for (the protocol).
SCENARIO_METHODS = ("role_types", "multiplicity", "max_team_size", "team_size", "team_cap", "staff", "header", "actions",
                    "handlers", "refusal", "is_teammate", "submits", "expects", "agent_finished", "demo_count",
                    "demo_key", "demonstrations")


class Scenario:
    """Base class with the defaults most scenarios want; override what differs."""

    name: str = "scenario"
    groups: int = 1  # workflow.groups: agents in creation order take turns over the groups (make_scenario)
    hires: bool = False  # True when a role may hire at run time (team size is then a policy choice)
    manager_hires: int = 0  # hires each hired agent may make in turn (a hierarchy; 0: the CEO alone hires)
    span: int = 0  # a two-level hierarchy's span of control (collective/org.py `Org.span`; 0: flat)
    demo_set: str = ""  # which scripted demonstrations the warm start uses ("" = none)

    @classmethod
    def from_config(cls, cfg) -> "Scenario":
        """Build from the run's `Config` (override to read `cfg.workflow` options)."""
        return cls()

    # ------------------------------------------------------------------ structure
    def role_types(self) -> list[str]:
        """Role types in a fixed order: one policy slot each under isolated sharing."""
        raise NotImplementedError

    def multiplicity(self) -> dict[str, int]:
        """Agents per role type where fixed (the loss's multiplicity division); {} if chosen at run time."""
        return {}

    def max_team_size(self) -> int:
        """The largest team a rollout can have (evaluation and scaling refuse more)."""
        return sum(self.multiplicity().values()) or 1

    def team_size(self, r: "Rollout") -> int:
        """The rollout's team size for the metrics: every agent it staffed."""
        return len(r.agents)

    def team_cap(self, requested: int | None) -> int:
        """Experts the rollout's org may hire, given a requested cap (None: the scenario's default)."""
        return 0

    # ------------------------------------------------------------------ a rollout's start
    def staff(self, runtime, r: "Rollout", prestaffed: int = 0) -> None:
        """Create the agents present at t = 0 (`runtime.add_agent`) and any channels."""
        raise NotImplementedError

    def header(self, r: "Rollout", name: str, role: str) -> str:
        """The first text in an agent's context: who it is, then the problem (`r.problem_text(name)`:
        the agent's group's variant)."""
        raise NotImplementedError

    def describe(self, r: "Rollout", name: str, role: str) -> str:
        """Who the agent is and how its team works, in words (the chat protocol's system message
        opens with it; the compact protocol uses `header`)."""
        return f"You are {name}, an agent with the role {role} in a team of AI agents that solves one problem together."

    def tool_docs(self) -> dict[str, tuple[str, str, str]]:
        """(syntax, what it does, example) of this scenario's own action kinds, for the chat
        protocol's tool list (collective/tools.py has the built-in ones)."""
        return {}

    # ------------------------------------------------------------------ actions
    def actions(self, role: str) -> tuple[str, ...]:
        """Every action kind an agent of `role` may take."""
        return CORE_ACTIONS

    def handlers(self) -> dict[str, Handler]:
        """Handlers of the actions only this scenario has (the runtime's own cover CORE_ACTIONS)."""
        return {}

    def refusal(self, role: str, kind: str) -> str:
        """The error line an agent of `role` sees for an action kind it may not take."""
        return f"error: <{kind}> is not your role's action"

    def is_teammate(self, r: "Rollout", name: str) -> bool:
        """May agents of this rollout send a direct message to `name`?"""
        return name in r.agents

    def submits(self, role: str) -> bool:
        """Are this role's submissions graded as the answer (else: proposals for others)?"""
        return True

    def expects(self, role: str) -> str | None:
        """The output kind this role owes (workflows/graph.py EXPECTS), None if any valid action will do."""
        return None

    def agent_finished(self, runtime, r: "Rollout", agent: "Agent", now: float) -> None:
        """An agent ended (done, cut, idle): e.g. deliver outputs to the roles downstream."""

    # ------------------------------------------------------------------ warm start
    def demo_count(self, per_strategy: int) -> int:
        """How many demonstration rollouts: `warmstart.demos_per_strategy` per strategy shown."""
        return per_strategy

    def demo_key(self) -> dict:
        """The settings the demonstrations depend on (part of the warm start's cache key)."""
        return {}

    def demonstrations(self, runtime, scripts, tokenizer, end_id: int, n: int, seed: int):
        """Scripted rollouts for the warm start: (rollouts not yet run, an actor that plays them,
        stats for the log). `scripts` is the task's `scripts()`; None when there are none."""
        raise NotImplementedError(f"scenario {self.name!r} has no scripted demonstrations")
