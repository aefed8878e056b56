"""Fixed role graphs as scenarios (the workflow study): Voting, Eval-Opt, Orchestrator-Workers.

Every role is staffed at t = 0 with its multiplicity (workflows/graph.py); roles without
inputs start, the others wait. When every agent of a role's inputs has finished, the runtime
(sender "wf") sends each agent of the role one message with their outputs, puts the
candidates for each item on its desk, and gives it its items (a worker: the items the plan
assigned to it; others: all). Only roles with `submits` give the graded answer; other roles'
submissions are proposals, graded for diagnostics only. No one hires.
"""

from __future__ import annotations

from collections import Counter

from swarmrl.collective.actions import Action
from swarmrl.collective.grading import item_indices, item_label
from swarmrl.collective.render import output_value
from swarmrl.scenarios.base import CORE_ACTIONS, Scenario
from swarmrl.scenarios.org import CEO_ONLY, NO_DEADLINE, SingleScenario
from swarmrl.workflows.graph import Workflow, preset

_ROLE_ACTIONS = {"verdict": ("verdict",), "plan": ("assign",)}  # expects -> actions beyond the core
_DUTIES = {  # expects -> what the role is for, in the chat protocol's words
    "answer": "Solve the items in front of you and submit an answer for each.",
    "choice": "Pick the best answer of each item from the candidates you receive and submit it.",
    "verdict": "Check each candidate answer you receive and give a verdict (yes or no) on it.",
    "plan": "Split the items among the workers with assign actions, then finish.",
}


class GraphScenario(Scenario):
    """A scenario defined by a role graph (`Workflow`): fixed roles, all staffed at t = 0, that
    pass outputs along their edges (the presets voting, eval_opt, orch_workers, or your own)."""

    hires = False
    demo_set = "workflows"

    def __init__(self, workflow: Workflow, generators: int = 3, workers: int = 3, max_experts: int = 8):
        self.workflow = workflow.validate()
        self.name = workflow.name
        # The warm start's demonstrations cover every preset at these multiplicities, plus a solo agent.
        self.generators, self.workers, self.max_experts = generators, workers, max_experts

    @classmethod
    def from_config(cls, cfg) -> "GraphScenario":
        w = cfg.workflow
        return cls(preset(w.name, generators=w.generators, workers=w.workers), w.generators, w.workers, w.max_experts)

    def role_types(self) -> list[str]:
        return [r.name for r in self.workflow.roles]

    def multiplicity(self) -> dict[str, int]:
        return self.workflow.multiplicity()

    def staff(self, runtime, r, prestaffed: int = 0) -> None:
        if prestaffed:
            raise ValueError(f"workflow {self.name}: every role is staffed at t=0; prestaffed_experts must be 0")
        for spec in self.workflow.roles:
            for name in spec.agent_names():
                a = runtime.add_agent(r, name, spec.name, 0.0, ready=not spec.inputs)
                if not spec.inputs and spec.expects == "answer":  # a source solver: every item on its desk
                    a.queue, a.took = list(item_indices(r.problem)), True

    def header(self, r, name: str, role: str) -> str:
        return f"{name} wf={self.name}\n{r.problem_text(name)}\n"

    def describe(self, r, name: str, role: str) -> str:
        spec = self.workflow.role(role)
        parts = [f"You are {name}, a {role} in a fixed {self.name} workflow of AI agents that solves one problem "
                 f"together. {_DUTIES[spec.expects]}"]
        if spec.inputs:
            parts.append(f"You start when every {' and '.join(spec.inputs)} has finished: their outputs come "
                         "to you in one message.")
        if not spec.submits:
            parts.append("Your submissions are proposals passed on to the next role, not the final answer.")
        return " ".join(parts)

    def actions(self, role: str) -> tuple[str, ...]:
        return CORE_ACTIONS + _ROLE_ACTIONS.get(self.workflow.role(role).expects, ())

    def handlers(self) -> dict:
        return {"verdict": _verdict, "assign": _assign}

    def refusal(self, role: str, kind: str) -> str:
        return CEO_ONLY.get(kind) or super().refusal(role, kind)

    def submits(self, role: str) -> bool:
        return self.workflow.role(role).submits

    def expects(self, role: str) -> str | None:
        return self.workflow.role(role).expects

    def agent_finished(self, runtime, r, agent, now: float) -> None:
        for err in route(r, agent, now, runtime.limits.max_message_chars):
            r.reject(now, "wf", 0, "route", err)

    def demo_count(self, per_strategy: int) -> int:
        return per_strategy * 4  # three presets and a solo agent

    def demo_key(self) -> dict:
        return {"generators": self.generators, "workers": self.workers}

    def demonstrations(self, runtime, scripts, tokenizer, end_id: int, n: int, seed: int):
        """Equal shares of voting, eval_opt, orch_workers and a solo agent (the single control),
        so every cell of a workflow study starts from one base model."""
        from swarmrl.seeds import rng_for
        rng = rng_for("demos", seed)
        flows = [GraphScenario(preset(name, self.generators, self.workers), self.generators, self.workers,
                               self.max_experts) for name in ("voting", "eval_opt", "orch_workers")]
        flows.append(SingleScenario(self.max_experts))
        problems = runtime.task.sample(rng, n)
        rollouts = [runtime.new_rollout(i, i, p, NO_DEADLINE, 0, scenario=flows[i % len(flows)])
                    for i, p in enumerate(problems)]
        solo = scripts.org_actor(tokenizer, end_id, {r.index: scripts.solo_strategy() for r in rollouts
                                                     if not isinstance(r.scenario, GraphScenario)})
        actor = scripts.role_actor(tokenizer, end_id, seed=seed, fallback=solo)
        stats = {"team_sizes": dict(Counter(r.scenario.name for r in rollouts))}  # rollouts per workflow
        return rollouts, actor, stats


