"""Sample rows: one rollout as written to samples/step_NNNN.jsonl, and read back for the report.

`Rollout.to_json` (collective/state.py) holds the turns, messages, submissions and audit. A
reader also needs what the runtime keeps only in objects, so `sample_row` adds it:

- `agents`: each agent's full rendered first context (its header plus its first observation,
  decoded from the exact token ids the model conditioned on), the time it was hired and
  fired, and its context length. Every later prompt of the agent is that context followed by
  the turns' replies and observations in order, which `turns` holds.
- `item_labels`: item number -> the label agents use for it ("1" -> "A" in arith), and a
  `label` on every submission, so `solved`, `item_scores` and submissions read as agents saw them.
- `deliveries`: message id -> the agents it reached (a channel post reaches the members at
  delivery time, collective/bus.py), so a viewer can draw each delivery.
- `events`: hires, fires and archive reads with their simulated times.

`read_samples` reads them back for `swarmrl report`, skipping (and naming) a corrupt line.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Callable

from swarmrl.collective.grading import item_indices, item_label

SCHEMA = 2  # 1: Rollout.to_json alone; 2: plus the fields above
_STEP_FILE = re.compile(r"^step_(\d+)\.jsonl$")


def item_labels(problem: Any, parse_item: Callable[[Any, str], int | None] | None) -> dict[str, str]:
    """Item number -> the label agents use for it. A task's own `parse_item` decides: a letter
    ("A" for 1) where the task reads letters, else the number itself."""
    out = {}
    for i in item_indices(problem):
        letter = item_label(i)
        ok = parse_item is not None and _parses_to(parse_item, problem, letter, i)
        out[str(i)] = letter if ok else str(i)
    return out


def _parses_to(parse_item, problem, ref: str, index: int) -> bool:
    try:
        return parse_item(problem, ref) == index
    except Exception:  # noqa: BLE001 - a task's parser refusing a label means "not this label"
        return False


def _memberships(audit: list[dict]) -> dict[tuple[str, str], list[list[float]]]:
    """(channel, member) -> [start, end) membership stretches, rebuilt from the bus's audit."""
    spans: dict[tuple[str, str], list[list[float]]] = {}
    for e in audit:
        if e.get("outcome") != "ok":
            continue
        key = (e.get("target"), e.get("actor"))
        if e["action"] == "join":
            spans.setdefault(key, []).append([e["time"], math.inf])
        elif e["action"] == "leave" and spans.get(key):
            spans[key][-1][1] = e["time"]
    return spans


def deliveries(messages: list[dict], audit: list[dict], agents: list[str]) -> dict[str, list[str]]:
    """Message id -> recipients at its delivery (the bus's own visibility rule, from its audit)."""
    spans = _memberships(audit)
    out = {}
    for m in messages:
        if m["kind"] == "direct":
            got = [m["to"]] if m["to"] in agents else []
        else:
            got = [a for a in agents if a != m["sender"] and any(
                s <= m["deliver_at"] < e for s, e in spans.get((m["channel"], a), ()))]
        out[str(m["id"])] = got
    return out


def _events(r: Any, audit: list[dict]) -> list[dict]:
    """Hires (agents created after t=0: those staffed at the start were not hired), fires and
    accepted archive reads, in time order."""
    hires = [{"time": a.created_at, "kind": "hire", "agent": a.name, "role": a.role}
             for a in r.agents.values() if a.created_at > 0]
    fires = [{"time": a.fired_at, "kind": "fire", "agent": a.name} for a in r.agents.values()
             if a.fired_at is not None]
    reads = [{"time": e["time"], "kind": "read", "agent": e["actor"], "channel": e["target"],
              "returned": e.get("returned", 0)} for e in audit if e["action"] == "read" and e["outcome"] == "ok"]
    return sorted(hires + fires + reads, key=lambda e: (e["time"], e["kind"], e["agent"]))


def _agent_rows(r: Any, decode: Callable[[list[int]], str] | None) -> list[dict]:
    rows = []
    for a in r.agents.values():
        first = next((t for t in r.turns if t.agent == a.name), None)
        n = first.context_tokens if first is not None else len(a.ids)
        rows.append({"name": a.name, "role": a.role, "created_at": a.created_at, "fired_at": a.fired_at,
                     "status": a.status, "turns": a.turns, "context_tokens": len(a.ids),
                     "first_context": decode(a.ids[:n]) if decode is not None else None})
    return rows


def sample_row(r: Any, decode: Callable[[list[int]], str] | None = None,
               parse_item: Callable[[Any, str], int | None] | None = None) -> dict:
    """`Rollout.to_json()` plus what a reader needs to see the whole rollout (module docstring).
    `decode`: token ids -> text (the run's tokenizer); `parse_item`: the task's label parser."""
    row = r.to_json()
    labels = item_labels(r.problem, parse_item)
    names = list(r.agents)
    row.update(schema=SCHEMA, item_labels=labels, agents=_agent_rows(r, decode),
               deliveries=deliveries(row["messages"], row["audit"], names),
               events=_events(r, row["audit"]),
               submissions=[{**s, "label": labels.get(str(s.get("item")), str(s.get("item")))}
                            for s in row["submissions"]])
    return row


# --------------------------------------------------------------------------- reading


def sample_files(samples_dir: Path) -> dict[int, Path]:
    """step -> samples/step_NNNN.jsonl, in step order."""
    if not Path(samples_dir).is_dir():
        return {}
    found = {int(m.group(1)): p for p in Path(samples_dir).iterdir() if (m := _STEP_FILE.match(p.name))}
    return dict(sorted(found.items()))


def read_samples(path: Path, skipped: list[str] | None = None) -> list[dict]:
    """The rows of one samples file. A line that is not a JSON object is left out, and
    `path:line: why` is appended to `skipped` so the caller can say what it dropped."""
    rows = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").split("\n")):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            row, why = None, f"invalid JSON ({e.msg})"
        else:
            why = "not a JSON object"
        if isinstance(row, dict):
            rows.append(row)
        elif skipped is not None:
            skipped.append(f"{path}:{i + 1}: {why}")
    return rows
