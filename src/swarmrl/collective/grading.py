"""Submissions: each item's first graded submission in simulated time is final.

Why one graded submission per item: if every submission counted, an agent could submit
0..9 for an item and always score. So per rollout, the submission of an item that lands
first (earliest turn end; ties by agent name, then by order within the reply) decides it:
right, and the item earns its score; wrong, and the item earns nothing. Later submissions
of the item are not graded: they are counted as duplicates and their sender is told.
Submissions the grader failed on (`infra_error`) are not the agent's fault and decide nothing.

Why every submission is kept and the outcome computed from all of them: turns are applied
in start order within a batch, not in landing order, so a submission applied later may have
landed earlier. The outcome line an agent sees ("wrong answer", "already submitted") is
therefore shown only at its first turn starting at least one message latency after the
submission landed: by then every submission that landed before it has been simulated,
whatever the batch schedule (the argument for messages in runtime.py applies unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass


def item_label(index: int) -> str:
    """Items are named A, B, ..., Z, then AA, AB, ... (spreadsheet columns) in every task; a
    single-answer task has only A."""
    name = ""
    while index > 0:
        index, r = divmod(index - 1, 26)
        name = chr(ord("A") + r) + name
    return name


def item_indices(problem) -> "range | tuple[int, ...]":
    """A problem's item indices in label order: its own `item_indices` where a task labels its items
    sparsely (arith under `task.label_pool`: K of A..BL, say), else 1..num_items."""
    return getattr(problem, "item_indices", None) or range(1, problem.num_items + 1)


MAX_LABEL_LETTERS = 2  # AA..ZZ: 702 items, more than any problem needs


def parse_label(ref: str) -> int | None:
    """`item_label`'s inverse: "C" -> 3, "AB" -> 28; None for anything else."""
    if not (1 <= len(ref) <= MAX_LABEL_LETTERS) or not all("A" <= c <= "Z" for c in ref):
        return None
    n = 0
    for c in ref:
        n = n * 26 + ord(c) - ord("A") + 1
    return n


def submission_key(s: dict) -> tuple[float, str, int]:
    """Landing order: time, then agent name, then the submission's place in the agent's replies."""
    return s["t"], s["agent"], s["seq"]


@dataclass
class Settlement:
    first: dict[int, dict]  # item -> the submission that decides it
    wrong: int  # items decided by a wrong submission
    duplicates: int  # graded-status submissions that came after their item's first


def settle(submissions: list[dict]) -> Settlement:
    first: dict[int, dict] = {}
    duplicates = 0
    for s in sorted((s for s in submissions if s["status"] != "infra_error"), key=submission_key):
        if s["item"] in first:
            duplicates += 1
        else:
            first[s["item"]] = s
    return Settlement(first, sum(not s["correct"] for s in first.values()), duplicates)


def apply_settlement(r) -> None:
    """Bring the rollout's solved items, scores and counters in line with its submissions."""
    st = settle(r.submissions)
    won = {i: s for i, s in sorted(st.first.items()) if s["correct"]}
    for d in (r.solved, r.solved_by, r.item_scores):
        d.clear()
    r.solved.update({i: s["t"] for i, s in won.items()})
    r.solved_by.update({i: s["agent"] for i, s in won.items()})
    r.item_scores.update({i: s["score"] for i, s in won.items()})
    r.counters["wrong_submits"], r.counters["duplicate_submits"] = st.wrong, st.duplicates
    for s in r.submissions:
        s["final"] = st.first.get(s["item"]) is s


def wrong_by_deadline(r) -> int:
    """Items of rollout `r` decided by a wrong submission that landed at or before its deadline."""
    return sum(not s["correct"] and s["t"] <= r.time_limit for s in settle(r.submissions).first.values())


def outcome_line(first: dict[int, dict], s: dict) -> str | None:
    """What the sender of submission `s` is told, given each item's deciding submission."""
    if s["status"] == "infra_error":
        return None
    if first.get(s["item"]) is not s:
        return f"error: item {item_label(s['item'])} was already submitted"
    return None if s["correct"] else f"error: item {item_label(s['item'])}: wrong answer"


def due_outcomes(r, agent, start: float) -> list[str]:
    """Outcome lines of the agent's submissions that are due by `start`; the rest stay pending."""
    due = [s for s in agent.outcomes if s["t"] + r.bus.latency_s <= start]
    if not due:
        return []
    agent.outcomes = [s for s in agent.outcomes if s["t"] + r.bus.latency_s > start]
    first = settle(r.submissions).first
    return [line for s in due if (line := outcome_line(first, s)) is not None]


def outcome_audit(r) -> list[dict]:
    """Audit entries for the submissions that were not accepted as right (wrong or duplicate)."""
    first = settle(r.submissions).first
    return [{"time": s["t"], "actor": s["agent"], "action": "submit", "target": item_label(s["item"]),
             "outcome": line} for s in sorted(r.submissions, key=submission_key)
            if (line := outcome_line(first, s)) is not None]


def first_known(submissions: list[dict], s: dict) -> bool:
    """Whether a graded submission of the same item that landed before `s` is already recorded.

    Then `s` can never decide the item, whatever is simulated later, so it need not be graded.
    """
    return any(o["item"] == s["item"] and o["status"] not in ("infra_error", "not_graded")
               and submission_key(o) < submission_key(s) for o in submissions)


def next_outcome_due(r, agent) -> float | None:
    """When the earliest of the agent's pending outcome lines is due (None if none would show).

    A waiting agent wakes for it, as for a message. Deciding whether a line shows uses the
    submissions simulated so far; that is exact whenever the answer matters: a wake-up at
    `due` joins a batch only if due < s1 + d_min, and then every submission that landed
    before this one has been simulated (the module docstring's argument).
    """
    if not agent.outcomes:
        return None
    first = settle(r.submissions).first
    due = [s["t"] + r.bus.latency_s for s in agent.outcomes if outcome_line(first, s) is not None]
    return min(due) if due else None
