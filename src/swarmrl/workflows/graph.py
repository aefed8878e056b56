"""Fixed multi-agent workflows as declarative role graphs (the workflow study's presets).

A workflow is a list of roles. Each role has a multiplicity (how many agents play it), the
roles whose outputs it sees (`inputs`), whether its submissions are the workflow's graded
answer (`submits`), and the kind of output its slot expects (`expects`, used for format
compliance and by the scripted demonstrators):

    answer   solve items and <submit> them (generator, worker, reviser, solver)
    choice   <submit> one of the candidates shown (aggregator, synthesizer)
    verdict  <verdict item="A">yes|no</verdict> on each candidate (evaluator)
    plan     <assign who="worker-1" item="A-C"/> (orchestrator)

All of them run on the collective runtime and its clock as scenarios (scenarios/graph.py):
a role whose inputs are not all finished waits (simulated time passes), and the deadline
truncates the score as in RLCR. The RLCR `org` (a CEO who hires) is not a fixed graph but a
scenario of its own (scenarios/org.py), and `single` is the org without hiring.

`role type` = the role's name; all agents of a role share one adapter under isolated
policies ("all generators share the generator adapter", as in the paper).
"""

from __future__ import annotations

from dataclasses import dataclass

from swarmrl.config import ConfigError

EXPECTS = ("answer", "choice", "verdict", "plan")


class WorkflowError(ConfigError):
    """A workflow definition or setting is wrong; the message names it."""


@dataclass(frozen=True)
class RoleSpec:
    """One role of a `Workflow`: its name, how many agents play it, whose outputs it receives,
    whether its submissions are graded, and what it is expected to produce."""

    name: str  # role type; agents are named `name` (count 1) or `name-1..n`
    count: int = 1  # multiplicity
    inputs: tuple[str, ...] = ()  # role types whose outputs this role receives
    submits: bool = False  # its <submit>s are graded (the workflow's answer)
    expects: str = "answer"  # one of EXPECTS

    def agent_names(self) -> list[str]:
        return [self.name] if self.count == 1 else [f"{self.name}-{i + 1}" for i in range(self.count)]


@dataclass(frozen=True)
class Workflow:
    """A named role graph: the roles (`RoleSpec`) of a graph scenario and who feeds whom."""

    name: str
    roles: tuple[RoleSpec, ...]

    def role(self, name: str) -> RoleSpec:
        for r in self.roles:
            if r.name == name:
                return r
        raise WorkflowError(f"workflow {self.name}: unknown role '{name}' (roles: {[r.name for r in self.roles]})")

    def downstream(self, name: str) -> list[RoleSpec]:
        return [r for r in self.roles if name in r.inputs]

    def multiplicity(self) -> dict[str, int]:
        return {r.name: r.count for r in self.roles}

    def agent_roles(self) -> dict[str, str]:
        """agent name -> role type, in graph order."""
        return {a: r.name for r in self.roles for a in r.agent_names()}

    def validate(self) -> "Workflow":
        names = [r.name for r in self.roles]
        if not self.roles:
            raise WorkflowError(f"workflow {self.name}: no roles")
        if len(set(names)) != len(names):
            raise WorkflowError(f"workflow {self.name}: duplicate role names {names}")
        for r in self.roles:
            if r.count < 1:
                raise WorkflowError(f"workflow {self.name}: role '{r.name}' has multiplicity {r.count} (must be >= 1)")
            if r.expects not in EXPECTS:
                raise WorkflowError(f"workflow {self.name}: role '{r.name}' expects '{r.expects}' (one of {EXPECTS})")
            for i in r.inputs:
                if i not in names:
                    raise WorkflowError(f"workflow {self.name}: role '{r.name}' has unknown input role '{i}'")
                if i == r.name:
                    raise WorkflowError(f"workflow {self.name}: role '{r.name}' is its own input (a cycle)")
        self.topological_order()  # raises on a cycle
        if not any(r.submits for r in self.roles):
            raise WorkflowError(f"workflow {self.name}: no role submits the answer")
        # Every role must feed (directly or not) a submitting role, and be reachable from a source.
        feeds = {r.name for r in self.roles if r.submits}
        changed = True
        while changed:
            changed = False
            for r in self.roles:
                if r.name in feeds:
                    for i in r.inputs:
                        if i not in feeds:
                            feeds.add(i)
                            changed = True
        dead = [n for n in names if n not in feeds]
        if dead:
            raise WorkflowError(f"workflow {self.name}: roles {dead} are unreachable "
                                "(their output never reaches a submitting role)")
        return self

    def topological_order(self) -> list[str]:
        order, done, visiting = [], set(), set()

        def visit(n: str, path: list[str]) -> None:
            if n in done:
                return
            if n in visiting:
                raise WorkflowError(f"workflow {self.name}: the role graph has a cycle: {' -> '.join(path + [n])}")
            visiting.add(n)
            for i in self.role(n).inputs:
                visit(i, path + [n])
            visiting.discard(n)
            done.add(n)
            order.append(n)

        for r in self.roles:
            visit(r.name, [])
        return order


def preset(name: str, generators: int = 3, workers: int = 3) -> Workflow:
    """The workflow study's presets on any task (multiplicities are config knobs)."""
    if name == "voting":
        roles = (RoleSpec("generator", generators),
                 RoleSpec("aggregator", inputs=("generator",), submits=True, expects="choice"))
    elif name == "eval_opt":
        roles = (RoleSpec("generator"),
                 RoleSpec("evaluator", inputs=("generator",), expects="verdict"),
                 RoleSpec("reviser", inputs=("generator", "evaluator"), submits=True))
    elif name == "orch_workers":
        roles = (RoleSpec("orchestrator", expects="plan"),
                 RoleSpec("worker", workers, inputs=("orchestrator",)),
                 RoleSpec("synthesizer", inputs=("worker",), submits=True, expects="choice"))
    else:
        raise WorkflowError(f"unknown workflow '{name}' (fixed graphs: voting, eval_opt, orch_workers; "
                            "`org` (a CEO who hires) and `single` (one agent) are scenarios of their own)")
    return Workflow(name, roles).validate()
