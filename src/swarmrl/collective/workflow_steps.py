"""The runtime's part in fixed workflows (workflows/graph.py): verdicts, plans and routing.

Kept apart from collective/runtime.py, which owns the event loop; these functions only
read and write a rollout's workflow state and its bus.
"""

from __future__ import annotations

from swarmrl.collective.actions import Action
from swarmrl.collective.grading import item_label
from swarmrl.collective.render import escape_text


def output_value(v: str) -> str:
    """An agent's output as the runtime lists it: an `X=v` entry of the "wf" message, or one
    candidate on a desk (`C:4+1+2?7,7,6`).

    The value is agent text: escaped so it stays on its line, and spaces and commas escaped
    so it cannot add entries (`7 B=3`) or candidates (`7,7,7`) of its own.
    """
    return escape_text(v).replace(" ", "\\x20").replace(",", "\\x2c")


def routing_text(r, sources: list[str]) -> str:
    """One line per source agent: its outputs by item, or (nothing)."""
    return "\n".join(f"{n}: " + (" ".join(f"{item_label(i)}={output_value(v)}"
                                          for i, v in sorted(r.outputs.get(n, {}).items())) or "(nothing)")
                     for n in sources)


def route(r, a, now: float, max_chars: int) -> list[str]:
    """A workflow agent finished. A downstream role starts once *all* agents of all its
    input roles have finished: each of its agents gets one message from the runtime
    (sender "wf", provenance set here) with their outputs, the candidates on its desk,
    and its items (a worker: the items the plan assigned to it; others: all).
    Returns the bus's error lines for messages it refused (for the audit)."""
    wf, refused = r.workflow, []
    for down in wf.downstream(a.role):
        sources = [n for i in down.inputs for n in wf.role(i).agent_names()]
        if down.name in r.routed or any(r.agents[n].status == "active" for n in sources):
            continue
        r.routed.add(down.name)
        text = routing_text(r, sources)
        for name in down.agent_names():
            b = r.agents[name]
            planned = any(wf.role(i).expects == "plan" for i in down.inputs)
            for n in sources:
                if wf.role(r.agents[n].role).expects != "plan":  # a plan's output is an assignee, not a candidate
                    for i, v in r.outputs.get(n, {}).items():
                        b.candidates.setdefault(i, []).append(v)
            b.queue = list(r.assignments.get(name, [])) if planned else list(range(1, r.problem.num_items + 1))
            b.took = True
            out = r.bus.send_direct("wf", name, text[:max_chars], now)
            if isinstance(out, str):
                refused.append(out)
    return refused


def workflow_action(r, a, act: Action, task) -> str | None:
    """An evaluator's verdict on an item, or an orchestrator's assignment of items."""
    spec = r.workflow.role(a.role) if r.workflow is not None else None
    want = "verdict" if act.kind == "verdict" else "plan"
    if spec is None or spec.expects != want:
        return f"error: <{act.kind}> is not your role's action"
    if act.kind == "verdict":
        item = task.parse_item(r.problem, act.attrs["item"])
        body = (act.body or "").strip()
        if item is None or body not in ("yes", "no"):
            return "error: verdict needs a valid item and yes or no"
        r.outputs.setdefault(a.name, {})[item] = body
        if item in a.queue:
            a.queue.remove(item)
        return None
    who, items = act.attrs["who"], task.take(r.problem, act.attrs["item"])
    targets = {n for d in r.workflow.downstream(a.role) for n in d.agent_names()}
    if who not in targets or items is None:
        return f"error: cannot assign {act.attrs['item'][:8]!r} to {who[:24]!r}"
    r.assignments.setdefault(who, []).extend(i for i in items if i not in r.assignments.get(who, []))
    r.outputs.setdefault(a.name, {}).update({i: who for i in items})
    return None
