"""The runtime's own action handlers: the actions every scenario's agents may take.

A handler is `(runtime, rollout, agent, action, now) -> error line | None` and never raises:
a bad action becomes an error line in the agent's next observation. Scenario-specific
actions (hiring, verdicts, plans) have their handlers in scenarios/.
"""

from __future__ import annotations

from swarmrl.collective.actions import DEFAULT_READ_LAST, Action
from swarmrl.collective.grading import apply_settlement, first_known, item_indices


BOARD_NEXT = "next"


def take(runtime, r, a, act: Action, now: float) -> str | None:
    ref = act.attrs["item"]
    if ref.strip() == BOARD_NEXT:
        r.counters["board_takes"] += 1
        a.board = True
        items = _board_next(r)
    elif (items := runtime.task.take(r.problem, ref)) is None:
        return f"error: no item or range {ref!r}"
    else:
        r.claimed.update(items)
    # Taken items go to the front (e.g. recomputing a dependency before the item needing it).
    a.queue = items + [i for i in a.queue if i not in items]
    a.took = True
    return None


def _board_next(r) -> list[int]:
    """The shared board: the lowest-labelled item no one has taken or submitted (the first
    submission decides an item, right or wrong); none left: an empty desk.

    An agent that took `next` once is dealt the next free item whenever its desk empties (in
    `submit`), so it needs no brief and spends no tokens asking: the CEO's hiring turn stays
    a few tokens however many experts it hires, and each item costs what it costs alone.
    """
    free = [i for i in item_indices(r.problem) if i not in r.claimed]
    r.claimed.update(free[:1])  # dealt: claimed by the agent it goes to
    return free[:1]


def msg(runtime, r, a, act: Action, now: float) -> str | None:
    to = act.attrs["to"]
    if to == a.name or not r.scenario.is_teammate(r, to):
        return f"error: no active teammate named {to!r}"
    return runtime.count_sent(r, r.bus.send_direct(a.name, to, act.body or "", now), "direct_messages")


def post(runtime, r, a, act: Action, now: float) -> str | None:
    text = act.body or ""
    if "item" in act.attrs:
        text = _result_line(runtime, r, a, act.attrs["item"])
        if text.startswith("error:"):
            return text
    return runtime.count_sent(r, r.bus.post(a.name, act.attrs["ch"], text, now), "channel_posts")


def _result_line(runtime, r, a, ref: str) -> str:
    """`<post item="A"/>`: "A=7", the result the poster knows for the item (its own submission,
    else one it saw), written by the runtime: a result shared this way cannot be mistyped."""
    item = runtime.task.parse_item(r.problem, ref)
    if item is None:
        return f"error: no item {ref!r}"
    if item not in a.known:
        return f"error: you have no result for item {ref.strip()} to post"
    return f"{ref.strip()}={a.known[item]}"


def read(runtime, r, a, act: Action, now: float) -> str | None:
    ch = act.attrs["ch"]
    if a.name not in r.bus.members(ch):
        return f"error: you are not a member of {ch[:40]}"
    last = int(act.attrs.get("last", DEFAULT_READ_LAST))
    if last < 1:
        return "error: last must be at least 1"
    r.counters["archive_reads"] += 1
    # Read (once, by the bus, audited there) at the agent's next turn: by then every post
    # delivered up to `now` has been simulated, whatever the batch order.
    a.pending_reads.append((ch, last, now))
    return None


def submit(runtime, r, a, act: Action, now: float) -> str | None:
    """Record a submission; which one decides its item is settled in grading.py."""
    task, answer = runtime.task, act.body or ""
    item = task.parse_item(r.problem, act.attrs["item"])
    if item is None:
        return f"error: no item {act.attrs['item']!r}"
    a.known[item] = answer.strip()
    if item in a.queue:
        a.queue.remove(item)
    r.claimed.add(item)  # submitted (decided, right or wrong): never dealt from the board
    if a.board and not a.queue:  # the board deals the next free item
        a.queue = _board_next(r)
    if not r.scenario.submits(a.role):
        # Not the answer: a proposal for the roles downstream (graded only for diagnostics).
        r.outputs.setdefault(a.name, {})[item] = answer.strip()
        r.proposals.append({"t": now, "agent": a.name, "item": item,
                            "correct": task.grade(r.problem, item, answer).correct})
        return None
    sub = {"t": now, "agent": a.name, "item": item, "answer": answer,
           "seq": sum(s["agent"] == a.name for s in r.submissions)}
    if first_known(r.submissions, sub):  # landed after a graded one: it cannot decide the item
        sub.update(correct=False, score=0.0, status="not_graded")
    else:
        grade = task.grade(r.problem, item, answer)
        sub.update(correct=grade.correct, score=grade.score, status=grade.status)
    r.submissions.append(sub)
    if sub["status"] == "infra_error":  # not the agent's fault: counted, and the trainer drops the rollout
        r.counters["infra_errors"] += 1
        return None
    a.outcomes.append(sub)
    apply_settlement(r)
    return None


CORE_HANDLERS = {"take": take, "msg": msg, "post": post, "read": read, "submit": submit}