def routing_text(r, sources: list[str]) -> str:
    """One line per source agent: its outputs by item, or (nothing)."""
    return "\n".join(f"{n}: " + (" ".join(f"{item_label(i)}={output_value(v)}"
                                          for i, v in sorted(r.outputs.get(n, {}).items())) or "(nothing)")
                     for n in sources)


def route(r, a, now: float, max_chars: int) -> list[str]:
    """Deliver the outputs of `a`'s role to each downstream role whose inputs have all finished.
    Returns the bus's error lines for messages it refused (for the audit)."""
    wf, refused = r.scenario.workflow, []
    for down in wf.downstream(a.role):
        sources = [n for i in down.inputs for n in wf.role(i).agent_names()]
        if down.name in r.routed or any(r.agents[n].status == "active" for n in sources):
            continue
        r.routed.add(down.name)
        text = routing_text(r, sources)
        planned = any(wf.role(i).expects == "plan" for i in down.inputs)
        for name in down.agent_names():
            b = r.agents[name]
            for n in sources:
                if wf.role(r.agents[n].role).expects != "plan":  # a plan's output is an assignee, not a candidate
                    for i, v in r.outputs.get(n, {}).items():
                        b.candidates.setdefault(i, []).append(v)
            b.queue = list(r.assignments.get(name, [])) if planned else list(item_indices(r.problem))
            b.took = True
            out = r.bus.send_direct("wf", name, text[:max_chars], now)
            if isinstance(out, str):
                refused.append(out)
    return refused


def _verdict(runtime, r, a, act: Action, now: float) -> str | None:
    """An evaluator's yes / no on an item's candidate."""
    item = runtime.task.parse_item(r.problem, act.attrs["item"])
    body = (act.body or "").strip()
    if item is None or body not in ("yes", "no"):
        return "error: verdict needs a valid item and yes or no"
    r.outputs.setdefault(a.name, {})[item] = body
    if item in a.queue:
        a.queue.remove(item)
    return None


def _assign(runtime, r, a, act: Action, now: float) -> str | None:
    """An orchestrator's plan: items to a worker downstream."""
    who, items = act.attrs["who"], runtime.task.take(r.problem, act.attrs["item"])
    targets = {n for d in r.scenario.workflow.downstream(a.role) for n in d.agent_names()}
    if who not in targets or items is None:
        return f"error: cannot assign {act.attrs['item'][:8]!r} to {who[:24]!r}"
    r.assignments.setdefault(who, []).extend(i for i in items if i not in r.assignments.get(who, []))
    r.outputs.setdefault(a.name, {}).update({i: who for i in items})
    return None
